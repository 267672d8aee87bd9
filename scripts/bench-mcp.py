#!/usr/bin/env python3
"""bench-mcp.py: a destroy through a warm MCP session against `sandboxctl
destroy ID` as a process, and the server's memory over 1,000 calls.

usage: bench-mcp.py --host unix://D/docker.sock --bin target/release/sandboxctl
                    [--rounds 21] [--calls 1000] [--image ca-sbx:bench-sleep]

Run by scripts/bench-mcp.sh, which starts the private dockerd it needs. Only
the standard library and the docker CLI. The MCP client here is a plain
JSON-RPC one (newline-delimited on the server's pipes), so that the timing is
the server's and not a client library's.

Each round makes two boxes (a named volume and a running container mounting
it, labeled ca.sandbox=1, ca.sandbox.id=<box> and this run's scope), then
times, in an order that alternates from round to round:
  (a) process: sandboxctl -H HOST --state S --format json destroy BOX
  (b) session: tools/call destroy {"ids": [BOX]} on a server started once
      (sandboxctl -H HOST --state S mcp) and already warm: initialized and
      one destroy done before the first round.
Both must converge with the box's container and volume removed. Prints each
contender's median, minimum and maximum and the ratio of the medians; then
the server's resident memory (VmRSS) idle, and after every 100 of --calls
calls (destroy of a box no listing carries, inventory and plan, in turn).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def docker(host, *args):
    return subprocess.run(["docker", "-H", host, *args], check=True, capture_output=True, text=True).stdout


class Session:
    def __init__(self, bin_path, host, state):
        self.proc = subprocess.Popen(
            [bin_path, "-H", host, "--state", state, "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.next_id = 0
        self.request("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench-mcp", "version": "1"}})
        self.notify("notifications/initialized")

    def notify(self, method, params=None):
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        rid = self.next_id
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("the server ended")
            message = json.loads(line)
            if message.get("id") == rid and "method" not in message:
                if "error" in message:
                    raise SystemExit(f"protocol error: {message['error']}")
                return message["result"]

    def call(self, tool, arguments):
        return self.request("tools/call", {"name": tool, "arguments": arguments})

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise SystemExit("no VmRSS")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--image", default="ca-sbx:bench-sleep")
    a = ap.parse_args()
    run_id = f"bench-mcp-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    work = tempfile.mkdtemp(prefix="bench-mcp.")
    state = os.path.join(work, "state.toml")
    with open(state, "w") as f:
        f.write(f'[scope]\nlabels = {{ "ca.sandbox.bench" = "{run_id}" }}\n')
    scope = ["--label", "ca.sandbox=1", "--label", f"ca.sandbox.bench={run_id}"]

    def make_box(box):
        docker(a.host, "volume", "create", *scope, "--label", f"ca.sandbox.id={box}", f"ca-sbx-{box}")
        docker(a.host, "run", "-d", "--network", "none", "--name", f"sbx-{box}", *scope,
               "--label", f"ca.sandbox.id={box}", "-v", f"ca-sbx-{box}:/data", a.image, "/bin/sleep", "infinity")

    def gone(box):
        left = docker(a.host, "ps", "-aq", "--filter", f"name=^sbx-{box}$")
        left += docker(a.host, "volume", "ls", "-q", "--filter", f"name=^ca-sbx-{box}$")
        return not left.strip()

    def check(report, box, how):
        if not report.get("converged") or not gone(box):
            raise SystemExit(f"{how} destroy of {box} did not converge: {json.dumps(report)[:400]}")

    def process(box):
        started = time.perf_counter()
        out = subprocess.run([a.bin, "-H", a.host, "--state", state, "--format", "json", "destroy", box],
                             capture_output=True, text=True)
        took = time.perf_counter() - started
        if out.returncode != 0:
            raise SystemExit(f"process destroy of {box} exited {out.returncode}: {out.stderr}")
        check(json.loads(out.stdout), box, "process")
        return took

    session = Session(a.bin, a.host, state)

    def warm(box):
        started = time.perf_counter()
        result = session.call("destroy", {"ids": [box]})
        took = time.perf_counter() - started
        if result.get("isError"):
            raise SystemExit(f"session destroy of {box} failed: {json.dumps(result)[:400]}")
        check(result["structuredContent"], box, "session")
        return took

    try:
        make_box(f"{run_id}-warmup")
        warm(f"{run_id}-warmup")
        times = {"process": [], "session": []}
        for r in range(a.rounds):
            boxes = {"process": f"{run_id}-p{r}", "session": f"{run_id}-s{r}"}
            for box in boxes.values():
                make_box(box)
            time.sleep(0.5)
            order = ["process", "session"] if r % 2 == 0 else ["session", "process"]
            for contender in order:
                run = process if contender == "process" else warm
                times[contender].append(run(boxes[contender]))
        print(f"destroy of one running box (a container and its volume), {a.rounds} interleaved rounds, ms")
        print(f"{'contender':<34} {'median':>8} {'min':>8} {'max':>8}")
        labels = {"process": "(a) sandboxctl destroy ID (process)", "session": "(b) tools/call destroy (warm)"}
        for k in ("process", "session"):
            ms = [t * 1000 for t in times[k]]
            print(f"{labels[k]:<34} {statistics.median(ms):8.1f} {min(ms):8.1f} {max(ms):8.1f}")
        ratio = statistics.median(times["session"]) / statistics.median(times["process"])
        print(f"ratio (b)/(a) of the medians: {ratio:.2f}")
        print()
        print(f"server memory over {a.calls} calls (destroy of an absent box, inventory, plan, in turn)")
        print(f"{'calls':>6} {'VmRSS KiB':>10}")
        print(f"{0:>6} {session.rss_kib():>10}")
        cycle = [("destroy", {"ids": [f"{run_id}-absent"]}), ("inventory", {}), ("plan", {})]
        for i in range(1, a.calls + 1):
            tool, args = cycle[i % 3]
            result = session.call(tool, args)
            if result.get("isError"):
                raise SystemExit(f"call {i} ({tool}) failed: {json.dumps(result)[:400]}")
            if i % 100 == 0:
                print(f"{i:>6} {session.rss_kib():>10}")
        session.close()
    finally:
        if session.proc.poll() is None:
            session.proc.kill()
        # What a failed round left, by both labels only (on the private engine).
        ours = ["--filter", "label=ca.sandbox=1", "--filter", f"label=ca.sandbox.bench={run_id}"]
        ids = docker(a.host, "ps", "-aq", *ours).split()
        if ids:
            docker(a.host, "rm", "-f", *ids)
        vols = docker(a.host, "volume", "ls", "-q", *ours).split()
        if vols:
            docker(a.host, "volume", "rm", *vols)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
