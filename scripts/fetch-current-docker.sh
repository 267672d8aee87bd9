#!/usr/bin/env bash
# Fetches a current Docker Engine (Debian trixie's docker.io and containerd)
# for the tests' second, newer engine: downloaded with a private apt
# configuration and unpacked with `dpkg -x`, never installed. The main engine
# and the machine's apt state are left alone.
#
#   scripts/fetch-current-docker.sh [DEST]   (default /var/cache/sandboxctl-test/docker-26)
#
# Idempotent: when DEST/root/.complete exists and DEST/root/usr/sbin/dockerd
# runs, it only prints the version. Prints DEST/root/usr/sbin/dockerd's
# version last. trixie's runc needs glibc 2.38, so it is not fetched: run the
# engine with the machine's own /usr/sbin/runc (bookworm's) on PATH after
# DEST/root/usr/bin.
set -euo pipefail

dest=${1:-/var/cache/sandboxctl-test/docker-26}
root=$dest/root
started=$(date +%s)

if [ -e "$root/.complete" ] && "$root/usr/sbin/dockerd" --version >/dev/null 2>&1; then
    "$root/usr/sbin/dockerd" --version
    exit 0
fi

# The Debian mirror the machine's own apt sources use (deb822 or one-line form).
mirror=$(
    {
        cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '$1 == "URIs:" {print $2}'
        cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
            awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}'
    } | awk '/\/debian\/?$/ && !found {print; found = 1}' || true
)
mirror=${mirror:-http://deb.debian.org/debian}

apt_dir=$dest/apt
rm -rf "$apt_dir" "$dest/debs" "$root"
mkdir -p "$apt_dir/etc/apt/sources.list.d" "$apt_dir/etc/apt/trusted.gpg.d" \
    "$apt_dir/etc/apt/preferences.d" "$apt_dir/var/lib/apt/lists/partial" \
    "$apt_dir/var/cache/apt/archives/partial" "$dest/debs" "$root"
printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s trixie main\n' "$mirror" \
    >"$apt_dir/etc/apt/sources.list"
cp /usr/share/keyrings/debian-archive-trixie-*.gpg "$apt_dir/etc/apt/trusted.gpg.d/"

apt_opts=(
    -o "Dir::Etc=$apt_dir/etc/apt"
    -o "Dir::Etc::sourcelist=$apt_dir/etc/apt/sources.list"
    -o "Dir::Etc::sourceparts=$apt_dir/etc/apt/sources.list.d"
    -o "Dir::Etc::preferencesparts=$apt_dir/etc/apt/preferences.d"
    -o "Dir::State=$apt_dir/var/lib/apt"
    -o "Dir::Cache=$apt_dir/var/cache/apt"
    -o "Debug::NoLocking=1"
    -o "APT::Sandbox::User=root"
)
apt-get -qq "${apt_opts[@]}" update
(cd "$dest/debs" && apt-get -qq "${apt_opts[@]}" download docker.io containerd)
for deb in "$dest"/debs/*.deb; do
    dpkg -x "$deb" "$root"
done
"$root/usr/sbin/dockerd" --version
# The package lists and .debs are not needed once unpacked (about 200 MB).
rm -rf "$apt_dir" "$dest/debs"
touch "$root/.complete"
echo "fetched into $root in $(($(date +%s) - started)) s (mirror $mirror)"
