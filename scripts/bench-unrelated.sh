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
#   engine L ("loaded"): K running containers beside every box that
#                        sandboxctl destroys there, floor(K/2) of them created
#                        before the box and the rest after it (see BENCH_LAYOUT
#                        for how); the unrelated ones are UNLABELED (named
#                        <run id>-u-NNNNN, `docker run -d --network none
#                        --stop-timeout 1` of the sleep image).
#   engine E ("empty"):  the same set-up with no other container.
# A box is a named volume ca-sbx-<box> and a running container sbx-<box>
# (`sleep`, mounting the volume, BENCH_BOX_ARGS), both labeled ca.sandbox=1,
# ca.sandbox.id=<box>, ca.sandbox.bench=<run id> and its own scope label
# ca.sandbox.benchbox=<box>. Every timed contender gets a box of its own
# (creation, and laying out the unrelated containers, is not timed). In every
# round, in an order rotated by one each round:
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
# (b), (c) and (d) make their box right before their timing (then BENCH_SETTLE);
# (a)'s and (e)'s boxes sit in the middle of L's containers, laid out by
# BENCH_LAYOUT:
#   once   (the default) L is laid out ONE time, after the engine-call counts and
#          before the first round: floor(K/2) unrelated containers, then the
#          boxes of (a) and (e) of ALL rounds, one after the other in the order
#          they will be destroyed (round by round; within a round, in the order
#          the rotation times them), then K - floor(K/2) - (boxes - 1) unrelated
#          containers; then BENCH_LAYOUT_SETTLE seconds. Each round destroys its
#          own boxes, so boxes go oldest first, and every destroyed box has the
#          floor(K/2) unrelated ones (never an earlier box: those are gone)
#          created before it and K - floor(K/2) containers created after it:
#          the later boxes count among these. A later box is outside the
#          destroyed box's scope (each box has its own ca.sandbox.benchbox
#          label), so to sandboxctl it is a container beside the box like the
#          unrelated ones, only labeled. To keep that count, after each (a)/(e)
#          timing one new unrelated container is made (not timed; the next
#          contender waits BENCH_SETTLE before its timing, as always). No
#          container is removed from L during the rounds but the boxes. Refused
#          when K - floor(K/2) < boxes - 1 (lower BENCH_REPEAT, raise BENCH_K,
#          or use churn).
#   churn  at the start of each round, the newest unrelated containers are
#          dropped down to floor(K/2), (a)'s box (and (e)'s, made first in every
#          other round) is made, then K - floor(K/2) new unrelated ones after
#          it, followed by BENCH_CHURN_SETTLE seconds; the rotation spreads any
#          after-effect over all contenders alike. Each round removes and makes
#          about K/2 containers (`docker rm -f` of K/2 of them), which keeps a
#          small machine's load high during the timings.
# Before each timing, the running containers on the box's engine created
# before and after its container are counted in the engine's listing order
# (newest first, by creation time) and checked against the creation order the
# script tracks for L (a WARNING, and a count in the report, if they differ).
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
# Output: two markdown tables on stdout (wall times of (a)-(e) with the issue's
# two ratios, and the counts before/after each (a)/(e) box; engine calls by K);
# progress on stderr.
#
# Environment:
#   BENCH_K          containers beside each box of (a) and (e) on L     [300]
#   BENCH_REPEAT     rounds; each runs (a), (b), (c), (d) once            [11]
#   BENCH_COUNTS     K values for the engine-call table        [0 50 150 300]
#   BENCH_CREATE_P   concurrent `docker run` while creating unrelated ones [8]
#   BENCH_SETTLE     seconds to let the daemon settle before each timing   [1]
#   BENCH_LAYOUT     how L's containers are laid out around (a)'s and (e)'s
#                    boxes: once or churn (see above)                   [once]
#   BENCH_LAYOUT_SETTLE  once: seconds to let it settle after the layout  [30]
#   BENCH_CHURN_SETTLE   churn: seconds to let it settle after each round's
#                    churn                                                 [5]
#   BENCH_MEMO       fresh: every sandboxctl run starts with no memo of
#                    earlier inspections (an empty XDG_STATE_HOME of its
#                    own: the first destroy on a machine); keep: each binary
#                    keeps its memo on each engine from round to round (what
#                    a user's later destroys see; decision 11)      [fresh]
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
LAYOUT=${BENCH_LAYOUT:-once}
MEMO=${BENCH_MEMO:-fresh}
LAYOUT_SETTLE=${BENCH_LAYOUT_SETTLE:-30}
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
[[ $LAYOUT == once || $LAYOUT == churn ]] || { echo "BENCH_LAYOUT: once or churn" >&2; exit 2; }
[[ $MEMO == fresh || $MEMO == keep ]] || { echo "BENCH_MEMO: fresh or keep" >&2; exit 2; }
[[ $LAYOUT_SETTLE =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "BENCH_LAYOUT_SETTLE: seconds" >&2; exit 2; }
# The boxes of (a) (and (e)) of all rounds; once: the boxes after the first one
# count among its K - floor(K/2) later containers.
L_BOXES=$REPEAT
[[ -z $BIN_B ]] || L_BOXES=$((2 * REPEAT))
if [[ $LAYOUT == once ]] && ((K - K / 2 < L_BOXES - 1)); then
    echo "BENCH_LAYOUT=once: $L_BOXES boxes of (a)/(e) do not fit beside K=$K: every box must have K - K/2 = $((K - K / 2)) containers after it, and the later boxes are among them (lower BENCH_REPEAT, raise BENCH_K, or BENCH_LAYOUT=churn)" >&2
    exit 2
fi
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
L_SEQ=()        # ids of all containers on L (unrelated ones and boxes), in creation order
declare -A BOX_CID=()   # box -> the id of its container
NEXT_UNREL=1    # number of the next unrelated container's name
CREATE_PID=     # a creation batch in flight (its own process group)
PROXY_PID=

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ------------------------------------------------------------------ clean-up

# Seconds any one docker call of the clean-up may take: a private dockerd
# 20.10 can deadlock in its network store under `docker rm -f` churn (seen
# 2026-12-02, in this clean-up), and then nothing answers; the engines are
# stopped by pid after it either way.
CALL_LIMIT=60

# Removes containers $2.. from engine $1, 25 per `docker rm -f`, 4 at a time.
remove_containers() {
    local host=$1
    shift
    (($#)) || return 0
    printf '%s\n' "$@" | xargs -P 4 -n 25 timeout "$CALL_LIMIT" docker -H "$host" rm -f >/dev/null 2>&1 || true
}

# Removes this run's boxes (containers, then volumes) from engine $1; only box
# $2 if given (the other boxes laid out on L must stay).
purge_boxes() {
    local host=$1 attempt ids vols what="boxes of $RUN_LABEL" f=(--filter "label=$RUN_LABEL")
    if [[ -n ${2:-} ]]; then
        f+=(--filter "label=ca.sandbox.benchbox=$2")
        what="box $2"
    fi
    for attempt in 1 2 3; do
        mapfile -t ids < <(timeout "$CALL_LIMIT" docker -H "$host" ps -aq "${f[@]}" 2>/dev/null)
        if ((${#ids[@]})); then timeout "$CALL_LIMIT" docker -H "$host" rm -f "${ids[@]}" >/dev/null 2>&1 || true; fi
        mapfile -t vols < <(timeout "$CALL_LIMIT" docker -H "$host" volume ls -q "${f[@]}" 2>/dev/null)
        if ((${#vols[@]})); then timeout "$CALL_LIMIT" docker -H "$host" volume rm "${vols[@]}" >/dev/null 2>&1 || true; fi
        mapfile -t ids < <(timeout "$CALL_LIMIT" docker -H "$host" ps -aq "${f[@]}" 2>/dev/null)
        mapfile -t vols < <(timeout "$CALL_LIMIT" docker -H "$host" volume ls -q "${f[@]}" 2>/dev/null)
        ((${#ids[@]} + ${#vols[@]} == 0)) && return 0
        sleep "$attempt"
    done
    log "WARNING: $what left on $host: ${#ids[@]} containers, ${#vols[@]} volumes"
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
        mapfile -t stray < <(timeout "$CALL_LIMIT" docker -H "$L_HOST" ps -aq --filter "name=^/$RUN_ID-u-" 2>/dev/null)
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
    mapfile -t -O "${#L_SEQ[@]}" L_SEQ <"$WORK/batch"
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
    forget_on_L "${UNREL[@]:keep}"
    UNREL=("${UNREL[@]:0:keep}")
}

# Takes containers $1.. (ids) out of L's tracked creation order (they are gone).
forget_on_L() {
    local -A gone=()
    local id keep=()
    for id in "$@"; do gone[$id]=1; done
    for id in "${L_SEQ[@]}"; do [[ -n ${gone[$id]:-} ]] || keep+=("$id"); done
    L_SEQ=("${keep[@]}")
}

# One box $2 on engine $1: labeled named volume, running container mounting it
# (its id in BOX_CID, and on L in L_SEQ); writes its state file $WORK/$2.toml.
create_box() {
    local host=$1 box=$2 id
    docker -H "$host" volume create --label ca.sandbox=1 --label "ca.sandbox.id=$box" \
        --label "$RUN_LABEL" --label "ca.sandbox.benchbox=$box" "ca-sbx-$box" >/dev/null
    id=$(docker -H "$host" run -d --name "sbx-$box" --label ca.sandbox=1 --label "ca.sandbox.id=$box" \
        --label "$RUN_LABEL" --label "ca.sandbox.benchbox=$box" -v "ca-sbx-$box:/data" \
        "${BOX_ARGS[@]}" "$IMAGE" /bin/sleep infinity)
    BOX_CID[$box]=$id
    [[ $host != "$L_HOST" ]] || L_SEQ+=("$id")
    printf '[scope]\nlabels = { "ca.sandbox.bench" = "%s", "ca.sandbox.benchbox" = "%s" }\n' \
        "$RUN_ID" "$box" >"$WORK/$box.toml"
}

# L with $1 unrelated containers, then new boxes $3... (made one after the
# other), then $2 unrelated containers (the newest unrelated ones are dropped
# or more are created first, as needed).
layout() {
    local before=$1 after=$2 have=${#UNREL[@]} box
    shift 2
    if ((have > before)); then drop_unrelated $((have - before)); fi
    create_unrelated $((before - ${#UNREL[@]}))
    for box in "$@"; do create_box "$L_HOST" "$box"; done
    create_unrelated "$after"
}

# The boxes on L of round $1 ((a)'s, and (e)'s with SANDBOXCTL_B), in the order
# that round times them.
round_l_boxes() {
    local round=$1 i c n=${#CONTENDERS[@]}
    for ((i = 0; i < n; i++)); do
        c=${CONTENDERS[(i + round - 1) % n]}
        [[ $c != a && $c != e ]] || echo "$RUN_ID-r$round-$c"
    done
}

# "<before> <after> <order>" for box $2 on engine $1: its running containers
# created before and after the box's container, in the engine's listing order
# (newest first, by creation time); order: on L, "same" if the tracked creation
# order L_SEQ has the same containers before and after the box, else "differs"
# (and a WARNING); "-" on E.
box_neighbours() {
    local host=$1 box=$2 id=${BOX_CID[$2]:-} ids i n tb ta order=-
    mapfile -t ids < <(docker -H "$host" ps -q --no-trunc)
    n=${#ids[@]}
    for ((i = 0; i < n; i++)); do [[ ${ids[i]} != "$id" ]] || break; done
    if ((i == n)); then
        log "WARNING: box $box's container is not running"
        echo "- - -"
        return 0
    fi
    if [[ $host == "$L_HOST" ]]; then
        for ((tb = 0; tb < ${#L_SEQ[@]}; tb++)); do [[ ${L_SEQ[tb]} != "$id" ]] || break; done
        ta=$((${#L_SEQ[@]} - tb - 1))
        order=differs
        # the same sets: before (listed after it), after (listed before it)
        if ((tb < ${#L_SEQ[@]})) &&
            [[ $(printf '%s\n' "${ids[@]:i+1}" | sort) == $(printf '%s\n' "${L_SEQ[@]:0:tb}" | sort) &&
            $(printf '%s\n' "${ids[@]:0:i}" | sort) == $(printf '%s\n' "${L_SEQ[@]:tb+1}" | sort) ]]; then
            order=same
        else
            log "WARNING: box $box: the engine lists $((n - i - 1)) containers before it and $i after it, the tracked order $tb and $ta, or other ones"
        fi
    fi
    echo "$((n - i - 1)) $i $order"
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
    local host=$1 box=$2 via=${3:-$1} bin=${4:-$BIN} out=$WORK/$2.out err=$WORK/$2.err rc=0 t0 t1 verdict state
    # Its own state folder per binary and engine (never the caller's): with
    # BENCH_MEMO=fresh emptied before each run, so no answer of an earlier
    # run's inspections is known (decision 11); with keep, kept across rounds.
    state=$WORK/state-$(printf '%s %s' "$bin" "$via" | md5sum | cut -c1-12)
    [[ $MEMO == keep ]] || rm -rf "$state"
    mkdir -p "$state"
    t0=$EPOCHREALTIME
    XDG_STATE_HOME=$state "$bin" --host "$via" --state "$WORK/$box.toml" --format json destroy "$box" >"$out" 2>"$err" || rc=$?
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

# Contender $1 in round $2: makes its box (the layout made (a)'s and (e)'s), lets
# the daemon settle, times it, checks the box is gone; appends a line to RAW.
contender() {
    local c=$1 round=$2
    local box=$RUN_ID-r$round-$c host res left others load before after order
    case $c in
    a | b | e) host=$L_HOST ;;
    c | d) host=$E_HOST ;;
    esac
    # (a)'s and (e)'s boxes sit in the middle of the unrelated containers
    # (made by the layout); the others are made now.
    [[ $c == a || $c == e ]] || create_box "$host" "$box"
    sleep "$SETTLE"
    read -r before after order < <(box_neighbours "$host" "$box")
    others=-
    [[ $before == - ]] || others=$((before + after))
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
        purge_boxes "$host" "$box" || true
    fi
    [[ $host != "$L_HOST" ]] || forget_on_L "${BOX_CID[$box]}"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$round" "${res%% *}" "${res#* }" "$others" "$load" \
        "$before" "$after" "$order" >>"$RAW"
    log "($c) round $round: ${res%% *} ms, ${res#* }; other running containers $others ($before made before the box, $after after; order ${order/-/not tracked}); load $load"
    # once: a new unrelated container takes the place of the box among the
    # containers made after the boxes still to come (not timed; the next
    # contender lets the daemon settle before its timing).
    if [[ $LAYOUT == once && ($c == a || $c == e) ]]; then create_unrelated 1; fi
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
        layout $((k / 2)) $((k - k / 2)) "$box"
        sleep "$SETTLE"
        from=$(wc -l <"$log")
        res=$(run_sandboxctl "$L_HOST" "$box" "unix://$sock")
        [[ $(box_left "$L_HOST" "$box") == "0 0" ]] || { res="${res%% *} FAILED:box-left"; purge_boxes "$L_HOST" "$box" || true; }
        forget_on_L "${BOX_CID[$box]}"
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
    local c name s runs ok others med_a med_b med_c med_d med_e ver ae="(a)" ae_each="(a)" before=$((K / 2)) after=$((K - K / 2))
    [[ -z $BIN_B ]] || { ae="(a) and (e)"; ae_each="(a)/(e)"; }
    ver=$(docker -H "$L_HOST" version -f '{{.Server.Version}} (API {{.Server.APIVersion}})')
    echo
    echo "One box (running container + named volume), \`sandboxctl destroy BOX\` vs \`docker rm -f C && docker volume rm V\`;"
    if [[ $LAYOUT == once ]]; then
        echo "beside $ae: K = $K running containers on a private dockerd L, $before unrelated unlabeled ones created before the box"
        echo "and $after after it (unrelated ones, or later rounds' boxes). Layout \"once\": L was laid out one time, before the first"
        echo "round: $before unrelated containers, then the $L_BOXES boxes of $ae of all rounds, one after the other in the order they"
        echo "are destroyed (oldest first), then $((after - L_BOXES + 1)) unrelated ones. The later rounds' boxes are labeled, but each box has its own"
        echo "scope label (ca.sandbox.benchbox), so to sandboxctl they are containers beside the box like the unrelated ones. After"
        echo "each $ae_each timing one new unrelated container (not timed) keeps the counts; no other container is removed from L"
        echo "during the rounds. (b) makes its box right before its timing, after all of them. None beside (c) and (d) (a second"
        echo "private dockerd, same set-up, same rounds); $REPEAT rounds, order rotated each round (${LAYOUT_SETTLE} s settling after the layout;"
        echo "${SETTLE} s before each timing)."
    else
        echo "K = $K unrelated unlabeled running containers beside (a)$([[ -z $BIN_B ]] || echo ", (e)") and (b) ($before created before the box, $after after$([[ -z $BIN_B ]] || echo "; and the round's other box of (a)/(e) until it goes")),"
        echo "none beside (c) and (d) (a second private dockerd, same set-up, same rounds); $REPEAT rounds, order rotated each round."
        echo "Layout \"churn\": at the start of each round, the newest unrelated containers on L are dropped down to $before, (a)'s box"
        echo "$([[ -z $BIN_B ]] || echo "and (e)'s (made first in every other round) are")$([[ -n $BIN_B ]] || echo "is") made, then $after new unrelated ones (${CHURN_SETTLE} s settling after it; ${SETTLE} s before each timing)."
    fi
    echo "Machine: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); private dockerds Docker $ver, storage $(docker -H "$L_HOST" info -f '{{.Driver}}'); $("$BIN" --version 2>/dev/null || echo sandboxctl) ($BIN).
Memo of inspections (BENCH_MEMO): $MEMO ($([[ $MEMO == keep ]] && echo "each binary's memo on each engine kept from round to round" || echo "every sandboxctl run started with none"))."
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
    # Before/after counts of the boxes of (a) and (e), as "<before>/<after> xN" per contender.
    awk -F'\t' -v layout="$LAYOUT" -v want="$before/$after" '
        $1 == "a" || $1 == "e" { k = $1 " " $7 "/" $8; if (!(k in n)) keys[++nk] = k; n[k]++; if ($7 "/" $8 != want) off++ }
        $1 == "a" || $1 == "b" || $1 == "e" { l++; if ($9 != "same") diff++ }
        END {
            for (i = 2; i <= nk; i++) { x = keys[i]; for (j = i - 1; j >= 1 && keys[j] > x; j--) keys[j + 1] = keys[j]; keys[j + 1] = x }
            s = ""
            for (i = 1; i <= nk; i++) { split(keys[i], p, " "); s = s (i > 1 ? ", " : "") "(" p[1] ") " p[2] " x" n[keys[i]] }
            printf "- containers on L created before/after the box, when each (a)/(e) timing started: %s", s
            if (layout == "once") printf " (all %s: %s)", want, (off ? "NO, " off " not" : "yes")
            printf ";\n  by the engine'"'"'s listing order; the creation order the script tracks agreed %s\n", (diff ? "NOT in " diff " of " l " timings on L" : "in all " l " timings on L")
        }' "$RAW"
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
    log "run $RUN_ID: K=$K, $REPEAT rounds, layout $LAYOUT, engine-call counts at K = ${COUNTS[*]}; binary $BIN"
    log "starting the private dockerd L in $L_DIR"
    L_HOST=$(start_engine "$L_DIR")
    log "starting the private dockerd E in $E_DIR"
    E_HOST=$(start_engine "$E_DIR")
    : >"$RAW"
    : >"$CALLS"
    count_calls
    local round i c n=${#CONTENDERS[@]} boxes=()
    if [[ $LAYOUT == once ]]; then
        # All rounds' boxes of (a) (and (e)), in the order they will be destroyed;
        # the later ones count among the K - K/2 made after each.
        for ((round = 1; round <= REPEAT; round++)); do
            mapfile -t -O "${#boxes[@]}" boxes < <(round_l_boxes "$round")
        done
        log "laying out L once: $((K / 2)) unrelated containers, the ${#boxes[@]} boxes of (a)$([[ -z $BIN_B ]] || echo " and (e)") of all rounds, $((K - K / 2 - ${#boxes[@]} + 1)) unrelated containers"
        layout $((K / 2)) $((K - K / 2 - ${#boxes[@]} + 1)) "${boxes[@]}"
        log "letting L settle for $LAYOUT_SETTLE s"
        sleep "$LAYOUT_SETTLE"
    fi
    for ((round = 1; round <= REPEAT; round++)); do
        if [[ $LAYOUT == churn ]]; then
            log "round $round: laying out K=$K unrelated containers around (a)'s box"
            boxes=("$RUN_ID-r$round-a")
            # (e)'s box beside (a)'s, made first in every other round (the older
            # one sees the younger one among the containers made after it).
            if [[ -n $BIN_B ]]; then
                if ((round % 2)); then boxes+=("$RUN_ID-r$round-e"); else boxes=("$RUN_ID-r$round-e" "${boxes[@]}"); fi
            fi
            layout $((K / 2)) $((K - K / 2)) "${boxes[@]}"
            sleep "$CHURN_SETTLE"
        fi
        for ((i = 0; i < n; i++)); do
            c=${CONTENDERS[(i + round - 1) % n]}
            contender "$c" "$round"
        done
    done
    report
}

main
