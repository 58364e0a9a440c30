"""A real HTTP server on loopback that speaks the chat-completions wire format.

Tests drive it through the official ``openai`` SDK, so retries, timeouts, status
mapping and SSE parsing are the SDK's own, not a mock's::

    with FakeOpenAIServer() as srv:
        srv.enqueue(text="About 160 responses.")
        srv.enqueue_error(429, retry_after=0.01)
        client = OpenAI(base_url=srv.base_url, api_key="test")

Each ``POST /v1/chat/completions`` takes the next scripted reply from the queue
(an empty queue answers 500 "no scripted reply", so a test notices). ``GET
/v1/models`` lists the model. Every request received is recorded in
:attr:`FakeOpenAIServer.requests`.

A reply can be text (JSON, or SSE ``chat.completion.chunk`` events ending in
``data: [DONE]`` when the request says ``stream: true``), an HTTP error (with
``Retry-After``), a raw body (for malformed responses), a delay (for
timeouts), or a stream that fails midway (an ``error`` event, or the
connection dropped).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["FakeOpenAIServer", "RecordedRequest", "ScriptedReply"]


@dataclass(frozen=True, slots=True)
class ScriptedReply:
    """One scripted answer to a chat-completions request.

    Attributes:
        text: the assistant's content (for a 200 reply).
        status: the HTTP status.
        error_message: the ``error.message`` of a non-200 reply.
        headers: extra response headers (``Retry-After`` …).
        delay: seconds to wait before answering (for client timeouts).
        raw_body: sent verbatim instead of a generated body (malformed responses).
        finish_reason: the choice's finish reason.
        chunks: how to split ``text`` into stream chunks (default: by words).
        stream_error_after: in a stream, send an ``error`` event after this many chunks.
        stream_abort_after: in a stream, drop the connection after this many chunks.
        prompt_tokens: usage reported.
        completion_tokens: usage reported (default: the number of words).
        message: extra fields of the reply's message (``tool_calls``, ``refusal``,
            ``reasoning_content`` …), merged over ``role``/``content``.
        choice: extra fields of the reply's choice (``logprobs`` …).
        events: in a stream, the choice objects to send (``{"delta": {...},
            "logprobs": ...}``, index and finish reason filled in) instead of
            ``text`` split into content deltas.
    """

    text: str | None = None
    status: int = 200
    error_message: str = "scripted error"
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw_body: bytes | None = None
    finish_reason: str = "stop"
    chunks: Sequence[str] | None = None
    stream_error_after: int | None = None
    stream_abort_after: int | None = None
    prompt_tokens: int = 10
    completion_tokens: int | None = None
    message: Mapping[str, Any] | None = None
    choice: Mapping[str, Any] | None = None
    events: Sequence[Mapping[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: Mapping[str, str]  # lower-case names
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` of a chat-completions request body."""
        if isinstance(self.body, dict):
            return list(self.body.get("messages", []))
        return []


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # the stdlib's 5 drops SYNs under concurrent load (1 s retransmits)
    owner: FakeOpenAIServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output (and logs) free of request lines

    def _record(self, body: Any) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        rec = RecordedRequest(self.command, self.path, headers, body)
        self.server.owner._record(rec)

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] = {}) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._record(None)
        if self.path.rstrip("/").endswith("/models"):
            model = self.server.owner.model
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": model, "object": "model", "created": 0, "owned_by": "dpllm"}],
                },
            )
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "invalid_request"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self._record(body)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": "not found", "type": "invalid_request"}})
            return
        reply = self.server.owner._next()
        if reply is None:
            self._send_json(
                500, {"error": {"message": "no scripted reply", "type": "server_error"}}
            )
            return
        if reply.delay and self.server.owner._stopping.wait(reply.delay):
            return
        try:
            self._answer(reply, body if isinstance(body, dict) else {})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to do

    def _answer(self, reply: ScriptedReply, body: dict[str, Any]) -> None:
        owner = self.server.owner
        if reply.raw_body is not None:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply.raw_body)))
            self.end_headers()
            self.wfile.write(reply.raw_body)
            return
        if reply.status != 200:
            error = {"message": reply.error_message, "type": "scripted", "code": reply.status}
            self._send_json(reply.status, {"error": error}, reply.headers)
            return
        text = reply.text or ""
        model = str(body.get("model") or owner.model)
        completion_tokens = (
            reply.completion_tokens if reply.completion_tokens is not None else len(text.split())
        )
        usage = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": reply.prompt_tokens + completion_tokens,
        }
        ident = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        if body.get("stream"):
            self._stream(reply, text, model, ident, usage, body)
            return
        message = {"role": "assistant", "content": text, **(reply.message or {})}
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": reply.finish_reason,
            **(reply.choice or {}),
        }
        payload = {
            "id": ident,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": usage,
        }
        self._send_json(200, payload, reply.headers)

    def _stream(
        self,
        reply: ScriptedReply,
        text: str,
        model: str,
        ident: str,
        usage: dict[str, int],
        body: dict[str, Any],
    ) -> None:
        # HTTP/1.1 chunked, so that an abort (no terminating chunk) is a broken body.
        self.protocol_version = "HTTP/1.1"
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        pieces = list(reply.chunks) if reply.chunks is not None else _words(text)

        def send(data: str) -> None:
            raw = data.encode()
            self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
            self.wfile.flush()

        def event(delta: Mapping[str, Any], finish: str | None, **extra: Any) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, **extra}
            chunk = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [choice],
            }
            send(f"data: {json.dumps(chunk)}\n\n")

        event({"role": "assistant", "content": ""}, None)
        for raw in reply.events or ():
            event(raw.get("delta", {}), None, **{k: v for k, v in raw.items() if k != "delta"})
        if reply.events is not None and not text:
            pieces = []
        for i, piece in enumerate(pieces):
            if reply.stream_abort_after is not None and i == reply.stream_abort_after:
                return  # no terminating chunk: the client sees a truncated body
            if reply.stream_error_after is not None and i == reply.stream_error_after:
                err = {"error": {"message": reply.error_message, "type": "server_error"}}
                send(f"data: {json.dumps(err)}\n\n")
                send("")
                return
            event({"content": piece}, None)
        event({}, reply.finish_reason)
        options = body.get("stream_options") or {}
        if isinstance(options, dict) and options.get("include_usage"):
            chunk = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [],
                "usage": usage,
            }
            send(f"data: {json.dumps(chunk)}\n\n")
        send("data: [DONE]\n\n")
        send("")


