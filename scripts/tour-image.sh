#!/usr/bin/env bash
# Makes the image the README's tour runs, with no registry: /bin/sleep (as
# /sleep) and the shared libraries `ldd` lists for it, at their paths, in a
# tar that `docker import` turns into an image with `CMD ["/sleep",
# "infinity"]`: the test image tests/support/docker.rs imports, by the same
# recipe.
#
#   scripts/tour-image.sh [TAG]     default TAG: ca-sbx:sandboxctl-test-sleep
#
# Environment: DOCKER_HOST (and the rest) as the docker CLI reads it. When
# the engine has TAG already, says so and leaves it (a second import would
# leave the first one untagged). Prints the tag and the image's ID. Removes
# nothing but its own scratch folder. sandboxctl never removes an image: a
# ca-sbx:* tag is listed as retained.
set -euo pipefail

tag=${1:-ca-sbx:sandboxctl-test-sleep}
if id=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null); then
    echo "$tag is there already: $id"
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sleep_bin=$(readlink -f /bin/sleep)
cp "$sleep_bin" "$work/sleep"
while read -r lib; do
    mkdir -p "$work$(dirname "$lib")"
    cp -L "$lib" "$work$lib"
done < <(ldd "$sleep_bin" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }')
tar -C "$work" -cf - . | docker import --change 'CMD ["/sleep", "infinity"]' - "$tag" >/dev/null
echo "$tag: $(docker image inspect --format '{{.Id}}' "$tag")"
