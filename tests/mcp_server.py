"""A small real MCP server (an item store) built on the SDK's low-level server, for the tests and the example list.

    python -m tests.mcp_server                  # over stdio
    python -m tests.mcp_server --http 8931      # streamable HTTP at http://127.0.0.1:8931/mcp
    python -m tests.mcp_server --legacy         # over stdio, knowing only the initialize handshake, as most
                                                # servers do today

Run it as a module from the project's folder: run as a file, tests/ would come first on the path, and its
`socket` package would hide the standard library's.

Its tools: `find_items` (read-only), `get_item` (a strict schema: an integer id and a kind from an enum),
`delete_item` (destructive), `rename_item` (not annotated at all), `fail` (its handler raises), `sleep` (hangs
for as long as asked), `crash` (the process dies mid-call), `quit` (it dies just after answering), `add_tool`
(adds a tool and says the list changed), `whoami` (what came with the call: the identity header and the call's
`_meta`) and `picture` (an image and an embedded resource besides its text).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

IDENTITY_HEADER = "x-user-token"
IDENTITY_META_KEY = "agentchat/identity"
# The smallest PNG: one transparent pixel.
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()

READ_ONLY = types.ToolAnnotations(read_only_hint=True)
ITEMS = {1: {"id": 1, "kind": "book", "title": "Dune"}, 2: {"id": 2, "kind": "film", "title": "Alien"}}


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or [], "additionalProperties": False}


TOOLS = [
    types.Tool(
        name="find_items",
        description="Find items whose title contains the text.",
        input_schema=_schema({"text": {"type": "string", "description": "Part of a title."}}, ["text"]),
        annotations=READ_ONLY,
    ),
    types.Tool(
        name="get_item",
        description="One item by its id and kind.",
        input_schema=_schema(
            {"id": {"type": "integer", "minimum": 1}, "kind": {"type": "string", "enum": ["book", "film"]}},
            ["id", "kind"],
        ),
        annotations=READ_ONLY,
    ),
    types.Tool(
        name="delete_item",
        description="Delete an item for good.",
        input_schema=_schema({"id": {"type": "integer"}}, ["id"]),
        annotations=types.ToolAnnotations(destructive_hint=True),
    ),
    types.Tool(
        name="rename_item",
        description="Give an item a new title.",
        input_schema=_schema({"id": {"type": "integer"}, "title": {"type": "string"}}, ["id", "title"]),
    ),
    types.Tool(name="fail", description="Always fails.", input_schema=_schema({}), annotations=READ_ONLY),
    types.Tool(
        name="sleep",
        description="Wait, then answer.",
        input_schema=_schema({"seconds": {"type": "number"}}, ["seconds"]),
        annotations=READ_ONLY,
    ),
    types.Tool(name="crash", description="The server stops mid-call.", input_schema=_schema({}), annotations=READ_ONLY),
    types.Tool(name="quit", description="Answer, then stop.", input_schema=_schema({}), annotations=READ_ONLY),
    types.Tool(
        name="add_tool",
        description="Add a read-only tool that answers with its own name.",
        input_schema=_schema({"name": {"type": "string"}}, ["name"]),
        annotations=READ_ONLY,
    ),
    types.Tool(name="whoami", description="What came with this call.", input_schema=_schema({}), annotations=READ_ONLY),
    types.Tool(
        name="picture", description="A picture, with its caption.", input_schema=_schema({}), annotations=READ_ONLY
    ),
]
added: list[types.Tool] = []
bus = InMemorySubscriptionBus()


def text(value: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=value)]


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[*TOOLS, *added])


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    match params.name:
        case "find_items":
            found = [item for item in ITEMS.values() if arguments["text"].lower() in item["title"].lower()]
            return types.CallToolResult(content=text(", ".join(item["title"] for item in found) or "nothing"))
        case "get_item":
            item = ITEMS.get(arguments["id"])
            if item is None or item["kind"] != arguments["kind"]:
                return types.CallToolResult(content=text(f"No {arguments['kind']} {arguments['id']}."), is_error=True)
            return types.CallToolResult(content=text(item["title"]), structured_content=item)
        case "delete_item":
            return types.CallToolResult(content=text(f"Deleted item {arguments['id']}."))
        case "rename_item":
            return types.CallToolResult(content=text(f"Item {arguments['id']} is now {arguments['title']!r}."))
        case "fail":
            raise MCPError(types.INTERNAL_ERROR, "the item store is locked")
        case "sleep":
            await anyio.sleep(arguments["seconds"])
            return types.CallToolResult(content=text("awake"))
        case "crash":
            os._exit(3)
        case "quit":
            asyncio.get_running_loop().call_later(0.1, os._exit, 0)
            return types.CallToolResult(content=text("bye"))
        case "add_tool":
            added.append(types.Tool(name=arguments["name"], input_schema=_schema({}), annotations=READ_ONLY))
            await bus.publish(ToolsListChanged())  # to subscribers (2026-07-28 sessions)
            await ctx.session.send_tool_list_changed()  # to handshake-era sessions
            return types.CallToolResult(content=text(f"Added {arguments['name']}."))
        case "whoami":
            headers = getattr(ctx.request, "headers", None)
            return types.CallToolResult(
                content=text("who"),
                structured_content={
                    "header": headers.get(IDENTITY_HEADER) if headers is not None else None,
                    "meta": (ctx.meta or {}).get(IDENTITY_META_KEY),
                },
            )
        case "picture":
            return types.CallToolResult(
                content=[
                    *text("A pixel."),
                    types.ImageContent(type="image", data=PIXEL, mime_type="image/png"),
                    types.EmbeddedResource(
                        type="resource",
                        resource=types.TextResourceContents(
                            uri="items://caption", mime_type="text/plain", text="One transparent pixel."
                        ),
                    ),
                ]
            )
        case name if any(tool.name == name for tool in added):
            return types.CallToolResult(content=text(name))
    raise MCPError(types.METHOD_NOT_FOUND, f"no tool {params.name}")


server = Server(
    "items", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool, on_subscriptions_listen=ListenHandler(bus)
)


async def refuse_discover(incoming: Any, outgoing: Any, forward: Any) -> None:
    """Every message but `server/discover`, which is answered "method not found", as a server from before 2026
    does: the client then falls back to the initialize handshake."""
    async with forward:
        async for message in incoming:
            request = getattr(message, "message", None)
            if isinstance(request, types.JSONRPCRequest) and request.method == "server/discover":
                error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found")
                await outgoing.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request.id, error=error)))
                continue
            await forward.send(message)


async def serve_stdio(*, legacy: bool) -> None:
    async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tasks:
        if legacy:
            forward, received = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            tasks.start_soon(refuse_discover, read_stream, write_stream, forward)
            read_stream = received
        await server.run(read_stream, write_stream, server.create_initialization_options())
        tasks.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--legacy", action="store_true", help="answer only the initialize handshake (stdio)")
    options = parser.parse_args()
    if options.http is None:
        asyncio.run(serve_stdio(legacy=options.legacy))
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp")
    uvicorn.run(app, host="127.0.0.1", port=options.http, log_level="warning")


if __name__ == "__main__":
    main()
