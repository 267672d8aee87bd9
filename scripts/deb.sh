#!/usr/bin/env bash
# deb.sh: builds the Debian package target/debian/sandboxctl_<version>-1_<arch>.deb
# with cargo-deb ([package.metadata.deb] in Cargo.toml says what goes where).
#
# 1. cargo-deb, pinned: installed (`cargo install --locked`) into
#    $CARGO_HOME/bin when `cargo deb --version` is not that version.
# 2. The release binary: `cargo build --release --locked` (nothing to do when
#    it is built already, as in CI).
# 3. What the package holds beside the binary, generated from that binary into
#    target/deb-assets/: the man page (gzipped), the bash, zsh and fish
#    completions, and the systemd unit of examples/systemd with ExecStart
#    pointing at the packaged /usr/bin/sandboxctl.
# 4. `cargo deb --no-build`: packs exactly that binary (not stripped further:
#    its symbol table names the functions of a backtrace, decision 0015).
#
# Prints the path of the package on its last line, and each step's duration.
# scripts/check-deb.sh checks the package.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

CARGO_DEB_VERSION=3.8.0
ASSETS=target/deb-assets

log() { printf '== %s\n' "$*" >&2; }

started=$SECONDS
if ! cargo deb --version 2>/dev/null | grep -qx "cargo-deb $CARGO_DEB_VERSION"; then
    log "installing cargo-deb $CARGO_DEB_VERSION"
    cargo install --quiet --locked cargo-deb --version "$CARGO_DEB_VERSION"
    log "cargo-deb installed in $((SECONDS - started)) s"
fi
cargo deb --version | grep -qx "cargo-deb $CARGO_DEB_VERSION" || {
    echo "cargo deb --version says $(cargo deb --version 2>&1), not $CARGO_DEB_VERSION" >&2
    exit 1
}

started=$SECONDS
cargo build --release --locked >&2
log "release binary ready in $((SECONDS - started)) s"
bin=target/release/sandboxctl

started=$SECONDS
rm -rf "$ASSETS"
mkdir -p "$ASSETS"
"$bin" man | gzip -9n >"$ASSETS/sandboxctl.1.gz"
"$bin" completions bash >"$ASSETS/sandboxctl.bash"
"$bin" completions zsh >"$ASSETS/_sandboxctl"
"$bin" completions fish >"$ASSETS/sandboxctl.fish"
# The example unit runs a binary installed by hand (/usr/local/bin); the
# package's is /usr/bin.
sed 's|^ExecStart=/usr/local/bin/sandboxctl |ExecStart=/usr/bin/sandboxctl |' \
    examples/systemd/sandboxctl-watch.service >"$ASSETS/sandboxctl-watch.service"
grep -q '^ExecStart=/usr/bin/sandboxctl ' "$ASSETS/sandboxctl-watch.service" || {
    echo "examples/systemd/sandboxctl-watch.service: no 'ExecStart=/usr/local/bin/sandboxctl ' line to point at /usr/bin" >&2
    exit 1
}
log "man page, completions and unit generated in $((SECONDS - started)) s"

started=$SECONDS
deb=$(cargo deb --no-build --no-strip --locked --quiet | tail -n 1)
log "package built in $((SECONDS - started)) s: $deb ($(stat -c %s "$deb") bytes)"
echo "$deb"
