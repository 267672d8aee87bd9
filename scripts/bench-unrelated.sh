#!/usr/bin/env bash
# bench-unrelated.sh: what do unrelated containers cost `sandboxctl destroy BOX`?
#
# usage: scripts/bench-unrelated.sh   (no arguments; settings in the environment
#        below; needs root, dockerd, jq and python3)
#
# Issue "Inspect only what can matter": destroying one box should cost about
# the same beside K unrelated containers as beside none, and about what the
# docker CLI idiom costs. All load goes on two PRIVATE dockerds that this
# script starts and stops (scripts/second-dockerd.sh: own socket, bridge,
# data-root, cgroups); the main engine is never used (only read, by
# second-dockerd.sh, for its storage driver and MTU).
#   engine L ("loaded"): K unrelated running containers, UNLABELED (named
#                        <run id>-u-NNNNN, `docker run -d --network none
#                        --stop-timeout 1` of the sleep image); for every box
#                        that sandboxctl destroys there, half of them were
#                        created before the box and half after it.
#   engine E ("empty"):  the same set-up with no other container.
# A box is a named volume ca-sbx-<box> and a running container sbx-<box>
# (`sleep`, mounting the volume, BENCH_BOX_ARGS), both labeled ca.sandbox=1,
# ca.sandbox.id=<box>, ca.sandbox.bench=<run id> and its own scope label
# ca.sandbox.benchbox=<box>. Every timed contender gets a new box (creation,
# and the churn of unrelated containers that keeps K/2 of them newer than the
# box, is not timed). In every round, in an order rotated by one each round:
#   (a) sandboxctl destroy on L:  sandboxctl --host L --state S --format json destroy BOX
#       (S: an otherwise empty state file whose [scope] is the box's two scope labels)
#   (b) the docker CLI idiom on L, names known beforehand:
#       docker -H L rm -f sbx-BOX && docker -H L volume rm ca-sbx-BOX
#   (c) as (a), on E (beside no other container), same rounds
#   (d) as (b), on E
#   (e) only with SANDBOXCTL_B: as (a), with that binary, on a box of its own
#       made beside (a)'s in the middle of the unrelated containers
# Each sandboxctl run must exit 0 and report converged with its box's container
# and volume removed; after every contender the box's labels must match nothing.
# The churn (dropping the K/2 newest unrelated containers, creating (a)'s box and
# K/2 new ones after it) happens at the start of each round, before all four
# contenders, followed by BENCH_CHURN_SETTLE seconds; the rotation spreads any
# after-effect of it over all four contenders alike.
#
# Engine calls: before the timing rounds, for each K of BENCH_COUNTS, L is laid
# out with K unrelated containers (K/2 before a new box, the rest after it) and
# one `sandboxctl destroy` runs through a counting unix-socket proxy (python3,
# written to the work folder) in front of L; every HTTP request line it
# forwards is logged and classified by endpoint. Not timed (the proxy adds
# latency); the timing runs talk to the engines' own sockets.
#
# Clean-up on exit, also on Ctrl-C/TERM: the proxy and any creation batch in
# flight are stopped by pid, the run's boxes (by its label) and exactly the
# unrelated containers it created (tracked ids, plus any of its names a batch
# in flight created) are removed, then both dockerds are stopped by
# second-dockerd.sh (which removes their bridges, cgroups and folders). No
# image is ever removed (the sleep image is imported into each private engine
# only; see scripts/lib/sleep-image.sh).
#
# Output: two markdown tables on stdout (wall times of (a)-(d) with the issue's
# two ratios; engine calls by K); progress on stderr.
#
# Environment:
#   BENCH_K          unrelated containers beside (a) and (b)            [300]
#   BENCH_REPEAT     rounds; each runs (a), (b), (c), (d) once            [11]
#   BENCH_COUNTS     K values for the engine-call table        [0 50 150 300]
#   BENCH_CREATE_P   concurrent `docker run` while creating unrelated ones [8]
#   BENCH_SETTLE     seconds to let the daemon settle before each timing   [1]
#   BENCH_CHURN_SETTLE  seconds to let it settle after each round's churn  [5]
#   BENCH_BOX_ARGS   extra `docker run` arguments for the box's container
#                    [--network none]
#   SANDBOXCTL_B     a second sandboxctl binary: adds contender (e), as (a)
#                    with it (its box made in the middle of the unrelated
#                    containers beside (a)'s), for a before/after      []
#   SANDBOXCTL       sandboxctl binary [target/release/sandboxctl; build it
#                    first with cargo build --release]
#   BENCH_KEEP_RAW   directory to copy raw measurements and the proxy log into []
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/sleep-image.sh
source "$ROOT/scripts/lib/sleep-image.sh"

