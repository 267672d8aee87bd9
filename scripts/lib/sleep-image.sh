# Sourced by the bench scripts; defines one function.
#
# import_sleep_image IMAGE WORK: imports IMAGE (a ca-sbx:* tag, so that
# sandboxctl may make archive helpers from it) into the engine the docker CLI
# reaches as the caller's environment has it (DOCKER_HOST, else the local
# socket): /bin/sleep (as /bin/sleep) and the libraries `ldd` lists, from a
# tar, with `CMD ["/bin/sleep", "infinity"]`. Nothing is pulled. WORK: a
# scratch folder (its rootfs/ is made and removed). Call it only where a
# failure stops the script (not under `if` or `||`, where `set -e` is off).
import_sleep_image() {
    local image=$1 rootfs=$2/rootfs sleep_bin lib
    sleep_bin=$(readlink -f /bin/sleep)
    mkdir -p "$rootfs/bin"
    cp "$sleep_bin" "$rootfs/bin/sleep"
    while read -r lib; do
        mkdir -p "$rootfs$(dirname "$lib")"
        cp -L "$lib" "$rootfs$lib"
    done < <(ldd "$sleep_bin" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }')
    tar -C "$rootfs" -cf - . |
        docker import --change 'CMD ["/bin/sleep", "infinity"]' - "$image" >/dev/null
    rm -rf "$rootfs"
}
