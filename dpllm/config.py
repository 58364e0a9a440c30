"""``dpllm.toml`` → validated, frozen settings.

One file configures the weekly job, the proxy and the CLI. Every value is
checked when the file is loaded; an error names the field (dotted path) and,
where it can be found, the line. Defaults are the named constants below.
Only the edges (``cli``, ``server``) call :meth:`Settings.from_env`.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from dpllm._toml import TomlReader as _Reader
from dpllm._toml import flat_settings as _flat_settings
from dpllm.errors import ConfigError
from dpllm.ledger.base import (
    DEFAULT_DELTA_WINDOW_CAP,
    DELTA_UNIT,
    PoolSpec,
    derived_delta_lifetime_cap,
    to_delta_units,
)
from dpllm.release import MAX_AMOUNT, Measure, to_micro

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_LEDGER",
    "DEFAULT_PLAN",
    "ApiKey",
    "BoundsSettings",
    "DataSettings",
    "LDPMetric",
    "ModelSettings",
    "PlanQuery",
    "ServerLimits",
    "Settings",
    "hash_api_key",
]

DEFAULT_CONFIDENCE = 0.95
DEFAULT_LEDGER = ".dpllm/ledger.db"
DEFAULT_SMALL_THRESHOLD = 5.0
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_COLUMNS: Mapping[str, str] = {
    "user": "user_id",
    "rating": "rating",
    "text": "text",
    "timestamp": "ts",
    "course": "course",
}
# ε per query of the default weekly plan; the key metric (mean rating) gets most.
DEFAULT_PLAN: Mapping[str, float] = {
    "feedback_count": 0.2,
    "active_users": 0.2,
    "mean_rating": 0.5,
    "rating_histogram": 0.4,
    "topic_counts": 0.3,
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)  # fullmatch: `$` passes "x\n"


def hash_api_key(key: str) -> str:
    """The stored form of an API key: ``sha256:<hex>`` (keys are never stored in clear)."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class DataSettings:
    """Where the feedback lives and how its columns are named."""

    source: str = "sqlite"  # sqlite | duckdb | postgres | spark
    path: str = "demo.db"
    dsn: str = ""
    spark: Mapping[str, str] = field(default_factory=dict)
    """``spark.*`` settings for the SparkSession (``spark.master``, ``spark.remote``);
    ``path`` (files, a folder, a glob; empty: the catalog's ``table``) is read as ``format``."""
    format: str = "parquet"
    table: str = "feedback"
    dataset_id: str = "feedback"
    columns: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_COLUMNS))
    courses: tuple[str, ...] = ()
    """The public list of course names (metadata, never derived from the data)."""


@dataclass(frozen=True, slots=True)
class BoundsSettings:
    """Contribution bounds: what one user may contribute per window."""

    max_records_per_user: int = 5
    max_courses_per_user: int = 3
    max_topics_per_user: int = 3
    out_of_range: str = "clamp"  # clamp | reject (left out like a NULL; never an error)
    salt: str = ""


@dataclass(frozen=True, slots=True)
class PlanQuery:
    name: str
    epsilon: float


@dataclass(frozen=True, slots=True)
class ModelSettings:
    provider: str = "offline"  # offline | openai
    base_url: str | None = None
    model: str = "gpt-4o-mini"
    api_key: str | None = None
    temperature: float = 0.2
    timeout: float = 30.0
    max_retries: int = 2
    max_attempts: int = DEFAULT_MAX_ATTEMPTS


