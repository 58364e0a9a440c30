"""The shared SQL text and the migration list."""

from __future__ import annotations

from dpllm.ledger import sql
from dpllm.ledger.migrations import MIGRATIONS, POSTGRES_MIGRATIONS


def test_named_parameters_translate_to_psycopg_style() -> None:
    text = "SELECT a::text FROM t WHERE x = :pool AND y LIKE '5%' AND z = :pool_2"
    assert sql.to_pyformat(text) == (
        "SELECT a::text FROM t WHERE x = %(pool)s AND y LIKE '5%%' AND z = %(pool_2)s"
    )
    assert "%(micro)s" in sql.to_pyformat(sql.CHARGE_WINDOW)


def test_migrations_are_uniquely_named_and_ordered() -> None:
    names = [m.name for m in MIGRATIONS]
    assert len(set(names)) == len(names)
    assert names == sorted(names)
    # A step may be empty on one engine (0004 is PostgreSQL's charge function), never on both.
    steps = zip(MIGRATIONS, POSTGRES_MIGRATIONS, strict=True)
    assert all(lite.statements or pg.statements for lite, pg in steps)
