"""Append-only, versioned schema migrations of the ledger (SQLite and PostgreSQL).

Each :class:`Migration` has a name and a list of statements. They are applied in
order, each inside the same ``BEGIN IMMEDIATE`` transaction that records its
name in ``dpllm_migrations``, so a crash mid-migration leaves the database at
the previous version. **Never edit or reorder a migration that has shipped:**
append a new one. A database that records a migration this code does not know
was written by a newer dpllm and is refused rather than guessed at.

Every page a charge touches is one more page written to the WAL before the
fsync, so the schema keeps a charge to few pages (``WITHOUT ROWID`` tables for
the small keyed rows, no index that only reports would use).

:data:`POSTGRES_MIGRATIONS` is the same schema, step for step and name for name,
in PostgreSQL's types: ``BIGINT`` micro-units (exact; a 64-bit integer holds
9.2·10¹² ε), ``BIGINT GENERATED ALWAYS AS IDENTITY`` for the audit id, ``DOUBLE
PRECISION`` only for δ and lease times (neither is an amount). Append a step to
both tuples under the same name; a test checks the names agree.

The schema keeps the portable core of the design:

* ``pools`` — one row per pool: caps, measure, parent, and the running
  ``lifetime_spent`` (micro-units in the pool's measure).
* ``pool_windows`` — one row per (pool, window): ``spent`` and ``granted``
  (window headroom moved in or out by approvals; may be negative).
* ``charges`` — one row per query id (the primary key makes a second charge for
  the same query id impossible): status, owner and lease, the stored release,
  and for a ``failed`` charge the class name of its exception (``0002``).
* ``charge_parts`` — what a charge took from each pool on its path, in that
  pool's measure. ``Σ parts = spent`` for every (pool, window) at all times.
* δ (``0006``): ``pools.delta_window_cap``, ``delta_lifetime_cap`` and
  ``delta_lifetime_spent``, ``pool_windows.delta_spent``, and the δ of each
  charge and charge part, all integers in units of 10⁻¹⁵
  (:data:`dpllm.ledger.base.DELTA_UNIT`). Columns are only added (with
  defaults: δ 0 for every earlier charge, a δ window cap of 10⁻⁶), so a ledger
  written by an earlier dpllm opens and upgrades in place. PostgreSQL's
  one-round-trip function (``0004``) is left as it is: it never writes δ, and
  a charge with δ > 0 takes the general path.
* ``tickets`` — the approval queue; ``ticket_items`` (``0005``) lists the queries
  of a ticket filed for a whole run (the weekly job's plan), each with its cost.
* ``local_reports`` — one row per (metric, window, user) of a local-DP report,
  with the ε the user spent on it; the user is stored only as a keyed hash
  (HMAC with a random per-ledger key kept in ``ledger_secrets``) (``0003``).
* ``audit`` — append-only log (ids only grow: rows are never deleted) of every charge, refusal, refund, approval,
  denial, takeover and cache hit (never statistic values).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dpllm.errors import LedgerError

__all__ = ["LEDGER_TABLE", "MIGRATIONS", "POSTGRES_MIGRATIONS", "Migration", "pending"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One named, append-only schema step."""

    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        name="0001_initial",
        statements=(
            """CREATE TABLE pools (
                name TEXT PRIMARY KEY,
                measure TEXT NOT NULL CHECK (measure IN ('pure', 'zcdp')),
                window_cap INTEGER NOT NULL CHECK (window_cap >= 0),
                lifetime_cap INTEGER CHECK (lifetime_cap IS NULL OR lifetime_cap >= 0),
                parent TEXT REFERENCES pools(name),
                delta REAL NOT NULL,
                on_exceed TEXT NOT NULL CHECK (on_exceed IN ('refuse', 'queue')),
                reserve TEXT,
                lifetime_spent INTEGER NOT NULL DEFAULT 0 CHECK (lifetime_spent >= 0),
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            """CREATE TABLE pool_windows (
                pool TEXT NOT NULL REFERENCES pools(name),
                window_key TEXT NOT NULL,
                spent INTEGER NOT NULL DEFAULT 0 CHECK (spent >= 0),
                granted INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (pool, window_key)
            ) WITHOUT ROWID""",
            """CREATE TABLE charges (
                query_id TEXT PRIMARY KEY,
                pool TEXT NOT NULL REFERENCES pools(name),
                window_key TEXT NOT NULL,
                measure TEXT NOT NULL,
                micro INTEGER NOT NULL,
                analyst TEXT NOT NULL,
                description TEXT NOT NULL,
                status TEXT NOT NULL
                    CHECK (status IN ('in_progress', 'data_read', 'released')),
                owner TEXT,
                lease_expires REAL,
                ticket TEXT,
                release_name TEXT,
                release_json TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            """CREATE TABLE charge_parts (
                query_id TEXT NOT NULL REFERENCES charges(query_id),
                pool TEXT NOT NULL,
                window_key TEXT NOT NULL,
                micro INTEGER NOT NULL CHECK (micro >= 0),
                PRIMARY KEY (query_id, pool)
            ) WITHOUT ROWID""",
            """CREATE TABLE tickets (
                ticket TEXT PRIMARY KEY,
                query_id TEXT NOT NULL,
                pool TEXT NOT NULL,
                window_key TEXT NOT NULL,
                measure TEXT NOT NULL,
                micro INTEGER NOT NULL,
                analyst TEXT NOT NULL,
                description TEXT NOT NULL,
                status TEXT NOT NULL
                    CHECK (status IN ('pending', 'approved', 'denied', 'used')),
                decided_by TEXT,
                from_pool TEXT,
                created_at TEXT NOT NULL,
                decided_at TEXT
            )""",
            "CREATE INDEX tickets_query ON tickets (query_id, status)",
            """CREATE TABLE audit (
                id INTEGER PRIMARY KEY,
                time TEXT NOT NULL,
                event TEXT NOT NULL,
                analyst TEXT NOT NULL,
                pool TEXT NOT NULL,
                window_key TEXT NOT NULL,
                query_id TEXT NOT NULL,
                micro INTEGER NOT NULL,
                detail TEXT NOT NULL
            )""",
        ),
    ),
    # SQLite cannot alter a CHECK constraint: the table is rebuilt (SQLite's own
    # procedure, https://sqlite.org/lang_altertable.html#otheralter; the migration
    # runs with foreign keys off and checks them before it commits).
    Migration(
        name="0002_failed_charges",
        statements=(
            """CREATE TABLE charges_0002 (
                query_id TEXT PRIMARY KEY,
                pool TEXT NOT NULL REFERENCES pools(name),
                window_key TEXT NOT NULL,
                measure TEXT NOT NULL,
                micro INTEGER NOT NULL,
                analyst TEXT NOT NULL,
                description TEXT NOT NULL,
                status TEXT NOT NULL
                    CHECK (status IN ('in_progress', 'data_read', 'released', 'failed')),
                owner TEXT,
                lease_expires REAL,
                ticket TEXT,
                release_name TEXT,
                release_json TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                error_class TEXT
            )""",
            """INSERT INTO charges_0002 (query_id, pool, window_key, measure, micro, analyst,
                description, status, owner, lease_expires, ticket, release_name, release_json,
                created_at, updated_at)
            SELECT query_id, pool, window_key, measure, micro, analyst, description, status,
                owner, lease_expires, ticket, release_name, release_json, created_at, updated_at
            FROM charges""",
            "DROP TABLE charges",
            "ALTER TABLE charges_0002 RENAME TO charges",
        ),
    ),
    Migration(
        name="0003_local_reports",
        statements=(
            """CREATE TABLE local_reports (
                metric TEXT NOT NULL,
                window_key TEXT NOT NULL,
                user_key TEXT NOT NULL,
                measure TEXT NOT NULL CHECK (measure = 'pure'),
                micro INTEGER NOT NULL CHECK (micro > 0),
                analyst TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (metric, window_key, user_key)
            ) WITHOUT ROWID""",
            "CREATE INDEX local_reports_user ON local_reports (user_key, window_key)",
            """CREATE TABLE ledger_secrets (
                name TEXT PRIMARY KEY,
                value TEXT NOT NULL
            )""",
        ),
    ),
    # PostgreSQL only (its one-round-trip charge function); SQLite charges in process,
    # where a statement costs no round trip. Kept so that both lists name the same steps.
    Migration(name="0004_charge_function", statements=()),
    Migration(
        name="0005_ticket_items",
        statements=(
            """CREATE TABLE ticket_items (
                ticket TEXT NOT NULL REFERENCES tickets (ticket),
                query_id TEXT NOT NULL,
                measure TEXT NOT NULL,
                micro INTEGER NOT NULL CHECK (micro > 0),
                description TEXT NOT NULL,
                PRIMARY KEY (ticket, query_id)
            )""",
        ),
    ),
    Migration(
        name="0006_delta_budget",
        statements=(
            "ALTER TABLE pools ADD COLUMN delta_window_cap INTEGER NOT NULL DEFAULT 1000000000 "
            "CHECK (delta_window_cap >= 0)",
            "ALTER TABLE pools ADD COLUMN delta_lifetime_cap INTEGER "
            "CHECK (delta_lifetime_cap IS NULL OR delta_lifetime_cap >= 0)",
            "ALTER TABLE pools ADD COLUMN delta_lifetime_spent INTEGER NOT NULL DEFAULT 0 "
            "CHECK (delta_lifetime_spent >= 0)",
            "ALTER TABLE pool_windows ADD COLUMN delta_spent INTEGER NOT NULL DEFAULT 0 "
            "CHECK (delta_spent >= 0)",
            "ALTER TABLE charges ADD COLUMN delta INTEGER NOT NULL DEFAULT 0 CHECK (delta >= 0)",
            "ALTER TABLE charge_parts ADD COLUMN delta INTEGER NOT NULL DEFAULT 0 "
            "CHECK (delta >= 0)",
        ),
    ),
)


