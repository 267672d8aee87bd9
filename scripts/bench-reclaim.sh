#!/usr/bin/env bash
# bench-reclaim.sh: what it costs to learn the space a teardown gives back.
#
# usage: bench-reclaim.sh probe N      the Engine API's size reads on N boxes
#        bench-reclaim.sh teardown N   sandboxctl apply on N boxes, interleaved:
#                                      the binary before (SANDBOXCTL_BEFORE),
#                                      after (SANDBOXCTL), after --reclaimed,
#                                      after --reclaimed --call-timeout 30
#
# Everything runs on a private dockerd of its own (scripts/second-dockerd.sh:
# own data-root, bridge, cgroups; stopped on exit, also on Ctrl-C/TERM); the
# shared engine is never loaded. Its image ca-sbx:bench-sleep is imported
# into it from /bin/sleep (scripts/lib/sleep-image.sh; nothing is pulled).
#
# A box: a named volume and a running container (`--network none`, `sleep`)
# that mounts it at /data, both labeled ca.sandbox=1, ca.sandbox.id=<box> and
# this run's scope label. Each container gets RECLAIM_CONTAINER_FILES files of
# RECLAIM_FILE_KB KiB written into its writable layer (`docker cp` to
# /scratch), each volume RECLAIM_VOLUME_FILES such files (`docker cp` to /data).
#
# probe times, with curl on the engine's socket, each call RECLAIM_REPEAT
# times (median, min, max in ms):
#   GET /system/df                              (every volume, container, image)
#   GET /containers/{id}/json?size=true         (one container's writable layer)
#   GET /containers/{id}/json                   (the same without size)
#   GET /containers/json?all=1&filters=..&size=true   (the box listing with size)
#   GET /containers/json?all=1&filters=..             (the same without size)
#   GET /volumes/{name}                         (whether it says UsageData)
# and tries two /system/df at once (Docker 20.10 refuses a second one while
# one runs), and prints what the engine says one box holds against what was
# written into it.
#
# teardown times `sandboxctl --scope S --state <empty> apply` on N fresh boxes
# per run (boxes made untimed, then a 2 s settle), RECLAIM_ROUNDS rounds of
# before, after, after --reclaimed and after --reclaimed --call-timeout 30,
# in a rotating order; prints the median, minimum and maximum wall seconds,
# each run's exit status, the reclaimedBytes each run reported, and how
# many runs warned that the engine could not measure.
#
# Environment:
#   RECLAIM_CONTAINER_FILES  files written into each container [4]
#   RECLAIM_VOLUME_FILES     files written into each volume [3]
#   RECLAIM_FILE_KB          size of each file, KiB [1024]
#   RECLAIM_REPEAT           timed calls of each kind (probe) [11]
#   RECLAIM_ROUNDS           rounds (teardown) [3]
#   RECLAIM_CREATE_P         concurrent box creations [8]
#   SANDBOXCTL               sandboxctl after [target/release/sandboxctl]
#   SANDBOXCTL_BEFORE        sandboxctl before (teardown only; required)
set -euo pipefail
export LC_ALL=C

