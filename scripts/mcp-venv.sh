#!/usr/bin/env bash
# Makes the virtual environment the MCP tests run their client in: the
# official MCP Python SDK (PyPI `mcp`) and what it needs, at the versions
# pinned in tests/mcp/requirements.txt, in DIR (default target/mcp-venv).
# Does nothing when DIR already holds exactly those versions (its stamp,
# written last, is a copy of the requirements). .ci/run calls it; so does
# the test harness when the environment is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/mcp-venv}
requirements=tests/mcp/requirements.txt
python=${PYTHON:-python3}
stamp="$dir/.requirements"
if [ -x "$dir/bin/python" ] && [ -f "$stamp" ] && cmp -s "$stamp" "$requirements"; then
    exit 0
fi
started=$SECONDS
rm -rf "$dir"
trap 'rm -rf "$dir"' ERR
"$python" -m venv "$dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$requirements"
"$dir/bin/python" -c 'import mcp, mcp.client.stdio' >/dev/null
cp "$requirements" "$stamp"
echo "mcp-venv: $dir ready in $((SECONDS - started)) s (mcp $("$dir/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))'))"
