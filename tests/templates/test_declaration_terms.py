"""``terms:`` lines in a template's front matter, and attaching them to releases."""

from __future__ import annotations

import pytest

from dpllm.errors import TemplateError
from dpllm.release import Cost, Release
from dpllm.templates.declaration import Declaration

HEADER = """{#- dpllm
releases: mean_rating, topic_counts
terms: mean_rating = en: mean rating | average rating; zh: 平均评分
terms: topic_counts.refund = en: refunds; zh: 退款
-#}
body"""


def _rel(name: str, labels: tuple[str, ...] = (), **kw: object) -> Release:
    n = max(1, len(labels))
    return Release(
        name=name, values=(1.0,) * n, intervals=((0.0, 2.0),) * n, mechanism="laplace",
        noise_scale=1.0, cost=Cost.pure(0.1), fingerprint=f"fp-{name}", labels=labels, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_terms_are_parsed_in_order() -> None:
    decl = Declaration.from_source(HEADER)
    assert decl is not None
    assert decl.terms == (
        ("mean_rating", "en", "mean rating"),
        ("mean_rating", "en", "average rating"),
        ("mean_rating", "zh", "平均评分"),
        ("topic_counts.refund", "en", "refunds"),
        ("topic_counts.refund", "zh", "退款"),
    )


def test_with_terms_fills_releases_without_terms_and_keeps_fingerprints() -> None:
    decl = Declaration.from_source(HEADER)
    assert decl is not None
    own = _rel("mean_rating", terms=(("en", "score"),))
    out = decl.with_terms(
        {"mean_rating": own, "topic_counts": _rel("topic_counts", ("refund", "video"))}
    )
    assert out["mean_rating"] is own  # a release's own terms win
    topics = out["topic_counts"]
    assert topics.fingerprint == "fp-topic_counts"
    assert topics["refund"].terms == (("en", "refunds"), ("zh", "退款"))
    assert topics["video"].terms == ()
    fresh = decl.with_terms({"mean_rating": _rel("mean_rating")})["mean_rating"]
    assert fresh.terms_in("en") == ("mean rating", "average rating")


@pytest.mark.parametrize(
    "line", ["terms: mean_rating", "terms: mean_rating = fr: note", "terms: = en: x"]
)
def test_malformed_terms_name_the_line(line: str) -> None:
    with pytest.raises(TemplateError, match="line 3"):
        Declaration.from_source(f"{{#- dpllm\nreleases: mean_rating\n{line}\n-#}}\n")
