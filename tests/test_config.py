"""dpllm.toml validation: every error names the field and, where it can, the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpllm import ConfigError
from dpllm.config import Settings, hash_api_key
from dpllm.release import Measure

GOOD = """
[data]
source = "sqlite"
path = "demo.db"
table = "feedback"

[data.columns]
user = "uid"

[bounds]
max_records_per_user = 4

[[pools]]
name = "global"
window_cap = 3.0
lifetime_cap = 30

[[pools]]
name = "weekly"
parent = "global"
window_cap = 2.0
on_exceed = "queue"

[plan]
pool = "weekly"

[plan.queries]
mean_rating = 0.8
feedback_count = 0.2

[topics]
workload = ["作业", "homework"]

[model]
provider = "offline"

[[server.keys]]
hash = "{hash}"
analyst = "alice"
pools = ["weekly"]
""".replace("{hash}", hash_api_key("secret"))


def test_good_config_parses() -> None:
    s = Settings.parse(GOOD)
    assert s.data.columns["user"] == "uid"
    assert s.data.columns["rating"] == "rating"
    assert s.bounds.max_records_per_user == 4
    assert [p.name for p in s.pools] == ["global", "weekly"]
    assert s.pools[1].parent == "global" and s.pools[1].on_exceed == "queue"
    assert s.pools[0].window_cap == 3_000_000 and s.pools[0].measure is Measure.PURE
    assert [(q.name, q.epsilon) for q in s.plan] == [("mean_rating", 0.8), ("feedback_count", 0.2)]
    assert s.topics["workload"] == ("作业", "homework")
    assert s.api_keys[0].analyst == "alice"
    assert "secret" not in repr(s)


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        ('[data]\nsource = "oracle"\n', "data.source", 2),
        ('[data]\ntable = "feedback; DROP TABLE x"\n', "data.table", 2),
        ('[data.columns]\nuser = "u id"\n', "data.columns.user", 2),
        ("[bounds]\nmax_records_per_user = 0\n", "bounds.max_records_per_user", 2),
        ('[bounds]\nmax_records_per_user = "five"\n', "bounds.max_records_per_user", 2),
        ("[plan.queries]\nmean_rating = -1\n", "plan.queries.mean_rating", 2),
        ("[plan.queries]\nmean_rating = nan\n", "plan.queries.mean_rating", 2),
        ("[plan.queries]\nmean_rating = inf\n", "plan.queries.mean_rating", 2),
        ('[[pools]]\nname = "g"\n', "pools[0].window_cap", None),
        ('[[pools]]\nname = "g"\nwindow_cap = 1\nparent = "nope"\n', "pools", None),
        ("[modle]\nprovider = 1\n", "modle", None),
        ('[model]\nprovider = "anthropic"\n', "model.provider", 2),
        ('[[server.keys]]\nhash = "plaintext"\n', "server.keys[0].hash", 2),
    ],
)
def test_errors_name_the_field_and_line(text: str, field: str, line: int | None) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.parse(text)
    assert info.value.field == field
    if line is not None:
        assert info.value.line == line
    assert field in str(info.value)


def test_not_toml_reports_the_line() -> None:
    with pytest.raises(ConfigError, match="not valid TOML") as info:
        Settings.parse("[data]\nsource = \n")
    assert info.value.line == 2


def test_missing_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dpllm init"):
        Settings.load(tmp_path / "nope.toml")


def test_environment_selects_a_model_only_at_the_edge() -> None:
    s = Settings.parse(GOOD)
    assert s.model.provider == "offline"
    t = s.from_env({"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert t.model.provider == "openai" and t.model.base_url == "http://127.0.0.1:9/v1"
    assert s.from_env({}).model == s.model


def test_default_pools_exist_when_none_configured() -> None:
    s = Settings.parse("")
    assert [p.name for p in s.default_pools] == ["global", "weekly"]


def test_ldp_metrics() -> None:
    s = Settings.parse(
        '[ldp.metrics.course_rating]\nmechanism = "krr"\nepsilon = 1.0\n'
        '[ldp.metrics.minutes]\nmechanism = "oue"\nepsilon = 2\ndomain = [0, 15, 30, 60]\n'
    )
    assert [(m.name, m.mechanism, m.epsilon, m.domain) for m in s.ldp_metrics] == [
        ("course_rating", "krr", 1.0, (1, 2, 3, 4, 5)),
        ("minutes", "oue", 2.0, (0, 15, 30, 60)),
    ]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[ldp.metrics.r]\nmechanism = 'krr'\n", "ldp.metrics.r.epsilon"),
        ("[ldp.metrics.r]\nepsilon = 1\ndomain = [1]\n", "ldp.metrics.r.domain"),
        ("[ldp.metrics.r]\nepsilon = 1\nmechanism = 'rappor'\n", "ldp.metrics.r.mechanism"),
    ],
)
def test_bad_ldp_metrics(text: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.parse(text)
    assert info.value.field == field


def test_default_plan_matches_the_statistics_catalogue() -> None:
    """One default plan: the config's and the catalogue's ε per query agree."""
    from dpllm.config import DEFAULT_PLAN
    from dpllm.data.stats import DEFAULT_EPSILONS

    assert dict(DEFAULT_PLAN) == {k: v for k, v in DEFAULT_EPSILONS.items() if k in DEFAULT_PLAN}
    assert set(DEFAULT_PLAN) == set(DEFAULT_EPSILONS)


@pytest.mark.parametrize("key", ["window_cap", "delta_window_cap"])
def test_an_integer_beyond_any_float_is_a_config_error(key: str) -> None:
    text = f'[[pools]]\nname = "p"\nwindow_cap = 1\n{key} = 1{"0" * 400}\n'
    if key == "window_cap":
        text = f'[[pools]]\nname = "p"\nwindow_cap = 1{"0" * 400}\n'
    with pytest.raises(ConfigError, match="too large"):
        Settings.parse(text)
