"""What only the PostgreSQL ledger has: its session, its schema, an unreachable server."""

from __future__ import annotations

import socket
import threading
import time

import psycopg
import pytest

from dpllm.errors import ConfigError, LedgerUnavailable
from dpllm.ledger.base import release_once
from dpllm.ledger.factory import open_ledger
from dpllm.ledger.migrations import MIGRATIONS, POSTGRES_MIGRATIONS
from dpllm.ledger.postgres import PostgresLedger
from dpllm.release import Cost
from tests.ledger.conftest import WEEK, compute_for, pure_pool
from tests.replicas.tcp_proxy import TcpProxy

pytestmark = pytest.mark.postgres


def test_both_schemas_have_the_same_migrations() -> None:
    assert [m.name for m in POSTGRES_MIGRATIONS] == [m.name for m in MIGRATIONS]


def test_amounts_are_exact_integers(pg_ledger_url: str) -> None:
    ledger = PostgresLedger(pg_ledger_url)
    types = dict(
        ledger._query(
            "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND column_name IN "
            "('micro', 'spent', 'granted', 'window_cap', 'lifetime_cap', 'lifetime_spent')"
        )
    )
    assert types and set(types.values()) == {"bigint"}, types


def test_session_is_durable_and_read_committed(pg_ledger_url: str) -> None:
    ledger = PostgresLedger(pg_ledger_url)
    with ledger._tx() as conn:
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"
        assert conn.execute("SHOW transaction_isolation").fetchone()[0] == "read committed"
    with ledger._read() as conn:
        assert conn.execute("SHOW transaction_isolation").fetchone()[0] == "repeatable read"


def test_factory_opens_postgres_urls(pg_ledger_url: str) -> None:
    ledger = open_ledger(pg_ledger_url)
    assert isinstance(ledger, PostgresLedger)
    ledger.ensure_pool(pure_pool("p", 1.0))
    assert ledger.balance("p", WEEK).spent == 0


def test_replicas_starting_together_migrate_once(pg_ledger_url: str) -> None:
    errors: list[BaseException] = []

    def start() -> None:
        try:
            PostgresLedger(pg_ledger_url).close()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert PostgresLedger(pg_ledger_url).schema_version() == [m.name for m in MIGRATIONS]


def test_password_never_shows(pg_ledger_url: str) -> None:
    with pytest.raises(LedgerUnavailable) as info:
        PostgresLedger("postgresql://ana:s3cret@127.0.0.1:1/db", connect_timeout=1)
    assert "s3cret" not in str(info.value)
    assert "Nothing was charged" in str(info.value)


def test_bad_url() -> None:
    with pytest.raises(ConfigError, match="postgresql://"):
        PostgresLedger("mysql://x")


@pytest.mark.parametrize("path_cached", [False, True], ids=["general-path", "one-trip"])
def test_connections_killed_by_a_restart_are_replaced(
    pg_ledger_url: str, path_cached: bool
) -> None:
    """Idle connections whose backends died are dropped before use; nothing fails.

    Both charge paths: the general one (BEGIN alone first) and the one-round-trip
    charge, which sends BEGIN with everything else and so checks the idle socket
    for the server's goodbye before sending.
    """
    ledger = PostgresLedger(pg_ledger_url)
    ledger.ensure_pool(pure_pool("p", 1.0))
    if path_cached:
        with ledger.charging(query_id="warm", pool="p", window=WEEK, cost=Cost.pure(0.1)):
            pass  # refunded (no data read); the pool's path is now cached
        assert "p" in ledger._path_cache
    with psycopg.connect(pg_ledger_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'dpllm-ledger' AND datname = current_database()"
        ).fetchone()
        # pg_terminate_backend only signals; wait until the backends are gone (as after a
        # restart, whose goodbye has reached the idle sockets before the next request)
        for _ in range(200):
            left = admin.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = 'dpllm-ledger' AND datname = current_database()"
            ).fetchone()
            if left is not None and left[0] == 0:
                break
            time.sleep(0.01)
        time.sleep(0.05)  # the entry goes a moment before the process and its socket
    assert killed is not None and killed[0] >= 1
    with ledger.charging(query_id="q", pool="p", window=WEEK, cost=Cost.pure(0.1)) as c:
        c.data_read()
    assert ledger.balance("p", WEEK).spent == Cost.pure(0.1).micro


def test_server_unreachable_mid_run_spends_nothing_and_recovers(pg_ledger_url: str) -> None:
    """The server "stops" (a TCP proxy in front of it cuts every connection and refuses
    new ones): LedgerUnavailable, nothing spent; when it is back, charging works again."""
    with TcpProxy.to_url(pg_ledger_url) as proxy:
        ledger = PostgresLedger(proxy.url(pg_ledger_url), connect_timeout=2)
        ledger.ensure_pool(pure_pool("p", 1.0))
        release_once(ledger, query_id="before", pool="p", window=WEEK, cost=Cost.pure(0.1),
                     compute=compute_for("before", Cost.pure(0.1)))  # fmt: skip
        proxy.cut()
        for qid in ("during-1", "during-2"):
            with pytest.raises(LedgerUnavailable):
                release_once(ledger, query_id=qid, pool="p", window=WEEK, cost=Cost.pure(0.1),
                             compute=compute_for(qid, Cost.pure(0.1)))  # fmt: skip
        with pytest.raises(LedgerUnavailable):
            ledger.balance("p", WEEK)
        proxy.restore()
        release_once(ledger, query_id="after", pool="p", window=WEEK, cost=Cost.pure(0.1),
                     compute=compute_for("after", Cost.pure(0.1)))  # fmt: skip
        assert ledger.balance("p", WEEK).spent == Cost.pure(0.2).micro
        assert ledger.get_release("during-1") is None
        assert {e.query_id for e in ledger.history() if e.event == "charge"} == {"before", "after"}
        ledger.close()


def test_connect_timeout_on_a_silent_port() -> None:
    """A port that accepts and never answers: LedgerUnavailable within the timeout."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        with pytest.raises(LedgerUnavailable):
            PostgresLedger(f"postgresql://postgres@127.0.0.1:{port}/x", connect_timeout=1)
    finally:
        server.close()