@dataclass(frozen=True, slots=True)
class LDPMetric:
    """A locally randomised metric clients may report (``[ldp.metrics.NAME]``)."""

    name: str
    mechanism: str  # krr | oue
    epsilon: float
    domain: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A proxy API key: stored hashed, mapped to an analyst and their pools."""

    key_hash: str
    analyst: str
    pools: tuple[str, ...]
    admin: bool = False


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What one request may ask of ``dpllm serve`` (``[server.limits]``; see docs/server.md).

    Every limit is checked before any redaction, guard or upstream work; a request
    over one is answered 413 (sizes) or 400 (shape) in OpenAI's error shape.

    Attributes:
        max_header_bytes: the request line and headers together, checked by the
            HTTP server as they arrive (before authentication): 431 above it.
        max_body_bytes: the request body: 413 above it (read no further).
        max_messages: chat messages per request.
        max_content_parts: content parts (``[{"type": "text", ...}, ...]``) per request.
        max_text_chars: characters of text per request, and per upstream answer,
            that redaction and the guard read.
        max_n: the largest ``n`` (choices) a chat request may ask for.
        max_depth: how deeply JSON arrays and objects may nest in a body.
        protect_workers: threads that run redaction and the guard (0: one per core).
    """

    max_header_bytes: int = 16 * 1024
    max_body_bytes: int = 4 * 1024 * 1024
    max_messages: int = 1024
    max_content_parts: int = 1024
    max_text_chars: int = 400_000
    max_n: int = 8
    max_depth: int = 32
    protect_workers: int = 0

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            least = 0 if name == "protect_workers" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"[server.limits] {name} must be an integer ≥ {least}")


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything ``dpllm.toml`` configures."""

    data: DataSettings = field(default_factory=DataSettings)
    bounds: BoundsSettings = field(default_factory=BoundsSettings)
    ledger: str = DEFAULT_LEDGER
    analyst: str = "default"
    pools: tuple[PoolSpec, ...] = ()
    plan_pool: str = "weekly"
    plan: tuple[PlanQuery, ...] = tuple(PlanQuery(k, v) for k, v in DEFAULT_PLAN.items())
    confidence: float = DEFAULT_CONFIDENCE
    small_threshold: float = DEFAULT_SMALL_THRESHOLD
    topics: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    lang: str = "zh"
    template: str = "weekly"
    template_dirs: tuple[str, ...] = ()
    model: ModelSettings = field(default_factory=ModelSettings)
    redaction_enabled: bool = True
    redaction_operator: str = "replace"
    guard_unsupported: str = "violation"
    output_dir: str = "reports"
    api_keys: tuple[ApiKey, ...] = ()
    server_limits: ServerLimits = field(default_factory=ServerLimits)
    ldp_metrics: tuple[LDPMetric, ...] = ()
    ldp_store: str = ".dpllm/ldp.db"
    base_dir: str = "."

    # -- loading ---------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> Settings:
        """Read and validate a ``dpllm.toml``.

        Raises:
            ConfigError: the file is missing, is not TOML, or a value is invalid.
        """
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read config file {p}: {exc.strerror}; create one with `dpllm init`"
            ) from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"config file {p} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
            ) from None
        return cls.parse(text, base_dir=str(p.resolve().parent))

    @classmethod
    def parse(cls, text: str, *, base_dir: str = ".") -> Settings:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            m = re.search(r"line (\d+)", str(exc))
            raise ConfigError(
                f"not valid TOML: {exc}", line=int(m.group(1)) if m else None
            ) from exc
        return cls._from_mapping(_Reader(raw, text), base_dir)

    @classmethod
    def _from_mapping(cls, r: _Reader, base_dir: str) -> Settings:
        r.unknown(
            {
                "data",
                "bounds",
                "ledger",
                "pools",
                "plan",
                "topics",
                "templates",
                "model",
                "redaction",
                "guard",
                "output",
                "server",
                "ldp",
            }
        )
        d = r.sub("data")
        known = {"source", "path", "dsn", "table", "dataset_id", "columns", "courses", "format"}
        d.unknown(known | {"spark"} | {k for k in d.data if k.startswith("spark.")})
        cols_r = d.sub("columns")
        columns = dict(DEFAULT_COLUMNS)
        for key in cols_r.data:
            if key not in DEFAULT_COLUMNS:
                raise cols_r.error(key, f"unknown column role; use {', '.join(DEFAULT_COLUMNS)}")
            value = cols_r.get(key, str, "")
            if not _NAME.fullmatch(value):
                raise cols_r.error(key, f"{value!r} is not a plain SQL identifier")
            columns[key] = value
        courses = d.get("courses", list, [])
        if not all(isinstance(c, str) and c for c in courses):
            raise d.error("courses", "must be a list of course names (public metadata)")
        table = d.get("table", str, "feedback")
        if not _NAME.fullmatch(table):
            raise d.error("table", f"{table!r} is not a plain SQL identifier")
        source = d.choice("source", ("sqlite", "duckdb", "postgres", "spark"), "sqlite")
        dataset_id = d.get("dataset_id", str, "feedback")
        if not dataset_id.strip():
            raise d.error("dataset_id", "must name the dataset (it is part of every cache key)")
        data = DataSettings(
            source=source,
            path=d.get("path", str, "" if source == "spark" else "demo.db"),
            spark=_flat_settings(d, "spark"),
            format=d.choice("format", ("parquet", "delta", "orc", "json", "csv"), "parquet"),
            dsn=d.get("dsn", str, ""),
            table=table,
            dataset_id=dataset_id,
            columns=columns,
            courses=tuple(courses),
        )

        b = r.sub("bounds")
        b.unknown(
            {
                "max_records_per_user",
                "max_courses_per_user",
                "max_topics_per_user",
                "out_of_range",
                "salt",
            }
        )
        bounds = BoundsSettings(
            max_records_per_user=b.integer("max_records_per_user", 5, minimum=1),
            max_courses_per_user=b.integer("max_courses_per_user", 3, minimum=1),
            max_topics_per_user=b.integer("max_topics_per_user", 3, minimum=1),
            out_of_range=b.choice("out_of_range", ("clamp", "reject"), "clamp"),
            salt=b.get("salt", str, ""),
        )

        lg = r.sub("ledger")
        lg.unknown({"url", "analyst"})
        ledger = lg.get("url", str, DEFAULT_LEDGER)
        analyst = lg.get("analyst", str, "default")

        pools = cls._pools(r)
        pl = r.sub("plan")
        pl.unknown({"pool", "confidence", "small_threshold", "queries"})
        plan_pool = pl.get("pool", str, pools[-1].name if pools else "weekly")
        if pools and plan_pool not in {p.name for p in pools}:
            raise pl.error("pool", f"unknown pool {plan_pool!r}; define it under [[pools]]")
        confidence = pl.number("confidence", DEFAULT_CONFIDENCE, positive=True) or 0.95
        if not confidence < 1:
            raise pl.error("confidence", "must lie in (0, 1)")
        small = pl.number("small_threshold", DEFAULT_SMALL_THRESHOLD) or 0.0
        qr = pl.sub("queries")
        plan = tuple(
            PlanQuery(name, qr.number(name, None, positive=True, maximum=MAX_AMOUNT) or 0.0)
            for name in qr.data
        ) or tuple(PlanQuery(k, v) for k, v in DEFAULT_PLAN.items())

        tp = r.sub("topics")
        topics: dict[str, tuple[str, ...]] = {}
        for name, words in tp.data.items():
            if not isinstance(words, list) or not all(isinstance(w, str) and w for w in words):
                raise tp.error(name, "must be a list of keywords (Chinese or English)")
            topics[name] = tuple(words)

        tm = r.sub("templates")
        tm.unknown({"lang", "name", "dirs"})
        dirs = tm.get("dirs", list, [])
        if not all(isinstance(x, str) for x in dirs):
            raise tm.error("dirs", "must be a list of folder paths")

        model = cls._model(r.sub("model"))

        rd = r.sub("redaction")
        rd.unknown({"enabled", "operator"})
        gd = r.sub("guard")
        gd.unknown({"unsupported"})
        out = r.sub("output")
        out.unknown({"dir"})

        return cls(
            data=data,
            bounds=bounds,
            ledger=ledger,
            analyst=analyst,
            pools=pools,
            plan_pool=plan_pool,
            plan=plan,
            confidence=confidence,
            small_threshold=small,
            topics=topics,
            lang=tm.choice("lang", ("zh", "en"), "zh"),
            template=tm.get("name", str, "weekly"),
            template_dirs=tuple(dirs),
            model=model,
            redaction_enabled=rd.get("enabled", bool, True),
            redaction_operator=rd.choice("operator", ("replace", "mask", "hash"), "replace"),
            guard_unsupported=gd.choice("unsupported", ("violation", "warning"), "violation"),
            output_dir=out.get("dir", str, "reports"),
            api_keys=cls._keys(r.sub("server")),
            server_limits=cls._limits(r.sub("server").sub("limits")),
            ldp_metrics=cls._ldp(r.sub("ldp")),
            ldp_store=r.sub("ldp").get("store", str, ".dpllm/ldp.db"),
            base_dir=base_dir,
        )

    @staticmethod
    def _pools(r: _Reader) -> tuple[PoolSpec, ...]:
        raw = r.data.get("pools", [])
        if not isinstance(raw, list):
            raise r.error("pools", "must be an array of tables: [[pools]]")
        pools: list[PoolSpec] = []
        for i, entry in enumerate(raw):
            if not isinstance(entry, Mapping):
                raise r.error("pools", "each [[pools]] entry must be a table")
            pr = _Reader(entry, r.text, f"pools[{i}]")
            pr.unknown(
                {
                    "name",
                    "measure",
                    "window_cap",
                    "lifetime_cap",
                    "parent",
                    "delta",
                    "on_exceed",
                    "delta_window_cap",
                    "delta_lifetime_cap",
                }
            )
            name = pr.get("name", str, "")
            measure = Measure(pr.choice("measure", ("pure", "zcdp"), "pure"))
            window_cap = pr.number("window_cap", None, positive=True, maximum=MAX_AMOUNT)
            if window_cap is None:
                raise pr.error("window_cap", "is required (ε per window, or ρ for zCDP pools)")
            lifetime = pr.number("lifetime_cap", None, positive=True, maximum=MAX_AMOUNT)
            delta_window = pr.number("delta_window_cap", DEFAULT_DELTA_WINDOW_CAP / DELTA_UNIT)
            delta_life = pr.number("delta_lifetime_cap", None)
            for key, value in (
                ("delta_window_cap", delta_window),
                ("delta_lifetime_cap", delta_life),
            ):
                if value is not None and value > 1:
                    raise pr.error(key, f"is a δ and must be ≤ 1, got {value!r}")
            delta_window_units = to_delta_units(delta_window or 0.0, cap=True)
            try:
                pools.append(
                    PoolSpec(
                        name=name,
                        measure=measure,
                        window_cap=to_micro(window_cap),
                        lifetime_cap=None if lifetime is None else to_micro(lifetime),
                        parent=pr.get("parent", str, None),
                        delta=pr.number("delta", 1e-6, positive=True) or 1e-6,
                        on_exceed=pr.choice("on_exceed", ("refuse", "queue"), "refuse"),
                        delta_window_cap=delta_window_units,
                        delta_lifetime_cap=(
                            derived_delta_lifetime_cap(
                                to_micro(window_cap),
                                None if lifetime is None else to_micro(lifetime),
                                delta_window_units,
                            )
                            if delta_life is None
                            else to_delta_units(delta_life, cap=True)
                        ),
                    )
                )
            except ConfigError as exc:
                raise pr.error("name", str(exc)) from exc
        names = [p.name for p in pools]
        for p in pools:
            if p.parent is not None and p.parent not in names:
                raise r.error("pools", f"pool {p.name!r} has unknown parent {p.parent!r}")
        if len(set(names)) != len(names):
            raise r.error("pools", "pool names must be unique")
        return tuple(pools)

    @staticmethod
    def _model(m: _Reader) -> ModelSettings:
        m.unknown(
            {
                "provider",
                "base_url",
                "model",
                "api_key",
                "temperature",
                "timeout",
                "max_retries",
                "max_attempts",
            }
        )
        return ModelSettings(
            provider=m.choice("provider", ("offline", "openai"), "offline"),
            base_url=m.get("base_url", str, None),
            model=m.get("model", str, "gpt-4o-mini"),
            api_key=m.get("api_key", str, None),
            temperature=m.number("temperature", 0.2) or 0.0,
            timeout=m.number("timeout", 30.0, positive=True) or 30.0,
            max_retries=m.integer("max_retries", 2),
            max_attempts=m.integer("max_attempts", DEFAULT_MAX_ATTEMPTS, minimum=1),
        )

    @staticmethod
    def _keys(s: _Reader) -> tuple[ApiKey, ...]:
        s.unknown({"keys", "limits"})
        raw = s.data.get("keys", [])
        if not isinstance(raw, list):
            raise s.error("keys", "must be an array of tables: [[server.keys]]")
        keys: list[ApiKey] = []
        for i, entry in enumerate(raw):
            kr = _Reader(entry if isinstance(entry, Mapping) else {}, s.text, f"server.keys[{i}]")
            kr.unknown({"hash", "analyst", "pools", "admin"})
            key_hash = kr.get("hash", str, "")
            if not re.fullmatch(r"sha256:[0-9a-f]{64}", key_hash):
                raise kr.error(
                    "hash", "must be 'sha256:<64 hex>' (make one with `dpllm serve hash-key`)"
                )
            pools = kr.get("pools", list, [])
            keys.append(
                ApiKey(
                    key_hash=key_hash,
                    analyst=kr.get("analyst", str, "default"),
                    pools=tuple(str(p) for p in pools),
                    admin=kr.get("admin", bool, False),
                )
            )
        return tuple(keys)

    @staticmethod
    def _limits(r: _Reader) -> ServerLimits:
        defaults = ServerLimits()
        names = set(ServerLimits.__slots__)
        r.unknown(names)
        least = {"protect_workers": 0}
        values = {
            name: r.integer(name, getattr(defaults, name), minimum=least.get(name, 1))
            for name in names
        }
        return ServerLimits(**values)

    @staticmethod
    def _ldp(r: _Reader) -> tuple[LDPMetric, ...]:
        r.unknown({"metrics", "store"})
        m = r.sub("metrics")
        metrics: list[LDPMetric] = []
        for name in m.data:
            if not _NAME.fullmatch(name):
                raise m.error(name, "an LDP metric name must be a plain name")
            mr = m.sub(name)
            mr.unknown({"mechanism", "epsilon", "domain"})
            epsilon = mr.number("epsilon", None, positive=True)
            if epsilon is None:
                raise mr.error("epsilon", "is required (the ε each client randomises with)")
            domain = mr.get("domain", list, [1, 2, 3, 4, 5])
            if (
                len(domain) < 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in domain)
                or len(set(domain)) != len(domain)
            ):
                raise mr.error("domain", "must list at least two distinct integers")
            metrics.append(
                LDPMetric(
                    name=name,
                    mechanism=mr.choice("mechanism", ("krr", "oue"), "krr"),
                    epsilon=epsilon,
                    domain=tuple(domain),
                )
            )
        return tuple(metrics)

    # -- environment (edges only) ----------------------------------------------
    def from_env(self, environ: Mapping[str, str]) -> Settings:
        """Apply environment overrides (called by the CLI and server only).

        ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` select the OpenAI-compatible
        client (with those credentials); ``DPLLM_MODEL`` names the model and
        ``DPLLM_LEDGER`` the ledger. Without them the config file decides.
        """
        model = self.model
        api_key = environ.get("OPENAI_API_KEY")
        base_url = environ.get("OPENAI_BASE_URL")
        if api_key or base_url:
            model = replace(
                model,
                provider="openai",
                api_key=api_key or model.api_key,
                base_url=base_url or model.base_url,
            )
        if environ.get("DPLLM_MODEL"):
            model = replace(model, model=environ["DPLLM_MODEL"])
        ledger = environ.get("DPLLM_LEDGER") or self.ledger
        return replace(self, model=model, ledger=ledger)

    def resolve(self, path: str) -> Path:
        """A path from the config, relative to the config file's folder."""
        p = Path(path)
        return p if p.is_absolute() else Path(self.base_dir) / p

    @property
    def default_pools(self) -> tuple[PoolSpec, ...]:
        """The configured pools, or a default global → weekly pair (ε 10 lifetime, 2/week)."""
        if self.pools:
            return self.pools
        return (
            PoolSpec(
                name="global",
                measure=Measure.PURE,
                window_cap=to_micro(2.0),
                lifetime_cap=to_micro(20.0),
                delta_lifetime_cap=derived_delta_lifetime_cap(
                    to_micro(2.0), to_micro(20.0), DEFAULT_DELTA_WINDOW_CAP
                ),
            ),
            PoolSpec(
                name="weekly",
                measure=Measure.PURE,
                window_cap=to_micro(2.0),
                parent="global",
            ),
        )
