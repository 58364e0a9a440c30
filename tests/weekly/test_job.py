"""The weekly job end to end on demo data: offline, rerun, exhausted budget, loopback model."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpllm.config import ModelSettings
from dpllm.data.demo import DEMO_COURSES, DemoData
from dpllm.data.queries import FeedbackCount
from dpllm.errors import BudgetExceeded, ConfigError, DataError
from dpllm.ledger.base import PoolSpec
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Measure, to_micro
from dpllm.testing import FakeOpenAIServer
from dpllm.weekly.job import WeeklyJob, WeeklyReport, run_weekly
from dpllm.weekly.report import REPORT_JSON, REPORT_MD, write_report
from dpllm.weekly.wiring import build_plan
from tests.weekly.helpers import (
    WEEK,
    make_demo,
    pii_values,
    scan_outputs,
    settings_for,
    shared_redactor,
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DemoData]:
    return make_demo(tmp_path_factory.mktemp("demo"))


def _run(root: Path, db: Path, **changes: object) -> tuple[WeeklyReport, Path]:
    settings = settings_for(root, db, **changes)
    report = run_weekly(settings, WEEK, redactor=shared_redactor(), courses=DEMO_COURSES)
    folder = settings.resolve(settings.output_dir) / WEEK
    write_report(report, folder)
    return report, folder


def _balances(root: Path) -> list[tuple[str, int, int]]:
    ledger = SQLiteLedger(root / "ledger.db")
    try:
        return [(b.pool, b.spent, b.lifetime_spent) for b in ledger.balances()]
    finally:
        ledger.close()


def test_offline_end_to_end_writes_report(tmp_path: Path, demo: tuple[Path, DemoData]) -> None:
    db, data = demo
    steps: list[str] = []
    settings = settings_for(tmp_path, db)
    report = run_weekly(
        settings, WEEK, redactor=shared_redactor(), courses=DEMO_COURSES, progress=steps.append
    )
    folder = tmp_path / "reports" / WEEK
    written = write_report(report, folder)

    assert steps == ["statistics", "render", "redactor", "generate"]
    assert report.model == "offline" and report.model_error is None
    assert set(report.fresh) == set(build_plan(settings)) and report.spent.epsilon == 1.6
    assert set(report.derived) == {"share_positive", "share_negative"}
    assert report.text.startswith("Weekly feedback summary")
    assert set(written) == {REPORT_MD, REPORT_JSON, "rating_histogram.png", "trend.png"}
    md = (folder / REPORT_MD).read_text("utf-8")
    assert "## Figures" in md and "## Privacy budget" in md and "rating_histogram[5]" in md
    assert "This run charged ε = 1.6 (5 releases)." in md
    doc = json.loads((folder / REPORT_JSON).read_text("utf-8"))
    assert doc["week"] == WEEK and doc["source"] == "offline"
    assert doc["releases"]["mean_rating"]["charged_this_run"] is True
    assert [b["pool"] for b in doc["budget"]] == ["weekly", "global"]
    assert doc["budget"][0]["spent"] == pytest.approx(1.6)
    assert doc["attempts"] and all(a["violations"] == [] for a in doc["attempts"])
    # Timings depend on the raw data, unnoised: kept for the operator, never published.
    assert "timings" not in doc and "statistics_s" not in json.dumps(doc)
    assert set(report.timings) >= {"statistics_s", "generate_s"}


def test_rerun_spends_nothing_and_repeats_the_figures(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    db, _ = demo
    first, folder = _run(tmp_path, db)
    before = _balances(tmp_path)
    doc1 = json.loads((folder / REPORT_JSON).read_text("utf-8"))
    second, _ = _run(tmp_path, db)
    doc2 = json.loads((folder / REPORT_JSON).read_text("utf-8"))

    assert second.fresh == () and second.spent.is_zero
    assert _balances(tmp_path) == before
    assert {n: r.to_dict() for n, r in second.releases.items()} == {
        n: r.to_dict() for n, r in first.releases.items()
    }
    assert second.derived == first.derived
    for doc in (doc1, doc2):
        for rel in doc["releases"].values():
            rel.pop("charged_this_run")
    assert doc1["releases"] == doc2["releases"] and doc1["budget"] == doc2["budget"]
    assert "This run spent nothing" in (folder / REPORT_MD).read_text("utf-8")


def test_exhausted_budget_spends_nothing(tmp_path: Path, demo: tuple[Path, DemoData]) -> None:
    db, _ = demo
    tight = (
        PoolSpec("global", Measure.PURE, window_cap=to_micro(2.0), lifetime_cap=to_micro(20.0)),
        PoolSpec("weekly", Measure.PURE, window_cap=to_micro(1.0), parent="global"),
    )
    settings = settings_for(tmp_path, db, pools=tight)
    with pytest.raises(BudgetExceeded) as info:
        run_weekly(settings, WEEK, redactor=shared_redactor(), courses=DEMO_COURSES)
    message = str(info.value)
    assert "'weekly' has ε 1 left" in message and "asks ε 1.6" in message
    assert "nothing was spent" in message
    assert info.value.requested == pytest.approx(1.6) and info.value.remaining == 1.0
    assert all(spent == 0 for _, spent, _ in _balances(tmp_path))
    assert not (tmp_path / "reports").exists()


def test_partly_cached_plan_only_needs_the_rest(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    db, _ = demo
    settings = settings_for(tmp_path, db)
    with WeeklyJob(settings, redactor=shared_redactor(), courses=DEMO_COURSES) as job:
        job.release(WEEK, {"mean_rating": job.plan["mean_rating"]})
        assert set(job.uncached(WEEK)) == set(job.plan) - {"mean_rating"}
        report = job.run(WEEK)
    assert "mean_rating" in report.cached and report.spent.epsilon == pytest.approx(1.1)


def test_bad_input_fails_before_any_charge(tmp_path: Path, demo: tuple[Path, DemoData]) -> None:
    db, _ = demo
    with pytest.raises(DataError, match="malformed window"):
        run_weekly(settings_for(tmp_path, db), "2026-47", redactor=shared_redactor())
    missing = settings_for(tmp_path, tmp_path / "nope.db")
    with pytest.raises(DataError, match="does not exist"):
        run_weekly(missing, WEEK, redactor=shared_redactor())
    settings = settings_for(tmp_path, db)
    columns = {**settings.data.columns, "timestamp": "created_at"}
    wrong = dataclasses.replace(settings, data=dataclasses.replace(settings.data, columns=columns))
    with pytest.raises(DataError, match="unknown column 'created_at'"):
        run_weekly(wrong, WEEK, redactor=shared_redactor())
    short_plan = dataclasses.replace(settings, plan=settings.plan[:2])
    with pytest.raises(ConfigError, match="needs the releases mean_rating, rating_histogram"):
        run_weekly(short_plan, WEEK, redactor=shared_redactor())
    assert all(spent == 0 for _, spent, _ in _balances(tmp_path))


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(model="loopback-model") as srv:
        yield srv


def test_loopback_model_regenerates_an_over_precise_answer(
    tmp_path: Path, demo: tuple[Path, DemoData], server: FakeOpenAIServer
) -> None:
    db, data = demo
    phone = next(p.value for p in data.pii if p.kind == "phone")
    server.enqueue(
        f"Students left 1,537 feedback records and the mean rating was 3.6123 stars. "
        f"One student asked to be called at {phone}."
    )
    server.enqueue(
        "Feedback this week was broadly positive: most ratings were 4 or 5 stars, and the "
        "figures above are approximate by design."
    )
    model = ModelSettings(
        provider="openai", base_url=server.base_url, api_key="test", model="loopback-model",
        max_retries=0, timeout=10.0,
    )  # fmt: skip
    report, folder = _run(tmp_path, db, model=model)

    gen = report.generation
    assert gen.source == "model" and gen.model_calls == 2 and report.model == "loopback-model"
    first, second = gen.attempts
    assert {str(v.rule) for v in first.violations} >= {"over-precise"}
    assert first.text is not None and phone not in first.text and "<PHONE_NUMBER>" in first.text
    assert first.redaction_counts.get("PHONE_NUMBER") == 1
    assert second.violations == () and report.text == second.text
    follow_up = server.completion_requests[1].messages[-1]["content"]
    assert follow_up.startswith("Your previous answer states figures more precisely")
    doc = json.loads((folder / REPORT_JSON).read_text("utf-8"))
    assert doc["model"] == "loopback-model" and len(doc["attempts"]) == 2
    assert any(v["allowed"] for v in doc["attempts"][0]["violations"])
    assert doc["redaction_counts"] == {"PHONE_NUMBER": 1}
    assert scan_outputs(folder, pii_values(data)) == []


def test_model_failure_falls_back_and_says_so(
    tmp_path: Path, demo: tuple[Path, DemoData], server: FakeOpenAIServer
) -> None:
    db, _ = demo
    server.enqueue_error(500, "upstream down")
    model = ModelSettings(provider="openai", base_url=server.base_url, api_key="t", max_retries=0)
    report, folder = _run(tmp_path, db, model=model)
    assert report.generation.source == "fallback"
    assert report.model_error is not None and "ModelBadResponse" in report.model_error
    assert "Model error" in (folder / REPORT_MD).read_text("utf-8")


def test_no_output_file_holds_embedded_pii(tmp_path: Path, demo: tuple[Path, DemoData]) -> None:
    db, data = demo
    _, folder = _run(tmp_path, db)
    _run(tmp_path / "zh", db, lang="zh")
    needles = pii_values(data)
    assert len(needles) > 20  # the generator did embed personal data to look for
    assert scan_outputs(tmp_path / "reports", needles) == []
    assert scan_outputs(tmp_path / "zh" / "reports", needles) == []


def test_the_statistics_step_reads_the_week_once_for_the_shareable_queries(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    """The plan goes through ``release_all``: one per-user read for count, active
    users, mean and histogram, one for topics; a rerun reads nothing."""
    from dpllm.data.engines import SQLiteEngine
    from dpllm.data.sql import Statement

    db, _ = demo

    class Counting(SQLiteEngine):
        reads: list[str] = []

        def fetch(self, statement: Statement, *, query: str = "?") -> list[tuple[object, ...]]:
            self.reads.append(query)
            return super().fetch(statement, query=query)

    settings = settings_for(tmp_path, db)
    engine = Counting(db)
    with WeeklyJob(settings, engine=engine, redactor=shared_redactor()) as job:
        assert set(job.plan) == {
            "feedback_count",
            "active_users",
            "mean_rating",
            "rating_histogram",
            "topic_counts",
        }
        report = job.run(WEEK)
        assert set(report.fresh) == set(job.plan)
        assert len(Counting.reads) == 2 and Counting.reads[0].startswith("shared summary")
        assert job.run(WEEK).fresh == ()
    assert len(Counting.reads) == 2


def test_release_weeks_charges_each_week_once_from_one_read(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    db, _ = demo
    weeks = ["2026-W45", "2026-W46", "2026-W47"]
    with WeeklyJob(settings_for(tmp_path, db), courses=DEMO_COURSES) as job:
        trend = {n: job.plan[n] for n in ("mean_rating", "feedback_count")}
        first = job.release_weeks(weeks, trend)
        cost = sum(q.cost.micro for q in trend.values())
        assert [job.ledger.balance("weekly", w).spent for w in weeks] == [cost] * 3
        assert job.history(WEEK)["mean_rating"] == {w: first[w]["mean_rating"] for w in weeks}
        again = job.release_weeks(weeks, trend)  # cached: nothing charged, same figures
        assert [job.ledger.balance("weekly", w).spent for w in weeks] == [cost] * 3
        assert (
            again["2026-W46"]["mean_rating"].to_dict() == first["2026-W46"]["mean_rating"].to_dict()
        )
        with pytest.raises(BudgetExceeded):  # the whole plan no longer fits W46's cap
            job.release_weeks(["2026-W44", "2026-W46"], {"x": FeedbackCount(epsilon=1.8)})
        assert job.ledger.balance("weekly", "2026-W44").spent == 0


def test_release_weeks_takes_over_an_interrupted_runs_charges_without_counting_them_twice(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    """A resumed backfill is checked against what it still has to pay, as release() is."""
    db, _ = demo
    base = settings_for(tmp_path, db)
    with WeeklyJob(base) as probe:
        trend = {n: probe.plan[n] for n in ("mean_rating", "feedback_count")}
    cap = sum(q.cost.micro for q in trend.values())
    # The weekly pool holds exactly the two releases of one week.
    pools = tuple(
        dataclasses.replace(p, window_cap=cap) if p.name == "weekly" else p for p in base.pools
    )
    settings = dataclasses.replace(base, pools=pools)
    week = "2026-W46"
    with WeeklyJob(settings) as job:
        job.ensure_pools()
        first = trend["mean_rating"]
        # An earlier run paid mean_rating, read the data and was interrupted (Ctrl-C).
        with pytest.raises(KeyboardInterrupt):
            with job.ledger.charging(
                query_id=job.runner.query_id(first, week), pool="weekly", window=week,
                cost=first.cost,
            ) as charge:  # fmt: skip
                charge.data_read()
                raise KeyboardInterrupt
        assert job.states(week, trend)["mean_rating"] == "paid"
        released = job.release_weeks([week], trend)  # was: BudgetExceeded (counted twice)
        assert set(released[week]) == {"mean_rating", "feedback_count"}
        assert job.ledger.balance("weekly", week).spent == cap
