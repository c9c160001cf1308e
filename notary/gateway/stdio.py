"""The gateway's stdio transport: every line a client sends gets an answer, or a clear error.

The ``mcp`` SDK's stdio server parses each line with pydantic's JSON parser and, when that
fails, hands the exception to the session, which logs it and answers nothing: a JSON-RPC
batch (MCP dropped batching in 2025-06-18), or arguments nested a couple of hundred levels
deep (past the parser's recursion limit), then leave the client waiting forever. This
transport reads the lines itself and screens each one first (:func:`screen_line`, pure):

- not JSON at all: ``-32700`` Parse error, ``id: null``;
- a batch (a JSON array): an array of ``-32600`` errors, one per request in it, each with
  its ``id`` (a batch holding no request gets a single ``-32600`` with ``id: null``);
- nested deeper than :data:`MAX_DEPTH` (the canonical-JSON limit: such a call could never be
  recorded anyway): ``-32602`` with the request's ``id``;
- not a valid JSON-RPC message: ``-32600`` with the ``id`` when there is one;
- otherwise the message goes to the server as usual (validated from the parsed value, so the
  SDK's parser limit no longer applies).

Notifications and responses that fail the screen are dropped (JSON-RPC never answers a
notification). Like the SDK's own transport it claims file descriptors 0 and 1 while it
serves (stray reads get EOF, stray writes go to stderr), so nothing but protocol frames ever
reaches the client.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager, suppress
from typing import BinaryIO, Final, Literal, TypedDict

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from notary.core.canonical import MAX_DEPTH

__all__ = ["MAX_DEPTH", "MAX_LINE_BYTES", "guarded_stdio", "screen_line"]

MAX_LINE_BYTES: Final = 64 * 1024 * 1024
"""A longer line is refused unread (``-32700``): no client sends one on purpose."""

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
INVALID_PARAMS: Final = -32602


class _ErrorObject(TypedDict):
    code: int
    message: str


class _ErrorResponse(TypedDict):
    """A JSON-RPC error response, as this module answers a line it does not pass on."""

    jsonrpc: Literal["2.0"]
    id: str | int | None
    error: _ErrorObject


def _error(request_id: str | int | None, code: int, message: str) -> _ErrorResponse:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _request_id(obj: object) -> str | int | None:
    """The id of a request (an object with ``method`` and a string or integer ``id``)."""
    if not isinstance(obj, dict) or "method" not in obj:
        return None
    rid = obj.get("id")
    if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
        return rid
    return None


def _too_deep(value: object, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` arrays/objects (iterative, no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def screen_line(line: str | bytes) -> tuple[types.JSONRPCMessage | None, str | None]:
    """(message for the server, None), (None, JSON text to answer), or (None, None) to drop.

    Pure: decides from the line alone (see the module docstring for the rules).
    """
    if len(line) > MAX_LINE_BYTES:
        return None, json.dumps(_error(None, PARSE_ERROR, "Parse error: the line is longer "
                                       f"than {MAX_LINE_BYTES} bytes"))
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    if not text.strip():
        return None, None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None, json.dumps(_error(None, PARSE_ERROR, "Parse error: not a JSON text"))
    if isinstance(obj, list):
        ids = [rid for item in obj if (rid := _request_id(item)) is not None]
        message = ("Invalid Request: JSON-RPC batches are not supported (MCP sends one "
                   "message per line)")
        if not ids:
            return None, json.dumps(_error(None, INVALID_REQUEST, message))
        return None, json.dumps([_error(rid, INVALID_REQUEST, message) for rid in ids])
    rid = _request_id(obj)
    if _too_deep(obj, MAX_DEPTH):
        if rid is None:
            return None, None
        return None, json.dumps(_error(rid, INVALID_PARAMS, "Invalid params: the request "
                                       f"nests deeper than {MAX_DEPTH} arrays/objects"))
    if rid is None and isinstance(obj, dict) and "id" in obj and "method" in obj:
        # A request whose id is neither a string nor a number (true, 1.5, {}, null): the SDK
        # would take it for a notification and never answer.
        return None, json.dumps(_error(None, INVALID_REQUEST,
                                       "Invalid Request: the id must be a string or an integer"))
    try:
        return types.jsonrpc_message_adapter.validate_python(obj, by_name=False), None
    except ValidationError:
        if rid is not None:
            return None, json.dumps(_error(rid, INVALID_REQUEST,
                                           "Invalid Request: not a valid JSON-RPC request"))
        return None, None


def _claim(fd: int, divert: Callable[[], int]) -> tuple[int, Callable[[], None]]:
    """A private duplicate of ``fd`` for the wire, ``fd`` itself pointed at ``divert()``."""
    private = os.dup(fd)
    target = divert()
    os.dup2(target, fd)
    os.close(target)

    def restore() -> None:
        with suppress(OSError):
            os.dup2(private, fd)
        with suppress(OSError):
            os.close(private)

    return private, restore


@asynccontextmanager
async def guarded_stdio(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
                        ) -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage |
                                                                           Exception],
                                                 MemoryObjectSendStream[SessionMessage]]]:
    """(read stream, write stream) for ``Server.run``, over stdin/stdout (or the given files)."""
    restores: list[Callable[[], None]] = []
    if stdin is None:
        fd, restore = _claim(0, lambda: os.open(os.devnull, os.O_RDONLY))
        restores.append(restore)
        stdin = os.fdopen(fd, "rb", buffering=0, closefd=False)
    if stdout is None:
        sys.stdout.flush()
        fd, restore = _claim(1, lambda: os.dup(2))
        restores.append(restore)
        stdout = os.fdopen(fd, "wb", closefd=False)
    writer = anyio.wrap_file(stdout)
    lock = anyio.Lock()
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)

    async def emit(text: str) -> None:
        async with lock:
            await writer.write(text.encode("utf-8") + b"\n")
            await writer.flush()

    async def read_lines() -> None:
        read = stdin.read1 if hasattr(stdin, "read1") else stdin.read
        async with read_send:
            pending = b""
            skipping = False  # inside a line already answered as too long
            while True:
                # Abandoned on cancellation: a thread blocked on stdin never holds up the exit.
                chunk = await anyio.to_thread.run_sync(read, 65536, abandon_on_cancel=True)
                if not chunk:
                    break
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for raw in lines:
                    if skipping:
                        skipping = False
                        continue
                    await _dispatch(raw)
                if len(pending) > MAX_LINE_BYTES and not skipping:
                    await _dispatch(pending)  # answered as too long; the rest is skipped
                    skipping = True
                if skipping:
                    pending = b""
            if pending.strip() and not skipping:
                await _dispatch(pending)

    async def _dispatch(raw: bytes) -> None:
        message, answer = screen_line(raw)
        if answer is not None:
            await emit(answer)
        elif message is not None:
            await read_send.send(SessionMessage(message))

    async def write_messages() -> None:
        async with write_recv:
            async for session_message in write_recv:
                await emit(session_message.message.model_dump_json(by_alias=True,
                                                                   exclude_unset=True))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_lines)
            tg.start_soon(write_messages)
            try:
                yield read_recv, write_send
            finally:
                tg.cancel_scope.cancel()
    finally:
        for restore in reversed(restores):
            restore()
