#!/usr/bin/env bash
# Builds the sandboxctl container image with no registry: the release binary
# (built with `cargo build --release --locked` when missing or stale, a no-op
# when fresh), a stripped copy of it and the shared libraries it links, as
# ldd lists them, staged in a context of its own under target/ with the
# repository's Dockerfile (FROM scratch), then `docker build`.
#
#   scripts/image.sh [TAG]         default TAG: sandboxctl:local
#
# Environment: SANDBOXCTL_BIN=PATH takes that binary instead of building one
# (a release build of this checkout); CARGO_TARGET_DIR as cargo reads it;
# DOCKER_HOST as the docker CLI reads it. Prints the tag, its size, its user
# and its health check. Removes nothing but its own staged context.
set -euo pipefail

tag=${1:-sandboxctl:local}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
case $target in /*) ;; *) target=$repo/$target ;; esac

if [[ -n ${SANDBOXCTL_BIN:-} ]]; then
    bin=$SANDBOXCTL_BIN
else
    # Called from a cargo test or run, cargo's own variables for the package
    # (CARGO_MANIFEST_DIR, CARGO_PKG_*, ...) would reach build scripts that
    # watch them (ring's does) and make a fresh release build stale: unset.
    unset_vars=()
    while read -r var; do
        case $var in
        CARGO_MANIFEST_* | CARGO_PKG_* | CARGO_BIN_* | CARGO_CRATE_* | CARGO_PRIMARY_PACKAGE | CARGO_TARGET_TMPDIR | LD_LIBRARY_PATH)
            unset_vars+=(-u "$var") ;;
        esac
    done < <(compgen -e)
    (cd "$repo" && env "${unset_vars[@]}" "${CARGO:-cargo}" build --release --locked --bin sandboxctl)
    bin=$target/release/sandboxctl
fi
[[ -x $bin ]] || { echo "image.sh: no executable at $bin" >&2; exit 1; }

mkdir -p "$target"
# A context of its own: two builds at once (tests) never share one.
context=$(mktemp -d "$target/image.XXXXXX")
trap 'rm -rf "$context"' EXIT
rootfs=$context/rootfs
mkdir -p "$rootfs/usr/local/bin" "$rootfs/var/lib/sandboxctl"
chmod 0755 "$rootfs" "$rootfs/usr" "$rootfs/usr/local" "$rootfs/usr/local/bin" "$rootfs/var" "$rootfs/var/lib"
chmod 0700 "$rootfs/var/lib/sandboxctl"
strip --strip-all -o "$rootfs/usr/local/bin/sandboxctl" "$bin"
# Every library at the path ldd names (the loader too), its content copied
# through any symbolic link.
libs=$(ldd "$bin" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | sort -u)
[[ -n $libs ]] || { echo "image.sh: ldd lists no library of $bin (a static build needs none: remove this check)" >&2; exit 1; }
while read -r lib; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
done <<<"$libs"
# Root's, but the writable folder: the image's user's (USER in the Dockerfile).
tar -C "$rootfs" --numeric-owner --owner=0 --group=0 --exclude=./var/lib/sandboxctl \
    -cf "$context/rootfs.tar" .
tar -C "$rootfs" --numeric-owner --owner=10001 --group=10001 --no-recursion \
    -rf "$context/rootfs.tar" ./var/lib/sandboxctl
rm -rf "$rootfs"
cp "$repo/Dockerfile" "$context/Dockerfile"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)
docker build --quiet --tag "$tag" \
    --label org.opencontainers.image.title=sandboxctl \
    --label "org.opencontainers.image.version=$version" \
    "$context" >/dev/null

docker image inspect --format \
    "$tag {{.Id}} {{.Size}} bytes, user {{.Config.User}}, entrypoint {{json .Config.Entrypoint}}, health check {{json .Config.Healthcheck.Test}}" \
    "$tag"
