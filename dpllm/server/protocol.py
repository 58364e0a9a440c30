"""The HTTP server's own limit on request heads, before any ASGI code runs.

uvicorn's ``h11`` protocol refuses a head over ``h11_max_incomplete_event_size``
bytes; its ``httptools`` protocol (the faster one, used when installed) has no
such limit and buffers whatever arrives: one 64 MB ``Authorization`` header cost
~200 MB of memory before the key was checked. :class:`LimitedHttpToolsProtocol`
gives it the same limit (the same setting), feeding the parser no more than
``limit`` bytes of a head: past that the connection is answered 431 and closed.

:func:`uvicorn_options` is what ``dpllm serve`` (and the tests' live server) pass
to uvicorn.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from dpllm.config import ServerLimits
from dpllm.server.limits import refusal

__all__ = ["LimitedHttpToolsProtocol", "uvicorn_options"]


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a bound on each request head (line + headers).

    The bound is uvicorn's ``h11_max_incomplete_event_size`` (as for its h11
    protocol). Bytes are counted from the end of one message to the end of the
    next head; a head still open after ``limit`` bytes is refused (431).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_limit = (
            self.config.h11_max_incomplete_event_size or ServerLimits().max_header_bytes
        )
        self._in_head = True
        self._head_bytes = 0

    def data_received(self, data: bytes) -> None:
        if not self._in_head:
            super().data_received(data)
            return
        room = self._head_limit - self._head_bytes
        if len(data) <= room:
            self._head_bytes += len(data)
            super().data_received(data)
            return
        # Feed only what the head may still take (plus one byte: the parser must see
        # the head go over, not stop exactly at the limit).
        first, rest = data[: room + 1], data[room + 1 :]
        self._head_bytes += len(first)
        super().data_received(first)
        if self.transport.is_closing():
            return
        if self._in_head:
            self._refuse()
            return
        if rest:
            self.data_received(rest)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0

    def _refuse(self) -> None:
        headers, body = refusal(
            431,
            f"the request's headers are larger than {self._head_limit} bytes "
            "([server.limits] max_header_bytes)",
            "headers_too_large",
        )
        head = [b"HTTP/1.1 431 Request Header Fields Too Large\r\n"]
        head += [name + b": " + value + b"\r\n" for name, value in headers]
        head.append(b"connection: close\r\n\r\n")
        self.transport.write(b"".join(head) + body)
        self.transport.close()


def uvicorn_options(limits: ServerLimits) -> dict[str, Any]:
    """uvicorn settings that enforce ``limits.max_header_bytes`` in the HTTP server."""
    options: dict[str, Any] = {"h11_max_incomplete_event_size": limits.max_header_bytes}
    try:
        import httptools  # noqa: F401
    except ImportError:  # uvicorn falls back to h11, which honours the same setting
        options["http"] = "h11"
    else:
        options["http"] = LimitedHttpToolsProtocol
    return options
