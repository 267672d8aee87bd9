#!/usr/bin/env python3
"""latency-proxy.py: a unix-socket forwarder that delays every request.

usage: latency-proxy.py LISTEN_SOCKET UPSTREAM_SOCKET DELAY_MS

Listens on LISTEN_SOCKET (created; removed on exit) and forwards every
connection to UPSTREAM_SOCKET, both ways, byte for byte. Each request is held
DELAY_MS milliseconds before it reaches the upstream: the first bytes a client
sends on a connection, and again the first bytes it sends after the upstream
has answered (a new request on a kept-alive connection). bollard opens one
connection per request, so every engine call pays DELAY_MS once. Responses are
not delayed. It simulates a remote engine (one round trip of DELAY_MS) without
touching the network stack, which unix sockets bypass anyway.

Runs until SIGTERM or SIGINT; then prints one line to stderr:
  latency-proxy LISTEN: N connections, M delayed requests, B bytes up, C bytes down
Standard library only (asyncio).
"""

import asyncio
import os
import signal
import sys

CHUNK = 65536


class Stats:
    def __init__(self):
        self.connections = 0
        self.requests = 0
        self.up = 0
        self.down = 0


async def pump(reader, writer, on_chunk, count):
    """Copies reader to writer until EOF; on_chunk (async) runs before each write."""
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            await on_chunk()
            writer.write(data)
            count(len(data))
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, RuntimeError):
            pass


async def handle(client_r, client_w, upstream, delay, stats):
    stats.connections += 1
    # True until the client's next request has been delayed; set again by
    # every answer from upstream (so a kept-alive connection pays per request).
    state = {"awaiting": True}

    async def before_up():
        if state["awaiting"]:
            state["awaiting"] = False
            stats.requests += 1
            if delay > 0:
                await asyncio.sleep(delay)

    async def before_down():
        state["awaiting"] = True

    def count_up(n):
        stats.up += n

    def count_down(n):
        stats.down += n

    try:
        up_r, up_w = await asyncio.open_unix_connection(upstream)
    except OSError as e:
        print(f"latency-proxy: cannot connect to {upstream}: {e}", file=sys.stderr)
        client_w.close()
        return
    try:
        await asyncio.gather(
            pump(client_r, up_w, before_up, count_up),
            pump(up_r, client_w, before_down, count_down),
        )
    finally:
        for w in (up_w, client_w):
            try:
                w.close()
            except OSError:
                pass


async def main(listen, upstream, delay_ms):
    stats = Stats()
    delay = delay_ms / 1000.0
    if os.path.exists(listen):
        os.unlink(listen)
    server = await asyncio.start_unix_server(
        lambda r, w: handle(r, w, upstream, delay, stats), path=listen, backlog=1024
    )
    os.chmod(listen, 0o660)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
    try:
        os.unlink(listen)
    except FileNotFoundError:
        pass
    print(
        f"latency-proxy {listen}: {stats.connections} connections, "
        f"{stats.requests} delayed requests, {stats.up} bytes up, {stats.down} bytes down",
        file=sys.stderr,
    )


if __name__ == "__main__":
    if len(sys.argv) != 4 or not sys.argv[3].isdigit():
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
