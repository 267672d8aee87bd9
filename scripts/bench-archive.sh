#!/usr/bin/env bash
# bench-archive.sh [SIZE_MIB]: memory and throughput of `apply --archive` on
# one big volume, against the docker CLI idiom on the same content (issue 16).
# BENCH_SOURCE=helper (default) or container: how sandboxctl reads it (see fill).
#
# Against the real Docker engine (DOCKER_HOST, else the local socket). Builds
# target/release/sandboxctl (CARGO_TARGET_DIR honoured) if it is missing.
# Generates the content once, in a temporary folder, from a fixed seed:
# SIZE_MIB MiB (default 1024) of incompressible bytes (AES-CTR keystream from
# `openssl enc`, in files of at most 256 MiB) plus BENCH_SMALL_FILES small
# text files (1..8 KiB each, compressible, in 64 folders). Then, BENCH_REPEAT
# rounds (default 3), each on a freshly made volume holding that same content:
#   fill  a managed volume (ca.sandbox=1, ca.sandbox.id=<box>, this run's scope
#         label ca.sandbox.benchar=<run id>) through a container that is
#         created, never started, and mounts it: `tar ... | docker cp -
#         CONTAINER:/v` (no shell in the image, nothing pulled); then `sync`.
#   (b)   docker cp CONTAINER:/v - | zstd -3 > FILE        (the issue's idiom)
#   (a)   sandboxctl --scope <scope> --state <empty state> --format json \
#             apply --archive DIR                           (after the holder
#         container is removed: the volume is an undeclared box's, so apply
#         archives it through its helper container, then removes it)
# (b) runs before (a) in every round (apply removes the volume). Both read
# the volume from the page cache the fill left (the machine is not asked to
# drop its caches: other work runs on it). Timed: wall clock of each command
# (bash EPOCHREALTIME); peak RSS from GNU time's "Maximum resident set size"
# (for (b), of docker cp and zstd each). sandboxctl's wall time includes
# everything `apply` does: listing, planning, creating and removing the helper,
# SHA-256 of the archive, fsync of archive, manifest and folder, removing the
# volume, verifying; the idiom's includes none of that (no fsync either).
#
# The table also shows the idiom's wall time up to a `sync FILE` after it
# (same runs), since sandboxctl fsyncs its archive before it counts as written.
#
# Also recorded: CPU seconds (user + system, GNU time; for (b) docker cp's and
# zstd's added) and the 1-minute load average before each run, since other
# work shares the machine.
#
# Output: a markdown table on stdout (medians; MiB/s is the tar stream's size,
# the manifest's uncompressedSize, over the median wall time), the raw runs on
# stderr. Exits 1 if a run fails (sandboxctl not exit 0, not converged, no
# archive).
#
# Isolation: everything it makes carries the run's scope label; on exit (also
# Ctrl-C or TERM) a running sandboxctl gets SIGINT and is waited for, then
# every container and volume with that label is removed, and the temporary
# folder (content and archives) goes. The image ca-sbx:bench-sleep (a ca-sbx:*
# image, which sandboxctl's helper needs) is built from /bin/sleep if missing
# and never removed.
#
# Needs: docker, openssl, jq, tar, zstd and GNU time (/usr/bin/time). zstd and
# time are installed with apt-get (packages `zstd`, `time`) when missing.
#
# Environment:
#   BENCH_REPEAT       rounds                                   [3]
#   BENCH_SMALL_FILES  small files beside the bulk              [4096]
#   BENCH_SEED         seed of the content                      [sandboxctl-bench-archive]
#   BENCH_KEEP         folder to copy raw outputs into          []
#   SANDBOXCTL         sandboxctl binary [${CARGO_TARGET_DIR:-target}/release/sandboxctl]
set -euo pipefail
export LC_ALL=C

