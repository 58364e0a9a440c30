"""The proxy's lean upstream client: one JSON POST, one JSON answer, over aiohttp.

Why not the ``openai`` SDK's client for non-streaming chat: per forwarded call it
costs ~1.8 ms of CPU on the benchmark machine (request building, its retry and
auth layers, ``httpx``, ``httpcore``, ``anyio``, ``h11``), and more under 32
concurrent callers (pool bookkeeping, keep-alive churn). The proxy only posts a
JSON body and reads a JSON answer from one origin: :mod:`aiohttp`'s
``ClientSession`` (its HTTP parser in C, its keep-alive pool) does that in
~0.3 ms. The HTTP wire format is aiohttp's business: this module holds no HTTP
parser. ``bench/proxy_bench.py`` measures the proxy end to end.

Scope: plain ``http://`` upstreams reached directly (a model server on loopback
or the LAN: vLLM, llama.cpp, Ollama …). ``https://`` upstreams and upstreams
behind an HTTP proxy keep the SDK's client (TLS verification and proxy support
as the SDK does them): :func:`lean_eligible` decides.

Behaviour matches the SDK's client where it matters to callers:

* **retries**: ``max_retries`` more attempts after a connection error, a
  timeout, or HTTP 408, 409, 429 and 5xx (``x-should-retry`` overrides), waiting
  ``Retry-After`` (≤ 60 s) or an exponential backoff (0.5 s doubling, ≤ 8 s,
  with jitter); a kept-alive connection that the server closed before answering
  (most likely while idle, as our request went out — but it may have read it) is
  retried at once, without the backoff, as one of the ``max_retries``: a prompt
  goes out at most ``max_retries + 1`` times, as with the SDK. Idle connections
  are kept :data:`KEEPALIVE_SECONDS`, under common servers' idle timeout;
* **deadline**: one per call (``timeout`` seconds, or the caller's ``deadline``),
  covering every attempt and every wait between them: an attempt gets the time
  left, a wait (``Retry-After`` or backoff) that would end past the deadline is not
  made and the last error is raised instead; cancelling the call (the proxy does
  when its client disconnects) stops it, waits included;
* **redirects** are not followed (unlike the SDK's client: a prompt is not
  re-sent to another address; a 3xx is :class:`ModelBadResponse` asking for the
  final ``base_url``), cookies not kept, compressed answers not decoded
  (``Accept-Encoding: identity`` is asked for);
* **errors**, as dpllm's own (:func:`dpllm.server.errors.status_and_body` turns
  them into OpenAI-shaped answers):

  =================================================  =========================  ======
  upstream                                           raised                     answer
  =================================================  =========================  ======
  refused / reset / closed connection                :class:`ModelUnreachable`  502
  no answer by the deadline                          :class:`ModelTimeout`      504
  HTTP 401, 403                                      :class:`ModelAuthError`    502
  HTTP 429 (after the retries)                       :class:`ModelRateLimited`  429
  HTTP 400, 404, 405, 409, 413, 415, 422             :class:`ModelBadResponse`  same
  other HTTP ≥ 400, or a redirect (3xx)              :class:`ModelBadResponse`  502
  malformed HTTP, not a JSON object, > 64 MiB        :class:`ModelBadResponse`  502
  =================================================  =========================  ======

  Status errors carry the upstream's status (``exc.status``) and its error
  ``type`` when that is an identifier, never its error message (which may quote
  the prompt). aiohttp's
  exceptions never leave this module. "Malformed HTTP" is what aiohttp's parser
  refuses, e.g. a header line over 8,190 bytes. A chunked body whose framing
  breaks after its first bytes arrived is not reported by aiohttp's C parser
  (3.14), which closes the connection but leaves the body's read open: the read
  is raced against that close (:func:`_read_body`), a 502 at once.

The API key is sent in ``Authorization`` and kept nowhere else (no repr, no log).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import urllib.parse
import weakref
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

import aiohttp
from aiohttp.http import HttpProcessingError

from dpllm.errors import (
    ModelAuthError,
    ModelBadResponse,
    ModelError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnreachable,
)

__all__ = ["MAX_BODY", "MAX_CONNECTIONS", "UpstreamClient", "lean_eligible"]

MAX_BODY = 64 * 1024 * 1024
"""The largest upstream answer read (bytes); a larger one is refused."""

MAX_CONNECTIONS = 1000
"""Connections open to the upstream at most (the SDK's default pool: ``max_connections``)."""

KEEPALIVE_SECONDS = 4.0
"""How long an idle connection is kept: under the 5 s idle timeout of uvicorn-based model
servers (vLLM …), so that a connection the server is about to close is rarely reused."""

_RETRY_STATUSES = frozenset({408, 409, 429})
_ERROR_TYPE = re.compile(r"[A-Za-z0-9_.-]{1,40}")
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
    return _bypassed(parts.hostname, parts.port or 80, env.get("no_proxy", ""))


def _bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` names ``host:port``, by httpx's rules (the SDK's client).

    ``*`` is every host; ``example.com`` is that host and its subdomains;
    ``.example.com`` and ``*.example.com`` only its subdomains; an entry with a
    port (``localhost:9000``, ``[::1]:8000``) only that port.
    """
    host = host.lower()
    for entry in no_proxy.lower().split(","):
        entry = entry.strip()
        if entry == "*":
            return True
        want_port = None
        if entry.startswith("["):  # [::1] or [::1]:8000
            name, _, rest = entry[1:].partition("]")
            if rest.startswith(":") and rest[1:].isdigit():
                want_port = int(rest[1:])
            entry = name
        elif entry.count(":") == 1:  # host:port
            entry, _, port_text = entry.partition(":")
            if not port_text.isdigit():
                continue
            want_port = int(port_text)
        if want_port is not None and want_port != port:
            continue
        if entry.startswith(("*.", ".")):
            if host.endswith("." + entry.lstrip("*.")):
                return True
        elif entry and (host == entry or host.endswith("." + entry)):
            return True
    return False


class _Retry(Exception):
    """An attempt failed in a way the SDK would retry (internal)."""

    def __init__(self, error: ModelError, delay: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.delay = delay


async def _close(
    session: aiohttp.ClientSession | None, loop: asyncio.AbstractEventLoop | None
) -> None:
    """Close ``session``, which belongs to ``loop``, from whatever loop is running."""
    if session is None or session.closed or loop is None:
        return
    if loop is asyncio.get_running_loop() or loop.is_closed():
        await session.close()  # a closed loop's connections: aiohttp lets them go
    elif loop.is_running():  # another thread's
        asyncio.run_coroutine_threadsafe(session.close(), loop)


_REUSED: ContextVar[bool] = ContextVar("dpllm_upstream_reused", default=False)
"""Whether the request being made in this task went out on a kept-alive connection."""


class _Connector(aiohttp.TCPConnector):
    """aiohttp's connector, noting (in :data:`_REUSED`) whether the connection it hands
    out has carried a request before.

    aiohttp's tracing says the same, but a trace config costs every request a dozen
    signal dispatches (~10 % of the client's CPU); this is one set lookup. The
    connector is called in the requesting task (``ClientSession`` awaits it), so the
    context variable is the caller's. Should a later aiohttp call it elsewhere, every
    connection reads as fresh: a stale one is then retried with the backoff, still
    within ``max_retries`` (slower, never more attempts).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._carried: weakref.WeakSet[Any] = weakref.WeakSet()

    async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:
        connection = await super().connect(req, traces, timeout)
        protocol = connection.protocol  # a queue: falsy when empty, hence ``is not None``
        if protocol is not None:
            _REUSED.set(protocol in self._carried)
            self._carried.add(protocol)
        return connection


class UpstreamClient:
    """Posts JSON to an OpenAI-compatible ``http://`` server over kept-alive connections.

    Args:
        base_url: the upstream's base URL (``http://host:8000/v1``).
        api_key: sent as ``Authorization: Bearer …`` (omitted when empty).
        timeout: seconds per call, every attempt and wait included (the default
            deadline of :meth:`post_json`).
        max_retries: further attempts after a retryable failure.
        user_agent: the ``User-Agent`` header.

    Raises:
        ValueError: not an ``http://`` URL, a parameter out of range, or a line
            break in the key or the user agent.
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
        # aiohttp refuses these too (ValueError), but only at the first request.
        if any(c in api_key or c in user_agent for c in "\r\n\0"):
            raise ValueError("the API key and user agent must be one line (they are HTTP headers)")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.base_path = parts.path.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        authority = parts.netloc.rpartition("@")[2]  # userinfo is neither sent nor used
        self._base = f"http://{authority}{self.base_path}"
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            "User-Agent": user_agent,
        }
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # A session (its connections) belongs to the event loop that made it: an
        # app served again by a new loop gets a new one.
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # no key
        return f"<UpstreamClient http://{self.host}:{self.port}{self.base_path}>"

    async def aclose(self) -> None:
        """Close the connections; later calls open new ones."""
        session, loop = self._session, self._loop
        self._session = self._loop = None
        await _close(session, loop)

    async def _session_here(self) -> aiohttp.ClientSession:
        """This event loop's session; the one of an earlier loop is then closed."""
        loop = asyncio.get_running_loop()
        session = self._session
        if session is not None and self._loop is loop and not session.closed:
            return session
        old, old_loop = session, self._loop
        session = aiohttp.ClientSession(
            connector=_Connector(limit=MAX_CONNECTIONS, keepalive_timeout=KEEPALIVE_SECONDS),
            timeout=self._timeout,
            headers=self._headers,
            cookie_jar=aiohttp.DummyCookieJar(),  # the upstream's cookies are not kept
            auto_decompress=False,  # Accept-Encoding: identity; no decompression bombs
        )
        # Installed before anything is awaited, so that concurrent first calls on this
        # loop share it; then the earlier loop's session is closed.
        self._session, self._loop = session, loop
        await _close(old, old_loop)
        return session

    async def post_json(
        self, path: str, body: Mapping[str, Any], *, deadline: float | None = None
    ) -> dict[str, Any]:
        """POST ``body`` as JSON to ``base_url + path``; the decoded JSON object answered.

        Every attempt, and every wait between attempts, fits before ``deadline``
        (the event loop's clock; default: ``timeout`` seconds from now): an attempt
        gets the time that is left, and a retry whose wait (``Retry-After`` or the
        backoff) would end past the deadline is not made: the last error is raised.
        Cancelling the call (the client went away) stops it, waits included.

        .. versionchanged:: 0.2
           ``timeout`` bounds the whole call, retries included, not each attempt.

        Raises:
            ModelUnreachable, ModelTimeout, ModelAuthError, ModelRateLimited,
            ModelBadResponse: see the module docstring.
            ValueError: ``body`` cannot be encoded as JSON (NaN, infinities …).
        """
        payload = json.dumps(body, allow_nan=False).encode()
        url = self._base + path
        loop = asyncio.get_running_loop()
        if deadline is None:
            deadline = loop.time() + self.timeout
        attempt = 0
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise self._timed_out()
            try:
                return _decode(await self._attempt(url, payload, left))
            except _Retry as retry:
                if attempt >= self.max_retries:
                    raise retry.error from None
                wait = _backoff(attempt, retry.delay)
                if loop.time() + wait >= deadline:
                    raise retry.error from None  # Retry-After beyond the deadline: not honoured
                await asyncio.sleep(wait)
                attempt += 1

    def _timed_out(self) -> ModelTimeout:
        return ModelTimeout(
            f"the upstream model did not answer within {self.timeout:g} s (the [model] timeout)"
        )

    # -- one attempt ---------------------------------------------------------------
    async def _attempt(self, url: str, payload: bytes, left: float) -> bytes:
        session = await self._session_here()
        timeout = self._timeout if left >= self.timeout else aiohttp.ClientTimeout(total=left)
        try:
            _REUSED.set(False)
            try:
                return await self._exchange(session, url, payload, timeout)
            except aiohttp.ClientConnectionError as exc:
                # not ClientConnectorError (connecting failed) nor a timeout (the time is
                # up); a body cut short is a ClientPayloadError
                if not _REUSED.get() or isinstance(
                    exc, aiohttp.ClientConnectorError | TimeoutError
                ):
                    raise
            # A kept-alive connection closed with nothing answered: most likely the server
            # closed it while idle, but it may have read the request first, so this is a
            # retry like any other (counted against max_retries, as the SDK counts it),
            # only without the backoff.
            raise _Retry(
                ModelUnreachable(
                    "the upstream model closed a kept-alive connection without answering; "
                    "check that the server is running"
                ),
                delay=0.0,
            )
        except (ModelError, _Retry):
            raise  # answered (ModelAuthError is a PermissionError, an OSError)
        except TimeoutError:  # aiohttp's ServerTimeoutError is one too
            raise _Retry(self._timed_out()) from None
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError):
            # refused or reset, closed before the answer, or closed in the middle of its
            # body (ClientPayloadError: "Response payload is not completed")
            raise _Retry(
                ModelUnreachable(
                    "the upstream model cannot be reached (connection refused, reset or "
                    "closed); check [model] base_url and that the server is running"
                )
            ) from None
        except (aiohttp.ClientError, HttpProcessingError):
            # aiohttp's parser refused the answer: ClientResponseError from the C parser,
            # HttpProcessingError straight from the pure-Python one (AIOHTTP_NO_EXTENSIONS)
            raise ModelBadResponse("the upstream did not answer in well-formed HTTP/1.x") from None

    @staticmethod
    async def _exchange(
        session: aiohttp.ClientSession,
        url: str,
        payload: bytes,
        timeout: aiohttp.ClientTimeout,
    ) -> bytes:
        """One request and its answer's body; HTTP errors raised as dpllm's."""
        async with session.post(
            url, data=payload, allow_redirects=False, timeout=timeout
        ) as response:
            raw = await _read_body(response)
            if response.status >= 400:
                raise _status_error(response.status, response.headers, raw)
            if 300 <= response.status < 400:
                raise ModelBadResponse(
                    f"the upstream answered a redirect (HTTP {response.status}); dpllm does not "
                    "re-send prompts to another address: set [model] base_url to the address "
                    "in its Location header",
                    status=response.status,
                )
            return raw


async def _read_body(response: aiohttp.ClientResponse) -> bytes:
    length = response.content_length
    if length is not None and length > MAX_BODY:
        raise ModelBadResponse(f"the upstream's answer is larger than {MAX_BODY} bytes")
    if length is not None:
        return await response.read()  # aiohttp reads exactly Content-Length bytes
    # Chunked, or ended by the connection. aiohttp's C parser (3.14), on a chunk whose
    # framing breaks after the first bytes, closes the connection but never ends the
    # body's read: the read is raced against the connection's close, and a body still
    # open once the close has been delivered is a broken one (502 at once, not 504 later).
    reader = asyncio.ensure_future(_read_chunks(response))
    # (a protocol is a queue: falsy when empty, hence the ``is not None``)
    protocol = response.connection.protocol if response.connection is not None else None
    closed = protocol.closed if protocol is not None else None
    if closed is None:
        return await reader
    try:
        waiters: set[asyncio.Future[Any]] = {reader, closed}
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for _ in range(3):  # the close's end-of-body reaches the reader in a loop turn
            if reader.done():
                break
            await asyncio.sleep(0)
    finally:
        if closed.done() and not closed.cancelled():
            closed.exception()  # retrieved: the close is reported through the read
        broken = not reader.done()
        if broken:
            reader.cancel()
    if broken:
        raise ModelBadResponse(
            "the upstream's answer broke off mid-body (malformed chunked framing); "
            "nothing was passed on"
        )
    return reader.result()


async def _read_chunks(response: aiohttp.ClientResponse) -> bytes:
    parts: list[bytes] = []  # counted as it comes
    total = 0
    async for chunk in response.content.iter_any():
        total += len(chunk)
        if total > MAX_BODY:
            raise ModelBadResponse(f"the upstream's answer is larger than {MAX_BODY} bytes")
        parts.append(chunk)
    return b"".join(parts)


# -- answers -------------------------------------------------------------------------------


def _decode(raw: bytes) -> dict[str, Any]:
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
    # Only an identifier: the type is the model server's text, which no guard reads.
    return f" ({kind})" if isinstance(kind, str) and _ERROR_TYPE.fullmatch(kind) else ""


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