def _words(text: str) -> list[str]:
    parts = text.split(" ")
    return [p + (" " if i < len(parts) - 1 else "") for i, p in enumerate(parts)]


class FakeOpenAIServer:
    """A chat-completions server on ``127.0.0.1`` (a free port), with scripted replies.

    Args:
        model: the model id reported by ``/v1/models`` and in replies.

    Use as a context manager (or call :meth:`start`/:meth:`stop`).
    """

    def __init__(self, *, model: str = "fake-model") -> None:
        self.model = model
        self._queue: deque[ScriptedReply] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        """Bind a free loopback port and serve in a background thread."""
        server = _Server(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; pending delays are cut short."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake server is not running; use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` — the SDK's ``base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- script ------------------------------------------------------------------
    def enqueue(self, text: str | None = None, *, times: int = 1, **options: Any) -> None:
        """Queue ``times`` replies (see :class:`ScriptedReply` for the options)."""
        reply = ScriptedReply(text=text, **options)
        with self._lock:
            self._queue.extend([reply] * times)

    def enqueue_error(
        self,
        status: int,
        message: str = "scripted error",
        *,
        retry_after: float | None = None,
        times: int = 1,
    ) -> None:
        """Queue ``times`` HTTP error replies; ``retry_after`` sets ``Retry-After`` (seconds)."""
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["Retry-After"] = f"{retry_after:g}"
            headers["retry-after-ms"] = f"{retry_after * 1000:g}"
        self.enqueue(None, status=status, error_message=message, headers=headers, times=times)

    def _next(self) -> ScriptedReply | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        with self._lock:
            return len(self._queue)

    # -- record ------------------------------------------------------------------
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests received so far (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def completion_requests(self) -> list[RecordedRequest]:
        """Only the ``POST …/chat/completions`` requests."""
        return [r for r in self.requests if r.method == "POST" and "chat/completions" in r.path]
