#!/usr/bin/env bash
# second-dockerd.sh: start or stop a second Docker daemon beside the main one.
#
# usage: second-dockerd.sh start DIR [IMAGE...]   start it in DIR (created, must
#                                                 not exist); load each IMAGE
#                                                 from the main engine; print
#                                                 its host URL unix://DIR/docker.sock
#        second-dockerd.sh stop DIR               stop it; remove its bridge,
#                                                 cgroups, mounts and DIR
#
# Set up as /work/shared/notes/engines.md says, so that nothing is shared with
# the main engine: its own config file (with its own deprecated-key-path, so
# its own engine ID), data-root, exec-root, pidfile, socket, containerd
# namespaces and cgroup parent; no iptables, masquerading or ip forwarding; and
# its own pre-created bridge with an address in a 10.250.X.0/24 that no route
# or address on the host uses. Never `--bridge=none` (that deletes the main
# engine's docker0). The storage driver and MTU are the main engine's (so both
# engines do the same work per container), unless D2_STORAGE_DRIVER is set.
#
# Everything it made is recorded in DIR/state; `stop` undoes exactly that and
# nothing else (it signals only the recorded pid, and only if that process is a
# dockerd started with this DIR). Needs root (ip link, cgroups, dockerd).
#
# Environment:
#   DOCKERD            dockerd binary [dockerd]
#   D2_STORAGE_DRIVER  storage driver [the main engine's]
#   D2_START_TIMEOUT   seconds to wait until it answers [30]
#   D2_STOP_TIMEOUT    seconds to wait after SIGTERM before SIGKILL [60]
#   D2_BRIDGE_BITS     the bridge's prefix length: 24, or 22 for more than
#                      250 containers on the default bridge [24]
set -euo pipefail
export LC_ALL=C

