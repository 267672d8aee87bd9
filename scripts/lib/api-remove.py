#!/usr/bin/env python3
"""api-remove.py SOCKET API P [STRATEGY]: removes every container whose ID is
read from stdin through the Docker socket SOCKET (API prefix API, e.g. v1.41),
at most P calls at once, one kept-alive connection per worker, and prints one
line per container as its removal ends: its latency in seconds. Containers
whose calls did not answer 2xx are named on stderr; the exit status is then 1.

STRATEGY:
  delete             DELETE /containers/ID?force=1 (what `docker rm -f` sends) [default]
  kill-first         POST /containers/ID/kill for every container first (at P),
                     then DELETE each once it has exited (at P)
  disconnect-first   POST /networks/NET/disconnect (force) for each of its
                     networks, then DELETE ?force=1, one container after another
  volumes            the IDs are volume names: DELETE /volumes/NAME
  create:LABEL:IMAGE the IDs are box ids: make each box (a volume ca-sbx-ID and
                     a running container sbx-ID of IMAGE mounting it, both
                     labeled ca.sandbox=1, ca.sandbox.id=ID and LABEL (k=v))

Used by scripts/bench-floor.sh: one process for the whole teardown, so that
the client's own cost (a process per call, as with curl or the docker CLI)
does not count as the daemon's."""

import http.client
import json
import queue
import socket
import sys
import threading
import time


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=600)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def call(conn, method, path, body=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


def run_all(sock, parallelism, items, one):
    """Runs one(conn, item) for every item, P at once; returns the failures."""
    work = queue.Queue()
    for item in items:
        work.put(item)
    failed = []
    lock = threading.Lock()

    def worker():
        conn = UnixConnection(sock)
        while True:
            try:
                item = work.get_nowait()
            except queue.Empty:
                return
            problem = one(conn, item)
            if problem:
                with lock:
                    failed.append(f"{item}: {problem}")

    threads = [threading.Thread(target=worker) for _ in range(max(1, parallelism))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failed


def main():
    sock, api, parallelism = sys.argv[1], sys.argv[2], int(sys.argv[3])
    strategy = sys.argv[4] if len(sys.argv) > 4 else "delete"
    ids = [line.strip() for line in sys.stdin if line.strip()]
    out = threading.Lock()
    started = {}

    def timed(conn, method, path, key, body=None, ok=(200, 204)):
        status, body = call(conn, method, f"/{api}{path}", body)
        if status not in ok:
            return f"{method} {path}: {status} {body[:200]!r}"
        took = time.monotonic() - started.get(key, 0)
        with out:
            print(f"{took:.4f}", flush=True)
        return None

    def delete(conn, cid):
        started[cid] = time.monotonic()
        return timed(conn, "DELETE", f"/containers/{cid}?force=1", cid)

    def kill(conn, cid):
        started[cid] = time.monotonic()
        status, body = call(conn, "POST", f"/{api}/containers/{cid}/kill")
        # 409: not running any more, which is what a kill is for.
        return None if status in (204, 409) else f"kill: {status} {body[:200]!r}"

    def delete_exited(conn, cid):
        status, body = call(conn, "POST", f"/{api}/containers/{cid}/wait?condition=not-running")
        if status != 200:
            return f"wait: {status} {body[:200]!r}"
        return timed(conn, "DELETE", f"/containers/{cid}?force=1", cid)

    def disconnect_then_delete(conn, cid):
        started[cid] = time.monotonic()
        status, body = call(conn, "GET", f"/{api}/containers/{cid}/json")
        if status != 200:
            return f"inspect: {status}"
        for net in (json.loads(body).get("NetworkSettings") or {}).get("Networks") or {}:
            status, body = call(conn, "POST", f"/{api}/networks/{net}/disconnect", {"Container": cid, "Force": True})
            if status != 200:
                return f"disconnect {net}: {status} {body[:200]!r}"
        return timed(conn, "DELETE", f"/containers/{cid}?force=1", cid)

    def volume(conn, name):
        started[name] = time.monotonic()
        return timed(conn, "DELETE", f"/volumes/{name}", name)

    if strategy == "delete":
        failed = run_all(sock, parallelism, ids, delete)
    elif strategy == "kill-first":
        failed = run_all(sock, parallelism, ids, kill)
        failed += run_all(sock, parallelism, ids, delete_exited)
    elif strategy == "disconnect-first":
        failed = run_all(sock, parallelism, ids, disconnect_then_delete)
    elif strategy == "volumes":
        failed = run_all(sock, parallelism, ids, volume)
    elif strategy.startswith("create:"):
        _, label, image = strategy.split(":", 2)
        key, value = label.split("=", 1)

        def create(conn, box):
            started[box] = time.monotonic()
            labels = {"ca.sandbox": "1", "ca.sandbox.id": box, key: value}
            status, body = call(conn, "POST", f"/{api}/volumes/create", {"Name": f"ca-sbx-{box}", "Labels": labels})
            if status != 201:
                return f"volume: {status} {body[:200]!r}"
            spec = {
                "Image": image,
                "Cmd": ["/bin/sleep", "infinity"],
                "Labels": labels,
                "HostConfig": {"Binds": [f"ca-sbx-{box}:/data"]},
            }
            status, body = call(conn, "POST", f"/{api}/containers/create?name=sbx-{box}", spec)
            if status != 201:
                return f"create: {status} {body[:200]!r}"
            return timed(conn, "POST", f"/containers/{json.loads(body)['Id']}/start", box)

        failed = run_all(sock, parallelism, ids, create)
    else:
        print(f"unknown strategy {strategy}", file=sys.stderr)
        sys.exit(2)
    for f in failed:
        print(f"failed: {f}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
