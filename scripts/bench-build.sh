#!/usr/bin/env bash
# bench-build.sh [REV]: the first build of a fresh clone, measured. Clones
# this repository at REV (default HEAD) into a new folder, fetches the crates
# (`cargo fetch --locked`), builds the release binary with
# `cargo build --release --locked --timings`, runs the first `plan` (the
# clone's own state/sandboxes.toml against the engine found the usual way;
# read-only; its exit status is shown, not judged), and prints:
#   - wall, user and sys seconds of each step, with the 1-minute load average
#     before and after the build (CPU time is what other work on the machine
#     changes least);
#   - the number of units built and the size of the binary;
#   - the top BENCH_TOP units by duration, from cargo's timings report.
#
# Environment:
#   BENCH_TOP         rows of the unit table [20]
#   BENCH_KEEP        1: keep the clone and its target/ [removed at the end;
#                     the timings HTML is copied beside the output either way]
#   BENCH_OUT         folder for the copy of the timings HTML [/tmp]
#   BENCH_CARGO_HOME  a CARGO_HOME of its own, so that the fetch downloads
#                     every crate (an empty folder: a true first clone)
#                     [the user's CARGO_HOME: crates already downloaded]
#   BENCH_REPO        what to clone [this checkout]
#
# Public tools only: git, cargo, bash's `time`, python3 (to read the report).
set -euo pipefail
export LC_ALL=C CARGO_TERM_COLOR=never

REV=${1:-HEAD}
TOP=${BENCH_TOP:-20}
OUT=${BENCH_OUT:-/tmp}
REPO=${BENCH_REPO:-$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)}
[[ -n ${BENCH_CARGO_HOME:-} ]] && export CARGO_HOME=$BENCH_CARGO_HOME
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-build.XXXXXX")
[[ ${BENCH_KEEP:-0} == 1 ]] || trap 'rm -rf "$WORK"' EXIT

load() { cut -d' ' -f1 /proc/loadavg; }
# timed NAME CMD...: runs CMD, appends "NAME wall user sys" to $WORK/times.
timed() {
    local name=$1 t
    shift
    t=$( { TIMEFORMAT='%R %U %S'; time "$@" >"$WORK/$name.log" 2>&1; } 2>&1 ) || {
        echo "$name failed; its output:" >&2
        tail -n 40 "$WORK/$name.log" >&2
        exit 1
    }
    echo "$name $t" >>"$WORK/times"
}

commit=$(git -C "$REPO" rev-parse --short "$REV")
echo "fresh clone of $REPO at $commit into $WORK"
timed clone git clone --quiet --no-local --no-checkout "$REPO" "$WORK/src"
git -C "$WORK/src" checkout --quiet --detach "$commit"
cd "$WORK/src"
timed fetch cargo fetch --locked
load_before=$(load)
timed build cargo build --release --locked --timings
load_after=$(load)
plan_rc=0
t0=$EPOCHREALTIME
target/release/sandboxctl plan >"$WORK/plan.log" 2>&1 || plan_rc=$?
t1=$EPOCHREALTIME
html=$OUT/cargo-timing-$commit-$(date +%Y%m%dT%H%M%S).html
cp target/cargo-timings/cargo-timing.html "$html"

echo
printf '%-6s %9s %9s %9s\n' step wall_s user_s sys_s
awk '{ printf "%-6s %9.1f %9.1f %9.1f\n", $1, $2, $3, $4; w += $2 } END { printf "%-6s %9.1f\n", "total", w }' "$WORK/times"
awk -v a="$t0" -v b="$t1" -v rc="$plan_rc" 'BEGIN { printf "first plan: %.0f ms (exit %d)\n", 1000 * (b - a), rc }'
echo "1-minute load: $load_before before the build, $load_after after"
echo "binary: $(stat -c %s target/release/sandboxctl) bytes ($(rustc --version))"
echo "timings: $html"
echo
python3 - "$html" "$TOP" <<'EOF'
import json, re, sys
html, top = open(sys.argv[1]).read(), int(sys.argv[2])
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S).group(1))
total = sum(u["duration"] for u in units)
end = max(u["start"] + u["duration"] for u in units)
print(f"{len(units)} units, {total:.1f} s of unit time over {end:.1f} s of build")
print(f"| unit | kind | s | share of unit time | started at s |")
print(f"|---|---|---:|---:|---:|")
for u in sorted(units, key=lambda u: -u["duration"])[:top]:
    kind = u["target"].strip() or "lib"
    kind = kind.replace('"', "")
    print(f"| {u['name']} {u['version']} | {kind} | {u['duration']:.1f} | "
          f"{100 * u['duration'] / total:.1f} % | {u['start']:.1f} |")
EOF
