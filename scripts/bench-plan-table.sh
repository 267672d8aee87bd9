#!/usr/bin/env bash
# bench-plan-table.sh: the criterion results of `cargo bench --bench plan` as a
# markdown table (mean time per run and per managed object, with criterion's
# 95 % confidence interval), read from target/criterion/<group>/<size>/new/.
#
# Usage: cargo bench --bench plan && scripts/bench-plan-table.sh
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${CARGO_TARGET_DIR:-$ROOT/target}/criterion
GROUPS_=(inventory plan_build render_json render_human pipeline)
SIZES=(1000 10000 100000)
command -v jq >/dev/null || { echo "needs jq" >&2; exit 1; }

# mean and 95 % bounds, in ms, of one benchmark
estimate() {
    jq -r '.mean | [.point_estimate, .confidence_interval.lower_bound, .confidence_interval.upper_bound]
           | map(. / 1e6) | @tsv' "$DIR/$1/$2/new/estimates.json"
}

# the number of elements (managed objects) criterion was told about
elements() {
    jq -r '.throughput.Elements // empty' "$DIR/$1/$2/new/benchmark.json"
}

header="| stage |"
rule="|---|"
for n in "${SIZES[@]}"; do
    header="$header $((n / 1000))k objects: ms (95 % CI) | ns/object |"
    rule="$rule---:|---:|"
done
echo "$header"
echo "$rule"
for g in "${GROUPS_[@]}"; do
    row="| $g |"
    for n in "${SIZES[@]}"; do
        if [[ ! -f $DIR/$g/$n/new/estimates.json ]]; then
            row="$row - | - |"
            continue
        fi
        read -r mean lo hi < <(estimate "$g" "$n")
        objects=$(elements "$g" "$n")
        row="$row $(awk -v m="$mean" -v l="$lo" -v h="$hi" 'BEGIN { printf "%.2f (%.2f-%.2f)", m, l, h }') | $(awk -v m="$mean" -v o="${objects:-$n}" 'BEGIN { printf "%.0f", m * 1e6 / o }') |"
    done
    echo "$row"
done
