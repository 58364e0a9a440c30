"""The shared per-user summary over many windows, with one aggregate per (window, user).

:func:`dpllm.data.bounded.summaries` groups every record by (window, user) and
keeps, per group, ``n`` and one count per rating cell (five to seven counts).
On DuckDB that hash aggregation is most of the statistic's cost, and each
aggregate of a group is a separate scattered update: at 10M records in 52
weeks (~8M groups) six counts cost about twice what one does. This module
computes the *same integers* with one aggregate per group:

1. each record carries ``v = 2^(kF) + Σ_i [record in cell i]·2^(iF)``
   (``k`` cells, ``F = ⌊63/(k+1)⌋`` bits a field, so ``v < 2^63``), and a group
   keeps ``p = SUM(v)`` (DuckDB sums ``BIGINT`` into 128 bits: no overflow);
2. when ``p < 2^((k+1)F)`` — the group has ``n < 2^F`` records, so no cell
   count reached ``2^F`` — its fields are exact: ``n = p >> kF`` and cell ``i``
   is ``(p >> iF) mod 2^F``. If a field did overflow, its carry goes up and
   makes ``p ≥ 2^((k+1)F)``: a group over the bound is never decoded;
3. the exact groups are counted per ``(window, p)``: users with the same cells
   merge into one row with a weight (a few hundred distinct rows a week), and
   the plan's aggregates are summed with that weight
   (:func:`dpllm.data.sql.summary_aggregates`);
4. a group over the bound (a user with at least ``2^F`` records in a window:
   128 with seven cells, 1,024 with five) is counted again the plain way, by
   joining its records to the list of such groups. When there is none, DuckDB
   skips the join's scan.

So every window's row equals :func:`dpllm.data.sql.user_summary`'s row for the
window alone, for every input: no bound on a user's records, no rounding, no
hash that could collide. Which groups take step 4 changes the work done, never
a value released.

Privacy: as :func:`dpllm.data.bounded.summaries`; only per-window aggregates
leave the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from dpllm.data import sql
from dpllm.data.bounded import Span, U, W, windowed
from dpllm.data.sql import ColumnMap, Dialect, Statement, SummaryPlan, text

__all__ = ["field_bits", "summaries"]


def field_bits(cells: int) -> int:
    """The widest field ``F`` such that ``k`` cells and ``n`` fit a ``BIGINT``: ``⌊63/(k+1)⌋``."""
    return 63 // (cells + 1)


def summaries(
    cols: ColumnMap,
    dialect: Dialect,
    source: Statement,
    spans: Sequence[Span],
    plan: SummaryPlan,
    *,
    raw_user: bool = False,
    bits: int | None = None,
) -> Statement:
    """Rows ``(window index, *plan.keys())``, as :func:`dpllm.data.bounded.summaries`.

    DuckDB only (``>>``, ``//``, 128-bit sums, ``MATERIALIZED``).

    Args:
        bits: the field width ``F`` (default :func:`field_bits`); a smaller one
            sends more groups through the plain count (tests use it).

    Raises:
        ValueError: ``bits`` out of ``1…field_bits(k)``, or not DuckDB.
    """
    if dialect is not Dialect.DUCKDB:
        raise ValueError("the packed summary is DuckDB SQL")
    preds = sql.summary_cell_predicates(cols, dialect, plan)
    k = len(preds)
    f = field_bits(k) if bits is None else bits
    if not 1 <= f <= field_bits(k):
        raise ValueError(f"field width {f} must lie in 1..{field_bits(k)} for {k} cells")
    top = 1 << (k * f)
    bound = top << f  # ≤ 2^63: a group below it fits BIGINT and is exact
    mask = (1 << f) - 1
    v = str(top) + "".join(
        f" + CASE WHEN {p} THEN {1 << (i * f)} ELSE 0 END" for i, p in enumerate(preds.values())
    )
    key = cols.q("user") if raw_user else sql.user_key(cols, dialect)
    rating = cols.q("rating")

    def records(join: str = "") -> Statement:
        return (
            text("(")
            + windowed(cols, dialect, source, spans, f"{key} AS {U}, {rating}")
            + text(f") AS records{join} WHERE records.{W} IS NOT NULL")
        )

    per_user = (
        text(f"SELECT {W}, {U}, SUM({v}) AS dpllm_p FROM ")
        + records()
        + text(f" GROUP BY {W}, {U}")
    )
    merged = (
        text(
            f"WITH dpllm_merged AS MATERIALIZED (SELECT {W}, "
            f"CASE WHEN dpllm_p < {bound} THEN CAST(dpllm_p AS BIGINT) END AS dpllm_lp, "
            f"CASE WHEN dpllm_p >= {bound} THEN {U} END AS dpllm_hu, "
            "COUNT(*) AS dpllm_m FROM ("
        )
        + per_user
        + text(") AS per_user GROUP BY ALL)")
    )
    decoded = ", ".join(
        [f"CAST(dpllm_lp >> {k * f} AS BIGINT) AS n"]
        + [f"CAST((dpllm_lp >> {i * f}) & {mask} AS BIGINT) AS {c}" for i, c in enumerate(preds)]
    )
    names = ", ".join(["n", *preds])
    heavy = (
        text(f"SELECT records.{W}, {', '.join(sql.summary_cells(cols, dialect, plan))} FROM ")
        + records(
            f" JOIN (SELECT {W} AS dpllm_hw, dpllm_hu FROM dpllm_merged WHERE dpllm_hu IS NOT NULL)"
            f" AS heavy ON records.{W} = heavy.dpllm_hw AND records.{U} = heavy.dpllm_hu"
        )
        + text(f" GROUP BY records.{W}, records.{U}")
    )
    rows = (
        text(f"SELECT {W}, {decoded}, dpllm_m FROM dpllm_merged WHERE dpllm_lp IS NOT NULL ")
        + text(f"UNION ALL SELECT {W}, {names}, 1 AS dpllm_m FROM (")
        + heavy
        + text(") AS heavy_users")
    )
    out = ", ".join(sql.summary_aggregates(dialect, plan, weight="dpllm_m"))
    return merged + text(f" SELECT {W}, {out} FROM (") + rows + text(f") AS per_user GROUP BY {W}")
