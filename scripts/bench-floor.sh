#!/usr/bin/env bash
# bench-floor.sh: where the daemon's time goes when sandboxes are torn down,
# and how close sandboxctl comes to the fastest teardown the daemon allows.
#
# usage: bench-floor.sh probe N [P...]   remove N running boxes at each
#                                        parallelism P [1 2 4 8 16 32 64],
#                                        one raw API call per object (curl);
#                                        fit the floor model; one goroutine
#                                        dump of dockerd mid-teardown
#        bench-floor.sh compare N...     interleaved rounds at each N: sandboxctl,
#                                        the batch idiom, xargs -P8 and -P16,
#                                        the probe's floor; CPU busy % and peak
#                                        RSS of each
#
# Everything runs on a private dockerd that this script starts (with
# scripts/second-dockerd.sh: own data root, bridge, cgroups, containerd
# namespaces) and stops on exit, also on Ctrl-C; the main engine is never
# used. Its image ca-sbx:bench-sleep is imported into that engine from host
# files (/bin/sleep and its libraries). A box: a running container of that
# image (`sleep infinity`) mounting its own named volume, on the engine's
# default bridge, both labeled ca.sandbox=1, ca.sandbox.id=<box> and
# ca.sandbox.bench=<run>; every listing and removal is filtered by both labels.
#
# The floor model (probe): removing N containers at parallelism P takes
#   T(P) ~ N * max(serial, work / min(P, CPUs), (serial + parallel) / P)
# where `serial` is the part of one removal that no other removal overlaps
# (a lock in the daemon), `work` the CPU seconds one removal costs the whole
# machine (dockerd, containerd, shims, fuse-overlayfs, kernel), and
# `serial + parallel` one removal's latency alone (P = 1). The floor is the
# fastest T over P; the model's terms say why it is where it is.
#
# Environment:
#   BENCH_ENGINE    20 (Debian's dockerd) or 26 (scripts/fetch-current-docker.sh) [20]
#   BENCH_REPEAT    compare: rounds [3]
#   BENCH_CREATE_P  concurrent creations [8]
#   BENCH_DUMP_P    probe: the parallelism whose teardown is dumped mid-way [16]
#   BENCH_FLOOR_P   compare: the raw contenders' parallelism (the probe's best) [16]
#   BENCH_CONTENDERS compare: in order [sandboxctl batch xargs8 xargs16 raw-delete];
#                   raw-STRATEGY: scripts/lib/api-remove.py's strategies
#                   (raw-delete, raw-kill-first, raw-disconnect-first)
#   BENCH_STRATEGY  compare: extra sandboxctl arguments []
#   BENCH_RUN_ARGS  extra `docker run` arguments of every box (e.g. --network none) []
#   SANDBOXCTL      sandboxctl binary [target/release/sandboxctl]
#   SANDBOXCTL_B    compare: the binary of contender sandboxctl-b (an A/B of two builds) []
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/lib/sleep-image.sh"

usage() {
    sed -n '5,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
[[ $# -ge 2 ]] || usage
MODE=$1
shift
case $MODE in probe | compare) ;; *) usage ;; esac
for n in "$@"; do [[ $n =~ ^[1-9][0-9]*$ && $n -le 2000 ]] || usage; done

ENGINE=${BENCH_ENGINE:-20}
REPEAT=${BENCH_REPEAT:-3}
CREATE_P=${BENCH_CREATE_P:-8}
DUMP_P=${BENCH_DUMP_P:-16}
FLOOR_P=${BENCH_FLOOR_P:-16}
BIN=${SANDBOXCTL:-$ROOT/target/release/sandboxctl}
IMAGE=ca-sbx:bench-sleep
RUN_ID=floor-$(date +%Y%m%d-%H%M%S)-$$
SCOPE_LABEL=ca.sandbox.bench=$RUN_ID
MANAGED=(--filter label=ca.sandbox=1 --filter "label=$SCOPE_LABEL")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-floor.XXXXXX")
D2=$WORK/d2
CPUS=$(nproc)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -f $D2/state ]]; then
        log "stopping the private dockerd"
        "$ROOT/scripts/second-dockerd.sh" stop "$D2" || rc=1
    fi
    if [[ -n ${CG:-} && -d $CG ]]; then
        # The engine made its cgroup parent below it; its last processes
        # (fuse-overlayfs, shims) may take a moment to go.
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            find "$CG" -depth -type d -exec rmdir {} + 2>/dev/null && break
            sleep 0.5
        done
        [[ ! -d $CG ]] || log "cgroup $CG not empty; left"
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ $ENGINE == 26 ]]; then
    D26=/var/cache/sandboxctl-test/docker-26/root
    [[ -x $D26/usr/sbin/dockerd ]] || bash "$ROOT/scripts/fetch-current-docker.sh" >&2
    export PATH="$D26/usr/bin:$D26/usr/sbin:$PATH"
    export DOCKERD=$D26/usr/sbin/dockerd
