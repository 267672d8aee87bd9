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
set -euo pipefail
export LC_ALL=C

usage() {
    echo "usage: $0 N   (N running boxes per contender, 1..2000)" >&2
    exit 2
}
[[ $# -eq 1 && $1 =~ ^[1-9][0-9]*$ && $1 -le 2000 ]] || usage
N=$1

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
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

# ca-sbx:bench-sleep: /bin/sleep and its libraries, imported from a tar (no pull).
ensure_image() {
    docker image inspect "$IMAGE" >/dev/null 2>&1 && return 0
    log "building $IMAGE from /bin/sleep"
    local rootfs=$WORK/rootfs sleep_bin lib
    sleep_bin=$(readlink -f /bin/sleep)
    mkdir -p "$rootfs/bin"
    cp "$sleep_bin" "$rootfs/bin/sleep"
    while read -r lib; do
        mkdir -p "$rootfs$(dirname "$lib")"
        cp -L "$lib" "$rootfs$lib"
    done < <(ldd "$sleep_bin" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }')
    tar -C "$rootfs" -cf - . |
        docker import --change 'CMD ["/bin/sleep", "infinity"]' - "$IMAGE" >/dev/null
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
    default=$("$BIN" apply --help | sed -n 's/.*--parallelism .*\[default: \([0-9]*\)\].*/\1/p' | head -n 1)
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

main
