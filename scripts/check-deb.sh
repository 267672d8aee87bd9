#!/usr/bin/env bash
# check-deb.sh [DEB]: checks the Debian package that scripts/deb.sh built
# (default: the newest target/debian/sandboxctl_*.deb) without installing it
# on the machine: it is unpacked into a throwaway root (`dpkg -x`) and run
# from there.
#
# Checks: the file list (`dpkg -c`) holds the binary, the man page, the bash,
# zsh and fish completions, the systemd unit, the state file and the
# copyright; the copyright file carries the license Cargo.toml names and
# every line of LICENSE; the state file is a conffile; Depends was computed (libc6);
# the binary is at most 20 MB and `ROOT/usr/bin/sandboxctl --version` prints
# the package's version; `man -l` renders the page; the bash completion
# loads; the unit runs the packaged binary on the packaged state file and
# passes `systemd-analyze verify`; `sandboxctl validate` accepts
# the packaged state file.
#
# Prints one line per check and exits 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

deb=${1:-$(ls -t target/debian/sandboxctl_*.deb 2>/dev/null | head -n 1)}
[[ -n $deb && -f $deb ]] || {
    echo "no package: run scripts/deb.sh first (or give the .deb)" >&2
    exit 1
}
MAX_BYTES=20000000
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/check-deb.XXXXXX")
trap 'rm -rf "$ROOT"' EXIT

failed=0 passed=0
check() { # check NAME CMD...: runs CMD quietly, says ok or FAILED with its output
    local name=$1 out
    shift
    if out=$("$@" 2>&1); then
        printf 'ok      %s\n' "$name"
        passed=$((passed + 1))
    else
        printf 'FAILED  %s\n' "$name"
        printf '%s\n' "$out" | sed 's/^/        /' | head -n 20
        failed=$((failed + 1))
    fi
}

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
echo "checking $deb (sandboxctl $version)"
dpkg-deb -c "$deb" | awk '{ print $NF }' | sed 's|^\./|/|' >"$ROOT.list"
trap 'rm -rf "$ROOT" "$ROOT.list" "$ROOT.unit"' EXIT
has() { grep -qx "$1" "$ROOT.list" || { echo "$1 is not in the package; it holds:"; cat "$ROOT.list"; return 1; }; }
for path in /usr/bin/sandboxctl \
    /usr/share/man/man1/sandboxctl.1.gz \
    /usr/share/bash-completion/completions/sandboxctl \
    /usr/share/zsh/vendor-completions/_sandboxctl \
    /usr/share/fish/vendor_completions.d/sandboxctl.fish \
    /lib/systemd/system/sandboxctl-watch.service \
    /etc/sandboxctl/sandboxes.toml \
    /usr/share/doc/sandboxctl/copyright; do
    check "holds $path" has "$path"
done
check "the state file is a conffile" \
    sh -c "dpkg-deb --ctrl-tarfile '$deb' | tar -xOf - ./conffiles | grep -qx /etc/sandboxctl/sandboxes.toml"
check "Depends computed (libc6)" sh -c "dpkg-deb -f '$deb' Depends | grep -q libc6"
check "Version is $version" sh -c "dpkg-deb -f '$deb' Version | grep -q '^$version'"

dpkg -x "$deb" "$ROOT"
bin=$ROOT/usr/bin/sandboxctl
size=$(stat -c %s "$bin")
check "binary is at most $MAX_BYTES bytes ($size)" test "$size" -le "$MAX_BYTES"
check "sandboxctl --version says $version" sh -c "'$bin' --version | grep -qx 'sandboxctl $version'"
man_ok() {
    local text
    text=$(MANPAGER=cat MANWIDTH=100 man -l "$ROOT/usr/share/man/man1/sandboxctl.1.gz") || return 1
    grep -q '^EXIT STATUS' <<<"$text" && grep -q 'sandboxctl watch' <<<"$text" ||
        { echo "the rendered page lacks EXIT STATUS or sandboxctl watch:"; head -n 20 <<<"$text"; return 1; }
}
check "man -l renders the page" man_ok
check "the bash completion loads" \
    bash -c "source '$ROOT/usr/share/bash-completion/completions/sandboxctl' && complete -p sandboxctl"
check "zsh and fish completions name sandboxctl" sh -c \
    "head -n 1 '$ROOT/usr/share/zsh/vendor-completions/_sandboxctl' | grep -qx '#compdef sandboxctl' &&
     grep -q '^complete -c sandboxctl' '$ROOT/usr/share/fish/vendor_completions.d/sandboxctl.fish'"
unit=$ROOT/lib/systemd/system/sandboxctl-watch.service
check "the unit runs /usr/bin/sandboxctl --state /etc/sandboxctl/sandboxes.toml" sh -c \
    "grep -q '^ExecStart=/usr/bin/sandboxctl ' '$unit' && grep -q -- '--state /etc/sandboxctl/sandboxes.toml' '$unit'"
# systemd-analyze verify checks the unit's syntax and that ExecStart is an
# executable; the throwaway root is not a system it can boot, so the unit is
# verified on this machine's systemd with ExecStart pointed into the root.
verify_unit() {
    mkdir -p "$ROOT.unit"
    sed "s|^ExecStart=/usr/bin/sandboxctl |ExecStart=$bin |" "$unit" >"$ROOT.unit/sandboxctl-watch.service"
    systemd-analyze verify --man=no "$ROOT.unit/sandboxctl-watch.service"
}
if command -v systemd-analyze >/dev/null; then
    check "systemd-analyze verify of the unit" verify_unit
else
    echo "skipped systemd-analyze verify (no systemd-analyze on this machine)"
fi
license_ok() {
    local copyright=$ROOT/usr/share/doc/sandboxctl/copyright license line
    license=$(sed -n 's/^license = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
    grep -qx "License: $license" "$copyright" ||
        { echo "no 'License: $license' line in the copyright file:"; head -n 20 "$copyright"; return 1; }
    while IFS= read -r line; do
        [ -z "$line" ] && continue
        grep -qF -- "$line" "$copyright" || { echo "LICENSE's line is not in the copyright file: $line"; return 1; }
    done <LICENSE
}
check "the copyright file carries the license text (LICENSE)" license_ok
check "sandboxctl validate accepts the packaged state file" \
    "$bin" validate "$ROOT/etc/sandboxctl/sandboxes.toml"

if ((failed)); then
    echo "deb: $failed of $((passed + failed)) checks failed"
    exit 1
fi
echo "deb: all $passed checks passed"
