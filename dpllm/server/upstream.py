"""The proxy's lean upstream client: one JSON POST over keep-alive HTTP/1.1, one JSON answer.

Why not the ``openai`` SDK's client for non-streaming chat: per forwarded call it
costs ~1.8 ms of CPU on the benchmark machine (request building, its retry and
auth layers, ``httpx``, ``httpcore``, ``anyio``, ``h11``); ``httpx.AsyncClient``
alone ~1.4 ms and ``httpcore``'s pool ~0.95 ms, and both grow under 32
concurrent callers (pool bookkeeping, keep-alive churn). The proxy only posts a
JSON body and reads a JSON answer from one origin, which asyncio streams do in
~0.1 ms. ``bench/proxy_bench.py`` measures the proxy end to end.

Scope: plain ``http://`` upstreams reached directly (a model server on loopback
or the LAN: vLLM, llama.cpp, Ollama …). ``https://`` upstreams and upstreams
behind an HTTP proxy keep the SDK's client (TLS verification and proxy support
as the SDK does them): :func:`lean_eligible` decides.

Behaviour matches the SDK's client where it matters to callers:

* **retries**: ``max_retries`` more attempts after a connection error, a
  timeout, or HTTP 408, 409, 429 and 5xx (``x-should-retry`` overrides), waiting
  ``Retry-After`` (≤ 60 s) or an exponential backoff (0.5 s doubling, ≤ 8 s,
  with jitter); a kept-alive connection the server closed while idle is retried
  at once on a fresh one (nothing was answered on it);
* **timeout**: ``timeout`` seconds per attempt, connecting included;
* **errors**, as dpllm's own (:func:`dpllm.server.errors.status_and_body` turns
  them into OpenAI-shaped answers):

  =========================================  ==========================  ======
  upstream                                   raised                      answer
  =========================================  ==========================  ======
  refused / reset / closed connection        :class:`ModelUnreachable`   502
  no answer within ``timeout``               :class:`ModelTimeout`       504
  HTTP 401, 403                              :class:`ModelAuthError`     502
  HTTP 429 (after the retries)               :class:`ModelRateLimited`   502
  other HTTP ≥ 400                           :class:`ModelBadResponse`   502
  malformed HTTP, not a JSON object, > 64 MiB  :class:`ModelBadResponse`   502
  =========================================  ==========================  ======

  Status errors carry the upstream's status (``exc.status``) and its error
  ``type``, never its error message (which may quote the prompt).

The API key is sent in ``Authorization`` and kept nowhere else (no repr, no log).
"""

from __future__ import annotations

import asyncio
import json
import random
import urllib.parse
from collections.abc import Mapping
from typing import Any

from dpllm.errors import (
    ModelAuthError,
    ModelBadResponse,
    ModelError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnreachable,
)

__all__ = ["MAX_BODY", "UpstreamClient", "lean_eligible"]

MAX_BODY = 64 * 1024 * 1024
"""The largest upstream answer read (bytes); a larger one is refused."""

MAX_HEAD = 64 * 1024
"""The largest status line + headers read (bytes)."""

MAX_CONNECTIONS = 100
"""Connections open to the upstream at most (as the SDK's default pool)."""

_RETRY_STATUSES = frozenset({408, 409, 429})
_MAX_RETRY_AFTER = 60.0


