"""A chat body that is not JSON says why: an empty body was told "NaN and infinities are not JSON"."""

from __future__ import annotations

import pytest
from fastapi.exceptions import RequestValidationError

from dpllm.server.routes_chat import parse_chat_request


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"", "the body is empty"),
        (b"   ", "the body is empty"),
        (b"{not json}", "Expecting property name"),
        (b'{"n": NaN}', "NaN is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_the_message_says_what_is_wrong(raw: bytes, why: str) -> None:
    with pytest.raises(RequestValidationError) as info:
        parse_chat_request(raw)
    assert why in str(info.value.errors()), info.value.errors()


def test_a_number_out_of_range_is_refused_with_its_reason() -> None:
    from dpllm.server.limits import RequestRejected

    with pytest.raises(RequestRejected, match="out of range"):
        parse_chat_request(b'{"n": 1e400}')
