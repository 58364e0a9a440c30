"""The releases of the guard's evaluation set (:mod:`dpllm.guard.evalset`): four domains.

Each release declares how readers speak of it (a label and synonyms in English and
Chinese) and its unit; bands are chosen so that some releases of one kind overlap
(topics, reopened/escalated tickets) and some share a unit at very different
magnitudes (revenue and average order value, both in yuan). Synthetic, seeded:
never published.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpllm.release import Cost, Release

__all__ = ["DOMAINS", "Spec", "domain_releases", "topic_specs"]


@dataclass(frozen=True, slots=True)
class Spec:
    """One scalar release of a domain and how it is written about."""

    name: str
    value: float
    lo: float
    hi: float
    kind: str
    unit: str
    en: tuple[str, ...]
    zh: tuple[str, ...]
    # how a figure is written after the number: en, zh
    en_unit: str = ""
    zh_unit: str = ""
    noun: bool = False  # the label is a count noun ("157 feedback records")


DOMAINS: dict[str, tuple[Spec, ...]] = {
    "course": (
        Spec(
            "feedback_count",
            157,
            147,
            167,
            "count",
            "records",
            ("feedback records", "responses", "comments"),
            ("反馈", "评论", "反馈记录"),
            "",
            "条",
            noun=True,
        ),
        Spec(
            "mean_rating",
            4.31,
            4.11,
            4.51,
            "mean",
            "stars",
            ("mean rating", "average rating"),
            ("平均评分", "平均分"),
            " stars",
            "分",
        ),
        Spec(
            "share_positive",
            0.623,
            0.593,
            0.653,
            "proportion",
            "share",
            ("share of positive ratings", "positive share"),
            ("好评率", "好评占比"),
        ),
        Spec(
            "active_users",
            88,
            80,
            96,
            "count",
            "users",
            ("active students", "active users"),
            ("活跃学生", "活跃用户"),
            "",
            "人",
            noun=True,
        ),
    ),
    "support": (
        Spec(
            "tickets",
            1284,
            1254,
            1314,
            "count",
            "tickets",
            ("support tickets", "tickets"),
            ("工单", "支持工单"),
            "",
            "张",
            noun=True,
        ),
        Spec(
            "median_resolution_hours",
            18.4,
            17.9,
            18.9,
            "median",
            "hours",
            ("median resolution time", "median time to resolve"),
            ("解决时间中位数", "中位解决时长"),
            " hours",
            "小时",
        ),
        Spec(
            "share_first_contact",
            0.412,
            0.392,
            0.432,
            "proportion",
            "share",
            ("first-contact resolution rate", "share resolved at first contact"),
            ("首次解决率", "一次解决率"),
        ),
        Spec(
            "reopened",
            46,
            38,
            54,
            "count",
            "tickets",
            ("reopened tickets", "tickets reopened"),
            ("重开工单", "被重新打开的工单"),
            "",
            "张",
            noun=True,
        ),
        Spec(
            "escalated",
            71,
            63,
            79,
            "count",
            "tickets",
            ("escalated tickets", "escalations"),
            ("升级工单", "被升级的工单"),
            "",
            "张",
            noun=True,
        ),
    ),
    "app": (
        Spec(
            "sessions",
            12840,
            12700,
            12980,
            "count",
            "sessions",
            ("sessions", "app sessions"),
            ("会话", "使用次数"),
            "",
            "次",
            noun=True,
        ),
        Spec(
            "mean_session_minutes",
            7.34,
            7.14,
            7.54,
            "mean",
            "minutes",
            ("average session length", "mean session duration"),
            ("平均会话时长", "平均使用时长"),
            " minutes",
            "分钟",
        ),
        Spec(
            "daily_users",
            1_283_000,
            1_253_000,
            1_313_000,
            "count",
            "users",
            ("daily active users", "daily users"),
            ("日活跃用户", "日活"),
            "",
            "人",
            noun=True,
        ),
        Spec(
            "crash_rate",
            0.0312,
            0.0292,
            0.0332,
            "proportion",
            "share",
            ("crash rate", "share of sessions ending in a crash"),
            ("崩溃率", "闪退率"),
        ),
    ),
    "shop": (
        Spec(
            "revenue",
            1_283_400,
            1_251_000,
            1_315_800,
            "sum",
            "yuan",
            ("revenue", "sales"),
            ("销售额", "营收"),
            " yuan",
            "元",
        ),
        Spec(
            "orders",
            5620,
            5540,
            5700,
            "count",
            "orders",
            ("orders", "purchases"),
            ("订单", "笔订单"),
            "",
            "笔",
            noun=True,
        ),
        Spec(
            "mean_basket",
            228.4,
            221.0,
            235.8,
            "mean",
            "yuan",
            ("average order value", "average basket"),
            ("平均客单价", "客单价"),
            " yuan",
            "元",
        ),
        Spec(
            "share_returned",
            0.263,
            0.243,
            0.283,
            "proportion",
            "share",
            ("return rate", "share of orders returned"),
            ("退货率", "退货占比"),
        ),
    ),
}

# A vector release: topic mentions in course feedback (the named-release loophole).
_TOPICS = (
    ("refund", 23, 15, 31, ("refund", "the refund process"), ("退款", "退款流程")),
    ("video", 48, 40, 56, ("video", "lecture videos"), ("视频", "课程视频")),
    ("homework", 34, 26, 42, ("homework", "assignments"), ("作业", "课后作业")),
)


def _release(spec: Spec) -> Release:
    terms = tuple(("en", t) for t in spec.en) + tuple(("zh", t) for t in spec.zh)
    return Release(
        name=spec.name,
        values=(spec.value,),
        intervals=((spec.lo, spec.hi),),
        mechanism="discrete_laplace",
        noise_scale=1.0,
        cost=Cost.pure(0.5),
        fingerprint=f"eval-{spec.name}",
        kind=spec.kind,
        unit=spec.unit,
        seeded=True,
        terms=terms,
    )


def domain_releases(domain: str) -> dict[str, Release]:
    """The releases of one evaluation domain, by name (as a template would see them)."""
    out = {s.name: _release(s) for s in DOMAINS[domain]}
    if domain == "course":
        comp = tuple((label, "en", t) for label, *_, en, _zh in _TOPICS for t in en) + tuple(
            (label, "zh", t) for label, *_, zh in _TOPICS for t in zh
        )
        out["topic_counts"] = Release(
            name="topic_counts",
            values=tuple(float(t[1]) for t in _TOPICS),
            intervals=tuple((float(t[2]), float(t[3])) for t in _TOPICS),
            mechanism="discrete_laplace",
            noise_scale=1.0,
            cost=Cost.pure(0.5),
            fingerprint="eval-topic_counts",
            kind="count",
            unit="records",
            labels=tuple(t[0] for t in _TOPICS),
            seeded=True,
            terms=(("en", "topics"), ("zh", "话题")),
            component_terms=comp,
        )
    return out


def topic_specs() -> tuple[Spec, ...]:
    """The components of the topic vector, as scalar specs."""
    return tuple(
        Spec(f"topic_counts[{label}]", v, lo, hi, "count", "records", en, zh, " times", "次")
        for label, v, lo, hi, en, zh in _TOPICS
    )
