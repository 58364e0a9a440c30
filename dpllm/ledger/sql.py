"""The ledger's data-manipulation statements, written once for SQLite and PostgreSQL.

Every statement uses named parameters (``:name``); a PostgreSQL backend turns
them into ``%(name)s`` with :func:`to_pyformat`. A parameter that may be
``NULL`` in an ``IS NULL`` test is written ``CAST(:p AS TEXT)``: PostgreSQL
cannot infer the type of a bare ``$1 IS NULL``. ``LIMIT`` takes a large number
for "all" (PostgreSQL refuses SQLite's ``-1``). The atomicity argument is the
same on both engines: inside one transaction, one *conditional* ``UPDATE … SET
spent = spent + :c WHERE … AND spent + :c <= cap`` per pool on the path (the
row count says whether that pool took the charge), plus the ``INSERT`` of the
charge row whose primary key is the query id. If any pool refuses, the whole
charge rolls back to a savepoint; if the insert collides, another caller owns
the query id. No cap can be passed, and no query id can be charged twice.
"""

from __future__ import annotations

import re

__all__ = ["insert_parts", "to_pyformat"]

_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def to_pyformat(statement: str) -> str:
    """``:name`` → ``%(name)s`` (psycopg's named style); ``::casts`` are left alone."""
    return _PARAM.sub(r"%(\1)s", statement.replace("%", "%%"))


# -- pools ------------------------------------------------------------------------
SELECT_POOL = """
SELECT name, measure, window_cap, lifetime_cap, parent, delta, on_exceed, reserve,
       lifetime_spent, delta_window_cap, delta_lifetime_cap, delta_lifetime_spent
FROM pools WHERE name = :name
"""

SELECT_POOLS = """
SELECT name, measure, window_cap, lifetime_cap, parent, delta, on_exceed, reserve,
       lifetime_spent, delta_window_cap, delta_lifetime_cap, delta_lifetime_spent
FROM pools ORDER BY name
"""

SELECT_PATH = """
WITH RECURSIVE path (name, depth) AS (
    SELECT CAST(:name AS TEXT), 0
    UNION ALL
    SELECT pools.parent, path.depth + 1 FROM pools JOIN path ON pools.name = path.name
    WHERE pools.parent IS NOT NULL AND path.depth < 64
)
SELECT pools.name, measure, window_cap, lifetime_cap, parent, delta, on_exceed, reserve,
       lifetime_spent, delta_window_cap, delta_lifetime_cap, delta_lifetime_spent
FROM path JOIN pools ON pools.name = path.name ORDER BY path.depth
"""

UPSERT_POOL = """
INSERT INTO pools (name, measure, window_cap, lifetime_cap, parent, delta, on_exceed, reserve,
                   delta_window_cap, delta_lifetime_cap, created_at, updated_at)
VALUES (:name, :measure, :window_cap, :lifetime_cap, :parent, :delta, :on_exceed, :reserve,
        :delta_window_cap, :delta_lifetime_cap, :now, :now)
ON CONFLICT (name) DO UPDATE SET
    measure = excluded.measure, window_cap = excluded.window_cap,
    lifetime_cap = excluded.lifetime_cap, parent = excluded.parent, delta = excluded.delta,
    on_exceed = excluded.on_exceed, reserve = excluded.reserve,
    delta_window_cap = excluded.delta_window_cap,
    delta_lifetime_cap = excluded.delta_lifetime_cap, updated_at = excluded.updated_at
"""

POOL_HAS_SPENDING = "SELECT 1 FROM charge_parts WHERE pool = :name LIMIT 1"

# -- windows and the conditional charge ---------------------------------------
ENSURE_WINDOW = """
INSERT INTO pool_windows (pool, window_key) VALUES (:pool, :window)
ON CONFLICT (pool, window_key) DO NOTHING
"""

CHARGE_WINDOW = """
UPDATE pool_windows SET spent = spent + :micro
WHERE pool = :pool AND window_key = :window
  AND spent + :micro <= (SELECT window_cap FROM pools WHERE name = :pool) + granted
"""