fi
# The engine (dockerd, containerd, shims, runc, fuse-overlayfs: everything
# but the containers, which go to its cgroup parent) runs in a cpuacct cgroup
# of its own, so its CPU time is measured apart from the machine's.
CG=
for c in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/cpu,cpuacct; do
    if [[ -w $c ]]; then CG=$c/sbx-floor-$$; mkdir -p "$CG"; break; fi
done
# A /22 default bridge: room for 1,000 containers.
export D2_BRIDGE_BITS=${D2_BRIDGE_BITS:-22}
DOCKER_HOST=$(
    [[ -z $CG ]] || echo "$BASHPID" >"$CG/cgroup.procs"
    exec "$ROOT/scripts/second-dockerd.sh" start "$D2"
)
export DOCKER_HOST
SOCK=${DOCKER_HOST#unix://}
DPID=$(sed -n 's/^PID=//p' "$D2/state")
import_sleep_image "$IMAGE" "$WORK"
ENGINE_NAME="Docker $(docker version -f '{{.Server.Version}} (API {{.Server.APIVersion}})'), storage $(docker info -f '{{.Driver}}')"
API=v$(docker version -f '{{.Server.APIVersion}}')
log "private engine: $ENGINE_NAME at $DOCKER_HOST"

create_box() { # $1 = box id
    docker volume create --label ca.sandbox=1 --label "ca.sandbox.id=$1" \
        --label "$SCOPE_LABEL" "ca-sbx-$1" >/dev/null
    # shellcheck disable=SC2086
    docker run -d --name "sbx-$1" --label ca.sandbox=1 --label "ca.sandbox.id=$1" \
        --label "$SCOPE_LABEL" -v "ca-sbx-$1:/data" $RUN_ARGS "$IMAGE" /bin/sleep infinity >/dev/null
}

create_boxes() { # $1 = N, $2 = tag unique to the round
    local n=$1 tag=$2 running
    if [[ -n ${BENCH_RUN_ARGS:-} ]]; then
        export -f create_box
        export SCOPE_LABEL IMAGE RUN_ARGS=$BENCH_RUN_ARGS
        seq -f "$RUN_ID-$tag-%04g" 1 "$n" | xargs -P "$CREATE_P" -I{} bash -c 'create_box "$1"' _ {}
    else
        # The same boxes through the API from one process: faster to make.
        seq -f "$RUN_ID-$tag-%04g" 1 "$n" | api_remove "$CREATE_P" "create:$SCOPE_LABEL:$IMAGE" >/dev/null
    fi
    running=$(docker ps -q "${MANAGED[@]}" --filter status=running | wc -l)
    ((running == n)) || { log "created $running running boxes, expected $n"; exit 1; }
    sleep 2
}

left() {
    echo "$(docker ps -aq "${MANAGED[@]}" | wc -l)+$(docker volume ls -q "${MANAGED[@]}" | wc -l)"
}

# The machine's CPU counters (jiffies): busy and total.
cpu_now() { awk '/^cpu / { idle = $5 + $6; t = 0; for (i = 2; i <= 9; i++) t += $i; print t - idle, t }' /proc/stat; }
busy_pct() { # $1 $2 = busy0 total0, $3 $4 = busy1 total1
    awk -v b0="$1" -v t0="$2" -v b1="$3" -v t1="$4" 'BEGIN { printf "%.0f", (t1 > t0 ? 100 * (b1 - b0) / (t1 - t0) : 0) }'
}
now() { echo "$EPOCHREALTIME"; }
span() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "?"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
pct() { sort -g | awk -v p="$1" '{ v[NR] = $1 } END { i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; print v[i] }'; }

# Removes what stdin names at parallelism $1 with strategy $2, from one
# process; one latency (s) per line on stdout, as each removal ends.
api_remove() {
    python3 "$ROOT/scripts/lib/api-remove.py" "$SOCK" "$API" "$1" "$2"
}

# The engine's CPU time so far, in ns (0 without a cgroup).
engine_cpu() { if [[ -n $CG ]]; then cat "$CG/cpuacct.usage"; else echo 0; fi; }

# Dumps dockerd's goroutines once $1 latencies are in file $2; writes the dump's path to $3.
dump_midway() {
    local want=$1 file=$2 out=$3 f
    while (($(wc -l <"$file") < want)); do sleep 0.01; done
    kill -USR1 "$DPID"
    log "goroutine dump of dockerd $DPID after $(wc -l <"$file") of the calls ended"
    for _ in $(seq 1 100); do
        f=$(find "$D2/exec" -name 'goroutine-stacks-*.log' 2>/dev/null | sort | tail -n 1)
        [[ -z $f ]] || break
        sleep 0.1
    done
    [[ -n $f ]] || { log "no goroutine dump appeared in $D2/exec"; return 0; }
    sleep 0.5 # written in one go, but give it time to be complete
    cp "$f" "${TMPDIR:-/tmp}/bench-floor-dump-$ENGINE.log"
    echo "${TMPDIR:-/tmp}/bench-floor-dump-$ENGINE.log" >"$out"
}

# Where the goroutines of a dump wait, by state: the innermost frame of the
# daemon's own code (libnetwork and other vendored docker code included, not
# grpc), else the innermost outside the Go runtime.
summarize_dump() {
    awk '
        function flush() { if (state != "") n[state " " (own != "" ? own : other)]++; state = "" }
        /^goroutine [0-9]+ \[/ { flush(); state = $3; gsub(/[\[\],:]/, "", state); own = ""; other = ""; next }
        state != "" && /^[a-zA-Z]/ {
            f = $0; sub(/\([^()]*\)$/, "", f)
            if (own == "" && f ~ /^github\.com\/docker\/(docker|libnetwork)\// && f !~ /grpc/) own = f
            else if (other == "" && f !~ /^(runtime|sync|syscall|internal\/|net\.|net\/|bufio|io\.|os\.|golang\.org\/x\/)/) other = f
        }
        END { flush(); for (k in n) print n[k], k }' "$1" | sort -rn | head -n 15
}

# Removes the scope's boxes by raw API calls at parallelism $1 with strategy
# $2 (scripts/lib/api-remove.py); a goroutine dump a third of the way when $3
# is "dump". Prints: wall s (containers), wall s (volumes), machine busy %,
# median and p90 latency s, what is left, engine CPU ms, and the wall s of
# the whole teardown, listings included (as the batch idiom's).
raw_teardown() {
    local p=$1 strategy=$2 lat=$WORK/lat t0 t1 b0 c0 b1 c1 e0 e1 wall vwall busy dumper= n start
    start=$(now)
    docker ps -aq --no-trunc "${MANAGED[@]}" >"$WORK/ids"
    n=$(wc -l <"$WORK/ids")
    : >"$lat"
    if [[ ${3:-} == dump ]]; then
        dump_midway $((n / 3)) "$lat" "$WORK/dump.path" &
        dumper=$!
    fi
    read -r b0 c0 < <(cpu_now)
    e0=$(engine_cpu)
    t0=$(now)
    api_remove "$p" "$strategy" <"$WORK/ids" >"$lat"
    t1=$(now)
    e1=$(engine_cpu)
    read -r b1 c1 < <(cpu_now)
    wall=$(span "$t0" "$t1")
    busy=$(busy_pct "$b0" "$c0" "$b1" "$c1")
    t0=$(now)
    docker volume ls -q "${MANAGED[@]}" | api_remove "$p" volumes >/dev/null
    t1=$(now)
    vwall=$(span "$t0" "$t1")
    local whole
    whole=$(span "$start" "$t1")
    if [[ -n $dumper ]]; then wait "$dumper" || true; fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$wall" "$vwall" "$busy" "$(median <"$lat")" "$(pct 90 <"$lat")" "$(left)" "$(((e1 - e0) / 1000000))" "$whole"
}

probe() {
    local n=$1 p row
    shift
    local -a ps=("$@")
    ((${#ps[@]})) || ps=(1 2 4 8 16 32 64)
    local raw=$WORK/probe.tsv
    for p in "${ps[@]}"; do
        log "probe P=$p: creating $n boxes"
        create_boxes "$n" "p$p"
        row=$(raw_teardown "$p" delete "$([[ $p == "$DUMP_P" ]] && echo dump)")
        printf '%s\t%s\n' "$p" "$row" >>"$raw"
        log "probe P=$p: $row (containers s, volumes s, busy %, median call s, p90 s, left, engine CPU ms)"
    done
    echo
    echo "Probe: $n running boxes removed by raw API calls (one client process, P connections), one removal per container, then one per volume; box \`docker run\` arguments: ${BENCH_RUN_ARGS:-none}."
    echo "Machine: $CPUS CPUs; $ENGINE_NAME; $(date -u +%Y-%m-%d), commit $(git -C "$ROOT" rev-parse --short HEAD)."
    echo
    echo "| P | containers s | ms / container | machine busy % | machine CPU ms / container | engine CPU ms / container | one call median s | p90 s | volumes s | left |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    awk -F'\t' -v n="$n" -v cpus="$CPUS" '{
        printf "| %s | %.2f | %.1f | %s | %.1f | %.1f | %.3f | %.3f | %.2f | %s |\n", $1, $2, 1000 * $2 / n, $4, 1000 * $2 * $4 / 100 * cpus / n, $8 / n, $5, $6, $3, $7
    }' "$raw"
    awk -F'\t' -v n="$n" -v cpus="$CPUS" '
        $1 == 1 { alone = 1000 * $5 }
        { per = 1000 * $2 / n; work = 1000 * $2 * $4 / 100 * cpus / n
          if (best == "" || per < best) { best = per; bestp = $1 }
          if (work > maxwork) maxwork = work }
        END {
            cpu_floor = maxwork / cpus
            printf "\nModel: one removal alone %.1f ms (P = 1, median call); CPU work per removal up to %.1f ms over %d CPUs = %.1f ms; ", alone, maxwork, cpus, cpu_floor
            printf "fastest measured %.1f ms per container at P = %s.\n", best, bestp
            printf "Serial part (what no parallelism overlaps, above the CPU bound): %.1f ms per container.\n", (best > cpu_floor ? best - cpu_floor : 0)
            printf "Floor for N = 200: %.1f s (200 x %.1f ms).\n", 200 * best / 1000, best
        }' "$raw"
    if [[ -s $WORK/dump.path && -s $(cat "$WORK/dump.path") ]]; then
        echo
        echo "Goroutines of dockerd a third into the teardown at P = $DUMP_P, by state and first frame outside the Go runtime (count, state, frame):"
        echo
        echo '```'
        summarize_dump "$(cat "$WORK/dump.path")"
        echo '```'
    fi
}

# Peak RSS (KiB) and wall time of a command: its stdout to $1.
measured() {
    local out=$1
    shift
    /usr/bin/time -f '%e %M' -o "$WORK/time" "$@" >"$out" 2>"$out.err"
}

contender() { # $1 = name, $2 = N, $3 = round
    local c=$1 n=$2 r=$3 b0 c0 b1 c1 t0 t1 rss=- rc=0 ids
    create_boxes "$n" "$c-$n-$r"
    read -r b0 c0 < <(cpu_now)
    t0=$(now)
    case $c in
    raw-*)
        local row
        row=$(raw_teardown "$FLOOR_P" "${c#raw-}")
        [[ $(cut -f6 <<<"$row") == 0+0 ]] || rc=1
        t1=$(awk -v t0="$t0" -v w="$(cut -f8 <<<"$row")" 'BEGIN { printf "%.6f", t0 + w }')
        ;;
    sandboxctl | sandboxctl-b)
        local bin=$BIN
        [[ $c == sandboxctl ]] || bin=${SANDBOXCTL_B:?SANDBOXCTL_B names the second binary}
        # shellcheck disable=SC2086
        measured "$WORK/out" "$bin" --scope "$SCOPE_LABEL" --state "$WORK/empty.toml" apply ${BENCH_STRATEGY:-} || rc=$?
        rss=$(cut -d' ' -f2 "$WORK/time")
        grep -q '^Converged: ' "$WORK/out" || { log "sandboxctl did not converge (exit $rc)"; tail -n 20 "$WORK/out" "$WORK/out.err" >&2; }
        ;;
    batch)
        docker rm -f $(docker ps -aq "${MANAGED[@]}") >/dev/null || rc=$?
        docker volume rm $(docker volume ls -q "${MANAGED[@]}") >/dev/null || rc=$?
        ;;
    xargs8 | xargs16)
        docker ps -aq "${MANAGED[@]}" | xargs -P "${c#xargs}" -n 1 docker rm -f >/dev/null || rc=$?
        docker volume ls -q "${MANAGED[@]}" | xargs -P "${c#xargs}" -n 1 docker volume rm >/dev/null || rc=$?
        ;;
    esac
    [[ $c == raw-* ]] || t1=$(now)
    read -r b1 c1 < <(cpu_now)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$n" "$r" "$(span "$t0" "$t1")" \
        "$(busy_pct "$b0" "$c0" "$b1" "$c1")" "$rss" "$rc" "$(left)" >>"$WORK/compare.tsv"
    log "N=$n round $r $c: $(span "$t0" "$t1") s, exit $rc, left $(left)"
    [[ $(left) == 0+0 ]] || { log "scope not empty after $c"; exit 1; }
}

compare() {
    local n r c
    : >"$WORK/empty.toml"
    local -a order
    read -r -a order <<<"${BENCH_CONTENDERS:-sandboxctl batch xargs8 xargs16 raw-delete}"
    if [[ " ${order[*]} " == *" sandboxctl "* && ! -x $BIN ]]; then
        log "building $BIN"
        (cd "$ROOT" && cargo build --release --quiet)
    fi
    local -a contenders=("${order[@]}")
    for r in $(seq 1 "$REPEAT"); do
        for n in "$@"; do
            for c in "${order[@]}"; do contender "$c" "$n" "$r"; done
            order=("${order[@]:1}" "${order[0]}") # rotate who goes first
        done
    done
    local tsv=$WORK/compare.tsv
    echo
    echo "Teardown of N running boxes (container + named volume), median wall seconds of $REPEAT interleaved round(s); in brackets the machine's CPU busy % during it."
    echo "Machine: $CPUS CPUs; $ENGINE_NAME; $(date -u +%Y-%m-%d), commit $(git -C "$ROOT" rev-parse --short HEAD); sandboxctl arguments: ${BENCH_STRATEGY:-none}; raw-* = one client process over the API at P = $FLOOR_P (raw-delete: the measured floor)."
    echo
    printf '| N |'
    for c in "${contenders[@]}"; do printf ' %s |' "$c"; done
    echo ' sandboxctl / batch | sandboxctl / raw-delete | sandboxctl peak RSS MiB |'
    printf '|---:|'
    for c in "${contenders[@]}"; do printf -- '---:|'; done
    echo '---:|---:|---:|'
    for n in "$@"; do
        printf '| %s |' "$n"
        for c in "${contenders[@]}"; do
            printf ' %s (%s) |' \
                "$(awk -F'\t' -v n="$n" -v c="$c" '$1 == c && $2 == n { print $4 }' "$tsv" | median)" \
                "$(awk -F'\t' -v n="$n" -v c="$c" '$1 == c && $2 == n { print $5 }' "$tsv" | median)"
        done
        local s b f rss
        s=$(awk -F'\t' -v n="$n" '$1 == "sandboxctl" && $2 == n { print $4 }' "$tsv" | median)
        b=$(awk -F'\t' -v n="$n" '$1 == "batch" && $2 == n { print $4 }' "$tsv" | median)
        f=$(awk -F'\t' -v n="$n" '$1 == "raw-delete" && $2 == n { print $4 }' "$tsv" | median)
        rss=$(awk -F'\t' -v n="$n" '$1 == "sandboxctl" && $2 == n { print $6 }' "$tsv" | sort -g | tail -n 1)
        awk -v s="$s" -v b="$b" -v f="$f" -v rss="${rss:-?}" 'function r(x, y) { return (x + 0 > 0 && y + 0 > 0) ? sprintf("%.3f", x / y) : "-" }
            BEGIN { printf " %s | %s | %s |\n", r(s, b), r(s, f), (rss + 0 > 0 ? sprintf("%.1f", rss / 1024) : "-") }'
    done
    echo
    echo "Every run (contender, N, round, wall s, busy %, peak RSS KiB, exit, left):"
    echo
    sed 's/^/    /' "$tsv"
}

"$MODE" "$@"
