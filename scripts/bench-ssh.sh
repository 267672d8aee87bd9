#!/usr/bin/env bash
# bench-ssh.sh [N]: tearing down N running boxes on an engine reached over
# ssh://user@host:PORT behind a 20 ms round trip: sandboxctl apply against the
# docker CLI's batch idiom over the same address.
#
# Setup (needs root, iproute2, openssh-server, python3):
#   - a network namespace joined to the host by a veth pair (10.215.R.1/30 on
#     the host, .2 inside); the round trip is put on the veth pair inside the
#     namespace: `tc qdisc ... netem delay` on both ends when the kernel has
#     sch_netem, else scripts/delay-line.py inside the namespace, listening on
#     the veth address and holding every chunk half the round trip each way
#     in front of the namespace's own loopback. Never on the host's loopback.
#   - a stock sshd in that namespace (MaxStartups and MaxSessions left at their
#     defaults, 10:30:100 and 10) whose sessions have DOCKER_HOST set to the
#     main engine's socket, so `docker system dial-stdio` on the remote reaches
#     the main engine; a client key and an `ssh` wrapper first on PATH adding
#     `-F` with that key (the user's own ~/.ssh is not touched). Both the
#     docker CLI and sandboxctl run that `ssh`.
# For every contender, N boxes (a running container mounting its own named
# volume, labeled ca.sandbox=1, ca.sandbox.id=<box> and this run's scope
# ca.sandbox.bench=<run id>) are created on the main engine over its socket
# (not timed), then torn down over ssh://root@10.215.R.2:PORT (timed):
#   (b) docker rm -f $(docker ps -aq --filter label=ca.sandbox=1 --filter label=<scope>)
#       docker volume rm $(docker volume ls -q --filter ...same...)
#   (s) sandboxctl --scope <scope> --state <empty> apply   (default parallelism)
#   further contenders from BENCH_SSH_VARIANTS, each NAME=/path/to/sandboxctl (another
#   build, e.g. a variant of the transport) or NAME=VAR=VALUE (sandboxctl with that variable)
# Rounds are interleaved (b, s, variants, b, s, ...); the table shows medians.
# After each contender: the scope must be empty, and no ssh process of this
# run may be left (the "ssh left" column counts them).
#
# Output: a markdown table on stdout, progress on stderr.
# Environment:
#   BENCH_REPEAT     rounds                                   [5]
#   BENCH_RTT_MS     round trip added, ms                     [20]
#   BENCH_CREATE_P   concurrent `docker run` while creating   [8]
#   BENCH_SSH_VARIANTS  extra sandboxctl contenders, NAME=/path/to/sandboxctl or NAME=VAR=VALUE []
#   BENCH_MAX_STARTUPS  sshd's MaxStartups instead of its default (e.g. 100:30:200, room
#                       for the docker CLI's one connection per removal)  []
#   SANDBOXCTL       sandboxctl binary [target/release/sandboxctl, built if missing]
set -euo pipefail
export LC_ALL=C

