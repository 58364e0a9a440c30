"""Schemathesis over the app's own OpenAPI document, every check on: no 5xx the document
does not allow, every status and content type documented, schema-valid requests accepted,
schema-violating ones refused, response bodies as documented.

A live ``dpllm serve`` (uvicorn, the real redactor, a fake upstream that always answers)
is fuzzed over HTTP with alice's key. ``DPLLM_FUZZ_EXAMPLES`` examples per operation
(25 in the suite; ``make fuzz`` runs 500).

Two things the document cannot say, supplied here:

* the key: schemathesis sends alice's key (an auth provider, so that it knows the
  credentials are the caller's, not generated data);
* a valid release: ``dpllm.releases`` items are ``Release.to_dict()`` objects whose
  invariants (the interval holds the value, the cost matches the mechanism …) JSON
  Schema cannot express; schema-valid (positive) chat bodies get a real release in
  place of each drawn one. Negative bodies are left as drawn.

The local-DP endpoints (``/v1/ldp/…``, :mod:`dpllm.ldp.ingest`) answer their own error
shape and validate reports against the configured metrics (an unknown metric or a wrong
ε is a 422, which no schema can foresee): they are fuzzed separately, configured, with
every check but positive-data acceptance.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from dpllm.config import Settings
from dpllm.redact import Redactor
from dpllm.testing import FakeOpenAIServer
from tests.server.conftest import KEYS, RESPONSES, LiveServer, config_text, make_settings

EXAMPLES = int(os.environ.get("DPLLM_FUZZ_EXAMPLES", "25"))


class AliceKey:
    """Schemathesis auth provider: alice's API key on every request."""

    def get(self, case: Any, ctx: Any) -> str:
        return KEYS["alice"]

    def set(self, case: Any, data: str, ctx: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


# The documents are built at collection time by apps that open their stores (the LDP
# report store, the ledger) relative to base_dir: keep them out of the working tree.
_SCRATCH = tempfile.mkdtemp(prefix="dpllm-openapi-")
atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)


def _valid_releases(ctx: Any, case: Any) -> Any:
    meta = case.meta
    body = case.body
    if (
        case.operation.path != "/v1/chat/completions"
        or meta is None
        or not meta.generation.mode.is_positive
        or not isinstance(body, dict)
        or not isinstance(body.get("dpllm"), dict)
    ):
        return case
    options = body["dpllm"]
    releases = options.get("releases")
    if isinstance(releases, list):
        options["releases"] = [RESPONSES.to_dict() for _ in releases]
    elif isinstance(releases, dict):
        options["releases"] = {name: RESPONSES.to_dict() for name in releases}
    return case


def _document() -> dict[str, Any]:
    """The OpenAPI document of an app configured as the live one (the upstream's address
    is not in it; no file is opened to build it)."""
    from dpllm.chat.protection import NoRedaction
    from dpllm.server import create_app

    settings = Settings.parse(config_text("http://127.0.0.1:9/v1"), base_dir=_SCRATCH)
    return create_app(settings, redactor=NoRedaction()).openapi()


schema = schemathesis.openapi.from_dict(_document()).exclude(path_regex="^/v1/ldp/")
schema.auth()(AliceKey)


def _complete_week(ctx: Any, case: Any) -> Any:
    """A schema-valid request names a complete ISO week, as a regex cannot say.

    ``week`` is any string up to 32 characters to the schema; which strings are weeks
    whose data is complete depends on the day (a future or unfinished week is a 400),
    so a positive case asks for a week that ended. Negative and other cases keep what
    was drawn: a malformed week must be a 400.
    """
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or not case.query:
        return case
    if "week" in case.query:
        case.query = {**case.query, "week": "2026-W40"}
    return case


def _positive_case(ctx: Any, case: Any) -> Any:
    return _complete_week(ctx, _valid_releases(ctx, case))


schema.hook("map_case")(_positive_case)


@pytest.fixture(scope="module")
def live_url(tmp_path_factory: pytest.TempPathFactory, redactor: Redactor) -> Iterator[str]:
    from dpllm.server import create_app

    root: Path = tmp_path_factory.mktemp("schemathesis")
    with FakeOpenAIServer() as upstream:
        upstream.enqueue("About 160 responses. Call 13812345678.", times=1_000_000)
        app = create_app(make_settings(root, upstream.base_url), redactor=redactor)
        with LiveServer(app) as live:
            yield live.url


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_the_api_is_what_its_document_says(case: Any, live_url: str) -> None:
    case.call_and_validate(base_url=live_url)  # every built-in check


def test_the_document_names_what_the_server_answers() -> None:
    spec = _document()
    for path, item in spec["paths"].items():
        for method, op in item.items():
            statuses = set(op["responses"])
            assert {"413", "431"} <= statuses, (path, method)
            if path.startswith("/v1/ldp/"):
                assert "503" in statuses, (path, method)  # not configured
            elif path != "/v1/chat/completions":  # (there: an upstream 422, passed through)
                assert "422" not in statuses, (path, method)  # validation errors are 400
    chat = spec["paths"]["/v1/chat/completions"]["post"]
    assert {"400", "401", "502", "503", "504"} <= set(chat["responses"])
    body = chat["requestBody"]["content"]["application/json"]["schema"]
    assert {"type": "null"} in body["properties"]["dpllm"]["anyOf"]
    assert body["properties"]["n"]["anyOf"][0]["maximum"] == 8
    stats = spec["paths"]["/v1/stats/{query}"]["get"]
    assert {"202", "403", "404", "409", "429", "503"} <= set(stats["responses"])


# -- the local-DP endpoints, configured ----------------------------------------------------

LDP = """
[ldp]
store = "ldp.db"
[ldp.metrics.course_rating]
mechanism = "krr"
epsilon = 1.0
domain = [1, 2, 3, 4, 5]
"""


def _ldp_document() -> dict[str, Any]:
    from dpllm.chat.protection import NoRedaction
    from dpllm.server import create_app

    settings = Settings.parse(config_text("http://127.0.0.1:9/v1", extra=LDP), base_dir=_SCRATCH)
    return create_app(settings, redactor=NoRedaction()).openapi()


ldp_schema = schemathesis.openapi.from_dict(_ldp_document()).include(path_regex="^/v1/ldp/")
ldp_schema.auth()(AliceKey)


@pytest.fixture(scope="module")
def ldp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from dpllm.chat.protection import NoRedaction
    from dpllm.server import create_app

    root: Path = tmp_path_factory.mktemp("schemathesis-ldp")
    settings = make_settings(root, "http://127.0.0.1:9/v1", extra=LDP)
    with LiveServer(create_app(settings, redactor=NoRedaction())) as live:
        yield live.url


@ldp_schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_ldp_endpoints_are_what_the_document_says(case: Any, ldp_url: str) -> None:
    """Every check but positive-data acceptance: a report is validated against the
    configured metrics (an unknown metric, a wrong ε … is a 422), which the document's
    schema cannot say."""
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    case.call_and_validate(base_url=ldp_url, excluded_checks=[positive_data_acceptance])
