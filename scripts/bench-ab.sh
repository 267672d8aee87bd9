#!/usr/bin/env bash
# bench-ab.sh A B [ARGS...]: times two sandboxctl binaries, A and B, running
# the same read-only command (`ARGS`, default `plan`), interleaved: A, B, B, A,
# A, B, ... so that a machine whose load drifts slows both alike. Prints the
# median, minimum and maximum wall milliseconds of each and the ratio B / A of
# the medians.
#
# Read-only commands only (plan, inventory, graph, explain, validate): the
# same state must hold for every run. Each run's exit status must be the same
# for A and B, else the script stops.
#
# Environment:
#   BENCH_ROUNDS  runs of each binary [21]
#   BENCH_WARMUP  untimed runs of each first [2]
set -euo pipefail
export LC_ALL=C

[[ $# -ge 2 && -x $1 && -x $2 ]] || {
    echo "usage: $0 A B [ARGS...]   (A and B: sandboxctl binaries)" >&2
    exit 2
}
A=$1 B=$2
shift 2
ARGS=("$@")
((${#ARGS[@]})) || ARGS=(plan)
ROUNDS=${BENCH_ROUNDS:-21}
WARMUP=${BENCH_WARMUP:-2}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-ab.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

one() { # $1 = binary, $2 = file to append ms to; prints the exit status
    local t0 t1 rc=0
    t0=$EPOCHREALTIME
    "$1" "${ARGS[@]}" >/dev/null 2>&1 || rc=$?
    t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", 1000 * (b - a) }' >>"$2"
    echo "$rc"
}

for _ in $(seq 1 "$WARMUP"); do
    one "$A" "$WORK/warm" >/dev/null
    one "$B" "$WORK/warm" >/dev/null
done
load0=$(cut -d' ' -f1 /proc/loadavg)
for i in $(seq 1 "$ROUNDS"); do
    if ((i % 2)); then order=("$A:a" "$B:b"); else order=("$B:b" "$A:a"); fi
    for entry in "${order[@]}"; do
        rc=$(one "${entry%:*}" "$WORK/${entry##*:}")
        echo "$rc" >>"$WORK/rc.${entry##*:}"
    done
done
load1=$(cut -d' ' -f1 /proc/loadavg)
if ! cmp -s <(sort -u "$WORK/rc.a") <(sort -u "$WORK/rc.b"); then
    echo "A and B exited differently: A $(sort -u "$WORK/rc.a" | paste -sd,), B $(sort -u "$WORK/rc.b" | paste -sd,)" >&2
    exit 1
fi

stats() { sort -g "$1" | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f %.1f %.1f\n", m, v[1], v[NR] }'; }
read -r ma mina maxa < <(stats "$WORK/a")
read -r mb minb maxb < <(stats "$WORK/b")
echo "sandboxctl ${ARGS[*]}: $ROUNDS interleaved runs each, load $load0 -> $load1, exit $(sort -u "$WORK/rc.a" | paste -sd,)"
echo
echo "| binary | median ms | min ms | max ms |"
echo "|---|---:|---:|---:|"
echo "| A $A | $ma | $mina | $maxa |"
echo "| B $B | $mb | $minb | $maxb |"
echo
awk -v a="$ma" -v b="$mb" 'BEGIN { printf "B / A (medians): %.3f\n", b / a }'