CHARGE_WINDOW_UPSERT = """
INSERT INTO pool_windows (pool, window_key, spent, delta_spent)
SELECT :pool, :window, :micro, :dmicro
WHERE (:micro <= (SELECT window_cap FROM pools WHERE name = :pool)
       AND (:dmicro = 0 OR :dmicro <= (SELECT delta_window_cap FROM pools WHERE name = :pool)))
   OR EXISTS (SELECT 1 FROM pool_windows WHERE pool = :pool AND window_key = :window)
ON CONFLICT (pool, window_key) DO UPDATE SET spent = pool_windows.spent + excluded.spent,
    delta_spent = pool_windows.delta_spent + excluded.delta_spent
WHERE pool_windows.spent + excluded.spent
      <= (SELECT window_cap FROM pools WHERE name = excluded.pool) + pool_windows.granted
  AND (excluded.delta_spent = 0 OR pool_windows.delta_spent + excluded.delta_spent
       <= (SELECT delta_window_cap FROM pools WHERE name = excluded.pool))
"""
"""ENSURE_WINDOW and CHARGE_WINDOW in one statement: 1 row if the window took the charge.

``:dmicro`` is the charge's δ in units of 10⁻¹⁵; it is checked against the
pool's δ window cap only when it is > 0, so a pure-ε charge is never refused
because a δ cap was lowered below what earlier charges spent.

The first charge of a window inserts its row (when it fits the bare cap: a new
row has no grant); once the row exists (approvals may have granted it more
room) the insert is always tried, so it conflicts and the update decides,
under the row's write lock, the
``WHERE`` evaluated against the latest committed row on both engines (SQLite
writers are serial; PostgreSQL re-checks ``ON CONFLICT DO UPDATE … WHERE`` on
the locked row version).
"""

CHARGE_LIFETIME = """
UPDATE pools SET lifetime_spent = lifetime_spent + :micro,
    delta_lifetime_spent = delta_lifetime_spent + :dmicro
WHERE name = :pool AND (lifetime_cap IS NULL OR lifetime_spent + :micro <= lifetime_cap)
  AND (:dmicro = 0 OR delta_lifetime_cap IS NULL
       OR delta_lifetime_spent + :dmicro <= delta_lifetime_cap)
RETURNING parent, measure
"""
"""Returns the pool's parent and measure, so a cached path is checked at no extra cost."""

REFUND_WINDOW = """
UPDATE pool_windows SET spent = spent - :micro, delta_spent = delta_spent - :dmicro
WHERE pool = :pool AND window_key = :window
"""

REFUND_LIFETIME = """
UPDATE pools SET lifetime_spent = lifetime_spent - :micro,
    delta_lifetime_spent = delta_lifetime_spent - :dmicro
WHERE name = :pool
"""

GRANT_OUT = """
UPDATE pool_windows SET granted = granted - :micro
WHERE pool = :pool AND window_key = :window
  AND spent + :micro <= (SELECT window_cap FROM pools WHERE name = :pool) + granted
"""

GRANT_IN = """
UPDATE pool_windows SET granted = granted + :micro WHERE pool = :pool AND window_key = :window
"""

SELECT_WINDOW = """
SELECT spent, granted, delta_spent FROM pool_windows WHERE pool = :pool AND window_key = :window
"""

SELECT_WINDOWS = """
SELECT pool, window_key, spent, granted, delta_spent FROM pool_windows
ORDER BY window_key, pool
"""

# -- charges -------------------------------------------------------------------------
SELECT_CHARGE = """
SELECT query_id, pool, window_key, measure, micro, analyst, description, status, owner,
       lease_expires, ticket, release_json, error_class, delta
FROM charges WHERE query_id = :query_id
"""

INSERT_CHARGE = """
INSERT INTO charges (query_id, pool, window_key, measure, micro, analyst, description, status,
                     owner, lease_expires, ticket, created_at, updated_at, delta)
VALUES (:query_id, :pool, :window, :measure, :micro, :analyst, :description, 'in_progress',
        :owner, :lease_expires, :ticket, :now, :now, :delta)
"""

INSERT_PART = """
INSERT INTO charge_parts (query_id, pool, window_key, micro)
VALUES (:query_id, :pool, :window, :micro)
"""