K=${BENCH_K:-300}
REPEAT=${BENCH_REPEAT:-11}
read -r -a COUNTS <<<"${BENCH_COUNTS:-0 50 150 300}"
CREATE_P=${BENCH_CREATE_P:-8}
SETTLE=${BENCH_SETTLE:-1}
CHURN_SETTLE=${BENCH_CHURN_SETTLE:-5}
read -r -a BOX_ARGS <<<"${BENCH_BOX_ARGS:---network none}"
BIN=${SANDBOXCTL:-$ROOT/target/release/sandboxctl}
BIN_B=${SANDBOXCTL_B:-}
CONTENDERS=(a b c d)
[[ -z $BIN_B ]] || CONTENDERS+=(e)
IMAGE=ca-sbx:bench-sleep
RUN_ID=unrel-$(date +%Y%m%d-%H%M%S)-$$
RUN_LABEL=ca.sandbox.bench=$RUN_ID
PYTHON=$(command -v /usr/bin/python3 || command -v python3 || true)

[[ $K =~ ^[0-9]+$ && $K -le 2000 ]] || { echo "BENCH_K: 0..2000" >&2; exit 2; }
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_REPEAT: a positive number" >&2; exit 2; }
for k in "${COUNTS[@]}"; do
    [[ $k =~ ^[0-9]+$ && $k -le 2000 ]] || { echo "BENCH_COUNTS: numbers 0..2000" >&2; exit 2; }
done
[[ -x $BIN ]] || { echo "no sandboxctl binary at $BIN (cargo build --release, or set SANDBOXCTL)" >&2; exit 1; }
[[ -z $BIN_B || -x $BIN_B ]] || { echo "no sandboxctl binary at $BIN_B (SANDBOXCTL_B)" >&2; exit 1; }
[[ -n $PYTHON ]] || { echo "needs python3 (the counting proxy)" >&2; exit 1; }
command -v jq >/dev/null || { echo "needs jq" >&2; exit 1; }
((EUID == 0)) || { echo "needs root (scripts/second-dockerd.sh)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-unrelated.XXXXXX")
RAW=$WORK/raw.tsv
CALLS=$WORK/calls.tsv
L_DIR=$(mktemp -u /tmp/sbx-unrel-L.XXXXXX)
E_DIR=$(mktemp -u /tmp/sbx-unrel-E.XXXXXX)
L_HOST=
E_HOST=
UNREL=()        # ids of the unrelated containers on L, in creation order (batch by batch)
NEXT_UNREL=1    # number of the next unrelated container's name
CREATE_PID=     # a creation batch in flight (its own process group)
PROXY_PID=

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ------------------------------------------------------------------ clean-up