usage() {
    sed -n '4,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
[[ $# -eq 2 && ($1 == probe || $1 == teardown) && $2 =~ ^[1-9][0-9]*$ && $2 -le 1000 ]] || usage
MODE=$1 N=$2

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/sleep-image.sh
source "$ROOT/scripts/lib/sleep-image.sh"
C_FILES=${RECLAIM_CONTAINER_FILES:-4}
V_FILES=${RECLAIM_VOLUME_FILES:-3}
FILE_KB=${RECLAIM_FILE_KB:-1024}
REPEAT=${RECLAIM_REPEAT:-11}
ROUNDS=${RECLAIM_ROUNDS:-3}
CREATE_P=${RECLAIM_CREATE_P:-8}
AFTER=${SANDBOXCTL:-$ROOT/target/release/sandboxctl}
BEFORE=${SANDBOXCTL_BEFORE:-}
IMAGE=ca-sbx:bench-sleep
RUN_ID=reclaim-$(date +%Y%m%d-%H%M%S)-$$
SCOPE_LABEL=ca.sandbox.bench=$RUN_ID
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-reclaim.XXXXXX")
D2_DIR=$(mktemp -u /tmp/sbx-reclaim-d2.XXXXXX)
D2_HOST=
SOCK=

log() { printf '[bench-reclaim %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n $D2_HOST ]]; then
        log "stopping the private dockerd"
        "$ROOT/scripts/second-dockerd.sh" stop "$D2_DIR" || rc=1
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The files written into every container and every volume.
make_fill() {
    local i
    mkdir -p "$WORK/fill-c" "$WORK/fill-v"
    for ((i = 1; i <= C_FILES; i++)); do head -c $((FILE_KB * 1024)) /dev/urandom >"$WORK/fill-c/f$i"; done
    for ((i = 1; i <= V_FILES; i++)); do head -c $((FILE_KB * 1024)) /dev/urandom >"$WORK/fill-v/f$i"; done
}

# One box with id $1 in scope label $2, filled.
create_box() {
    local id=$1 scope=$2
    docker volume create --label ca.sandbox=1 --label "ca.sandbox.id=$id" \
        --label "$SCOPE_LABEL" --label "$scope" "ca-sbx-$id" >/dev/null
    docker run -d --name "sbx-$id" --network none --label ca.sandbox=1 --label "ca.sandbox.id=$id" \
        --label "$SCOPE_LABEL" --label "$scope" -v "ca-sbx-$id:/data" "$IMAGE" \
        /bin/sleep infinity >/dev/null
    docker cp "$WORK/fill-c/." "sbx-$id:/scratch" >/dev/null
    docker cp "$WORK/fill-v/." "sbx-$id:/data" >/dev/null
}

# N filled boxes in scope label $1 (tag $2 makes their ids unique).
create_boxes() {
    local scope=$1 tag=$2 n
    export -f create_box
    export SCOPE_LABEL IMAGE WORK
    seq -f "$RUN_ID-$tag-%04g" 1 "$N" | xargs -P "$CREATE_P" -I{} bash -c 'create_box "$1" "'"$scope"'"' _ {}
    n=$(docker ps -q --filter "label=$scope" --filter status=running | wc -l)
    ((n == N)) || { log "made $n running boxes in $scope, expected $N"; exit 1; }
    sleep 2
}

# One call on the engine's socket: prints "HTTP_CODE MS".
api() {
    curl -s --unix-socket "$SOCK" -o "${2:-/dev/null}" -w '%{http_code} %{time_total}\n' "http://engine/v1.41$1" |
        awk '{ printf "%s %.1f\n", $1, 1000 * $2 }'
}

# "median | min | max" of the numbers on stdin, with $1 decimals [1].
stats() { sort -g | awk -v d="${1:-1}" '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; f = "%." d "f | %." d "f | %." d "f"; printf f, m, v[1], v[NR] }'; }

# Times call $2 (a path; {id} is replaced by the next container id of
# $WORK/ids) RECLAIM_REPEAT times; prints a table row named $1.
row() {
    local name=$1 path=$2 i id code ms out="$WORK/ms" codes=""
    : >"$out"
    for ((i = 1; i <= REPEAT; i++)); do
        id=$(sed -n "$(((i - 1) % N + 1))p" "$WORK/ids")
        read -r code ms < <(api "${path//\{id\}/$id}")
        echo "$ms" >>"$out"
        [[ " $codes " == *" $code "* ]] || codes="$codes${codes:+ }$code"
    done
    echo "| $name | $(stats <"$out") | $codes |"
}

probe() {
    local filter q c v one
    log "making $N filled boxes"
    create_boxes "ca.sandbox.benchrun=$RUN_ID-probe" probe
    docker ps -q --no-trunc --filter "label=$SCOPE_LABEL" >"$WORK/ids"
    filter=$(jq -rn --arg s "$SCOPE_LABEL" '{label: ["ca.sandbox=1", $s]} | tostring | @uri')
    # Warm the daemon's caches as a first run of sandboxctl would not; each
    # call is then as cheap as it gets.
    api /system/df >/dev/null
    echo
    echo "N = $N boxes: each a running container with $C_FILES x $FILE_KB KiB written into its writable layer and a volume with $V_FILES x $FILE_KB KiB."
    echo "Engine: a private dockerd, Docker $(docker version -f '{{.Server.Version}} (API {{.Server.APIVersion}})'), storage $(docker info -f '{{.Driver}}'); $(nproc) CPUs; $REPEAT calls each (curl on the socket)."
    echo
    echo "| call | median ms | min ms | max ms | HTTP |"
    echo "|---|---:|---:|---:|---|"
    row 'GET /system/df' /system/df
    row 'GET /containers/{id}/json?size=true' '/containers/{id}/json?size=true'
    row 'GET /containers/{id}/json' '/containers/{id}/json'
    row "GET /containers/json?all=1&filters=<scope>&size=true ($N)" "/containers/json?all=1&filters=$filter&size=true"
    row "GET /containers/json?all=1&filters=<scope> ($N)" "/containers/json?all=1&filters=$filter"
    row 'GET /volumes/{name}' "/volumes/ca-sbx-$RUN_ID-probe-0001"
    echo
    # Two /system/df at once.
    api /system/df "$WORK/df1.json" >"$WORK/df1" &
    api /system/df "$WORK/df2.json" >"$WORK/df2"
    wait
    echo "Two GET /system/df at once: HTTP $(cut -d' ' -f1 "$WORK/df1") and $(cut -d' ' -f1 "$WORK/df2")$(
        for f in "$WORK/df1.json" "$WORK/df2.json"; do
            jq -r 'select(.message != null) | " (\"" + .message + "\")"' "$f" 2>/dev/null
        done | head -n 1)."
    # What the engine says one box holds.
    api /system/df "$WORK/df.json" >/dev/null
    one=sbx-$RUN_ID-probe-0001
    c=$(jq --arg n "/$one" '.Containers[] | select(.Names[0] == $n) | .SizeRw' "$WORK/df.json")
    v=$(jq --arg n "ca-sbx-$RUN_ID-probe-0001" '.Volumes[] | select(.Name == $n) | .UsageData.Size' "$WORK/df.json")
    api "/containers/$one/json?size=true" "$WORK/inspect.json" >/dev/null
    api "/volumes/ca-sbx-$RUN_ID-probe-0001" "$WORK/volume.json" >/dev/null
    echo "Written into one box: container $((C_FILES * FILE_KB * 1024)) bytes, volume $((V_FILES * FILE_KB * 1024)) bytes."
    echo "The engine says: /system/df SizeRw $c, UsageData.Size $v; inspect SizeRw $(jq .SizeRw "$WORK/inspect.json"); volume inspect UsageData $(jq -c '.UsageData // null' "$WORK/volume.json")."
    q=$(jq '[.Volumes[]] | length' "$WORK/df.json")
    echo "/system/df answered for $q volumes, $(jq '[.Containers[]] | length' "$WORK/df.json") containers, $(jq '[.Images[]] | length' "$WORK/df.json") images."
}

# One timed apply of binary $1 with extra apply arguments $2.. on N fresh
# boxes; appends "wall rc reclaimed" to $WORK/<label>.
timed_apply() {
    local label=$1 bin=$2 tag scope t0 t1 rc=0 out
    shift 2
    tag=$label-$((++TAG))
    scope=ca.sandbox.benchrun=$RUN_ID-$tag
    log "making $N boxes for $label"
    create_boxes "$scope" "$tag"
    out=$WORK/$tag.json
    : >"$WORK/empty.toml"
    t0=$EPOCHREALTIME
    "$bin" --scope "$SCOPE_LABEL" --scope "$scope" --state "$WORK/empty.toml" --format json apply "$@" \
        >"$out" 2>"$WORK/$tag.err" || rc=$?
    t1=$EPOCHREALTIME
    local wall left
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    left=$(docker ps -aq --filter "label=$scope" | wc -l)
    local warned=0
    grep -q 'could not measure' "$WORK/$tag.err" && warned=1
    echo "$wall $rc $(jq -c '.reclaimedBytes' "$out" 2>/dev/null || echo '?') $warned left=$left" >>"$WORK/$label"
    log "$label: $wall s, exit $rc, left $left"
    if ((rc != 0 || left != 0)); then tail -n 5 "$WORK/$tag.err" >&2; fi
}

teardown() {
    [[ -x $BEFORE && -x $AFTER ]] || { echo "teardown needs SANDBOXCTL_BEFORE and SANDBOXCTL (executables)" >&2; exit 2; }
    local round label i
    local all=(before after reclaimed reclaimed-30s)
    TAG=0
    for ((round = 1; round <= ROUNDS; round++)); do
        for ((i = 0; i < ${#all[@]}; i++)); do
            label=${all[(i + round - 1) % ${#all[@]}]}
            case $label in
            before) timed_apply before "$BEFORE" ;;
            after) timed_apply after "$AFTER" ;;
            reclaimed) timed_apply reclaimed "$AFTER" --reclaimed ;;
            reclaimed-30s) timed_apply reclaimed-30s "$AFTER" --reclaimed --call-timeout 30 ;;
            esac
        done
    done
    echo
    echo "N = $N boxes per run (running container with $C_FILES x $FILE_KB KiB written, volume with $V_FILES x $FILE_KB KiB), $ROUNDS rounds, rotating order."
    echo "Engine: a private dockerd, Docker $(docker version -f '{{.Server.Version}}'), storage $(docker info -f '{{.Driver}}'); $(nproc) CPUs."
    echo
    echo "| contender | median s | min s | max s | runs (s) | exit | reclaimedBytes | runs that could not measure |"
    echo "|---|---:|---:|---:|---|---|---|---:|"
    for label in "${all[@]}"; do
        echo "| $label | $(cut -d' ' -f1 "$WORK/$label" | stats 3) | $(cut -d' ' -f1 "$WORK/$label" | paste -sd' ') | $(cut -d' ' -f2 "$WORK/$label" | sort -u | paste -sd,) | $(cut -d' ' -f3 "$WORK/$label" | sort -u | paste -sd' ') | $(awk '{ n += $4 } END { print n + 0 }' "$WORK/$label") |"
    done
    echo
    echo "before: $BEFORE; after: $AFTER (the default path: no size read); reclaimed: --reclaimed"
    echo "(one GET /system/df per run, under the default --call-timeout, 5 s); reclaimed-30s: with --call-timeout 30."
}

log "starting a private dockerd in $D2_DIR"
D2_HOST=$("$ROOT/scripts/second-dockerd.sh" start "$D2_DIR")
export DOCKER_HOST=$D2_HOST
SOCK=${D2_HOST#unix://}
import_sleep_image "$IMAGE" "$WORK"
make_fill
"$MODE"
