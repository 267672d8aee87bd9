#!/usr/bin/env bash
# bench-leases.sh [N]: what leases cost, against the real Docker engine.
#
# Prints a markdown table (progress on stderr):
#   1. `sandboxctl lease BOX` (take or renew: create the next lease volume,
#      list the box's volumes, remove the older lease: three engine calls;
#      `hold` renews in two, see the unit test
#      `a_renewal_is_at_most_two_engine_calls`): wall time per call, median
#      of 20, process start included.
#   2. `GET /info` (how sandboxctl reads the engine's clock): median of 50.
#   3. `sandboxctl plan --grace 24h` over N boxes (a container and a volume
#      each), with no lease and with a live lease per box (N more volumes,
#      and one /info): wall time, median of 5. The grace keeps every box in
#      both cases, so neither plan inspects containers: the difference is
#      the leases' own cost.
#
# Isolation: every object carries ca.sandbox=1 and this run's scope label
# ca.sandbox.bench=<run id>; everything with that label is removed on exit
# (also on Ctrl-C or TERM). Nothing else is listed or removed. Containers are
# created, never started, from the image ca-sbx:bench-sleep (built from
# /bin/sleep if missing; never removed).
#
# Environment: SANDBOXCTL (binary) [target/release/sandboxctl, built if missing]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000}
BIN=${SANDBOXCTL:-target/release/sandboxctl}
[ -x "$BIN" ] || cargo build --release --quiet
RUN="leases-$$-$(date +%s)"
SCOPE="ca.sandbox.bench=$RUN"
IMAGE=ca-sbx:bench-sleep
DIR=$(mktemp -d)
say() { printf '%s\n' "$*" >&2; }

purge() {
    docker ps -aq --filter label=ca.sandbox=1 --filter "label=$SCOPE" | xargs -r docker rm -f >/dev/null 2>&1 || true
    docker volume ls -q --filter label=ca.sandbox=1 --filter "label=$SCOPE" | xargs -r docker volume rm -f >/dev/null 2>&1 || true
    rm -rf "$DIR"
}
trap purge EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
    say "building $IMAGE from /bin/sleep"
    mkdir -p "$DIR/img"
    cp --parents /bin/sleep $(ldd /bin/sleep | grep -o '/[^ ]*') "$DIR/img/"
    tar -C "$DIR/img" -c . | docker import -c 'CMD ["/bin/sleep","600"]' - "$IMAGE" >/dev/null
fi
printf '[scope]\nlabels = { "ca.sandbox.bench" = "%s" }\n' "$RUN" >"$DIR/state.toml"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms() { echo $(($(date +%s%N) / 1000000)); }

# 1. lease renewals.
say "timing 20 renewals of one box's lease"
for _ in $(seq 1 20); do
    t0=$(ms)
    "$BIN" --state "$DIR/state.toml" lease renew-me --ttl 10m >/dev/null
    echo $(($(ms) - t0))
done >"$DIR/lease.txt"
lease_ms=$(median <"$DIR/lease.txt")

# 2. /info.
say "timing 50 GET /info"
for _ in $(seq 1 50); do
    curl -s -o /dev/null -w '%{time_total}\n' --unix-socket /var/run/docker.sock http://x/info
done | awk '{printf "%.1f\n", $1*1000}' >"$DIR/info.txt"
info_ms=$(median <"$DIR/info.txt")

# 3. plan over N boxes, without and with a lease per box.
say "creating $N boxes (a created container and a volume each)"
seq 1 "$N" | xargs -P 8 -I{} sh -c '
    docker volume create --label ca.sandbox=1 --label "$1" --label ca.sandbox.id=b{} "$2-b{}" >/dev/null &&
    docker create --label ca.sandbox=1 --label "$1" --label ca.sandbox.id=b{} -v "$2-b{}:/data" --network none "$3" >/dev/null
' _ "$SCOPE" "$RUN" "$IMAGE"
plan_times() {
    for _ in 1 2 3 4 5; do
        t0=$(ms)
        "$BIN" --state "$DIR/state.toml" --format json --grace 24h plan >"$DIR/plan.json"
        echo $(($(ms) - t0))
    done | median
}
say "timing plan without leases"
plain_ms=$(plan_times)
say "creating $N leases (one per box, ttl 1h)"
seq 1 "$N" | xargs -P 8 -I{} sh -c '
    docker volume create --label ca.sandbox=1 --label "$1" --label ca.sandbox.id=b{} --label ca.sandbox.lease.ttl=1h "ca-sbx-lease-b{}-$2" >/dev/null
' _ "$SCOPE" "$RUN"
say "timing plan with a lease per box"
leased_ms=$(plan_times)
kept=$(grep -c '"code": "leased"' "$DIR/plan.json" || true)

cat <<EOF
| what | median |
|---|---|
| \`sandboxctl lease BOX\` (renew; process start included), 20 runs | ${lease_ms} ms |
| \`GET /info\` (the engine's clock), 50 calls | ${info_ms} ms |
| \`sandboxctl plan --grace 24h\`, $N boxes, no lease (all kept by grace) | ${plain_ms} ms |
| \`sandboxctl plan --grace 24h\`, $N boxes, a live lease each ($kept objects kept as leased) | ${leased_ms} ms |
EOF
