"""Spark: the shared engine suite's exact aggregates equal DuckDB's on the same Parquet.

Few tests, one SparkSession (see ``conftest.py``): a JVM is slow to start.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from dpllm.data.engines import DuckDBEngine
from dpllm.data.queries import FeedbackCount, MeanRating, Scope
from dpllm.data.shared import measure_windows
from dpllm.data.sql import Statement
from dpllm.data.topics import NewKeywords
from dpllm.errors import DataError
from dpllm.windows import week_bounds
from tests.data._helpers import COLUMNS, WEEK, random_records, write_parquet
from tests.data.test_bounded import hostile_records
from tests.data.test_engines import QUERIES, exact_all

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    recs = random_records(random.Random(7), users=40, heavy=3)
    recs += hostile_records(random.Random(11))
    return write_parquet(tmp_path_factory.mktemp("spark") / "f.parquet", recs)


def test_same_exact_aggregates_as_duckdb(spark_session: Any, parquet: Path) -> None:
    """The shared suite's queries over two sets of weeks, one pass per kind of statement
    (one Spark job each), and two of them through their one-window statements."""
    from dpllm.data.spark import SparkEngine

    spark = SparkEngine(spark_session, paths=[str(parquet)])
    duck = DuckDBEngine(parquet)
    suite = [q for q in QUERIES if not isinstance(q, NewKeywords)]  # jieba: refused here
    start, end = week_bounds(WEEK)
    # A run of weeks (arithmetic window index), and weeks with gaps (CASE index).
    for windows in (["2026-W46", WEEK, "2026-W48"], [WEEK, "2026-W44", "2026-W49"]):
        scope = Scope(spark, COLUMNS, WEEK, start, end, b"test-salt")
        got = measure_windows(suite, scope, windows)
        want = measure_windows(suite, Scope(duck, COLUMNS, WEEK, start, end, b"test-salt"), windows)
        assert {k: (v.values, v.labels) for k, v in got.items()} == {
            k: (v.values, v.labels) for k, v in want.items()
        }
    for q in (suite[0], suite[-1]):  # the feedback count and the topic selection
        one = Scope(spark, COLUMNS, WEEK, start, end, b"test-salt")
        assert q.measure(one).values == want[(suite.index(q), WEEK)].values
    assert exact_all(duck)[0][0][0] > 0  # not vacuous
    spark.close()


def test_text_columns_and_errors(spark_session: Any, tmp_path: Path) -> None:
    """Ratings and times stored as text: values that do not parse are ignored, never an
    error (ANSI mode included); a failing statement's message is withheld."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpllm.data.spark import SparkEngine

    path = tmp_path / "text.parquet"
    pq.write_table(
        pa.table(
            {
                "user_id": ["a", "b", "c", "d"],
                "rating": ["4", "n/a", "5", "1e999"],
                "text": ["x", "x", "x", "x"],
                "ts": ["2026-11-16 10:00:00", "2026-11-16 11:00:00", "yesterday", "2026-11-17"],
                "course": ["algebra"] * 4,
            }
        ),
        path,
    )
    engine = SparkEngine(spark_session, paths=[str(path)])
    start, end = week_bounds(WEEK)
    scope = Scope(engine, COLUMNS, WEEK, start, end, b"s")
    assert FeedbackCount(epsilon=1.0).measure(scope).values == (3,)
    duck = DuckDBEngine(path)
    duck_scope = Scope(duck, COLUMNS, WEEK, start, end, b"s")
    assert (
        MeanRating(epsilon=1.0).measure(scope).values
        == MeanRating(epsilon=1.0).measure(duck_scope).values
    )
    with pytest.raises(DataError, match="withheld") as info:
        engine.fetch(
            Statement(
                "SELECT CAST(user_id AS INT) + assert_true(false, user_id) FROM dpllm_records"
            )
        )
    assert info.value.__cause__ is None
    with pytest.raises(DataError, match="cannot read"):
        SparkEngine(spark_session, paths=[str(tmp_path / "missing.parquet")])
    engine.close()


def test_the_spark_source_from_settings(spark_session: Any, parquet: Path) -> None:
    """``[data] source = "spark"``: dotted ``spark.*`` keys pass through; the weekly job's
    engine reads the Parquet path; new_keywords is refused before any charge."""
    from dpllm.config import Settings
    from dpllm.data.spark import SparkEngine
    from dpllm.data.stats import StatsRunner
    from dpllm.ledger.sqlite import SQLiteLedger
    from dpllm.weekly.wiring import open_engine

    settings = Settings.parse(
        f"""
[data]
source = "spark"
path = "{parquet.name}"
spark.master = "local[2]"
"spark.sql.shuffle.partitions" = 2
spark.ui.enabled = false
""",
        base_dir=str(parquet.parent),
    )
    assert settings.data.spark == {
        "spark.master": "local[2]",
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
    }
    engine = open_engine(settings)
    assert isinstance(engine, SparkEngine)
    assert engine.column_names("feedback") == {"user_id", "rating", "text", "ts", "course"}
    runner = StatsRunner(
        engine, SQLiteLedger(parquet.parent / "l.db"), dataset_id="d", pool="p", columns=COLUMNS
    )
    with pytest.raises(DataError, match="not available on the spark source"):
        runner.check(NewKeywords(epsilon=1.0))
    engine.close()


def test_spark_settings_must_be_scalars() -> None:
    from dpllm.config import Settings
    from dpllm.errors import ConfigError

    with pytest.raises(ConfigError, match="spark"):
        Settings.parse('[data]\nsource = "spark"\nspark.master = ["local"]\n')
    with pytest.raises(ConfigError, match="sparky"):
        Settings.parse('[data]\nsource = "spark"\nsparky = 1\n')