usage() {
    sed -n '3,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
log() { printf '[second-dockerd %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# A 10.250.X.0/BITS that no route, and no address on any interface, overlaps
# (BITS: 24, or 22 for an engine of more than 250 containers).
free_subnet() {
    local x start net step=$((1 << (24 - BITS))) k
    start=$((RANDOM % 200 + 20))
    for ((i = 0; i < 254; i++)); do
        x=$(((start + i) % 254 / step * step))
        ((x > 0)) || continue
        net=10.250.$x
        # routes containing the subnet (other than the default route) or inside it
        if ip -4 route show match "$net.0/$BITS" | grep -v '^default' | grep -q .; then continue; fi
        if ip -4 route show root "$net.0/$BITS" | grep -q .; then continue; fi
        for ((k = 0; k < step; k++)); do
            if ip -4 -o addr show | grep -q " 10\.250\.$((x + k))\."; then continue 2; fi
        done
        echo "$net"
        return 0
    done
    return 1
}

# True if pid $1 is a dockerd started with data-root under $2.
is_our_dockerd() {
    local pid=$1 dir=$2 cmd
    [[ -r /proc/$pid/cmdline ]] || return 1
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
    [[ $cmd == *dockerd* && $cmd == *"--data-root $dir/root"* ]]
}

start() {
    local dir=$1
    shift
    [[ ! -e $dir ]] || { echo "$dir exists; give a new directory" >&2; exit 1; }
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    (( ${#dir} <= 80 )) || { echo "$dir is too long for a unix socket path" >&2; exit 1; }
    local id bridge net driver mtu sock
    id=$(printf '%04x%02x' $(($$ % 65536)) $((RANDOM % 256)))
    bridge=sbx-d2-$id     # 13 characters (interface names: at most 15)
    BITS=${D2_BRIDGE_BITS:-24}
    [[ $BITS == 24 || $BITS == 22 ]] || { echo "D2_BRIDGE_BITS must be 24 or 22" >&2; exit 1; }
    net=$(free_subnet) || { echo "no free 10.250.X.0/$BITS on this host" >&2; exit 1; }
    driver=${D2_STORAGE_DRIVER:-$(docker info -f '{{.Driver}}')}
    mtu=$(docker network inspect bridge -f '{{index .Options "com.docker.network.driver.mtu"}}' 2>/dev/null || true)
    [[ $mtu =~ ^[0-9]+$ ]] || mtu=1500
    sock=$dir/docker.sock
    # Record first, so that stop can undo a half-done start.
    {
        echo "ID=$id"
        echo "BRIDGE=$bridge"
        echo "CGROUP_PARENT=sbx-d2-$id"
    } >"$dir/state"

    ip link add "$bridge" type bridge
    ip addr add "$net.1/$BITS" dev "$bridge"
    ip link set "$bridge" up
    mkdir -p "$dir/root" "$dir/exec"
    jq -n --arg key "$dir/key.json" --arg driver "$driver" --argjson mtu "$mtu" \
        '{"deprecated-key-path": $key, "storage-driver": $driver, "mtu": $mtu}' >"$dir/daemon.json"
    setsid "${DOCKERD:-dockerd}" --config-file "$dir/daemon.json" --data-root "$dir/root" \
        --exec-root "$dir/exec" --pidfile "$dir/docker.pid" -H "unix://$sock" \
        --iptables=false --ip-masq=false --ip-forward=false \
        --containerd-namespace "sbx-d2-$id" --containerd-plugins-namespace "sbx-d2-$id-p" \
        --cgroup-parent "sbx-d2-$id" --bridge "$bridge" \
        </dev/null >"$dir/dockerd.log" 2>&1 &
    local pid=$!
    echo "PID=$pid" >>"$dir/state"
    local deadline=$((SECONDS + ${D2_START_TIMEOUT:-30}))
    until docker -H "unix://$sock" version -f '{{.Server.Version}}' >/dev/null 2>&1; do
        if ! kill -0 "$pid" 2>/dev/null || ((SECONDS > deadline)); then
            log "dockerd did not come up; its log:"
            tail -n 30 "$dir/dockerd.log" >&2
            stop "$dir"
            exit 1
        fi
        sleep 0.2
    done
    log "dockerd pid $pid on unix://$sock, bridge $bridge $net.1/$BITS, storage $driver"
    local img
    for img in "$@"; do
        log "loading $img"
        docker save "$img" | docker -H "unix://$sock" load >/dev/null
    done
    echo "unix://$sock"
}

stop() {
    local dir=$1
    [[ -f $dir/state ]] || { echo "$dir/state not found: nothing started there" >&2; exit 1; }
    dir=$(cd "$dir" && pwd)
    local BRIDGE="" CGROUP_PARENT="" PID=""
    # shellcheck disable=SC1091
    source "$dir/state"
    if [[ -n $PID ]] && is_our_dockerd "$PID" "$dir"; then
        kill -TERM "$PID"
        local deadline=$((SECONDS + ${D2_STOP_TIMEOUT:-60}))
        while [[ -d /proc/$PID ]] && ((SECONDS <= deadline)); do sleep 0.2; done
        if [[ -d /proc/$PID ]]; then
            log "dockerd $PID still running after SIGTERM; SIGKILL"
            kill -KILL "$PID" 2>/dev/null || true
        fi
    fi
    # Its containerd (and shims) exit with it; any left are ours by their socket path.
    local p
    for p in $(pgrep -f "containerd.*$dir/exec" || true); do
        log "killing leftover containerd process $p"
        kill -KILL "$p" 2>/dev/null || true
    done
    # Mounts under DIR (overlay layers, netns, shm), deepest first.
    local m
    while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done < <(awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r)
    if [[ -n $BRIDGE ]] && ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link del "$BRIDGE"
    fi
    if [[ -n $CGROUP_PARENT ]]; then
        local c
        for c in /sys/fs/cgroup/*/"$CGROUP_PARENT" /sys/fs/cgroup/"$CGROUP_PARENT"; do
            [[ -d $c ]] || continue
            find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || log "could not remove cgroup $c"
        done
    fi
    if awk -v d="$dir/" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
        echo "mounts remain under $dir; not removing it (see /proc/self/mounts)" >&2
        exit 1
    fi
    rm -rf "$dir"
    log "stopped; removed bridge $BRIDGE, cgroups $CGROUP_PARENT and $dir"
}

[[ $# -ge 2 ]] || usage
case $1 in
start) shift; start "$@" ;;
stop) [[ $# -eq 2 ]] || usage; stop "$2" ;;
*) usage ;;
esac
