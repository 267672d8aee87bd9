#!/usr/bin/env bash
# soak-watch.sh [MINUTES]: the `watch` soak test against the real engine.
#
# Runs the ignored test `soak_watch_reaps_only_abandoned_boxes` in
# tests/watch.rs (DOCKER_HOST, else the local socket): for MINUTES (default
# 10) it makes a box every second, one in ten declared by an edit of the state
# file made just before, the rest abandoned, under one `sandboxctl watch` with
# a 20 s grace. It fails if anything undeclared older than grace + 15 s is
# left, if a declared object is gone, if any audit-log line is not the
# removal of an undeclared object past its grace, if a cycle failed, or if the
# watch process's RSS grew by 10 MiB or more after its first minute. The
# `soak:` line it prints has the numbers (objects made and reaped, cycles,
# RSS over time).
#
# Everything it creates carries its own scope label and is removed at the
# end, also on failure; images are never removed.
#
# Environment: CARGO_TARGET_DIR as usual; SOAK_MINUTES is set from MINUTES.
set -euo pipefail

minutes="${1:-10}"
case "$minutes" in
    '' | *[!0-9]* | 0) echo "usage: $0 [MINUTES]  (a whole number of minutes, at least 1)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
SOAK_MINUTES="$minutes" exec cargo test --test sandboxctl -- \
    --ignored --exact watch::soak_watch_reaps_only_abandoned_boxes --nocapture