N=${1:-50}
[[ $N =~ ^[1-9][0-9]*$ && $N -le 500 ]] || { echo "usage: $0 [N]  (1..500 boxes)" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/sleep-image.sh
source "$ROOT/scripts/lib/sleep-image.sh"
REPEAT=${BENCH_REPEAT:-5}
RTT=${BENCH_RTT_MS:-20}
CREATE_P=${BENCH_CREATE_P:-8}
read -r -a VARIANTS <<<"${BENCH_SSH_VARIANTS:-}"
IMAGE=ca-sbx:bench-sleep
RUN_ID=bench-ssh-$(date +%Y%m%d-%H%M%S)-$$
SCOPE_LABEL=ca.sandbox.bench=$RUN_ID
MANAGED=(--filter label=ca.sandbox=1 --filter "label=$SCOPE_LABEL")
BIN=${SANDBOXCTL:-$ROOT/target/release/sandboxctl}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-ssh.XXXXXX")
RAW=$WORK/raw.tsv
R=$(( ($$ % 250) + 1 ))
NS=sbx-bssh-$$
VH=sbxbs$$a
VN=sbxbs$$b
HOST_IP=10.215.$R.1
NS_IP=10.215.$R.2
PORT=2222
SSHD_PID=
RELAY_PID=
DELAY_HOW=

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
now() { echo "$EPOCHREALTIME"; }
span() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Removes every container and volume of this run's scope over the local socket.
purge_scope() {
    local ids vols
    mapfile -t ids < <(DOCKER_HOST= docker ps -aq "${MANAGED[@]}" 2>/dev/null)
    if ((${#ids[@]})); then DOCKER_HOST= docker rm -f "${ids[@]}" >/dev/null 2>&1 || true; fi
    mapfile -t vols < <(DOCKER_HOST= docker volume ls -q "${MANAGED[@]}" 2>/dev/null)
    if ((${#vols[@]})); then DOCKER_HOST= docker volume rm "${vols[@]}" >/dev/null 2>&1 || true; fi
}

scope_count() {
    echo "$(DOCKER_HOST= docker ps -aq --filter "label=$SCOPE_LABEL" | wc -l)+$(DOCKER_HOST= docker volume ls -q --filter "label=$SCOPE_LABEL" | wc -l)"
}

# ssh client processes of this run (their command line names our ssh config), not zombies.
ssh_left() {
    local pid n=0 state
    for pid in $(pgrep -f -- "-F $WORK/ssh_config" || true); do
        state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null || echo gone)
        [[ $state == Z || $state == gone ]] || n=$((n + 1))
    done
    echo "$n"
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [[ -n $RELAY_PID ]] && kill "$RELAY_PID" 2>/dev/null || true
    [[ -n $SSHD_PID ]] && kill "$SSHD_PID" 2>/dev/null || true
    for pid in $(pgrep -f -- "-F $WORK/ssh_config" || true); do kill "$pid" 2>/dev/null || true; done
    ip link del "$VH" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    log "cleaning up scope $SCOPE_LABEL"
    purge_scope
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

setup_network() {
    ip netns add "$NS"
    ip link add "$VH" type veth peer name "$VN"
    ip link set "$VN" netns "$NS"
    ip addr add "$HOST_IP/30" dev "$VH"
    ip link set "$VH" up
    ip netns exec "$NS" ip addr add "$NS_IP/30" dev "$VN"
    ip netns exec "$NS" ip link set "$VN" up
    ip netns exec "$NS" ip link set lo up
    local half
    half=$(awk -v r="$RTT" 'BEGIN { printf "%g", r / 2 }')
    if ip netns exec "$NS" tc qdisc add dev "$VN" root netem delay "${RTT}ms" 2>/dev/null; then
        DELAY_HOW="netem delay ${RTT}ms on the veth end inside the namespace"
        SSHD_LISTEN=$NS_IP:$PORT
    else
        DELAY_HOW="scripts/delay-line.py in the namespace, ${half} ms each way (this kernel has no sch_netem)"
        SSHD_LISTEN=127.0.0.1:$PORT
        ip netns exec "$NS" python3 "$ROOT/scripts/delay-line.py" "$NS_IP" "$PORT" 127.0.0.1 "$PORT" "$half" \
            >"$WORK/relay.out" 2>"$WORK/relay.log" &
        RELAY_PID=$!
        for _ in $(seq 100); do grep -q ready "$WORK/relay.out" 2>/dev/null && break; sleep 0.05; done
        grep -q ready "$WORK/relay.out" || { log "delay line did not start"; cat "$WORK/relay.log" >&2; exit 1; }
    fi
}

setup_sshd() {
    mkdir -p /run/sshd "$WORK/bin"
    ssh-keygen -q -t ed25519 -N "" -C bench-ssh-host -f "$WORK/host_key"
    ssh-keygen -q -t ed25519 -N "" -C bench-ssh-client -f "$WORK/id"
    cp "$WORK/id.pub" "$WORK/authorized_keys"
    cat >"$WORK/sshd_config" <<EOF
ListenAddress $SSHD_LISTEN
HostKey $WORK/host_key
PidFile $WORK/sshd.pid
AuthorizedKeysFile $WORK/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
SetEnv DOCKER_HOST=unix:///var/run/docker.sock
${BENCH_MAX_STARTUPS:+MaxStartups $BENCH_MAX_STARTUPS}
EOF
    cat >"$WORK/ssh_config" <<EOF
Host *
  IdentityFile $WORK/id
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
EOF
    printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$WORK/ssh_config" >"$WORK/bin/ssh"
    chmod +x "$WORK/bin/ssh"
    ip netns exec "$NS" /usr/sbin/sshd -D -e -f "$WORK/sshd_config" 2>"$WORK/sshd.log" &
    SSHD_PID=$!
    ADDR=ssh://root@$NS_IP:$PORT
    export PATH=$WORK/bin:$PATH
    for _ in $(seq 100); do
        ssh -p "$PORT" root@"$NS_IP" true 2>/dev/null && break
        sleep 0.1
    done
    ssh -p "$PORT" root@"$NS_IP" docker version -f '{{.Server.Version}}' >/dev/null ||
        { log "ssh to $ADDR does not reach docker"; tail "$WORK/sshd.log" >&2; exit 1; }
    local t0 t1
    t0=$(now); ssh -p "$PORT" root@"$NS_IP" true; t1=$(now)
    SSH_TRUE=$(span "$t0" "$t1")
}

# ca-sbx:bench-sleep: /bin/sleep and its libraries, imported from a tar (no pull);
# see scripts/lib/sleep-image.sh.
ensure_image() {
    DOCKER_HOST= docker image inspect "$IMAGE" >/dev/null 2>&1 && return 0
    log "building $IMAGE from /bin/sleep"
    DOCKER_HOST= import_sleep_image "$IMAGE" "$WORK"
}

create_box() { # $1 = box id (over the local socket)
    DOCKER_HOST= docker volume create --label ca.sandbox=1 --label "ca.sandbox.id=$1" \
        --label "$SCOPE_LABEL" "ca-sbx-$1" >/dev/null
    DOCKER_HOST= docker run -d --name "sbx-$1" --label ca.sandbox=1 --label "ca.sandbox.id=$1" \
        --label "$SCOPE_LABEL" -v "ca-sbx-$1:/data" --network none "$IMAGE" /bin/sleep infinity >/dev/null
}

create_boxes() {
    export -f create_box
    export SCOPE_LABEL IMAGE
    seq -f "$RUN_ID-$1-%04g" 1 "$N" | xargs -P "$CREATE_P" -I{} bash -c 'create_box "$1"' _ {}
    local running
    running=$(DOCKER_HOST= docker ps -q "${MANAGED[@]}" --filter status=running | wc -l)
    [[ $running == "$N" ]] || { log "created $running running boxes, expected $N"; exit 1; }
    sleep 1
}

teardown_b() {
    # shellcheck disable=SC2046 # word splitting intended: the idiom
    DOCKER_HOST=$ADDR docker rm -f $(DOCKER_HOST=$ADDR docker ps -aq "${MANAGED[@]}") >/dev/null
    # shellcheck disable=SC2046
    DOCKER_HOST=$ADDR docker volume rm $(DOCKER_HOST=$ADDR docker volume ls -q "${MANAGED[@]}") >/dev/null
}

teardown_s() { # $1 = a sandboxctl binary (/path) or an environment assignment
    local bin=$BIN env=()
    if [[ ${1:-} == /* ]]; then bin=$1; elif [[ -n ${1:-} ]]; then env=("$1"); fi
    env "${env[@]}" "$bin" -H "$ADDR" --scope "$SCOPE_LABEL" --state "$EMPTY_STATE" apply >"$WORK/out" 2>"$WORK/err"
}

run_contender() { # $1 = name, $2 = round, $3.. = env for sandboxctl
    local c=$1 round=$2 t0 t1 rc=0 left ssh before
    shift 2
    log "round $round: creating $N boxes for $c"
    create_boxes "$c-r$round"
    before=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(now)
    if [[ $c == docker-cli ]]; then teardown_b || rc=$?; else teardown_s "$@" || rc=$?; fi
    t1=$(now)
    ssh=$(ssh_left)
    left=$(scope_count)
    if ((rc != 0)); then
        log "($c) exit $rc"
        [[ $c == docker-cli ]] || tail -n 15 "$WORK/out" "$WORK/err" >&2
    fi
    [[ $left == 0+0 ]] || { log "($c) left $left in scope"; purge_scope; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$round" "$(span "$t0" "$t1")" "$rc" "$left" "$ssh" "$before" >>"$RAW"
    log "($c) $(span "$t0" "$t1") s; exit $rc; left $left; ssh processes left $ssh; load $before"
}

report() {
    local c wb w runs ok ssh
    wb=$(awk -F'\t' '$1 == "docker-cli" { print $3 }' "$RAW" | median)
    echo
    echo "N = $N running boxes (container + named volume), $REPEAT interleaved round(s), median wall time, over $ADDR."
    echo "Round trip: $DELAY_HOW; \`ssh true\` (a full connection) $SSH_TRUE s. sshd: MaxStartups ${BENCH_MAX_STARTUPS:-10:30:100 (stock)}, MaxSessions 10 (stock)."
    echo "Machine: $(nproc) CPUs, Docker $(DOCKER_HOST= docker version -f '{{.Server.Version}}'), docker CLI $(docker version -f '{{.Client.Version}}' 2>/dev/null), $(ssh -V 2>&1 | cut -d, -f1); sandboxctl $(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && git diff --quiet HEAD -- src || echo '+changes')."
    echo
    echo "| contender | wall s (median) | vs docker CLI | runs (s) | ok | ssh processes left |"
    echo "|---|---:|---:|---|---|---|"
    for c in "${CONTENDERS[@]}"; do
        w=$(awk -F'\t' -v c="$c" '$1 == c { print $3 }' "$RAW" | median)
        runs=$(awk -F'\t' -v c="$c" '$1 == c { printf "%s%s", sep, $3; sep = " " }' "$RAW")
        ok=$(awk -F'\t' -v c="$c" '$1 == c && ($4 != 0 || $5 != "0+0") { bad++ } END { print (bad ? "FAILED x" bad : "yes") }' "$RAW")
        ssh=$(awk -F'\t' -v c="$c" '$1 == c { printf "%s%s", sep, $6; sep = " " }' "$RAW")
        awk -v c="$c" -v w="$w" -v b="$wb" -v r="$runs" -v o="$ok" -v s="$ssh" \
            'BEGIN { printf "| %s | %s | %.2f | %s | %s | %s |\n", c, w, w / b, r, o, s }'
    done
    echo
    echo "sshd dropped $(grep -c 'past MaxStartups' "$WORK/sshd.log" || true) connections past MaxStartups over the whole run."
    echo "ok: exit 0 and the scope empty afterwards. docker-cli: \`docker rm -f \$(docker ps -aq --filter ...)\` then \`docker volume rm \$(docker volume ls -q --filter ...)\`;"
    echo "sandboxctl: \`sandboxctl -H $ADDR --scope <scope> --state <empty> apply\` at its default parallelism."
}

main() {
    [[ $(id -u) == 0 ]] || { echo "needs root (network namespace, sshd)" >&2; exit 1; }
    [[ -x /usr/sbin/sshd ]] || { echo "needs /usr/sbin/sshd (openssh-server)" >&2; exit 1; }
    DOCKER_HOST= docker version -f '{{.Server.Version}}' >/dev/null || { echo "cannot reach the Docker engine" >&2; exit 1; }
    if [[ ! -x $BIN ]]; then (cd "$ROOT" && cargo build --release --quiet); fi
    ensure_image
    EMPTY_STATE=$WORK/empty-state.toml
    : >"$EMPTY_STATE"
    setup_network
    setup_sshd
    CONTENDERS=(docker-cli sandboxctl)
    local v
    for v in "${VARIANTS[@]}"; do CONTENDERS+=("${v%%=*}"); done
    log "run $RUN_ID: N=$N over $ADDR ($DELAY_HOW), contenders ${CONTENDERS[*]}, $REPEAT round(s)"
    local round
    for ((round = 1; round <= REPEAT; round++)); do
        run_contender docker-cli "$round"
        run_contender sandboxctl "$round"
        for v in "${VARIANTS[@]}"; do run_contender "${v%%=*}" "$round" "${v#*=}"; done
    done
    report
}

main
