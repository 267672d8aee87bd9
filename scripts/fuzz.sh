#!/usr/bin/env bash
# fuzz.sh [SECONDS] [TARGET...]: runs every fuzz target of fuzz/fuzz_targets/
# (or the ones named) with libFuzzer for SECONDS each (default 60), and
# prints per target the executions, executions per second and coverage
# (libFuzzer's `cov`: edges reached; `ft`: features) it reached.
#
# 1. cargo-fuzz, pinned: installed (`cargo install --locked`, at most 15 min)
#    into target/tools/ when missing there; kept there for later runs.
# 2. The targets, built once with the stable toolchain: `cargo fuzz build -O`
#    needs `-Zsanitizer=address`, which RUSTC_BOOTSTRAP=1 lets stable rustc
#    take (stable ships the address sanitizer's runtime; decision 0025).
# 3. Each target from its corpus (fuzz/corpus/<target>/, not checked in)
#    seeded with fuzz/seeds/<target>/ (checked in), for SECONDS.
#
# A crash (a panic: a broken property of src/fuzz.rs, or a sanitizer report)
# fails the script and names the input libFuzzer saved under
# fuzz/artifacts/<target>/. Copy it into fuzz/seeds/<target>/: the ordinary
# suite (tests/fuzz_corpus.rs) then runs it on every `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

SECS=${1:-${FUZZ_SECONDS:-60}}
shift || true
CARGO_FUZZ_VERSION=0.13.2
TOOLS=$PWD/target/tools

log() { printf '== %s\n' "$*" >&2; }

started=$SECONDS
if ! "$TOOLS/bin/cargo-fuzz" --version 2>/dev/null | grep -qx "cargo-fuzz $CARGO_FUZZ_VERSION"; then
    log "installing cargo-fuzz $CARGO_FUZZ_VERSION into $TOOLS"
    timeout 900 cargo install --quiet --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION" --root "$TOOLS"
    log "cargo-fuzz installed in $((SECONDS - started)) s"
fi

started=$SECONDS
(cd fuzz && RUSTC_BOOTSTRAP=1 "$TOOLS/bin/cargo-fuzz" build -O >&2)
log "targets built in $((SECONDS - started)) s"
triple=$(rustc -vV | sed -n 's/^host: //p')
bin=fuzz/target/$triple/release

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for f in fuzz/fuzz_targets/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi

failed=()
printf '%-18s %10s %8s %6s %6s %s\n' target runs exec/s cov ft result
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    out=$(mktemp)
    set +e
    "$bin/$t" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" \
        "fuzz/corpus/$t" "fuzz/seeds/$t" >"$out" 2>&1
    status=$?
    set -e
    # The last status line: `#N  DONE|pulse|NEW ... cov: C ft: F ... exec/s: E`.
    last=$(grep -E '^#[0-9]+' "$out" | tail -n 1 || true)
    runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out")
    if [ "$status" -eq 0 ]; then
        result=ok
    else
        result="CRASH (exit $status)"
        failed+=("$t")
    fi
    printf '%-18s %10s %8s %6s %6s %s\n' "$t" "${runs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "$result"
    if [ "$status" -ne 0 ]; then
        grep -E 'panicked at|ERROR: |SUMMARY|Test unit written to' "$out" | head -n 10 | sed 's/^/    /'
        echo "    keep the input as a regression: cp fuzz/artifacts/$t/<crash-file> fuzz/seeds/$t/"
    fi
    rm -f "$out"
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: a crash in ${failed[*]}"
    exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${SECS} s each, no crash"
