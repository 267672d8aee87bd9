#!/usr/bin/env bash
# bench-teardown.sh N: how fast can N running sandboxes be torn down?
#
# Against the real Docker engine (DOCKER_HOST, else the local socket). For
# every contender it creates N running boxes (a container running `sleep`
# from a locally built image, mounting its own named volume; both labeled
# ca.sandbox=1, ca.sandbox.id=<box> and this run's scope label
# ca.sandbox.bench=<run id>), then times their teardown:
#   (a) one-by-one: `docker rm -f ID` per container, then `docker volume rm NAME` per volume;
#   (b) batch:      docker rm -f $(docker ps -aq --filter label=ca.sandbox=1 --filter label=<scope>)
#                   docker volume rm $(docker volume ls -q --filter label=ca.sandbox=1 --filter label=<scope>)
#   (c) sandboxctl --scope <scope> --state <empty state file> apply --parallelism P, for each P.
# Every contender lists what it removes as part of its timed work. Creating the
# boxes is not timed. After every contender the scope must be empty.
#
# Isolation: every command that lists or removes is filtered by this run's
# unique scope label (ca.sandbox.bench=<run id>) as well as ca.sandbox=1, so the
# benchmark never touches another user's objects, even other sandboxes. The
# scope is purged on exit, also when interrupted (Ctrl-C) or killed by TERM.
# The image ca-sbx:bench-sleep is built once (from /bin/sleep and the libraries
# `ldd` lists; nothing is pulled) and never removed.
#
# Output: a markdown table on stdout (progress on stderr); raw measurements in
# the file named on the last line. Ratios: "x (b)" is wall / wall of (b) (below
# 1 is faster than the batch idiom); "(a) / x" is how many times faster than (a).
#
# Environment:
#   BENCH_PARALLELISMS  sandboxctl parallelisms to time; sandboxctl's default
#                       is always added                          [1 4 8 16 32]
#   BENCH_REPEAT        rounds; every contender runs once a round, the table
#                       shows the median                           [1]
#   BENCH_CREATE_P      concurrent `docker run` while creating boxes [8]
#   BENCH_SETTLE        seconds to let the daemon settle after creating [2]
#   BENCH_RUN_ARGS      extra `docker run` arguments (e.g. --network none) []
#   SANDBOXCTL          sandboxctl binary [target/release/sandboxctl, built if missing]
#   BENCH_KEEP_RAW      directory to copy raw outputs into (sandboxctl stdout/stderr) []
#
# Fleet mode: bench-teardown.sh fleet N
# Times `sandboxctl --state S --format json apply` (default parallelism: a shared
# budget of 12 per engine, at most 12 in flight on each) where S names
# [[engine]] tables, for the contenders
#   main:   1 engine x N boxes   (S names the main engine only)
#   second: 1 engine x N boxes   (S names a second dockerd only)
#   both:   2 engines x N boxes each (S names both; the fleet works on them at once)
# each at every latency of BENCH_LATENCIES: `none` = the engines' own sockets;
# a number D = every engine behind its own scripts/latency-proxy.py, which holds
# each request D ms (one round trip to a remote engine; on one machine both
# daemons share the CPUs, so only latency shows what running engines
# concurrently buys). The second dockerd is started by scripts/second-dockerd.sh
# (own data-root, bridge, cgroups; the image loaded into it) and stopped on exit.
# Every contender round has its own scope label (ca.sandbox.benchrun=<tag>, on
# top of the run's ca.sandbox.bench=<run id>); the run's scope is purged on both
# engines on exit (also Ctrl-C/TERM), proxies and the second dockerd stopped.
# The report checks exit 0, converged, 2 x boxes removed and an empty scope.
#   BENCH_LATENCIES     latencies per engine call, ms or none      [none 20 50]
#   BENCH_FLEET         contenders, in order per round             [main second both]
#   BENCH_FLEET_ARGS    extra global sandboxctl arguments (e.g. --engine-parallelism 6) []
#   BENCH_FLEET_BOX     running: each box's container runs `sleep`; created: it is
#                       only created (removing it costs the daemon little, so
#                       engine-call latency dominates)                 [running]
#   BENCH_REPEAT, BENCH_CREATE_P, BENCH_SETTLE, BENCH_RUN_ARGS, SANDBOXCTL,
#   BENCH_KEEP_RAW      as above
set -euo pipefail
export LC_ALL=C

usage() {
    echo "usage: $0 N         (N running boxes per contender, 1..2000)" >&2
    echo "       $0 fleet N   (fleet mode: 1 engine x N boxes vs 2 engines x N boxes each)" >&2
    exit 2
}
MODE=single
if [[ ${1:-} == fleet ]]; then
    MODE=fleet
    shift
