"""A property-based run over every route of the OpenAPI spec: no server error, ever.

Hypothesis draws path and query values (valid by the spec's patterns, or junk),
JSON bodies (well-formed chat requests, or arbitrary JSON) and credentials (each
key, or none) for every operation the app's own ``/openapi.json`` lists, and
checks that no answer is a 500 and that every error is in OpenAI's shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpllm.redact import Redactor
from dpllm.testing import FakeOpenAIServer
from tests.server.conftest import KEYS, make_settings


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, redactor: Redactor) -> Iterator[TestClient]:
    from dpllm.server import create_app

    root: Path = tmp_path_factory.mktemp("fuzz")
    with FakeOpenAIServer() as upstream:
        upstream.enqueue("About 160 responses. Call 13812345678.", times=5000)
        app = create_app(make_settings(root, upstream.base_url), redactor=redactor)
        with TestClient(app, raise_server_exceptions=False) as c:
            yield c


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method.upper(), op)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if method in {"get", "post"}
    ]


junk = st.text(st.characters(codec="utf-8", exclude_characters="/?#%"), max_size=20)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "system", "assistant", "", "x" * 70]),
            "content": st.one_of(
                st.text(max_size=40), st.none(), st.just([{"type": "text", "text": "hi"}])
            ),
        }
    ),
    max_size=3,
)
chat_bodies = st.fixed_dictionaries(
    {"messages": messages},
    optional={
        "model": st.text(max_size=10),
        "stream": st.booleans(),
        "temperature": st.floats(0, 2),
        "dpllm": st.one_of(
            st.just({"releases": []}),
            st.just({"releases": [{"name": "x"}]}),
            st.just({"bogus": 1}),
            st.dictionaries(st.text(max_size=5), json_values, max_size=2),
        ),
    },
)


def _param_value(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    options = schema.get("anyOf", [schema])
    typed = next((o for o in options if o.get("type") != "null"), schema)
    if typed.get("type") == "integer":
        return st.integers(-10, 5000)
    valid: st.SearchStrategy[Any]
    if "pattern" in typed:
        valid = st.from_regex(typed["pattern"], fullmatch=True)
    else:
        valid = st.sampled_from(["feedback_count", "weekly", "queued", "pending", "2026-W47"])
    return st.one_of(valid, junk)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_server_error_on_any_route(client: TestClient, data: st.DataObject) -> None:
    spec = client.get("/openapi.json").json()
    path, method, op = data.draw(st.sampled_from(_operations(spec)), label="operation")
    url = path
    params: dict[str, Any] = {}
    for p in op.get("parameters", []):
        value = data.draw(_param_value(p.get("schema", {})), label=p["name"])
        if p["in"] == "path":
            url = url.replace("{" + p["name"] + "}", quote(str(value), safe="") or "x")
        elif p["in"] == "query" and data.draw(st.booleans(), label=f"send {p['name']}"):
            params[p["name"]] = value
    who = data.draw(st.sampled_from([None, *KEYS]), label="key")
    headers = {"Authorization": f"Bearer {KEYS[who]}"} if who else {}
    body: Any = None
    if method == "POST":
        body = data.draw(st.one_of(chat_bodies, json_values), label="body")
    r = client.request(method, url, params=params, headers=headers, json=body)
    assert r.status_code < 500 or r.status_code in (502, 503, 504), (r.status_code, r.text)
    json_error = r.headers.get("content-type", "").startswith("application/json")
    # dpllm.ldp.ingest (another module) answers errors as {"error": code, "detail": ...}.
    if r.status_code >= 400 and json_error and not path.startswith("/v1/ldp/"):
        err = r.json()["error"]
        assert isinstance(err["message"], str) and isinstance(err["type"], str)
