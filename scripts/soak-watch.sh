#!/usr/bin/env bash
# soak-watch.sh [MINUTES [SEED]]: the `watch` soak test against the real engine.
#
# Runs the ignored test `soak_watch_reaps_only_abandoned_boxes` in
# tests/watch.rs (DOCKER_HOST, else the local socket): for MINUTES (default
# 10) it makes a box every second, one in ten declared by an edit of the state
# file made just before, the rest abandoned, under one `sandboxctl watch` with
# a 20 s grace. Alongside, every 10 s a driver makes a box and holds it with
# `sandboxctl hold BOX --ttl 6-12s -- sleep 25-90` (ttl and lifetime random,
# from SEED, default 1): every other one runs to its end (hold releases), the
# others are SIGKILLed at a random moment past the grace (no release), and
# those still running at the end are checked, then stopped with SIGTERM.
#
# It fails if anything undeclared older than grace + 15 s is left, if a
# declared object is gone, if any audit-log line is not the removal of an
# undeclared object past its grace or of a held box's object after its driver
# ended (a killed one's: after its last lease's end), if a killed driver's box
# is not gone within debounce + 3 s of its last lease's end or a released
# one's within debounce + 3 s of its release, if a cycle failed, or if the
# watch process's RSS grew by 10 MiB or more after its first minute. The
# `soak drivers:` and `soak:` lines it prints have the numbers (objects made
# and reaped, drivers by end and reaping latencies, renewals, cycles, RSS
# over time).
#
# Everything it creates carries its own scope label and is removed at the
# end, also on failure (every hold and its command are killed by pid first);
# images are never removed.
#
# Environment: CARGO_TARGET_DIR as usual; SOAK_MINUTES and SOAK_SEED are set
# from MINUTES and SEED.
set -euo pipefail

minutes="${1:-10}"
seed="${2:-1}"
case "$minutes" in
    '' | *[!0-9]* | 0) echo "usage: $0 [MINUTES [SEED]]  (MINUTES a whole number, at least 1)" >&2; exit 2 ;;
esac
case "$seed" in
    '' | *[!0-9]*) echo "usage: $0 [MINUTES [SEED]]  (SEED a whole number)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
SOAK_MINUTES="$minutes" SOAK_SEED="$seed" exec cargo test --test sandboxctl -- \
    --ignored --exact watch::soak_watch_reaps_only_abandoned_boxes --nocapture