# Removes containers $2.. from engine $1, 25 per `docker rm -f`, 4 at a time.
remove_containers() {
    local host=$1
    shift
    (($#)) || return 0
    printf '%s\n' "$@" | xargs -P 4 -n 25 docker -H "$host" rm -f >/dev/null 2>&1 || true
}

# Removes this run's boxes (containers, then volumes) from engine $1.
purge_boxes() {
    local host=$1 attempt ids vols
    for attempt in 1 2 3; do
        mapfile -t ids < <(docker -H "$host" ps -aq --filter "label=$RUN_LABEL" 2>/dev/null)
        if ((${#ids[@]})); then docker -H "$host" rm -f "${ids[@]}" >/dev/null 2>&1 || true; fi
        mapfile -t vols < <(docker -H "$host" volume ls -q --filter "label=$RUN_LABEL" 2>/dev/null)
        if ((${#vols[@]})); then docker -H "$host" volume rm "${vols[@]}" >/dev/null 2>&1 || true; fi
        mapfile -t ids < <(docker -H "$host" ps -aq --filter "label=$RUN_LABEL" 2>/dev/null)
        mapfile -t vols < <(docker -H "$host" volume ls -q --filter "label=$RUN_LABEL" 2>/dev/null)
        ((${#ids[@]} + ${#vols[@]} == 0)) && return 0
        sleep "$attempt"
    done
    log "WARNING: boxes of $RUN_LABEL left on $host: ${#ids[@]} containers, ${#vols[@]} volumes"
    return 1
}

cleanup() {
    local rc=$? stray
    trap - EXIT INT TERM
    # Output may go to a pipe that is gone (`| head`): write nothing more to
    # stdout, and if stderr is gone too, clean up silently rather than die.
    trap '' PIPE
    exec 1>/dev/null
    if ! printf '[%s] cleaning up (exit %s)\n' "$(date +%H:%M:%S)" "$rc" >&2 2>/dev/null; then
        exec 2>/dev/null
    fi
    if [[ -n $PROXY_PID ]]; then
        kill -TERM "$PROXY_PID" 2>/dev/null || true
        wait "$PROXY_PID" 2>/dev/null || true
    fi
    if [[ -n $CREATE_PID ]]; then
        # The batch runs in its own process group (setsid): stop xargs and its `docker run`s.
        kill -TERM -- "-$CREATE_PID" 2>/dev/null || kill -TERM "$CREATE_PID" 2>/dev/null || true
        wait "$CREATE_PID" 2>/dev/null || true
        sleep 1
        [[ -s $WORK/batch ]] && mapfile -t -O "${#UNREL[@]}" UNREL <"$WORK/batch"
    fi
    if [[ -n $L_HOST ]]; then
        log "cleaning up: boxes of $RUN_LABEL and ${#UNREL[@]} unrelated containers on L"
        purge_boxes "$L_HOST" || rc=1
        remove_containers "$L_HOST" "${UNREL[@]}"
        # Any of our names a killed batch created but did not report.
        mapfile -t stray < <(docker -H "$L_HOST" ps -aq --filter "name=^/$RUN_ID-u-" 2>/dev/null)
        remove_containers "$L_HOST" "${stray[@]}"
    fi
    if [[ -n $E_HOST ]]; then
        log "cleaning up: boxes of $RUN_LABEL on E"
        purge_boxes "$E_HOST" || rc=1
    fi
    local d
    for d in "$L_DIR" "$E_DIR"; do
        if [[ -e $d/state ]]; then
            log "stopping the dockerd in $d"
            "$ROOT/scripts/second-dockerd.sh" stop "$d" || rc=1
        fi
    done
    if [[ -n ${BENCH_KEEP_RAW:-} && -e $RAW ]]; then
        mkdir -p "$BENCH_KEEP_RAW" && cp "$RAW" "$BENCH_KEEP_RAW/raw-$RUN_ID.tsv"
        [[ -e $CALLS ]] && cp "$CALLS" "$BENCH_KEEP_RAW/calls-$RUN_ID.tsv"
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 141' PIPE

# ------------------------------------------------------------------ engines

# Starts a private dockerd in $1, imports the sleep image into it; prints its host URL.
start_engine() {
    local dir=$1 host
    host=$("$ROOT/scripts/second-dockerd.sh" start "$dir")
    mkdir -p "$WORK/img"
    (
        export DOCKER_HOST=$host
        import_sleep_image "$IMAGE" "$WORK/img"
    )
    echo "$host"
}

# ------------------------------------------------------------------ objects

# Creates $1 more unrelated running containers on L (names <run id>-u-NNNNN),
# BENCH_CREATE_P at a time; appends their ids to UNREL.
create_unrelated() {
    local n=$1 first=$NEXT_UNREL rc=0
    ((n > 0)) || return 0
    NEXT_UNREL=$((first + n))
    : >"$WORK/batch"
    seq -f "$RUN_ID-u-%05g" "$first" "$((first + n - 1))" |
        setsid xargs -P "$CREATE_P" -I{} docker -H "$L_HOST" run -d --network none \
            --stop-timeout 1 --name {} "$IMAGE" >>"$WORK/batch" &
    CREATE_PID=$!
    wait "$CREATE_PID" || rc=$?
    CREATE_PID=
    mapfile -t -O "${#UNREL[@]}" UNREL <"$WORK/batch"
    : >"$WORK/batch"
    if ((rc != 0)); then
        log "creating unrelated containers failed (xargs exit $rc)"
        exit 1
    fi
}

# Removes the $1 newest unrelated containers from L.
drop_unrelated() {
    local n=$1 keep
    ((n > 0)) || return 0
    keep=$((${#UNREL[@]} - n))
    remove_containers "$L_HOST" "${UNREL[@]:keep}"
    UNREL=("${UNREL[@]:0:keep}")
}

# One box $2 on engine $1: labeled named volume, running container mounting it;
# writes its state file $WORK/$2.toml.
create_box() {
    local host=$1 box=$2
    docker -H "$host" volume create --label ca.sandbox=1 --label "ca.sandbox.id=$box" \
        --label "$RUN_LABEL" --label "ca.sandbox.benchbox=$box" "ca-sbx-$box" >/dev/null
    docker -H "$host" run -d --name "sbx-$box" --label ca.sandbox=1 --label "ca.sandbox.id=$box" \
        --label "$RUN_LABEL" --label "ca.sandbox.benchbox=$box" -v "ca-sbx-$box:/data" \
        "${BOX_ARGS[@]}" "$IMAGE" /bin/sleep infinity >/dev/null
    printf '[scope]\nlabels = { "ca.sandbox.bench" = "%s", "ca.sandbox.benchbox" = "%s" }\n' \
        "$RUN_ID" "$box" >"$WORK/$box.toml"
}

# L with $1 unrelated containers around new boxes $2... (made one after the
# other): floor($1/2) created before the boxes, the rest after them (the
# newest unrelated ones are dropped or more are created first, as needed).
layout() {
    local k=$1 before=$(($1 / 2)) have=${#UNREL[@]} box
    shift
    if ((have > before)); then drop_unrelated $((have - before)); fi
    create_unrelated $((before - ${#UNREL[@]}))
    for box in "$@"; do create_box "$L_HOST" "$box"; done
    create_unrelated $((k - before))
}

# "<containers> <volumes>" still carrying box $2's scope label on engine $1.
box_left() {
    local c v
    c=$(docker -H "$1" ps -aq --filter "label=ca.sandbox.benchbox=$2" | wc -l)
    v=$(docker -H "$1" volume ls -q --filter "label=ca.sandbox.benchbox=$2" | wc -l)
    echo "$c $v"
}

# ------------------------------------------------------------------ contenders

# Milliseconds between two EPOCHREALTIME values, 1 decimal.
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }

# sandboxctl destroy of box $2 on host $1 (URL sandboxctl uses: $3, default $1;
# binary: $4, default $BIN). Prints "<ms> <ok|FAILED:...>".
run_sandboxctl() {
    local host=$1 box=$2 via=${3:-$1} bin=${4:-$BIN} out=$WORK/$2.out err=$WORK/$2.err rc=0 t0 t1 verdict
    t0=$EPOCHREALTIME
    "$bin" --host "$via" --state "$WORK/$box.toml" --format json destroy "$box" >"$out" 2>"$err" || rc=$?
    t1=$EPOCHREALTIME
    verdict=$(jq -r --arg b "$box" '
        if .converged != true then "not-converged"
        elif ([.removed.containers[] | select(.box == $b and .outcome == "removed")] | length) != 1 then "container-not-removed"
        elif ([.removed.volumes[] | select(.box == $b and .outcome == "removed")] | length) != 1 then "volume-not-removed"
        else "ok" end' "$out" 2>/dev/null || echo "bad-json")
    ((rc == 0)) || verdict="exit-$rc,$verdict"
    if [[ $verdict != ok ]]; then
        log "sandboxctl destroy $box: $verdict; stdout/stderr:"
        tail -n 20 "$out" "$err" >&2
        verdict=FAILED:$verdict
    fi
    echo "$(ms "$t0" "$t1") $verdict"
}

# The docker CLI idiom on box $2 on host $1. Prints "<ms> <ok|FAILED:...>".
run_idiom() {
    local host=$1 box=$2 rc=0 t0 t1
    t0=$EPOCHREALTIME
    docker -H "$host" rm -f "sbx-$box" >/dev/null && docker -H "$host" volume rm "ca-sbx-$box" >/dev/null || rc=$?
    t1=$EPOCHREALTIME
    if ((rc == 0)); then echo "$(ms "$t0" "$t1") ok"; else echo "$(ms "$t0" "$t1") FAILED:exit-$rc"; fi
}

# Contender $1 in round $2: makes its box (the round's layout made (a)'s and (e)'s), lets
# the daemon settle, times it, checks the box is gone; appends a line to RAW.
contender() {
    local c=$1 round=$2 box=$RUN_ID-r$round-$1 host res left others load
    case $c in
    a | b | e) host=$L_HOST ;;
    c | d) host=$E_HOST ;;
    esac
    # (a)'s and (e)'s boxes sit in the middle of the unrelated containers
    # (made by the round's layout); the others are made now.
    [[ $c == a || $c == e ]] || create_box "$host" "$box"
    sleep "$SETTLE"
    others=$(($(docker -H "$host" ps -q | wc -l) - 1))
    load=$(cut -d' ' -f1 /proc/loadavg)
    case $c in
    a | c) res=$(run_sandboxctl "$host" "$box") ;;
    e) res=$(run_sandboxctl "$host" "$box" "$host" "$BIN_B") ;;
    b | d) res=$(run_idiom "$host" "$box") ;;
    esac
    left=$(box_left "$host" "$box")
    if [[ $left != "0 0" ]]; then
        log "($c) round $round: box $box not gone ($left containers volumes left)"
        res="${res%% *} FAILED:left-${left/ /+}"
        purge_boxes "$host" || true
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$round" "${res%% *}" "${res#* }" "$others" "$load" >>"$RAW"
    log "($c) round $round: ${res%% *} ms, ${res#* }; other running containers $others; load $load"
}

# ------------------------------------------------------------------ engine calls

write_proxy() {
    cat >"$WORK/count-proxy.py" <<'EOF'
"""Counting unix-socket proxy: LISTEN UPSTREAM LOG. Forwards byte for byte and
appends each request line (the first line of the first bytes a client sends on
a connection, and after every answer on a kept-alive one) to LOG."""
import asyncio, os, signal, sys

async def pump(reader, writer, on_data):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            on_data(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, RuntimeError):
            pass

async def handle(cr, cw, upstream, log):
    state = {"new": True}
    def up(data):
        if state["new"]:
            state["new"] = False
            log.write(data.split(b"\r\n", 1)[0].decode("latin-1") + "\n")
            log.flush()
    def down(_data):
        state["new"] = True
    try:
        ur, uw = await asyncio.open_unix_connection(upstream)
    except OSError as e:
        print(f"count-proxy: cannot connect to {upstream}: {e}", file=sys.stderr)
        cw.close()
        return
    try:
        await asyncio.gather(pump(cr, uw, up), pump(ur, cw, down))
    finally:
        for w in (uw, cw):
            try:
                w.close()
            except OSError:
                pass

async def main(listen, upstream, logpath):
    log = open(logpath, "a")
    server = await asyncio.start_unix_server(
        lambda r, w: handle(r, w, upstream, log), path=listen, backlog=256)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
    os.unlink(listen)

asyncio.run(main(*sys.argv[1:4]))
EOF
}

# Classifies request lines (stdin: "METHOD PATH HTTP/1.1") into
# "total inspects listings removals other | detail".
classify() {
    awk '
    {
        m = $1; p = $2
        sub(/\?.*/, "", p); sub(/^\/v[0-9.]+\//, "/", p); sub(/\/$/, "", p)
        total++
        if (m == "DELETE") {
            rem++; k = p; sub(/\/[^\/]+$/, "", k); det["DELETE " k]++
        } else if (m == "GET" && p == "/containers/json") {
            lst++; det["list containers"]++
        } else if (m == "GET" && p ~ /^\/containers\/[^\/]+\/json$/) {
            ins++; det["inspect container"]++
        } else if (m == "GET" && p ~ /^\/(volumes|networks|images\/json|services|configs|secrets|tasks|nodes)$/) {
            lst++; k = p; sub(/^\//, "", k); sub(/\/json$/, "", k); det["list " k]++
        } else if (m == "GET" && (p ~ /^\/(volumes|networks|services|configs|secrets|tasks|nodes)\/[^\/]+$/ || p ~ /^\/images\/.+\/json$/)) {
            ins++; k = p; sub(/^\//, "", k); sub(/\/.*/, "", k); det["inspect " k]++
        } else {
            oth++; det[m " " p]++
        }
    }
    END {
        n = 0
        for (d in det) names[++n] = d
        # sort the detail keys (insertion sort; a handful of them)
        for (i = 2; i <= n; i++) { x = names[i]; for (j = i - 1; j >= 1 && names[j] > x; j--) names[j + 1] = names[j]; names[j + 1] = x }
        s = ""
        for (i = 1; i <= n; i++) s = s (i > 1 ? ", " : "") names[i] " " det[names[i]]
        printf "%d\t%d\t%d\t%d\t%d\t%s\n", total, ins + 0, lst + 0, rem + 0, oth + 0, s
    }'
}

count_calls() {
    local sock=$WORK/count.sock log=$WORK/requests.log k box from res i
    write_proxy
    : >"$log"
    "$PYTHON" "$WORK/count-proxy.py" "$sock" "${L_HOST#unix://}" "$log" 2>"$WORK/proxy.err" &
    PROXY_PID=$!
    for ((i = 0; i < 100; i++)); do
        [[ -S $sock ]] && break
        sleep 0.05
    done
    [[ -S $sock ]] || { log "counting proxy did not start"; cat "$WORK/proxy.err" >&2; exit 1; }
    for k in "${COUNTS[@]}"; do
        box=$RUN_ID-calls-k$k
        log "engine calls: laying out K=$k unrelated containers around box $box"
        layout "$k" "$box"
        sleep "$SETTLE"
        from=$(wc -l <"$log")
        res=$(run_sandboxctl "$L_HOST" "$box" "unix://$sock")
        [[ $(box_left "$L_HOST" "$box") == "0 0" ]] || { res="${res%% *} FAILED:box-left"; purge_boxes "$L_HOST" || true; }
        printf '%s\t%s\t%s\t%s\n' "$k" "${#UNREL[@]}" "${res#* }" \
            "$(tail -n +"$((from + 1))" "$log" | classify)" >>"$CALLS"
        if [[ -n ${BENCH_KEEP_RAW:-} ]]; then
            mkdir -p "$BENCH_KEEP_RAW" && tail -n +"$((from + 1))" "$log" >"$BENCH_KEEP_RAW/requests-$RUN_ID-k$k.log"
        fi
        log "engine calls at K=$k: $(tail -n 1 "$CALLS" | awk -F'\t' '{ printf "%s total, %s inspects, %s listings, %s removals, %s other", $4, $5, $6, $7, $8 }') (${res#* })"
    done
    kill -TERM "$PROXY_PID" 2>/dev/null || true
    wait "$PROXY_PID" 2>/dev/null || true
    PROXY_PID=
}

# ------------------------------------------------------------------ report

stats() { # stdin: numbers; prints "min median max"
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "- - -"; exit }
        med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.1f %.1f %.1f\n", v[1], med, v[NR] }'
}

report() {
    local c name s runs ok others med_a med_b med_c med_d med_e ver
    ver=$(docker -H "$L_HOST" version -f '{{.Server.Version}} (API {{.Server.APIVersion}})')
    echo
    echo "One box (running container + named volume), \`sandboxctl destroy BOX\` vs \`docker rm -f C && docker volume rm V\`;"
    echo "K = $K unrelated unlabeled running containers beside (a) and (b) (half created before the box, half after),"
    echo "none beside (c) and (d) (a second private dockerd, same set-up, same rounds); $REPEAT rounds, order rotated each round"
    echo "(the round's churn of K/2 unrelated containers comes first, then ${CHURN_SETTLE} s settling; ${SETTLE} s before each timing)."
    echo "Machine: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); private dockerds Docker $ver, storage $(docker -H "$L_HOST" info -f '{{.Driver}}'); $("$BIN" --version 2>/dev/null || echo sandboxctl) ($BIN)."
    echo
    echo "| contender | min ms | median ms | max ms | ok | other running containers | runs (ms) |"
    echo "|---|---:|---:|---:|---|---|---|"
    for c in "${CONTENDERS[@]}"; do
        case $c in
        a) name="(a) sandboxctl destroy, beside K=$K" ;;
        b) name="(b) docker rm -f C && docker volume rm V, beside K=$K" ;;
        c) name="(c) sandboxctl destroy, beside none" ;;
        d) name="(d) docker rm -f C && docker volume rm V, beside none" ;;
        e) name="(e) as (a), binary B ($BIN_B)" ;;
        esac
        read -r -a s < <(awk -F'\t' -v c="$c" '$1 == c { print $3 }' "$RAW" | stats)
        runs=$(awk -F'\t' -v c="$c" '$1 == c { printf "%s%s", sep, $3; sep = " " }' "$RAW")
        ok=$(awk -F'\t' -v c="$c" '$1 == c && $4 != "ok" { bad++ } END { print (bad ? "FAILED x" bad : "yes") }' "$RAW")
        others=$(awk -F'\t' -v c="$c" '$1 == c { if (lo == "" || $5 < lo) lo = $5; if ($5 > hi) hi = $5 } END { print (lo == hi ? lo : lo ".." hi) }' "$RAW")
        echo "| $name | ${s[0]} | ${s[1]} | ${s[2]} | $ok | $others | $runs |"
        printf -v "med_$c" '%s' "${s[1]}"
    done
    echo
    awk -v a="$med_a" -v b="$med_b" -v c="$med_c" -v d="$med_d" 'BEGIN {
        printf "- median(a) / median(b) = %.2f (goal <= 1.25: %s)\n", a / b, (a / b <= 1.25 ? "MET" : "NOT MET")
        printf "- median(a) - median(c) = %+.1f ms (goal <= +80 ms: %s)\n", a - c, (a - c <= 80 ? "MET" : "NOT MET")
        printf "- for reference: median(c) / median(d) = %.2f; median(b) - median(d) = %+.1f ms\n", c / d, b - d
    }'
    [[ -z $BIN_B ]] || awk -v a="$med_a" -v e="$med_e" -v b="$med_b" 'BEGIN {
        printf "- binary B: median(e) / median(a) = %.2f; median(e) / median(b) = %.2f\n", e / a, e / b }'
    awk -F'\t' 'NR == 1 { lo = hi = $6 } { if ($6 < lo) lo = $6; if ($6 > hi) hi = $6 } END { printf "- 1-min load average at the start of the timings: %s..%s\n", lo, hi }' "$RAW"
    echo "ok: exit 0 and converged with the box's container and volume removed (sandboxctl), exit 0 (idiom), and the box's"
    echo "labels match nothing afterwards. other running containers: on that engine when the timing started (besides the box)."

    echo
    echo "Engine calls of one \`sandboxctl destroy BOX\` on L (through a counting proxy; not timed), by K unrelated containers:"
    echo
    echo "| K | total calls | inspects | listings | removals | other | ok | calls by endpoint |"
    echo "|---:|---:|---:|---:|---:|---:|---|---|"
    awk -F'\t' '{ ok = ($3 == "ok" ? "yes" : $3); if ($2 != $1) ok = ok " (" $2 " unrelated, not " $1 ")"
        printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $4, $5, $6, $7, $8, ok, $9 }' "$CALLS"
    echo
    echo "inspects: GET /containers/{id}/json (and any volume/network/image inspect); listings: GET /containers/json, /volumes,"
    echo "/networks, /images/json (and Swarm lists); removals: DELETE; other: anything else (e.g. /_ping, /version)."
}

# ------------------------------------------------------------------ main

main() {
    log "run $RUN_ID: K=$K, $REPEAT rounds, engine-call counts at K = ${COUNTS[*]}; binary $BIN"
    log "starting the private dockerd L in $L_DIR"
    L_HOST=$(start_engine "$L_DIR")
    log "starting the private dockerd E in $E_DIR"
    E_HOST=$(start_engine "$E_DIR")
    : >"$RAW"
    : >"$CALLS"
    count_calls
    local round i c n=${#CONTENDERS[@]} boxes
    for ((round = 1; round <= REPEAT; round++)); do
        log "round $round: laying out K=$K unrelated containers around (a)'s box"
        boxes=("$RUN_ID-r$round-a")
        # (e)'s box beside (a)'s, made first in every other round (the older
        # one sees the younger one among the containers made after it).
        if [[ -n $BIN_B ]]; then
            if ((round % 2)); then boxes+=("$RUN_ID-r$round-e"); else boxes=("$RUN_ID-r$round-e" "${boxes[@]}"); fi
        fi
        layout "$K" "${boxes[@]}"
        sleep "$CHURN_SETTLE"
        for ((i = 0; i < n; i++)); do
            c=${CONTENDERS[(i + round - 1) % n]}
            contender "$c" "$round"
        done
    done
    report
}

main
