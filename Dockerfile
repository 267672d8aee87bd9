# sandboxctl as a container beside the engine it reaps: `watch` as PID 1.
#
# Built by scripts/image.sh [TAG] (default sandboxctl:local), never by a plain
# `docker build .`: the script stages a small context (target/image.*/) with
# this file, the release binary (stripped) and the shared libraries it links,
# as ldd lists them (libc, libm, libgcc_s, the loader), in rootfs.tar. No
# registry is needed: `FROM scratch` pulls nothing. No shell, no curl: the
# health check is `sandboxctl health`. See docs/operations.md#container-image.
FROM scratch
# One layer, owners and modes as the tar says: everything root's but
# /var/lib/sandboxctl, the one writable folder (a volume or a bind mount
# over it: the audit log, the archive folder, and the state folder with the
# memo of inspections and the plan key), 0700 and the image user's, so a
# new named volume mounted there is too.
ADD rootfs.tar /
# Not root; the socket's group is given at run time (--group-add).
USER 10001:10001
# Read by `watch --metrics` and by `health`: the check asks where watch serves.
ENV SANDBOXCTL_METRICS=127.0.0.1:9464 \
    SANDBOXCTL_STATE=/etc/sandboxctl/sandboxes.toml \
    XDG_STATE_HOME=/var/lib/sandboxctl/state \
    HOME=/var/lib/sandboxctl
# 0 healthy (200: converged, or degraded and still reaping), 1 unhealthy.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/sandboxctl", "health"]
# watch ends on SIGTERM after its cycle in flight, exit 0 if it converged.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/sandboxctl"]
CMD ["watch", "--grace", "10m", "--audit", "/var/lib/sandboxctl/audit.jsonl"]
