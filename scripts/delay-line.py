#!/usr/bin/env python3
"""delay-line.py LISTEN_HOST LISTEN_PORT TO_HOST TO_PORT DELAY_MS

A TCP relay that holds every chunk of bytes DELAY_MS before passing it on, in
each direction, so a connection through it sees a round trip of 2 x DELAY_MS
(plus the real one). Order and throughput are kept: chunks are delayed, not
serialised one after the other. Stands in for `tc qdisc ... netem delay` on a
kernel without sch_netem (scripts/bench-ssh.sh runs it inside the network
namespace of the sshd it delays, never on the host's loopback).

Runs until SIGTERM or SIGINT; prints "ready" on stdout once it listens, and
the number of connections relayed on stderr when it stops.
"""

import asyncio
import signal
import sys
import time


async def pump(reader, writer, delay):
    queue = asyncio.Queue()

    async def release():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    task = asyncio.ensure_future(release())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            queue.put_nowait((time.monotonic() + delay, data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((time.monotonic() + delay, None))
    try:
        await task
    except (ConnectionError, OSError):
        pass


async def main():
    listen_host, listen_port, to_host, to_port, delay_ms = sys.argv[1:6]
    delay = float(delay_ms) / 1000.0
    count = 0

    async def handle(client_reader, client_writer):
        nonlocal count
        count += 1
        try:
            server_reader, server_writer = await asyncio.open_connection(to_host, int(to_port))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pump(client_reader, server_writer, delay),
            pump(server_reader, client_writer, delay),
        )
        for w in (client_writer, server_writer):
            w.close()

    server = await asyncio.start_server(handle, listen_host, int(listen_port), backlog=256)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    server.close()
    print(f"delay-line: {count} connections relayed", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