def insert_parts(count: int) -> str:
    """One ``INSERT`` of ``count`` parts: ``:pool0, :micro0``, ``:pool1, :micro1``, …

    Every part carries the charge's δ (``:delta``, units of 10⁻¹⁵): δ composes
    additively whatever a pool's measure.
    """
    rows = ", ".join(f"(:query_id, :pool{i}, :window, :micro{i}, :delta)" for i in range(count))
    return f"INSERT INTO charge_parts (query_id, pool, window_key, micro, delta) VALUES {rows}"


SELECT_PARTS = """
SELECT pool, window_key, micro, delta FROM charge_parts WHERE query_id = :query_id
"""

DELETE_PARTS = "DELETE FROM charge_parts WHERE query_id = :query_id"

DELETE_CHARGE = "DELETE FROM charges WHERE query_id = :query_id AND owner = :owner"

TAKE_OVER = """
UPDATE charges SET owner = :owner, lease_expires = :lease_expires, updated_at = :now
WHERE query_id = :query_id AND release_json IS NULL AND status <> 'failed'
"""

ABANDON = """
UPDATE charges SET status = 'data_read', owner = NULL, lease_expires = NULL, updated_at = :now
WHERE query_id = :query_id AND owner = :owner AND release_json IS NULL
"""

FAIL = """
UPDATE charges SET status = 'failed', error_class = :error_class, owner = NULL,
       lease_expires = NULL, updated_at = :now
WHERE query_id = :query_id AND owner = :owner AND release_json IS NULL
"""

STORE_RELEASE = """
UPDATE charges SET status = 'released', release_json = :release_json,
       release_name = :release_name, owner = NULL, lease_expires = NULL, updated_at = :now
WHERE query_id = :query_id AND release_json IS NULL
RETURNING analyst, pool, window_key
"""

SELECT_RELEASE = "SELECT release_json FROM charges WHERE query_id = :query_id"

SELECT_UNRELEASED = """
SELECT query_id, pool, window_key, measure, micro, analyst, description, status, owner,
       lease_expires, ticket, release_json, error_class, delta
FROM charges WHERE release_json IS NULL ORDER BY created_at, query_id
"""

# -- tickets --------------------------------------------------------------------------
SELECT_TICKET = """
SELECT ticket, query_id, pool, window_key, measure, micro, analyst, description, status
FROM tickets WHERE ticket = :ticket
"""

SELECT_OPEN_TICKET = """
SELECT ticket, status FROM tickets
WHERE query_id = :query_id AND status IN ('pending', 'denied')
ORDER BY created_at DESC LIMIT 1
"""

INSERT_TICKET = """
INSERT INTO tickets (ticket, query_id, pool, window_key, measure, micro, analyst, description,
                     status, created_at)
VALUES (:ticket, :query_id, :pool, :window, :measure, :micro, :analyst, :description,
        'pending', :now)
"""

DECIDE_TICKET = """
UPDATE tickets SET status = :status, decided_by = :decided_by, from_pool = :from_pool,
       decided_at = :now
WHERE ticket = :ticket AND status = 'pending'
"""

USE_TICKET = "UPDATE tickets SET status = 'used' WHERE ticket = :ticket AND status = 'approved'"

SELECT_TICKETS = """
SELECT ticket, query_id, pool, window_key, measure, micro, analyst, description, status
FROM tickets WHERE (CAST(:status AS TEXT) IS NULL OR status = :status)
ORDER BY created_at, ticket
"""

# -- audit ------------------------------------------------------------------------------
INSERT_AUDIT = """
INSERT INTO audit (time, event, analyst, pool, window_key, query_id, micro, detail)
VALUES (:now, :event, :analyst, :pool, :window, :query_id, :micro, :detail)
"""

SELECT_AUDIT = """
SELECT id, time, event, analyst, pool, window_key, query_id, micro, detail
FROM audit ORDER BY id DESC LIMIT :limit
"""

SELECT_RELEASES = """
SELECT release_json FROM charges
WHERE release_json IS NOT NULL
  AND (CAST(:name AS TEXT) IS NULL OR release_name = :name)
  AND (CAST(:window AS TEXT) IS NULL OR window_key = :window)
ORDER BY window_key, release_name, query_id
"""