CHARGE_FUNCTION = r"""
CREATE OR REPLACE FUNCTION dpllm_charge(
    p_query_id TEXT, p_window TEXT, p_measure TEXT, p_micro BIGINT, p_analyst TEXT,
    p_description TEXT, p_owner TEXT, p_lease_expires DOUBLE PRECISION, p_now TEXT,
    p_detail TEXT, p_pools TEXT[], p_micros BIGINT[], p_parents TEXT[], p_measures TEXT[],
    OUT out_status TEXT, OUT out_release TEXT
) LANGUAGE plpgsql AS $fn$
DECLARE
    v_pool TEXT;
    v_window_key TEXT;
    v_micro BIGINT;
    v_parent TEXT;
    v_measure TEXT;
    v_rows BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_query_id, 0));
    SELECT c.release_json, c.pool, c.window_key INTO out_release, v_pool, v_window_key
    FROM charges c WHERE c.query_id = p_query_id;
    IF FOUND THEN
        IF out_release IS NULL THEN
            out_status := 'exists';
            RETURN;
        END IF;
        INSERT INTO audit (time, event, analyst, pool, window_key, query_id, micro, detail)
        VALUES (p_now, 'cache_hit', p_analyst, v_pool, v_window_key, p_query_id, 0,
                'answered from the release cache; nothing charged');
        out_status := 'cached';
        RETURN;
    END IF;
    -- A refusal or a changed path undoes this block (a subtransaction) and is
    -- answered, not raised: the server logs nothing and the COMMIT commits nothing.
    BEGIN
        INSERT INTO charges (query_id, pool, window_key, measure, micro, analyst, description,
                             status, owner, lease_expires, ticket, created_at, updated_at)
        VALUES (p_query_id, p_pools[1], p_window, p_measure, p_micro, p_analyst, p_description,
                'in_progress', p_owner, p_lease_expires, NULL, p_now, p_now);
        INSERT INTO charge_parts (query_id, pool, window_key, micro)
        SELECT p_query_id, u.pool, p_window, u.micro FROM unnest(p_pools, p_micros) AS u(pool, micro);
        INSERT INTO audit (time, event, analyst, pool, window_key, query_id, micro, detail)
        VALUES (p_now, 'charge', p_analyst, p_pools[1], p_window, p_query_id, p_micro, p_detail);
        FOR i IN 1 .. cardinality(p_pools) LOOP
            v_pool := p_pools[i];
            v_micro := p_micros[i];
            INSERT INTO pool_windows AS w (pool, window_key, spent)
            SELECT v_pool, p_window, v_micro
            WHERE v_micro <= (SELECT window_cap FROM pools WHERE name = v_pool)
               OR EXISTS (SELECT 1 FROM pool_windows WHERE pool = v_pool AND window_key = p_window)
            ON CONFLICT (pool, window_key) DO UPDATE SET spent = w.spent + excluded.spent
            WHERE w.spent + excluded.spent
                  <= (SELECT window_cap FROM pools WHERE name = excluded.pool) + w.granted;
            GET DIAGNOSTICS v_rows = ROW_COUNT;
            IF v_rows <> 1 THEN
                RAISE EXCEPTION USING ERRCODE = 'DPL01', MESSAGE = 'refused';
            END IF;
            UPDATE pools SET lifetime_spent = lifetime_spent + v_micro
            WHERE name = v_pool AND (lifetime_cap IS NULL OR lifetime_spent + v_micro <= lifetime_cap)
            RETURNING parent, measure INTO v_parent, v_measure;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'DPL01', MESSAGE = 'refused';
            END IF;
            IF v_parent IS DISTINCT FROM p_parents[i] OR v_measure <> p_measures[i] THEN
                RAISE EXCEPTION USING ERRCODE = 'DPL01', MESSAGE = 'stale';
            END IF;
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'DPL01' THEN
        out_status := SQLERRM;
        RETURN;
    END;
    out_status := 'charged';
END
$fn$
"""
"""A whole new charge in one statement, so that the charge and its COMMIT go to
PostgreSQL in one round trip (see :mod:`dpllm.ledger.postgres`).

Statement for statement it is :meth:`~dpllm.ledger._sql_ledger.SQLLedger._try_acquire`
on a new query id, in the same order and under the same locks: the query id's
advisory lock; the charge row (a stored release is a cache hit, written to the
audit log and returned; any other row is ``exists``, left to the general path);
the charge row, its parts and its audit line; then per pool on the path, innermost
first, the conditional window upsert (:data:`dpllm.ledger.sql.CHARGE_WINDOW_UPSERT`)
and the conditional lifetime ``UPDATE`` (:data:`dpllm.ledger.sql.CHARGE_LIFETIME`),
checking the pool's parent and measure against the path the caller sent. A
refusal or a changed path undoes the writes (the block is a subtransaction) and
returns ``refused`` or ``stale``: nothing is written, and the caller judges the
request again on the general path, which writes the refusal's audit line or the
approval ticket.
"""


