#!/usr/bin/env bash
# Archive one volume of SIZE (default 1G) of random bytes with
# `sandboxctl apply --archive` and measure its peak RSS and wall time, against
# `docker cp CONTAINER:/path - | zstd -3 > file` on the same volume.
# Needs: a Docker engine, docker, zstd, GNU time, a ca-sbx:* image, and
# target/release/sandboxctl (cargo build --release).
# Usage: scripts/bench-archive.sh [SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1G}
bin=${SANDBOXCTL:-target/release/sandboxctl}
image=$(docker image ls 'ca-sbx:*' --format '{{.Repository}}:{{.Tag}}' | head -n1)
[ -n "$image" ] || { echo "no ca-sbx:* image: run the test suite once (it builds one)" >&2; exit 1; }
scope="bench-archive-$$"
work=$(mktemp -d)
vol="bench-archive-vol-$$"
holder=""
cleanup() {
    [ -n "$holder" ] && docker rm -f "$holder" >/dev/null 2>&1 || true
    docker volume rm "$vol" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

docker volume create --label ca.sandbox=1 --label ca.sandbox.id=bench \
    --label "ca.sandbox.test=$scope" "$vol" >/dev/null
mkdir -p "$work/data"
head -c "$size" /dev/urandom >"$work/data/big.bin"
holder=$(docker create --network none -v "$vol:/v" "$image" /sleep 0)
tar -C "$work/data" -cf - . | docker cp - "$holder:/v"
rm -rf "$work/data"
sync

start=$(date +%s.%N)
docker cp "$holder:/v" - | zstd -3 -q >"$work/baseline.tar.zst"
end=$(date +%s.%N)
baseline=$(echo "$end - $start" | bc)
baseline_bytes=$(stat -c %s "$work/baseline.tar.zst")
rm -f "$work/baseline.tar.zst"
docker rm -f "$holder" >/dev/null
holder=""

printf '' >"$work/state.toml"
/usr/bin/time -v -o "$work/time.txt" "$bin" --state "$work/state.toml" \
    --scope "ca.sandbox.test=$scope" apply --archive "$work/archive" --format json >"$work/report.json"
rss_kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
archive=$(find "$work/archive" -name '*.tar.zst')
echo "volume: $size of random bytes"
echo "docker cp | zstd -3: ${baseline}s, $baseline_bytes bytes"
echo "sandboxctl apply --archive: $wall (whole run: list, plan, archive, remove, verify), peak RSS $((rss_kib / 1024)) MiB, $(stat -c %s "$archive") bytes"
