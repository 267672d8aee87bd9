"""A Model Context Protocol client for sandboxctl's tests, on the official
Python SDK (PyPI `mcp`, pinned in requirements.txt).

It starts `sandboxctl mcp` as the SDK does (stdio_client), runs the steps of
a scenario and prints, as one JSON document on stdout, what the client saw:
the initialize result, each step's result (isError, structuredContent, the
text, the progress notifications it got, a protocol error), and the ids of
the tools/call requests it sent. It judges nothing: the Rust test that wrote
the scenario sets up the engine, reads this, and checks the engine after.

Only the wire tap below is ours: it watches the messages the SDK writes, to
learn the request id of a call (to cancel that call by notifications/cancelled
while still waiting for its answer, which the SDK's own cancellation, a
cancel scope, would not wait for).

Usage: python client.py SCENARIO.json
SCENARIO: {"server": {"command", "args", "cwd", "env"},
           "steps": [{"op": "list_tools"}
                     | {"op": "call", "tool", "args", "progress": bool,
                        "cancelAfter": N (progress done >= N), "tag"}
                     | {"op": "concurrent", "calls": [call...]}
                     | {"op": "raw", "message": {...}}   (a notification)
                     | {"op": "sleep", "seconds": s}]}
"""

import json
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def dump(model: Any) -> Any:
    if hasattr(model, "model_dump"):
        return model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return model


class Tap:
    """Forwards what the session writes to the transport, noting the id of
    every tools/call by its `_meta.sbxTag`."""

    def __init__(self, write_stream: Any) -> None:
        self.write_stream = write_stream
        self.ids: dict[str, Any] = {}
        self.calls: list[Any] = []
        self.tagged = anyio.Event()
        self.send, self.receive = anyio.create_memory_object_stream(0)

    async def run(self) -> None:
        async with self.receive:
            async for item in self.receive:
                message = getattr(item, "message", item)
                if getattr(message, "method", None) == "tools/call":
                    params = dump(getattr(message, "params", None)) or {}
                    tag = (params.get("_meta") or {}).get("sbxTag")
                    self.calls.append(message.id)
                    if tag is not None:
                        self.ids[tag] = message.id
                        self.tagged.set()
                await self.write_stream.send(item)


async def call(session: ClientSession, tap: Tap, step: dict[str, Any]) -> dict[str, Any]:
    seen: list[list[float | None]] = []
    out: dict[str, Any] = {"tool": step["tool"], "progress": seen}
    tag = step.get("tag") or f"step-{id(step)}"
    cancel_after = step.get("cancelAfter")
    cancelled = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append([progress, total])
        if cancel_after is not None and progress >= cancel_after and not cancelled.is_set():
            cancelled.set()

    async def canceller() -> None:
        await cancelled.wait()
        while tag not in tap.ids:
            await anyio.sleep(0.01)
        request_id = tap.ids[tag]
        out["cancelledId"] = request_id
        await session.send_notification(
            types.CancelledNotification(
                params=types.CancelledNotificationParams(request_id=request_id, reason="test cancels")
            )
        )

    wants_progress = step.get("progress") or cancel_after is not None
    try:
        async with anyio.create_task_group() as tg:
            if cancel_after is not None:
                tg.start_soon(canceller)
            result = await session.call_tool(
                step["tool"],
                step.get("args"),
                read_timeout_seconds=step.get("timeout", 300),
                progress_callback=on_progress if wants_progress else None,
                meta={"sbxTag": tag},
            )
            tg.cancel_scope.cancel()
        out["isError"] = bool(result.is_error)
        out["structured"] = result.structured_content
        # The blocks one by one (the words, then the JSON); `text` is the first.
        texts = [getattr(c, "text", None) for c in result.content]
        out["text"] = (texts[0] or "") if texts else ""
        out["texts"] = texts
    except Exception as e:  # a protocol error, or the SDK refusing the result
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        out["error"] = f"{type(e).__name__}: {e}"
    out["requestId"] = tap.ids.get(tag)
    return out


async def main(path: str) -> None:
    with open(path) as f:
        scenario = json.load(f)
    server = scenario["server"]
    params = StdioServerParameters(
        command=server["command"], args=server["args"], cwd=server.get("cwd"), env=server.get("env")
    )
    report: dict[str, Any] = {"results": []}
    async with stdio_client(params) as (read_stream, write_stream):
        tap = Tap(write_stream)
        async with anyio.create_task_group() as tg:
            tg.start_soon(tap.run)
            async with ClientSession(read_stream, tap.send) as session:
                init = await session.initialize()
                report["initialize"] = dump(init)
                for step in scenario["steps"]:
                    op = step["op"]
                    if op == "list_tools":
                        listed = await session.list_tools()
                        report["results"].append({"tools": [dump(t) for t in listed.tools]})
                    elif op == "call":
                        report["results"].append(await call(session, tap, step))
                    elif op == "concurrent":
                        results: list[Any] = [None] * len(step["calls"])

                        async def one(i: int, c: dict[str, Any]) -> None:
                            results[i] = await call(session, tap, c)

                        async with anyio.create_task_group() as calls:
                            for i, c in enumerate(step["calls"]):
                                calls.start_soon(one, i, c)
                        report["results"].append({"concurrent": results})
                    elif op == "sleep":
                        await anyio.sleep(step["seconds"])
                        report["results"].append({})
                    else:
                        raise SystemExit(f"unknown op {op!r}")
            tg.cancel_scope.cancel()
    report["toolCalls"] = tap.calls
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
