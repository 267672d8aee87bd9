#!/usr/bin/env bash
# Runs the tests that need a tool besides Docker with those tools hidden, and
# checks that they are ignored with the tool named, not failed: the proof that
# `cargo test` passes on a machine with Docker alone (docs/testing.md,
# decision 0021). Hidden: sshd, podman, dot, openssl (PATH is rebuilt without
# them), the MCP SDK's venv (another folder, and a package index that refuses
# connections) and Docker 26.1 (another folder, and no apt-get to fetch it).
# Cheap: only the tests named by FILTERs run (default: the areas that use
# these tools); with ALL as the only argument, the whole suite runs.
#
#   scripts/test-without-tools.sh [FILTER...|ALL]
set -euo pipefail
cd "$(dirname "$0")/.."
unset SANDBOXCTL_TEST_REQUIRE_TOOLS
hidden=(sshd podman dot openssl apt-get)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/bin"
IFS=: read -r -a dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
    [ -d "$dir" ] || continue
    for program in "$dir"/*; do
        name=${program##*/}
        [ -x "$program" ] && [ ! -d "$program" ] || continue
        [ -e "$scratch/bin/$name" ] && continue
        case " ${hidden[*]} " in *" $name "*) continue ;; esac
        ln -s "$program" "$scratch/bin/$name"
    done
done
if [ "${1:-}" = ALL ]; then
    args=(--no-fail-fast)
else
    filters=("$@")
    [ "${#filters[@]}" -gt 0 ] || filters=(ssh podman graph:: mcp:: tls current_docker docker_26)
    args=(--test sandboxctl -- "${filters[@]}")
fi
out="$scratch/out"
set +e
PATH="$scratch/bin" \
    SANDBOXCTL_MCP_VENV="$scratch/mcp-venv" PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_RETRIES=0 \
    SANDBOXCTL_CURRENT_DOCKER="$scratch/docker-26" \
    cargo test "${args[@]}" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
set -e
problems=()
[ "$status" -eq 0 ] || problems+=("cargo test exited $status")
for reason in "needs sshd" "needs Podman (podman)" "needs Graphviz (dot)" "needs the MCP Python SDK"; do
    grep -qF "ignored ($reason" "$out" || problems+=("no test was ignored with \"$reason\"")
done
if [ "${#problems[@]}" -gt 0 ]; then
    printf 'without tools: %s\n' "${problems[@]}" >&2
    exit 1
fi
echo "without tools: $(grep -c '\.\.\. ignored (needs ' "$out") tests ignored naming their tool, none failed"
