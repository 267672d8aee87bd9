#!/usr/bin/env bash
# bench-mcp.sh: a destroy through a warm MCP session against `sandboxctl
# destroy ID` as a process, and the server's memory over 1,000 calls.
#
# usage: scripts/bench-mcp.sh [ROUNDS] [CALLS]   (default 21 and 1000; needs
#        root, dockerd and python3)
#
# Starts a PRIVATE dockerd (scripts/second-dockerd.sh: its own socket,
# bridge, data-root and cgroups; the main engine is only read, for its
# storage driver), imports the sleep image there (scripts/lib/sleep-image.sh),
# runs scripts/bench-mcp.py against it with the release binary
# ($SANDBOXCTL, default target/release/sandboxctl, built when missing), then
# stops that dockerd and removes its folder.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/sleep-image.sh
source "$ROOT/scripts/lib/sleep-image.sh"
ROUNDS=${1:-21}
CALLS=${2:-1000}
BIN=${SANDBOXCTL:-$ROOT/target/release/sandboxctl}
IMAGE=ca-sbx:bench-sleep
DIR=$(mktemp -u "${TMPDIR:-/tmp}/bench-mcp-d2.XXXXXX")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-mcp.XXXXXX")
cleanup() {
    local rc=$?
    bash "$ROOT/scripts/second-dockerd.sh" stop "$DIR" >/dev/null 2>&1 || rc=1
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
if [[ ! -x $BIN ]]; then
    (cd "$ROOT" && cargo build --release --locked --quiet)
fi
docker image inspect "$IMAGE" >/dev/null 2>&1 || import_sleep_image "$IMAGE" "$WORK"
HOST=$(bash "$ROOT/scripts/second-dockerd.sh" start "$DIR" "$IMAGE")
echo "engine: private dockerd at $HOST; binary: $BIN ($(stat -c %s "$BIN") bytes); load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$ROOT/scripts/bench-mcp.py" --host "$HOST" --bin "$BIN" --rounds "$ROUNDS" --calls "$CALLS" --image "$IMAGE"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