def lean_eligible(base_url: str, environ: Mapping[str, str] | None) -> bool:
    """Whether :class:`UpstreamClient` can serve ``base_url`` as the SDK's client would.

    True for an ``http://`` URL when ``environ`` routes it through no proxy
    (``HTTP_PROXY`` / ``ALL_PROXY``, minus ``NO_PROXY``; the variables the SDK's
    client honours). ``environ=None``: no proxy variables.
    """
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    env = {k.lower(): v for k, v in (environ or {}).items()}
    if not (env.get("http_proxy") or env.get("all_proxy")):
        return True
    return _bypassed(parts.hostname, env.get("no_proxy", ""))


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` (comma-separated hosts and domains, or ``*``) names ``host``."""
    host = host.lower()
    for entry in no_proxy.lower().split(","):
        entry = entry.strip()
        if entry == "*":
            return True
        if entry.startswith("["):  # [::1]:8000
            entry = entry[1 : entry.find("]")]
        elif entry.count(":") == 1:  # host:port
            entry = entry.partition(":")[0]
        entry = entry.lstrip("*.")  # *.example.com, .example.com
        if entry and (host == entry or host.endswith("." + entry)):
            return True
    return False


class _Retry(Exception):
    """An attempt failed in a way the SDK would retry (internal)."""

    def __init__(self, error: ModelError, delay: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.delay = delay


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @property
    def usable(self) -> bool:
        return not (self.writer.is_closing() or self.reader.at_eof())

    def close(self) -> None:
        self.writer.close()


class UpstreamClient:
    """Posts JSON to an OpenAI-compatible ``http://`` server over kept-alive connections.

    Args:
        base_url: the upstream's base URL (``http://host:8000/v1``).
        api_key: sent as ``Authorization: Bearer …`` (omitted when empty).
        timeout: seconds per attempt.
        max_retries: further attempts after a retryable failure.
        user_agent: the ``User-Agent`` header.

    Raises:
        ValueError: not an ``http://`` URL, a parameter out of range, or a line
            break in the key.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str,
        timeout: float,
        max_retries: int,
        user_agent: str = "dpllm",
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"UpstreamClient needs an http:// base URL, got {base_url!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be ≥ 0, got {max_retries!r}")
        if any(c in api_key or c in user_agent for c in "\r\n\0"):
            raise ValueError("the API key and user agent must be one line (they are HTTP headers)")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.base_path = parts.path.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        authority = parts.netloc.rpartition("@")[2]  # never userinfo in Host
        head = [
            f"Host: {authority}",
            "Content-Type: application/json",
            "Accept: application/json",
            "Accept-Encoding: identity",
            f"User-Agent: {user_agent}",
        ]
        if api_key:
            head.append(f"Authorization: Bearer {api_key}")
        self._head = ("\r\n".join(head) + "\r\n").encode("latin-1")
        self._idle: list[_Conn] = []
        # Connections and the slot semaphore belong to the event loop that made them.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)

    def __repr__(self) -> str:  # no key
        return f"<UpstreamClient http://{self.host}:{self.port}{self.base_path}>"

    async def aclose(self) -> None:
        """Close the idle connections; later calls open new ones."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    async def post_json(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` as JSON to ``base_url + path``; the decoded JSON object answered.

        Raises:
            ModelUnreachable, ModelTimeout, ModelAuthError, ModelRateLimited,
            ModelBadResponse: see the module docstring.
            ValueError: ``body`` cannot be encoded as JSON (NaN, infinities …).
        """
        payload = json.dumps(body, allow_nan=False).encode()
        request = (
            b"POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n"
            % ((self.base_path + path).encode("latin-1"), self._head, len(payload))
        ) + payload
        attempt = 0
        while True:
            try:
                status, raw = await self._exchange(request)
                return _decode(status, raw)
            except _Retry as retry:
                if attempt >= self.max_retries:
                    raise retry.error from None
                await asyncio.sleep(_backoff(attempt, retry.delay))
                attempt += 1

    # -- one attempt ---------------------------------------------------------------
    async def _exchange(self, request: bytes) -> tuple[int, bytes]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # first use, or the app is served by a new loop
            self._loop, self._idle = loop, []
            self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        try:
            async with self._slots, asyncio.timeout(self.timeout):
                conn = self._take_idle()
                if conn is not None:
                    try:
                        return await self._send(conn, request)
                    except (ModelError, _Retry):
                        raise
                    except (OSError, asyncio.IncompleteReadError) as exc:
                        if not _nothing_answered(exc):
                            raise
                    # the server closed the kept-alive connection while it was idle
                conn = await self._connect()
                return await self._send(conn, request)
        except (ModelError, _Retry):
            raise  # answered (ModelAuthError is a PermissionError, an OSError)
        except TimeoutError:
            raise _Retry(
                ModelTimeout(
                    f"the upstream model did not answer within {self.timeout:g} s "
                    "(the [model] timeout)"
                )
            ) from None
        except (OSError, asyncio.IncompleteReadError):
            raise _Retry(
                ModelUnreachable(
                    "the upstream model cannot be reached (connection refused, reset or "
                    "closed); check [model] base_url and that the server is running"
                )
            ) from None

    def _take_idle(self) -> _Conn | None:
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the likeliest alive
            if conn.usable:
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Conn:
        reader, writer = await asyncio.open_connection(self.host, self.port, limit=MAX_HEAD)
        return _Conn(reader, writer)

    async def _send(self, conn: _Conn, request: bytes) -> tuple[int, bytes]:
        """Write the request, read one response; keep ``conn`` when it can be reused."""
        keep = False
        try:
            conn.writer.write(request)
            status, headers, keep = await _read_head(conn.reader)
            raw, framed = await _read_body(conn.reader, headers, status)
            keep = keep and framed
            if status >= 400:
                raise _status_error(status, headers, raw)
            return status, raw
        finally:
            if keep and len(self._idle) < MAX_CONNECTIONS:
                self._idle.append(conn)
            else:
                conn.close()


# -- HTTP/1.1 framing ------------------------------------------------------------------


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bool]:
    """Status, lower-cased headers, and whether the connection may be reused."""
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise ModelBadResponse("the upstream's response headers are too large") from None
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not (version.startswith("HTTP/1.") and code.isdigit()):
            raise ModelBadResponse("the upstream did not answer in HTTP/1.x")
        status = int(code)
        if 100 <= status < 200:
            continue  # an interim response (100 Continue …): the real one follows
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                value = value.strip()
                headers[name] = f"{headers[name]}, {value}" if name in headers else value
        connection = headers.get("connection", "").lower()
        keep = version == "HTTP/1.1" and "close" not in connection
        return status, headers, keep


async def _read_body(
    reader: asyncio.StreamReader, headers: Mapping[str, str], status: int
) -> tuple[bytes, bool]:
    """The body, and whether its end was framed (else the connection ended it)."""
    if status in (204, 304):
        return b"", True
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked(reader), True
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise ModelBadResponse("the upstream sent a malformed Content-Length")
        n = int(length)
        if n > MAX_BODY:
            raise ModelBadResponse(f"the upstream's answer is larger than {MAX_BODY} bytes")
        return await reader.readexactly(n), True
    parts: list[bytes] = []  # HTTP/1.0 style: the body ends with the connection
    total = 0
    while chunk := await reader.read(65536):
        total += len(chunk)
        if total > MAX_BODY:
            raise ModelBadResponse(f"the upstream's answer is larger than {MAX_BODY} bytes")
        parts.append(chunk)
    return b"".join(parts), False


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0].strip(), 16)
        except (asyncio.LimitOverrunError, ValueError):
            raise ModelBadResponse("the upstream sent a malformed chunked body") from None
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers
            return b"".join(parts)
        total += size
        if total > MAX_BODY:
            raise ModelBadResponse(f"the upstream's answer is larger than {MAX_BODY} bytes")
        chunk = await reader.readexactly(size + 2)
        parts.append(chunk[:-2])


def _nothing_answered(exc: BaseException) -> bool:
    """Whether a failure on a reused connection happened before any byte of an answer."""
    if isinstance(exc, asyncio.IncompleteReadError):
        return not exc.partial
    return isinstance(exc, ConnectionResetError | BrokenPipeError)


# -- answers -------------------------------------------------------------------------------


def _decode(status: int, raw: bytes) -> dict[str, Any]:
    try:
        decoded = json.loads(raw)
    except ValueError:
        raise ModelBadResponse("the upstream's answer is not JSON; nothing was passed on") from None
    if not isinstance(decoded, dict):
        raise ModelBadResponse("the upstream's answer is not a JSON object")
    return decoded


def _status_error(status: int, headers: Mapping[str, str], raw: bytes) -> Exception:
    kind = _error_type(raw)
    message = f"the upstream model answered HTTP {status}{kind}"
    error: ModelError
    if status in (401, 403):
        error = ModelAuthError(f"{message}; check [model] api_key", status=status)
    elif status == 429:
        error = ModelRateLimited(
            f"{message} after the allowed retries; retry later or raise [model] max_retries",
            status=status,
        )
    else:
        error = ModelBadResponse(message, status=status)
    should = headers.get("x-should-retry", "").lower()
    retry = should == "true" or (should != "false" and (status in _RETRY_STATUSES or status >= 500))
    return _Retry(error, _retry_after(headers)) if retry else error


def _error_type(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return ""
    inner = body.get("error", body) if isinstance(body, dict) else None
    kind = inner.get("type") if isinstance(inner, dict) else None
    return f" ({kind})" if isinstance(kind, str) and kind.isprintable() and len(kind) < 64 else ""


def _retry_after(headers: Mapping[str, str]) -> float | None:
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            value = float(headers[name]) / scale
        except (KeyError, ValueError):
            continue
        if 0 <= value <= _MAX_RETRY_AFTER:
            return value
    return None


def _backoff(attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return retry_after
    # As the openai SDK: 0.5 s doubling, at most 8 s, minus up to 25 % jitter.
    return min(0.5 * 2.0**attempt, 8.0) * (1 - 0.25 * random.random())