POSTGRES_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        name="0001_initial",
        statements=(
            """CREATE TABLE pools (
                name TEXT PRIMARY KEY,
                measure TEXT NOT NULL CHECK (measure IN ('pure', 'zcdp')),
                window_cap BIGINT NOT NULL CHECK (window_cap >= 0),
                lifetime_cap BIGINT CHECK (lifetime_cap IS NULL OR lifetime_cap >= 0),
                parent TEXT REFERENCES pools(name),
                delta DOUBLE PRECISION NOT NULL,
                on_exceed TEXT NOT NULL CHECK (on_exceed IN ('refuse', 'queue')),
                reserve TEXT,
                lifetime_spent BIGINT NOT NULL DEFAULT 0 CHECK (lifetime_spent >= 0),
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            """CREATE TABLE pool_windows (
                pool TEXT NOT NULL REFERENCES pools(name),
                window_key TEXT NOT NULL,
                spent BIGINT NOT NULL DEFAULT 0 CHECK (spent >= 0),
                granted BIGINT NOT NULL DEFAULT 0,
                PRIMARY KEY (pool, window_key)
            )""",
            """CREATE TABLE charges (
                query_id TEXT PRIMARY KEY,
                pool TEXT NOT NULL REFERENCES pools(name),
                window_key TEXT NOT NULL,
                measure TEXT NOT NULL,
                micro BIGINT NOT NULL,
                analyst TEXT NOT NULL,
                description TEXT NOT NULL,
                status TEXT NOT NULL
                    CHECK (status IN ('in_progress', 'data_read', 'released')),
                owner TEXT,
                lease_expires DOUBLE PRECISION,
                ticket TEXT,
                release_name TEXT,
                release_json TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            """CREATE TABLE charge_parts (
                query_id TEXT NOT NULL REFERENCES charges(query_id),
                pool TEXT NOT NULL,
                window_key TEXT NOT NULL,
                micro BIGINT NOT NULL CHECK (micro >= 0),
                PRIMARY KEY (query_id, pool)
            )""",
            """CREATE TABLE tickets (
                ticket TEXT PRIMARY KEY,
                query_id TEXT NOT NULL,
                pool TEXT NOT NULL,
                window_key TEXT NOT NULL,
                measure TEXT NOT NULL,
                micro BIGINT NOT NULL,
                analyst TEXT NOT NULL,
                description TEXT NOT NULL,
                status TEXT NOT NULL
                    CHECK (status IN ('pending', 'approved', 'denied', 'used')),
                decided_by TEXT,
                from_pool TEXT,
                created_at TEXT NOT NULL,
                decided_at TEXT
            )""",
            "CREATE INDEX tickets_query ON tickets (query_id, status)",
            """CREATE TABLE audit (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                time TEXT NOT NULL,
                event TEXT NOT NULL,
                analyst TEXT NOT NULL,
                pool TEXT NOT NULL,
                window_key TEXT NOT NULL,
                query_id TEXT NOT NULL,
                micro BIGINT NOT NULL,
                detail TEXT NOT NULL
            )""",
        ),
    ),
    Migration(
        name="0002_failed_charges",
        statements=(
            "ALTER TABLE charges DROP CONSTRAINT charges_status_check",
            """ALTER TABLE charges ADD CONSTRAINT charges_status_check
                CHECK (status IN ('in_progress', 'data_read', 'released', 'failed'))""",
            "ALTER TABLE charges ADD COLUMN error_class TEXT",
        ),
    ),
    Migration(
        name="0003_local_reports",
        statements=(
            """CREATE TABLE local_reports (
                metric TEXT NOT NULL,
                window_key TEXT NOT NULL,
                user_key TEXT NOT NULL,
                measure TEXT NOT NULL CHECK (measure = 'pure'),
                micro BIGINT NOT NULL CHECK (micro > 0),
                analyst TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (metric, window_key, user_key)
            )""",
            "CREATE INDEX local_reports_user ON local_reports (user_key, window_key)",
            """CREATE TABLE ledger_secrets (
                name TEXT PRIMARY KEY,
                value TEXT NOT NULL
            )""",
        ),
    ),
    Migration(name="0004_charge_function", statements=(CHARGE_FUNCTION,)),
    Migration(
        name="0005_ticket_items",
        statements=(
            """CREATE TABLE ticket_items (
                ticket TEXT NOT NULL REFERENCES tickets (ticket),
                query_id TEXT NOT NULL,
                measure TEXT NOT NULL,
                micro BIGINT NOT NULL CHECK (micro > 0),
                description TEXT NOT NULL,
                PRIMARY KEY (ticket, query_id)
            )""",
        ),
    ),
    Migration(
        name="0006_delta_budget",
        statements=(
            "ALTER TABLE pools ADD COLUMN delta_window_cap BIGINT NOT NULL DEFAULT 1000000000 "
            "CHECK (delta_window_cap >= 0)",
            "ALTER TABLE pools ADD COLUMN delta_lifetime_cap BIGINT "
            "CHECK (delta_lifetime_cap IS NULL OR delta_lifetime_cap >= 0)",
            "ALTER TABLE pools ADD COLUMN delta_lifetime_spent BIGINT NOT NULL DEFAULT 0 "
            "CHECK (delta_lifetime_spent >= 0)",
            "ALTER TABLE pool_windows ADD COLUMN delta_spent BIGINT NOT NULL DEFAULT 0 "
            "CHECK (delta_spent >= 0)",
            "ALTER TABLE charges ADD COLUMN delta BIGINT NOT NULL DEFAULT 0 CHECK (delta >= 0)",
            "ALTER TABLE charge_parts ADD COLUMN delta BIGINT NOT NULL DEFAULT 0 "
            "CHECK (delta >= 0)",
        ),
    ),
)


LEDGER_TABLE = (
    "CREATE TABLE IF NOT EXISTS dpllm_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
)
"""The table that records which migrations a ledger database has (both backends)."""


def pending(
    migrations: Sequence[Migration], applied: Sequence[str], *, where: str
) -> list[Migration]:
    """The migrations still to apply, in order.

    Raises:
        LedgerError: the database has a migration this dpllm does not know (it was
            written by a newer dpllm); ``where`` names the database in the message.
    """
    known = {m.name for m in migrations}
    unknown = sorted(set(applied) - known)
    if unknown:
        raise LedgerError(
            f"the ledger {where} has migrations this dpllm does not know ({unknown}); upgrade dpllm"
        )
    done = set(applied)
    return [m for m in migrations if m.name not in done]