fi
[[ $# -eq 1 && $1 =~ ^[1-9][0-9]*$ && $1 -le 2000 ]] || usage
N=$1

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/sleep-image.sh
source "$ROOT/scripts/lib/sleep-image.sh"
read -r -a PARALLELISMS <<<"${BENCH_PARALLELISMS:-1 4 8 16 32}"
REPEAT=${BENCH_REPEAT:-1}
CREATE_P=${BENCH_CREATE_P:-8}
SETTLE=${BENCH_SETTLE:-2}
read -r -a RUN_ARGS <<<"${BENCH_RUN_ARGS:-}"
IMAGE=ca-sbx:bench-sleep
RUN_ID=bench-$(date +%Y%m%d-%H%M%S)-$$
SCOPE_KEY=ca.sandbox.bench
SCOPE_LABEL=$SCOPE_KEY=$RUN_ID
MANAGED=(--filter label=ca.sandbox=1 --filter "label=$SCOPE_LABEL")
BIN=${SANDBOXCTL:-$ROOT/target/release/sandboxctl}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-teardown.XXXXXX")
RAW=$WORK/raw.tsv
CURRENT_PID=
SAMPLER_PID=

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Removes every container and volume of this run's scope (and nothing else).
purge_scope() {
    local attempt ids vols
    for attempt in 1 2 3 4 5; do
        mapfile -t ids < <(docker ps -aq "${MANAGED[@]}" 2>/dev/null)
        if ((${#ids[@]})); then docker rm -f "${ids[@]}" >/dev/null 2>&1 || true; fi
        mapfile -t vols < <(docker volume ls -q "${MANAGED[@]}" 2>/dev/null)
        if ((${#vols[@]})); then docker volume rm "${vols[@]}" >/dev/null 2>&1 || true; fi
        [[ $(scope_count) == "0 0" ]] && return 0
        sleep "$attempt"
    done
    log "WARNING: could not empty scope $SCOPE_LABEL: $(scope_count) (containers volumes) left"
    return 1
}

# "<containers> <volumes>" carrying this run's scope label (any ca.sandbox value).
scope_count() {
    local c v
    c=$(docker ps -aq --filter "label=$SCOPE_LABEL" | wc -l)
    v=$(docker volume ls -q --filter "label=$SCOPE_LABEL" | wc -l)
    echo "$c $v"
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n $SAMPLER_PID ]]; then kill "$SAMPLER_PID" 2>/dev/null || true; fi
    if [[ -n $CURRENT_PID ]] && kill -0 "$CURRENT_PID" 2>/dev/null; then
        # sandboxctl stops starting removals on SIGINT and verifies; then we purge.
        kill -INT "$CURRENT_PID" 2>/dev/null || true
        wait "$CURRENT_PID" 2>/dev/null || true
    fi
    if [[ $MODE == fleet ]]; then fleet_cleanup || rc=1; fi
    log "cleaning up scope $SCOPE_LABEL"
    purge_scope || rc=1
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { echo "$EPOCHREALTIME"; }
# seconds between two EPOCHREALTIME values, 3 decimals
span() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

ensure_binary() {
    if [[ ! -x $BIN ]]; then
        log "building $BIN (cargo build --release)"
        (cd "$ROOT" && cargo build --release --quiet)
    fi
    [[ -x $BIN ]] || { echo "no sandboxctl binary at $BIN" >&2; exit 1; }
}

# ca-sbx:bench-sleep: /bin/sleep and its libraries, imported from a tar (no pull);
# see scripts/lib/sleep-image.sh.
ensure_image() {
    docker image inspect "$IMAGE" >/dev/null 2>&1 && return 0
    log "building $IMAGE from /bin/sleep"
    import_sleep_image "$IMAGE" "$WORK"
}

# One box: a labeled named volume and a running container mounting it.
create_box() { # $1 = box id
    docker volume create --label ca.sandbox=1 --label "ca.sandbox.id=$1" \
        --label "$SCOPE_LABEL" "ca-sbx-$1" >/dev/null
    docker run -d --name "sbx-$1" --label ca.sandbox=1 --label "ca.sandbox.id=$1" \
        --label "$SCOPE_LABEL" -v "ca-sbx-$1:/data" "${RUN_ARGS[@]}" "$IMAGE" \
        /bin/sleep infinity >/dev/null
}

create_boxes() { # $1 = tag unique to this contender and round
    local tag=$1 running vols
    export -f create_box
    export SCOPE_LABEL IMAGE
    export RUN_ARGS_STR="${RUN_ARGS[*]}"
    # shellcheck disable=SC2016 # expanded by the inner bash
    seq -f "$RUN_ID-$tag-%04g" 1 "$N" |
        xargs -P "$CREATE_P" -I{} bash -c 'read -r -a RUN_ARGS <<<"$RUN_ARGS_STR"; create_box "$1"' _ {}
    running=$(docker ps -q "${MANAGED[@]}" --filter status=running | wc -l)
    vols=$(docker volume ls -q "${MANAGED[@]}" | wc -l)
    if ((running != N || vols != N)); then
        log "created $running running containers and $vols volumes, expected $N each"
        exit 1
    fi
    sleep "$SETTLE"
}

# Containers on the daemon that are not ours (other users' load), for the noise column.
foreign_containers() {
    local all mine
    all=$(docker ps -q | wc -l)
    mine=$(docker ps -q --filter "label=$SCOPE_LABEL" | wc -l)
    echo $((all - mine))
}

teardown_a() {
    local ids vols id v
    mapfile -t ids < <(docker ps -aq "${MANAGED[@]}")
    for id in "${ids[@]}"; do docker rm -f "$id" >/dev/null; done
    mapfile -t vols < <(docker volume ls -q "${MANAGED[@]}")
    for v in "${vols[@]}"; do docker volume rm "$v" >/dev/null; done
}

teardown_b() {
    # The idiom from the issue, narrowed to this run's scope; word splitting intended.
    # shellcheck disable=SC2046
    docker rm -f $(docker ps -aq --filter label=ca.sandbox=1 --filter "label=$SCOPE_LABEL") >/dev/null
    # shellcheck disable=SC2046
    docker volume rm $(docker volume ls -q --filter label=ca.sandbox=1 --filter "label=$SCOPE_LABEL") >/dev/null
}

# Copies lines from stdin to stdout, each prefixed with the time it arrived.
stamp() {
    local line
    while IFS= read -r line || [[ -n $line ]]; do
        printf '%s %s\n' "$EPOCHREALTIME" "$line"
    done
}

# Largest number of open file descriptors of process $1 while it lives (builtins only).
sample_fds() {
    local pid=$1 out=$2 max=0 n tick
    local -a fds
    mkfifo "$WORK/tick.$BASHPID"
    exec {tick}<>"$WORK/tick.$BASHPID"
    while [[ -d /proc/$pid/fd ]]; do
        fds=(/proc/"$pid"/fd/*)
        n=${#fds[@]}
        ((n > max)) && max=$n
        read -r -t 0.005 -u "$tick" _ || true
    done
    echo "$max" >"$out"
}

# sandboxctl apply at parallelism $1; prints "wall plan_phase apply_phase verify_phase max_fds rc".
# Human output: stdout gets the plan right after listing+planning and the report
# after verification; stderr (not a terminal) one line per finished removal. The
# arrival time of those lines splits the run into its phases.
teardown_c() {
    local p=$1 tag=$2 out err rc=0 t0 t1 t_plan t_last t_report fds
    out=$WORK/$tag.out err=$WORK/$tag.err
    mkfifo "$WORK/$tag.o" "$WORK/$tag.e"
    stamp <"$WORK/$tag.o" >"$out" &
    local so=$!
    stamp <"$WORK/$tag.e" >"$err" &
    local se=$!
    t0=$(now)
    "$BIN" --scope "$SCOPE_LABEL" --state "$EMPTY_STATE" apply --parallelism "$p" \
        >"$WORK/$tag.o" 2>"$WORK/$tag.e" &
    CURRENT_PID=$!
    sample_fds "$CURRENT_PID" "$WORK/$tag.fds" &
    SAMPLER_PID=$!
    wait "$CURRENT_PID" || rc=$?
    t1=$(now)
    CURRENT_PID=
    wait "$so" "$se" "$SAMPLER_PID" || true
    SAMPLER_PID=
    t_plan=$(awk 'NR == 1 { print $1 }' "$out")
    t_last=$(awk 'END { print $1 }' "$err")
    t_report=$(awk '{ text = substr($0, index($0, " ") + 1) } text ~ /^(Removed|Failures|Left behind):$/ { print $1; exit }' "$out")
    fds=$(cat "$WORK/$tag.fds" 2>/dev/null || echo "?")
    if [[ -n ${BENCH_KEEP_RAW:-} ]]; then
        mkdir -p "$BENCH_KEEP_RAW" && cp "$out" "$err" "$BENCH_KEEP_RAW/"
    fi
    if ((rc != 0)) || ! grep -q ' Converged: ' "$out"; then
        log "sandboxctl apply --parallelism $p: exit $rc, not converged; see below"
        tail -n 20 "$out" "$err" >&2
    fi
    echo "$(span "$t0" "$t1") $(span "$t0" "${t_plan:-$t0}") $(span "${t_plan:-$t0}" "${t_last:-$t1}") $(span "${t_last:-$t1}" "${t_report:-$t1}") $fds $rc"
}

# A timed command on its own: prints wall seconds.
timed() {
    local t0 t1
    t0=$(now)
    "$@" >/dev/null
    t1=$(now)
    span "$t0" "$t1"
}

run_contender() { # $1 = contender name, $2 = round
    local c=$1 round=$2 tag t0 t1 wall extra="" foreign before after left res
    tag=$c-r$round
    log "round $round: creating $N boxes for $c"
    create_boxes "$tag"
    foreign=$(foreign_containers)
    before=$(cut -d' ' -f1 /proc/loadavg)
    case $c in
    a | b)
        log "round $round: timing ($c)"
        t0=$(now)
        "teardown_$c"
        t1=$(now)
        wall=$(span "$t0" "$t1")
        ;;
    p*)
        local p=${c#p} plan_s
        # `sandboxctl plan` on the N boxes (not part of the apply timing).
        plan_s=$(timed "$BIN" --scope "$SCOPE_LABEL" --state "$EMPTY_STATE" plan)
        log "round $round: timing sandboxctl apply --parallelism $p"
        res=$(teardown_c "$p" "$tag")
        wall=${res%% *}
        extra="$plan_s ${res#* }"
        ;;
    esac
    after=$(cut -d' ' -f1 /proc/loadavg)
    left=$(scope_count)
    if [[ $left != "0 0" ]]; then
        log "($c) left $left (containers volumes) in scope: FAILED to empty it"
        purge_scope
    fi
    if [[ $c == p* ]]; then
        # A no-op apply on the now-empty scope: the fixed cost of a run.
        extra="$extra $(timed "$BIN" --scope "$SCOPE_LABEL" --state "$EMPTY_STATE" apply)"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$round" "$wall" "${left/ /+}" "$foreign" "$before" "$after" "$extra" >>"$RAW"
    log "($c) $wall s; left ${left/ /+}; other containers $foreign; load $before -> $after"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

report() {
    local default=$1 c name wa wb w med_plan med_apply med_verify fds plan_s noop over col
    wa=$(awk -F'\t' '$1 == "a" { print $3 }' "$RAW" | median)
    wb=$(awk -F'\t' '$1 == "b" { print $3 }' "$RAW" | median)
    echo
    echo "N = $N boxes (running container + named volume each), $REPEAT round(s), median wall time."
    echo "Machine: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Docker $(docker version -f '{{.Server.Version}} (API {{.Server.APIVersion}})'), storage $(docker info -f '{{.Driver}}'); sandboxctl default parallelism $default."
    echo
    echo "| contender | wall s | x (b) | (a) / x | runs (s) | listing+plan s | removals s | verify s | overhead % | max fds | \`plan\` s | no-op apply s |"
    echo "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    for c in a b "${PARALLELISMS[@]/#/p}"; do
        case $c in
        a) name="(a) docker rm -f / volume rm, one per call" ;;
        b) name="(b) docker rm -f \$(docker ps -aq ...) + volume rm \$(...)" ;;
        *) name="(c) sandboxctl apply --parallelism ${c#p}"
           [[ ${c#p} == "$default" ]] && name="$name (default)" ;;
        esac
        w=$(awk -F'\t' -v c="$c" '$1 == c { print $3 }' "$RAW" | median)
        local runs
        runs=$(awk -F'\t' -v c="$c" '$1 == c { printf "%s%s", sep, $3; sep = " " }' "$RAW")
        col="| $name | $w | $(awk -v x="$w" -v b="$wb" 'BEGIN { printf "%.2f", x / b }') | $(awk -v x="$w" -v a="$wa" 'BEGIN { printf "%.2f", a / x }') | $runs |"
        if [[ $c == p* ]]; then
            # extra fields: plan_s plan_phase apply_phase verify_phase fds rc noop
            med_plan=$(awk -F'\t' -v c="$c" '$1 == c { split($8, e, " "); print e[2] }' "$RAW" | median)
            med_apply=$(awk -F'\t' -v c="$c" '$1 == c { split($8, e, " "); print e[3] }' "$RAW" | median)
            med_verify=$(awk -F'\t' -v c="$c" '$1 == c { split($8, e, " "); print e[4] }' "$RAW" | median)
            over=$(awk -F'\t' -v c="$c" '$1 == c { split($8, e, " "); printf "%.4f\n", 100 * (e[2] + e[4]) / $3 }' "$RAW" | median)
            fds=$(awk -F'\t' -v c="$c" '$1 == c { split($8, e, " "); print e[5] }' "$RAW" | sort -n | tail -n 1)
            plan_s=$(awk -F'\t' -v c="$c" '$1 == c { split($8, e, " "); print e[1] }' "$RAW" | median)
            noop=$(awk -F'\t' -v c="$c" '$1 == c { split($8, e, " "); print e[7] }' "$RAW" | median)
            col="$col $med_plan | $med_apply | $med_verify | $(printf '%.1f' "$over") | $fds | $plan_s | $noop |"
        else
            col="$col | | | | | | |"
        fi
        echo "$col"
    done
    echo
    echo "listing+plan: from start until the plan is printed (process start, connect, 4 listings, planning);"
    echo "removals: until the last removal finished; verify: until the report is printed (listing again, re-plan)."
    echo "overhead = (listing+plan + verify) / wall. max fds: most file descriptors sandboxctl held at once."
    echo "\`plan\` s: \`sandboxctl plan\` on the same N boxes before apply; no-op apply s: apply on the emptied scope."
    awk -F'\t' '{ if ($4 != "0+0") bad = bad " " $1 "/r" $2 ":" $4 } END { if (bad != "") print "NOT EMPTY after:" bad; else print "Scope verified empty after every contender." }' "$RAW"
    awk -F'\t' '{ split($8, e, " "); if ($1 ~ /^p/ && e[6] != 0) bad = bad " " $1 "/r" $2 ":exit " e[6] } END { if (bad != "") print "sandboxctl FAILED:" bad }' "$RAW"
    awk -F'\t' 'NR == 1 { lo = hi = $5 } { if ($5 < lo) lo = $5; if ($5 > hi) hi = $5; if ($6 > lmax) lmax = $6; if ($7 > lmax) lmax = $7 } END { printf "Other containers on the daemon during timings: %d..%d; highest 1-min load average seen: %s.\n", lo, hi, lmax }' "$RAW"

    local wd
    wd=$(awk -F'\t' -v c="p$default" '$1 == c { print $3 }' "$RAW" | median)
    if [[ -n $wd ]]; then
        local od
        od=$(awk -F'\t' -v c="p$default" '$1 == c { split($8, e, " "); printf "%.4f\n", 100 * (e[2] + e[4]) / $3 }' "$RAW" | median)
        echo
        echo "Targets at the default parallelism ($default):"
        awk -v d="$wd" -v b="$wb" 'BEGIN { printf "- at least as fast as (b): %.3f s vs %.3f s: %s\n", d, b, (d <= b ? "MET" : "NOT MET") }'
        awk -v d="$wd" -v a="$wa" 'BEGIN { printf "- at least 1.8x faster than (a): %.2fx: %s\n", a / d, (a / d >= 1.8 ? "MET" : "NOT MET") }'
        awk -v o="$od" 'BEGIN { printf "- plan/verify overhead under 5%%: %.1f %%: %s\n", o, (o < 5 ? "MET" : "NOT MET") }'
    fi
}

main() {
    docker version -f '{{.Server.Version}}' >/dev/null || { echo "cannot reach the Docker engine" >&2; exit 1; }
    ensure_binary
    ensure_image
    EMPTY_STATE=$WORK/empty-state.toml
    : >"$EMPTY_STATE"
    local default
    # "--parallelism <P>  ... [default: 12]" (or "[default: 12, per engine in a fleet]")
    default=$("$BIN" apply -h | sed -n 's/^ *--parallelism .*\[default: \([0-9][0-9]*\)[],].*/\1/p' | head -n 1)
    [[ -n $default ]] || { echo "cannot read the default --parallelism from \`$BIN apply -h\`" >&2; exit 1; }
    # The targets are judged at the default parallelism: always time it.
    if [[ -n $default && " ${PARALLELISMS[*]} " != *" $default "* ]]; then
        PARALLELISMS+=("$default")
    fi
    log "run $RUN_ID: N=$N, parallelisms ${PARALLELISMS[*]} (default $default), $REPEAT round(s); scope $SCOPE_LABEL"
    local round c
    for ((round = 1; round <= REPEAT; round++)); do
        for c in a b "${PARALLELISMS[@]/#/p}"; do
            run_contender "$c" "$round"
        done
    done
    report "$default"
    if [[ -n ${BENCH_KEEP_RAW:-} ]]; then
        mkdir -p "$BENCH_KEEP_RAW" && cp "$RAW" "$BENCH_KEEP_RAW/raw-$RUN_ID.tsv"
        echo "Raw measurements: $BENCH_KEEP_RAW/raw-$RUN_ID.tsv"
    fi
}

# ---------------------------------------------------------------- fleet mode

MAIN_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}
D2_DIR=
D2_HOST=
BOX_STATE=running
PROXY_PIDS=()
PYTHON=$(command -v /usr/bin/python3 || command -v python3 || true)

# Stops the proxies, purges the run's scope on the second engine and stops it.
# (The main engine's scope is purged by cleanup.)
fleet_cleanup() {
    local rc=0
    stop_proxies || true
    if [[ -n $D2_HOST ]]; then
        log "cleaning up scope $SCOPE_LABEL on the second engine"
        DOCKER_HOST=$D2_HOST purge_scope || rc=1
    fi
    if [[ -n $D2_DIR && -e $D2_DIR ]]; then
        log "stopping the second dockerd"
        "$ROOT/scripts/second-dockerd.sh" stop "$D2_DIR" || rc=1
    fi
    return "$rc"
}

# One box on engine $1 with id $2, in contender scope $3; its container
# running (BOX_STATE=running) or created only (BOX_STATE=created).
create_box_on() {
    local how=(run -d)
    [[ $BOX_STATE == created ]] && how=(create)
    docker -H "$1" volume create --label ca.sandbox=1 --label "ca.sandbox.id=$2" \
        --label "$SCOPE_LABEL" --label "$3" "ca-sbx-$2" >/dev/null
    docker -H "$1" "${how[@]}" --name "sbx-$2" --label ca.sandbox=1 --label "ca.sandbox.id=$2" \
        --label "$SCOPE_LABEL" --label "$3" -v "ca-sbx-$2:/data" "${RUN_ARGS[@]}" "$IMAGE" \
        /bin/sleep infinity >/dev/null
}

# "<containers> <volumes>" of scope label $2 on engine $1.
scope_count_on() {
    local c v
    c=$(docker -H "$1" ps -aq --filter "label=$2" | wc -l)
    v=$(docker -H "$1" volume ls -q --filter "label=$2" | wc -l)
    echo "$c $v"
}

# N boxes on each engine named (main, second), in contender scope $1, tag $2.
fleet_create() {
    local scope=$1 tag=$2 host running e
    shift 2
    export -f create_box_on
    export SCOPE_LABEL IMAGE BOX_STATE
    export RUN_ARGS_STR="${RUN_ARGS[*]}"
    # shellcheck disable=SC2016 # expanded by the inner bash
    for e in "$@"; do
        host=$(engine_host "$e" none)
        seq -f "$host $RUN_ID-$tag-$e-%04g" 1 "$N"
    done |
        xargs -P "$CREATE_P" -L 1 bash -c \
            'read -r -a RUN_ARGS <<<"$RUN_ARGS_STR"; create_box_on "$1" "$2" "'"$scope"'"' _
    for e in "$@"; do
        host=$(engine_host "$e" none)
        running=$(docker -H "$host" ps -aq --filter "label=$scope" --filter "status=$BOX_STATE" | wc -l)
        if [[ $(scope_count_on "$host" "$scope") != "$N $N" || $running != "$N" ]]; then
            log "engine $e: $(scope_count_on "$host" "$scope") (containers volumes), $running $BOX_STATE; expected $N each"
            exit 1
        fi
    done
    sleep "$SETTLE"
}

# The host URL sandboxctl uses for engine $1 (main|second) at latency $2.
engine_host() {
    if [[ $2 == none ]]; then
        case $1 in main) echo "$MAIN_HOST" ;; second) echo "$D2_HOST" ;; esac
    else
        echo "unix://$WORK/proxy-$1.sock"
    fi
}

# Starts a latency proxy per engine of $2.. in front of it, delaying $1 ms.
start_proxies() {
    local delay=$1 e up i
    shift
    for e in "$@"; do
        up=$(engine_host "$e" none)
        "$PYTHON" "$ROOT/scripts/latency-proxy.py" "$WORK/proxy-$e.sock" "${up#unix://}" "$delay" \
            2>"$WORK/proxy-$e.log" &
        PROXY_PIDS+=($!)
        for ((i = 0; i < 100; i++)); do
            [[ -S $WORK/proxy-$e.sock ]] && break
            sleep 0.05
        done
        [[ -S $WORK/proxy-$e.sock ]] || { log "latency proxy for $e did not start"; cat "$WORK/proxy-$e.log" >&2; exit 1; }
    done
}

# Stops the proxies (waits until they have written their counts); sets
# PROXY_CALLS to the requests each delayed, e.g. "main:52 second:40".
stop_proxies() {
    local pid n f e
    for pid in "${PROXY_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    PROXY_PIDS=()
    PROXY_CALLS=
    for f in "$WORK"/proxy-*.log; do
        [[ -e $f ]] || continue
        e=${f##*/proxy-}
        e=${e%.log}
        n=$(sed -n 's/.* \([0-9]*\) delayed requests.*/\1/p' "$f")
        PROXY_CALLS="$PROXY_CALLS${PROXY_CALLS:+ }$e:${n:-?}"
        rm -f "$f"
    done
}

# Containers (any state) on engine $1 outside scope label $2: what the
# planner inspects for shared namespaces.
others_on() {
    local all mine
    all=$(docker -H "$1" ps -aq | wc -l)
    mine=$(docker -H "$1" ps -aq --filter "label=$2" | wc -l)
    echo $((all - mine))
}

fleet_contender() { # $1 = main|second|both, $2 = latency (none|ms), $3 = round
    local c=$1 lat=$2 round=$3 tag scope state engines e rc=0 t0 t1 wall calls="" before after
    local out err removed expect converged left="" foreign
    tag=$c-$lat-r$round
    scope=ca.sandbox.benchrun=$RUN_ID-$tag
    case $c in
    main | second) engines=("$c") ;;
    both) engines=(main second) ;;
    *) echo "unknown fleet contender $c (main, second or both)" >&2; exit 2 ;;
    esac
    log "round $round, latency $lat: creating $N boxes on each of ${engines[*]} for $c"
    fleet_create "$scope" "$tag" "${engines[@]}"
    [[ $lat == none ]] || start_proxies "$lat" "${engines[@]}"
    state=$WORK/state-$tag.toml
    for e in "${engines[@]}"; do
        printf '[[engine]]\nname = "%s"\nhost = "%s"\n\n' "$e" "$(engine_host "$e" "$lat")"
    done >"$state"
    foreign=
    for e in "${engines[@]}"; do
        foreign="$foreign${foreign:+ }$e:$(others_on "$(engine_host "$e" none)" "$scope")"
    done
    before=$(cut -d' ' -f1 /proc/loadavg)
    out=$WORK/$tag.out err=$WORK/$tag.err
    log "round $round, latency $lat: timing sandboxctl apply ($c)"
    t0=$(now)
    # shellcheck disable=SC2086 # BENCH_FLEET_ARGS is a list of words
    "$BIN" --state "$state" --scope "$SCOPE_LABEL" --scope "$scope" --format json \
        ${BENCH_FLEET_ARGS:-} apply >"$out" 2>"$err" &
    CURRENT_PID=$!
    wait "$CURRENT_PID" || rc=$?
    t1=$(now)
    CURRENT_PID=
    after=$(cut -d' ' -f1 /proc/loadavg)
    wall=$(span "$t0" "$t1")
    if [[ $lat != none ]]; then
        stop_proxies
        calls=$PROXY_CALLS
    fi
    removed=$(jq '(.removed.containers | length) + (.removed.volumes | length)' "$out" 2>/dev/null || echo "?")
    converged=$(jq -r '.converged' "$out" 2>/dev/null || echo "?")
    expect=$((2 * N * ${#engines[@]}))
    for e in "${engines[@]}"; do
        left="$left${left:+,}$(scope_count_on "$(engine_host "$e" none)" "$scope" | tr ' ' '+')"
    done
    if [[ -n ${BENCH_KEEP_RAW:-} ]]; then
        mkdir -p "$BENCH_KEEP_RAW" && cp "$out" "$err" "$state" "$BENCH_KEEP_RAW/"
    fi
    if ((rc != 0)) || [[ $converged != true || $removed != "$expect" ]]; then
        log "($c, $lat) exit $rc, converged $converged, removed $removed of $expect; stderr:"
        tail -n 20 "$err" >&2
    fi
    if [[ $left == *[1-9]* ]]; then
        log "($c, $lat) left $left (containers+volumes per engine): FAILED to empty the scope"
        for e in "${engines[@]}"; do
            DOCKER_HOST=$(engine_host "$e" none) purge_scope || true
        done
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$lat" "$round" "$wall" "$rc" \
        "$converged" "$removed/$expect" "${calls:--}" "$left" "$foreign" "$before" "$after" >>"$RAW"
    log "($c, $lat) $wall s; exit $rc; removed $removed/$expect; engine calls ${calls:--}; other containers $foreign; left $left; load $before -> $after"
}

fleet_report() {
    local lat c w runs ok calls wm ws wb loads removed others name l
    echo
    echo "Fleet: N = $N boxes ($BOX_STATE container + named volume each) per engine, $REPEAT round(s), median wall time of"
    echo "\`sandboxctl --state <[[engine]] file> --format json apply\` (default parallelism; extra args: ${BENCH_FLEET_ARGS:-none})."
    echo "Machine: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); main engine Docker $(docker version -f '{{.Server.Version}}'), second engine Docker $(docker -H "$D2_HOST" version -f '{{.Server.Version}}'), storage $(docker info -f '{{.Driver}}') / $(docker -H "$D2_HOST" info -f '{{.Driver}}')."
    echo
    echo "| contender | latency per call | wall s | runs (s) | ok | removed | engine calls | other containers | load (1 min) before -> after |"
    echo "|---|---|---:|---|---|---:|---|---|---|"
    for lat in "${LATENCIES[@]}"; do
        for c in "${CONTENDERS[@]}"; do
            case $c in
            main) name="1 engine x $N (main)" ;;
            second) name="1 engine x $N (second dockerd)" ;;
            both) name="2 engines x $N each" ;;
            esac
            w=$(awk -F'\t' -v c="$c" -v l="$lat" '$1 == c && $2 == l { print $4 }' "$RAW" | median)
            runs=$(awk -F'\t' -v c="$c" -v l="$lat" '$1 == c && $2 == l { printf "%s%s", sep, $4; sep = " " }' "$RAW")
            ok=$(awk -F'\t' -v c="$c" -v l="$lat" '$1 == c && $2 == l { split($7, r, "/"); if ($5 != 0 || $6 != "true" || r[1] != r[2] || $9 ~ /[1-9]/) bad++ } END { print (bad ? "FAILED x" bad : "yes") }' "$RAW")
            calls=$(awk -F'\t' -v c="$c" -v l="$lat" '$1 == c && $2 == l { printf "%s%s", sep, $8; sep = " " }' "$RAW")
            loads=$(awk -F'\t' -v c="$c" -v l="$lat" '$1 == c && $2 == l { printf "%s%s -> %s", sep, $11, $12; sep = ", " }' "$RAW")
            removed=$(awk -F'\t' -v c="$c" -v l="$lat" '$1 == c && $2 == l { print $7; exit }' "$RAW")
            others=$(awk -F'\t' -v c="$c" -v l="$lat" '$1 == c && $2 == l { printf "%s%s", sep, $10; sep = ", " }' "$RAW")
            [[ $lat == none ]] && l="none (direct)" || l="$lat ms"
            echo "| $name | $l | $w | $runs | $ok | $removed | $calls | $others | $loads |"
        done
    done
    if [[ " ${CONTENDERS[*]} " == *" main "* && " ${CONTENDERS[*]} " == *" both "* ]]; then
        echo
        echo "| latency per call | 1 x $N main s | 1 x $N second s | 2 x $N both s | both / main | both / (main + second) |"
        echo "|---|---:|---:|---:|---:|---:|"
        for lat in "${LATENCIES[@]}"; do
            wm=$(awk -F'\t' -v l="$lat" '$1 == "main" && $2 == l { print $4 }' "$RAW" | median)
            ws=$(awk -F'\t' -v l="$lat" '$1 == "second" && $2 == l { print $4 }' "$RAW" | median)
            wb=$(awk -F'\t' -v l="$lat" '$1 == "both" && $2 == l { print $4 }' "$RAW" | median)
            [[ $lat == none ]] && l="none (direct)" || l="$lat ms"
            awk -v l="$l" -v m="$wm" -v s="$ws" -v b="$wb" 'BEGIN {
                printf "| %s | %s | %s | %s | %.2f | %s |\n", l, m, (s == "" ? "-" : s), b, b / m,
                    (s == "" ? "-" : sprintf("%.2f", b / (m + s))) }'
        done
    fi
    echo
    echo "ok: exit 0, converged, every box's container and volume removed, scope empty on every engine afterwards."
    echo "engine calls: requests the latency proxies delayed during the apply, per engine (listing, inspecting, removing, verifying)."
    echo "other containers: containers (any state) outside the contender's scope on each engine when apply started; the planner"
    echo "inspects them for shared pid/ipc namespaces (the main engine is shared with other users' tests)."
}

fleet_main() {
    [[ -n $PYTHON ]] || { echo "fleet mode needs python3 (scripts/latency-proxy.py)" >&2; exit 1; }
    command -v jq >/dev/null || { echo "fleet mode needs jq" >&2; exit 1; }
    docker version -f '{{.Server.Version}}' >/dev/null || { echo "cannot reach the Docker engine" >&2; exit 1; }
    read -r -a LATENCIES <<<"${BENCH_LATENCIES:-none 20 50}"
    read -r -a CONTENDERS <<<"${BENCH_FLEET:-main second both}"
    BOX_STATE=${BENCH_FLEET_BOX:-running}
    [[ $BOX_STATE == running || $BOX_STATE == created ]] || { echo "BENCH_FLEET_BOX: running or created" >&2; exit 2; }
    local lat
    for lat in "${LATENCIES[@]}"; do
        [[ $lat == none || $lat =~ ^[0-9]+$ ]] || { echo "BENCH_LATENCIES: $lat is not none or a number of ms" >&2; exit 2; }
        if [[ $lat != none && $MAIN_HOST != unix://* ]]; then
            echo "latency proxies need a unix:// main engine (DOCKER_HOST=$MAIN_HOST)" >&2
            exit 2
        fi
    done
    ensure_binary
    ensure_image
    D2_DIR=$(mktemp -u /tmp/sbx-bench-d2.XXXXXX)
    log "starting a second dockerd in $D2_DIR"
    D2_HOST=$("$ROOT/scripts/second-dockerd.sh" start "$D2_DIR" "$IMAGE")
    log "fleet run $RUN_ID: N=$N per engine, latencies ${LATENCIES[*]}, contenders ${CONTENDERS[*]}, $REPEAT round(s); scope $SCOPE_LABEL"
    local round c
    for ((round = 1; round <= REPEAT; round++)); do
        for lat in "${LATENCIES[@]}"; do
            for c in "${CONTENDERS[@]}"; do
                fleet_contender "$c" "$lat" "$round"
            done
        done
    done
    fleet_report
    if [[ -n ${BENCH_KEEP_RAW:-} ]]; then
        mkdir -p "$BENCH_KEEP_RAW" && cp "$RAW" "$BENCH_KEEP_RAW/raw-$RUN_ID.tsv"
        echo "Raw measurements: $BENCH_KEEP_RAW/raw-$RUN_ID.tsv"
    fi
}

if [[ $MODE == fleet ]]; then fleet_main; else main; fi