usage() {
    echo "usage: $0 [SIZE_MIB]   (1..65536, default 1024)" >&2
    exit 2
}
[[ $# -le 1 ]] || usage
SIZE=${1:-1024}
[[ $SIZE =~ ^[1-9][0-9]*$ && $SIZE -le 65536 ]] || usage

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/sleep-image.sh
source "$ROOT/scripts/lib/sleep-image.sh"
REPEAT=${BENCH_REPEAT:-3}
SOURCE=${BENCH_SOURCE:-helper}
SMALL=${BENCH_SMALL_FILES:-4096}
SEED=${BENCH_SEED:-sandboxctl-bench-archive}
IMAGE=ca-sbx:bench-sleep
RUN_ID=benchar-$(date +%Y%m%d-%H%M%S)-$$
SCOPE_KEY=ca.sandbox.benchar
SCOPE_LABEL=$SCOPE_KEY=$RUN_ID
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${SANDBOXCTL:-$TARGET/release/sandboxctl}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-archive.XXXXXX")
CURRENT_PID=

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Removes every container and volume carrying this run's scope label (and nothing else).
purge_scope() {
    local attempt ids vols nc=0 nv=0
    for attempt in 1 2 3 4 5; do
        mapfile -t ids < <(docker ps -aq --filter "label=$SCOPE_LABEL" 2>/dev/null)
        if ((${#ids[@]})); then docker rm -f "${ids[@]}" >/dev/null 2>&1 || true; fi
        mapfile -t vols < <(docker volume ls -q --filter "label=$SCOPE_LABEL" 2>/dev/null)
        if ((${#vols[@]})); then docker volume rm "${vols[@]}" >/dev/null 2>&1 || true; fi
        nc=$(docker ps -aq --filter "label=$SCOPE_LABEL" | wc -l)
        nv=$(docker volume ls -q --filter "label=$SCOPE_LABEL" | wc -l)
        [[ $nc == 0 && $nv == 0 ]] && return 0
        sleep "$attempt"
    done
    log "WARNING: could not empty scope $SCOPE_LABEL: $nc containers, $nv volumes left"
    return 1
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n $CURRENT_PID ]] && kill -0 "$CURRENT_PID" 2>/dev/null; then
        # sandboxctl stops starting removals on SIGINT and verifies.
        kill -INT "$CURRENT_PID" 2>/dev/null || true
        wait "$CURRENT_PID" 2>/dev/null || true
    fi
    log "cleaning up scope $SCOPE_LABEL"
    purge_scope || rc=1
    if [[ -n ${BENCH_KEEP:-} ]]; then
        mkdir -p "$BENCH_KEEP"
        cp "$WORK"/*.json "$WORK"/*.time "$WORK"/*.err "$BENCH_KEEP"/ 2>/dev/null || true
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { echo "$EPOCHREALTIME"; }
span() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
# "Maximum resident set size (kbytes): N" of a GNU time -v output, in MiB.
rss_mib() { awk -F': ' '/Maximum resident set size/ { printf "%.1f", $2 / 1024 }' "$1"; }
# User + system CPU seconds of a GNU time -v output.
cpu_s() { awk -F': ' '/User time \(seconds\)|System time \(seconds\)/ { t += $2 } END { printf "%.2f", t }' "$1"; }
# The 1-minute load average (other agents share the machine).
load1() { cut -d' ' -f1 /proc/loadavg; }

ensure_tools() {
    local missing=()
    command -v zstd >/dev/null || missing+=(zstd)
    [[ -x /usr/bin/time ]] || missing+=(time)
    if ((${#missing[@]})); then
        log "installing ${missing[*]} with apt-get"
        apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
            { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
    fi
    command -v zstd >/dev/null || die "zstd is missing"
    [[ -x /usr/bin/time ]] || die "/usr/bin/time (GNU time) is missing"
    command -v openssl >/dev/null || die "openssl is missing"
    command -v jq >/dev/null || die "jq is missing"
}

ensure_binary() {
    if [[ ! -x $BIN ]]; then
        log "building $BIN (cargo build --release)"
        (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo build --release --quiet)
    fi
    [[ -x $BIN ]] || die "no sandboxctl binary at $BIN"
}

# ca-sbx:bench-sleep: /bin/sleep and its libraries, imported from a tar (no pull);
# see scripts/lib/sleep-image.sh.
ensure_image() {
    docker image inspect "$IMAGE" >/dev/null 2>&1 && return 0
    log "building $IMAGE from /bin/sleep"
    import_sleep_image "$IMAGE" "$WORK"
}

# The content, once: SIZE MiB of keystream in files of <= 256 MiB, and SMALL text files.
make_content() {
    local content=$WORK/content left=$SIZE n=0 chunk
    mkdir -p "$content/bulk" "$content/small"
    log "generating $SIZE MiB of incompressible bytes and $SMALL small files (seed $SEED)"
    # AES-CTR keystreams, one per file (key from the seed and the file's
    # number): the same bytes for the same seed and size.
    while ((left > 0)); do
        chunk=$((left < 256 ? left : 256))
        { openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:$SEED-$n" -in /dev/zero 2>/dev/null || true; } |
            head -c $((chunk * 1048576)) >"$content/bulk/part-$n.bin"
        [[ $(stat -c %s "$content/bulk/part-$n.bin") == $((chunk * 1048576)) ]] || die "openssl made a short part-$n.bin"
        left=$((left - chunk))
        n=$((n + 1))
    done
    awk -v n="$SMALL" -v dir="$content/small" -v seed="$SEED" 'BEGIN {
        srand(length(seed) * 7919 + 17)
        for (i = 0; i < n; i++) {
            d = sprintf("%s/d%02d", dir, i % 64)
            if (i < 64) system("mkdir -p " d)
            f = sprintf("%s/file-%05d.txt", d, i)
            size = 1024 + int(rand() * 7168)
            s = ""
            while (length(s) < size)
                s = s sprintf("%06d level=%s key=%d value=%.4f msg=sandbox file %d line\n",
                              length(s), (rand() < 0.5 ? "info" : "debug"), int(rand() * 1000), rand(), i)
            printf "%s", substr(s, 1, size) > f
            close(f)
        }
    }'
    # Fixed modes and times: the tar stream is the same every round.
    find "$content" -exec touch -h -d '2026-01-01 00:00:00 UTC' {} +
    log "content: $(du -sm --apparent-size "$content" | cut -f1) MiB apparent, $(find "$content" | wc -l) entries"
}

# Makes round $1's volume and its holder container, filled with the content.
fill() { # $1 = round
    local box=bench-r$1
    VOL=ca-sbx-$RUN_ID-r$1
    HOLDER=hold-$RUN_ID-r$1
    docker volume create --label ca.sandbox=1 --label "ca.sandbox.id=$box" \
        --label "$SCOPE_LABEL" "$VOL" >/dev/null
    # Only the scope label: unmanaged (never sandboxctl's to remove), and
    # removed before sandboxctl runs, which then reads through a helper. With
    # BENCH_SOURCE=container it is the box's own container (managed), left
    # in place: sandboxctl stops it, reads the volume through it (the same
    # endpoint as `docker cp`), and removes it.
    local labels=(--label "$SCOPE_LABEL")
    if [[ $SOURCE == container ]]; then
        labels+=(--label ca.sandbox=1 --label "ca.sandbox.id=$box")
    fi
    docker create --name "$HOLDER" "${labels[@]}" --network none \
        -v "$VOL:/v" "$IMAGE" /bin/sleep infinity >/dev/null
    local t0 t1
    t0=$(now)
    tar -C "$WORK/content" --sort=name --owner=0 --group=0 --numeric-owner -cf - . |
        docker cp - "$HOLDER:/v"
    sync
    t1=$(now)
    log "round $1: filled $VOL in $(span "$t0" "$t1") s (incl. sync)"
}

# (b): the docker CLI idiom; appends "b round wall archive_bytes rss_cp rss_zstd
# wall_with_fsync" to raw. The last: the idiom followed by `sync FILE` (an
# fsync of the archive, which sandboxctl does and the idiom does not).
run_docker_cp() { # $1 = round
    local out=$WORK/cp-r$1.tar.zst t0 t1 t2 wall bytes load
    load=$(load1)
    t0=$(now)
    /usr/bin/time -v -o "$WORK/cp-r$1.time" docker cp "$HOLDER:/v" - |
        /usr/bin/time -v -o "$WORK/zstd-r$1.time" zstd -3 -q >"$out"
    t1=$(now)
    sync "$out"
    t2=$(now)
    wall=$(span "$t0" "$t1")
    bytes=$(stat -c %s "$out")
    zstd -t -q "$out" || die "round $1: docker cp | zstd made a broken archive"
    rm -f "$out"
    echo "b $1 $wall $bytes $(rss_mib "$WORK/cp-r$1.time") $(rss_mib "$WORK/zstd-r$1.time") $(span "$t0" "$t2") $(cpu_s "$WORK/cp-r$1.time") $(cpu_s "$WORK/zstd-r$1.time") $load" >>"$WORK/raw"
    log "round $1 (b) docker cp | zstd -3: $wall s ($(span "$t0" "$t2") s with sync FILE), archive $(mib "$bytes") MiB, RSS docker cp $(rss_mib "$WORK/cp-r$1.time") MiB, zstd $(rss_mib "$WORK/zstd-r$1.time") MiB, CPU docker cp $(cpu_s "$WORK/cp-r$1.time") s, zstd $(cpu_s "$WORK/zstd-r$1.time") s, load $load"
}

# (a): sandboxctl apply --archive; appends "a round wall archive_bytes rss tar_bytes" to raw.
run_sandboxctl() { # $1 = round
    local dir=$WORK/archive-r$1 json=$WORK/apply-r$1.json rc=0 t0 t1 load
    mkdir -p "$dir"
    load=$(load1)
    t0=$(now)
    /usr/bin/time -v -o "$WORK/apply-r$1.time" \
        "$BIN" --scope "$SCOPE_LABEL" --state "$EMPTY_STATE" --format json apply --archive "$dir" \
        >"$json" 2>"$WORK/apply-r$1.err" &
    CURRENT_PID=$!
    wait "$CURRENT_PID" || rc=$?
    CURRENT_PID=
    t1=$(now)
    if ((rc != 0)); then
        cat "$WORK/apply-r$1.err" "$json" >&2
        die "round $1: sandboxctl exited $rc"
    fi
    local converged bytes archive manifest uncompressed
    converged=$(jq -r .converged "$json")
    bytes=$(jq -r '.archived[0].bytes // empty' "$json")
    archive=$(jq -r '.archived[0].path // empty' "$json")
    [[ $converged == true && -n $bytes && -f $archive ]] || { cat "$json" >&2; die "round $1: no archive, or not converged"; }
    manifest=${archive%.tar.zst}.json
    uncompressed=$(jq -r .uncompressedSize "$manifest")
    [[ $(stat -c %s "$archive") == "$bytes" ]] || die "round $1: archive size differs from the report"
    [[ $(sha256sum "$archive" | cut -d' ' -f1) == $(jq -r .sha256 "$manifest") ]] || die "round $1: archive does not match its manifest"
    if docker volume inspect "$VOL" >/dev/null 2>&1; then die "round $1: the volume is still there"; fi
    rm -rf "$dir"
    local wall rss step
    wall=$(span "$t0" "$t1")
    rss=$(rss_mib "$WORK/apply-r$1.time")
    # The archive step alone, as sandboxctl timed it (report's elapsedMs).
    step=$(jq -r '.archived[0].elapsedMs / 1000' "$json")
    echo "a $1 $wall $bytes $rss $uncompressed $(cpu_s "$WORK/apply-r$1.time") $load $step" >>"$WORK/raw"
    log "round $1 (a) sandboxctl apply --archive: $wall s (archive step $step s), archive $(mib "$bytes") MiB, peak RSS $rss MiB, tar $(mib "$uncompressed") MiB, CPU $(cpu_s "$WORK/apply-r$1.time") s, load $load"
}

ensure_tools
ensure_binary
ensure_image
EMPTY_STATE=$WORK/empty.toml
: >"$EMPTY_STATE"
make_content

for ((r = 1; r <= REPEAT; r++)); do
    fill "$r"
    run_docker_cp "$r"
    if [[ $SOURCE != container ]]; then docker rm "$HOLDER" >/dev/null; fi
    run_sandboxctl "$r"
done

col() { awk -v k="$1" -v c="$2" '$1 == k { print $c }' "$WORK/raw"; }
A_WALL=$(col a 3 | median)
B_WALL=$(col b 3 | median)
B_WALL_SYNC=$(col b 7 | median)
A_RSS=$(col a 5 | median)
A_RSS_MAX=$(col a 5 | sort -g | tail -1)
B_RSS_CP=$(col b 5 | median)
B_RSS_ZSTD=$(col b 6 | median)
A_BYTES=$(col a 4 | median)
B_BYTES=$(col b 4 | median)
TAR_BYTES=$(col a 6 | median)
A_CPU=$(col a 7 | median)
A_STEP=$(col a 9 | median)
B_CPU=$(awk '$1 == "b" { printf "%.2f\n", $8 + $9 }' "$WORK/raw" | median)
rate() { awk -v b="$TAR_BYTES" -v s="$1" 'BEGIN { printf "%.0f", b / 1048576 / s }'; }

log "raw runs (kind round wall bytes rss...):"
cat "$WORK/raw" >&2

cat <<EOF
Volume: $SIZE MiB of incompressible bytes + $SMALL small text files; tar stream $(mib "$TAR_BYTES") MiB; sandboxctl reads through the $SOURCE. $REPEAT rounds, medians; $(nproc) CPUs; Docker $(docker version --format '{{.Server.Version}}'); zstd $(zstd -V | grep -o 'v[0-9.]*').

| contender | wall (s) | MiB/s | CPU (s) | archive (MiB) | peak RSS (MiB) |
|---|---|---|---|---|---|
| \`sandboxctl apply --archive\` (fsync included) | $A_WALL ($(col a 3 | paste -sd' ')) | $(rate "$A_WALL") | $A_CPU | $(mib "$A_BYTES") | $A_RSS (max $A_RSS_MAX) |
| its archive step alone (\`elapsedMs\`: request for the stream to the archive renamed, fsynced) | $A_STEP ($(col a 9 | paste -sd' ')) | $(rate "$A_STEP") | | | |
| \`docker cp C:/v - \| zstd -3 > f\` (no fsync) | $B_WALL ($(col b 3 | paste -sd' ')) | $(rate "$B_WALL") | $B_CPU | $(mib "$B_BYTES") | docker cp $B_RSS_CP, zstd $B_RSS_ZSTD |
| the same, then \`sync f\` (fsync) | $B_WALL_SYNC ($(col b 7 | paste -sd' ')) | $(rate "$B_WALL_SYNC") | | $(mib "$B_BYTES") | |

1-minute load average before each run (2 CPUs shared with other agents): sandboxctl $(col a 8 | paste -sd' '); idiom $(col b 10 | paste -sd' ').

sandboxctl / idiom wall time: $(awk -v a="$A_WALL" -v b="$B_WALL" 'BEGIN { printf "%.2f", a / b }') (whole apply), $(awk -v a="$A_STEP" -v b="$B_WALL" 'BEGIN { printf "%.2f", a / b }') (archive step); against the idiom with fsync: $(awk -v a="$A_WALL" -v b="$B_WALL_SYNC" 'BEGIN { printf "%.2f", a / b }') and $(awk -v a="$A_STEP" -v b="$B_WALL_SYNC" 'BEGIN { printf "%.2f", a / b }'). Goals (issue 16): RSS under 64 MiB: $(awk -v r="$A_RSS_MAX" 'BEGIN { print (r < 64 ? "met" : "missed") }'); archiving no slower than the idiom (archive step against the idiom without fsync): $(awk -v a="$A_STEP" -v b="$B_WALL" 'BEGIN { print (a <= b ? "met" : "missed") }'); the whole apply (which also removes the volume and verifies) against it: $(awk -v a="$A_WALL" -v b="$B_WALL" 'BEGIN { print (a <= b ? "no slower" : "slower") }').
EOF
