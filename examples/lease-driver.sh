#!/usr/bin/env bash
# lease-driver.sh: the lease protocol of docs/leases.md with curl and jq only,
# spoken to the Docker Engine API over its unix socket. No sandboxctl needed.
#
#   lease-driver.sh take BOX [TTL_SECONDS]               takes a lease; prints its volume's name
#   lease-driver.sh renew BOX PREVIOUS [TTL_SECONDS]     takes the next lease, then removes PREVIOUS; prints the new name
#   lease-driver.sh release BOX                          removes every lease volume of BOX
#   lease-driver.sh hold BOX TTL_SECONDS -- COMMAND...   holds BOX while COMMAND runs (renews every ttl/3,
#                                                        releases when it ends, exits with its status)
#
# TTL_SECONDS defaults to 900 (15 minutes); it must be at most the state
# file's [policy] max_lease (default 24h) or the volume is not a lease.
#
# Environment:
#   DOCKER_SOCK   the engine's socket (default /var/run/docker.sock)
#   SCOPE_LABELS  the state file's scope labels, space-separated KEY=VALUE
#                 (a lease must carry every one, or sandboxctl never lists it)
#
# Needs bash 4.4 or later, curl 7.40 or later (--unix-socket), jq 1.5 or later.
set -euo pipefail

SOCK=${DOCKER_SOCK:-/var/run/docker.sock}
SCOPE_LABELS=${SCOPE_LABELS:-}

die() { echo "lease-driver: $*" >&2; exit 1; }

# api METHOD PATH [JSON]: sets STATUS and BODY. The host part of the URL is
# ignored by the engine; paths carry no API version, so the engine's own is used.
api() {
    local out
    if [[ $# -ge 3 ]]; then
        out=$(curl -sS --max-time 30 --unix-socket "$SOCK" -X "$1" \
            -H 'Content-Type: application/json' --data-binary "$3" \
            -w '\n%{http_code}' "http://docker$2") || die "$1 $2: curl failed"
    else
        out=$(curl -sS --max-time 30 --unix-socket "$SOCK" -X "$1" \
            -w '\n%{http_code}' "http://docker$2") || die "$1 $2: curl failed"
    fi
    STATUS=${out##*$'\n'}
    BODY=${out%$'\n'*}
}

# The labels of a lease of box $1 with ttl $2 seconds, as a JSON object.
lease_labels() {
    jq -cn --arg box "$1" --arg ttl "${2}s" --arg scope "$SCOPE_LABELS" '
        ($scope | split(" ") | map(select(. != "")
            | capture("^(?<k>[^=]+)=(?<v>.*)$") | {(.k): .v}) | add // {})
        + {"ca.sandbox": "1", "ca.sandbox.id": $box, "ca.sandbox.lease.ttl": $ttl}'
}

# take BOX TTL: creates the next lease volume and prints its name. The name
# must be new: Docker answers an existing name with that volume unchanged.
take() {
    local box=$1 ttl=$2 labels name
    [[ $ttl =~ ^[1-9][0-9]*$ ]] || die "ttl must be whole seconds over 0, not ${ttl@Q}"
    labels=$(lease_labels "$box" "$ttl")
    name="ca-sbx-lease-$box-$(date +%s)$(od -An -N4 -tx4 /dev/urandom | tr -d ' \n')"
    api POST /volumes/create "$(jq -cn --arg n "$name" --argjson l "$labels" '{Name: $n, Labels: $l}')"
    [[ $STATUS == 201 ]] || die "create volume $name: HTTP $STATUS: $BODY"
    # Check the answer is the volume we asked for, with every label.
    jq -e --argjson want "$labels" '(.Labels // {}) as $got
        | $want | to_entries | all(.value == $got[.key])' <<<"$BODY" >/dev/null \
        || die "volume $name came back without the lease labels: $BODY"
    echo "$name"
}

# remove NAME: a 404 means already gone, which is fine.
remove() {
    api DELETE "/volumes/$(jq -rn --arg n "$1" '$n | @uri')"
    [[ $STATUS == 204 || $STATUS == 404 ]] || die "remove volume $1: HTTP $STATUS: $BODY"
}

# release BOX: lists the box's lease volumes and removes each one whose labels
# are checked again here (Podman ORs several label filters on this listing).
release() {
    local box=$1 labels filters name
    labels=$(lease_labels "$box" 0 | jq -c 'del(."ca.sandbox.lease.ttl")')
    filters=$(jq -cn --argjson l "$labels" \
        '{label: ([$l | to_entries[] | "\(.key)=\(.value)"] + ["ca.sandbox.lease.ttl"])}')
    api GET "/volumes?filters=$(jq -rn --arg f "$filters" '$f | @uri')"
    [[ $STATUS == 200 ]] || die "list volumes: HTTP $STATUS: $BODY"
    jq -r --argjson want "$labels" '.Volumes // [] | .[]
        | select((.Labels // {}) as $got
            | ($got | has("ca.sandbox.lease.ttl"))
              and ($want | to_entries | all(.value == $got[.key])))
        | .Name' <<<"$BODY" | while IFS= read -r name; do
        remove "$name"
    done
}

# renew_loop BOX TTL LEASE PERIOD: in the background, every PERIOD seconds
# takes the next lease and removes the one before. A failed renewal is said
# on stderr and tried again after 5 s (PERIOD if shorter). Stops at SIGTERM.
renew_loop() {
    local box=$1 ttl=$2 lease=$3 period=$4 wait_for=$4 retry next nap=
    retry=$(( period < 5 ? period : 5 ))
    trap '[[ -n $nap ]] && kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do
        sleep "$wait_for" &
        nap=$!
        wait "$nap"
        nap=
        if next=$( (take "$box" "$ttl") ); then
            (remove "$lease") || echo "lease-driver: could not remove the older lease $lease (it runs out by itself)" >&2
            lease=$next
            wait_for=$period
        else
            echo "lease-driver: renewing the lease of box $box failed; trying again in ${retry}s" >&2
            wait_for=$retry
        fi
    done
}

# hold BOX TTL COMMAND...: takes a lease, runs COMMAND in the foreground
# while renew_loop renews every ttl/3, then stops renewing, releases, and
# returns COMMAND's status. Never kills COMMAND.
hold() {
    local box=$1 ttl=$2 lease renewer status=0
    shift 2
    lease=$(take "$box" "$ttl")
    renew_loop "$box" "$ttl" "$lease" $(( ttl / 3 > 0 ? ttl / 3 : 1 )) &
    renewer=$!
    trap 'true' INT    # Ctrl-C reaches COMMAND; this script goes on to release
    "$@" || status=$?
    kill -TERM "$renewer" 2>/dev/null || true
    wait "$renewer" || true
    (release "$box") || echo "lease-driver: could not release box $box (its lease runs out by itself)" >&2
    return "$status"
}

cmd=${1:-}
shift || true
case $cmd in
    take)
        [[ $# -ge 1 && $# -le 2 ]] || die "usage: take BOX [TTL_SECONDS]"
        take "$1" "${2:-900}" ;;
    renew)
        [[ $# -ge 2 && $# -le 3 ]] || die "usage: renew BOX PREVIOUS [TTL_SECONDS]"
        next=$(take "$1" "${3:-900}")
        remove "$2"
        echo "$next" ;;
    release)
        [[ $# -eq 1 ]] || die "usage: release BOX"
        release "$1" ;;
    hold)
        [[ $# -ge 4 && $3 == -- ]] || die "usage: hold BOX TTL_SECONDS -- COMMAND..."
        box=$1 ttl=$2
        shift 3
        hold "$box" "$ttl" "$@" ;;
    *)
        die "usage: lease-driver.sh take|renew|release|hold ... (see the top of this file)" ;;
esac
