"""dpllm: differentially private statistics for LLM prompts.

Re-exports only; each concept lives in its own module. Names backed by Presidio
(``Redactor``, ``Vault``, ``wrap`` …) are resolved on first access, because
importing Presidio loads spaCy (seconds) and most users of ``import dpllm`` —
the CLI's ``--help`` included — never redact anything. Names backed by an
optional extra (``PostgresLedger``, the ``LDP*`` ingest service) are lazy too, so
``import dpllm`` works on the core install (see ``dpllm/_extras.py``).

The package, one line a folder (lower lines never import higher ones;
``tests/test_layers.py`` checks it):

- ``errors``, ``release``, ``rounding``, ``windows``, ``config``: the vocabulary every layer shares
- ``privacy/``: the pure DP core (noise, mechanisms, intervals, the empirical audit)
- ``ldp/``: local DP (client-side mechanisms, the ingest service)
- ``ledger/``: the privacy budget (protocol, SQLite, PostgreSQL, approvals)
- ``data/``: queries, bounded SQL, engines, the statistics runner, demo data
- ``templates/``: template authoring (sandboxed Jinja, band filters, lint)
- ``redact/``: Presidio, offline, Chinese and English
- ``guard/``: number reading and the precision rules
- ``chat/``: around chat completions (model clients, the regenerate loop, ``wrap``, streams)
- ``weekly/``: the weekly summary job (the run, wiring, report, charts)
- ``assess/``: planning, the audit suite, utility curves
- ``server/``: FastAPI (OpenAI-compatible proxy, stats, budget, metrics)
- ``cli/``: Typer entry points
- ``testing/``: fakes for tests
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dpllm.chat.generate import GenerationResult, generate
from dpllm.chat.models import Completion, ModelClient, OfflineWriter, OpenAIModelClient
from dpllm.config import Settings
from dpllm.data.demo import generate_demo, write_demo
from dpllm.data.engines import DuckDBEngine, Engine, PostgresEngine, SQLiteEngine
from dpllm.data.queries import (
    ActiveUsers,
    CourseBreakdown,
    FeedbackCount,
    MeanRating,
    RatingHistogram,
)
from dpllm.data.sql import ColumnMap
from dpllm.data.stats import StatsRunner, default_catalogue, rating_shares, top_k
from dpllm.data.topics import NewKeywords, TopicCounts, TopTopics, Vocabulary
from dpllm.errors import (
    BudgetError,
    BudgetExceeded,
    BudgetPending,
    ChargeInProgress,
    ConfigError,
    DataError,
    DPLLMError,
    DuplicateReport,
    GuardError,
    InputError,
    InvalidPrivacyParameter,
    InvalidReport,
    InvalidText,
    InvalidWindow,
    LedgerError,
    LedgerUnavailable,
    MissingExtra,
    ModelAuthError,
    ModelBadResponse,
    ModelError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnreachable,
    QueryFailed,
    RawReleaseError,
    RedactionError,
    RequestRejected,
    RequestTooLarge,
    RunLocked,
    TemplateError,
    TemplateLintError,
    TemplateSecurityError,
    TemplateUndefinedError,
    UnknownPool,
    UnknownTicket,
    UnsafeIdentifier,
    WindowNotReady,
)
from dpllm.guard import Guard, GuardReport, Violation, extract_mentions
from dpllm.ldp.mechanisms import KRandomizedResponse, LDPEstimate, LDPReport, OptimisedUnaryEncoding
from dpllm.ledger import (
    AuditEvent,
    Balance,
    ChargeRecord,
    Ledger,
    PendingRequest,
    PoolSpec,
    SQLiteLedger,
    release_once,
)
from dpllm.ledger.factory import open_ledger
from dpllm.privacy.audit import AuditResult, audit_mechanism
from dpllm.privacy.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    make_release,
    permute_and_flip,
    ratio_release,
)
from dpllm.privacy.noise import NoiseSource, SecureNoise, SeededNoise
from dpllm.release import Cost, Measure, Release
from dpllm.templates import LintIssue, PromptEnvironment, lint
from dpllm.weekly.job import WeeklyJob, WeeklyReport, run_weekly
from dpllm.windows import Window

if TYPE_CHECKING:
    from dpllm.chat.wrapper import wrap
    from dpllm.ldp.ingest import LDPClient, LDPIngest, LDPStore
    from dpllm.ledger.postgres import PostgresLedger
    from dpllm.redact import RedactionResult, Redactor, Vault

__version__ = "0.1.0"

# name → module, imported on first access (see the module docstring).
_LAZY = {
    "LDPClient": "dpllm.ldp.ingest",
    "LDPIngest": "dpllm.ldp.ingest",
    "LDPStore": "dpllm.ldp.ingest",
    "PostgresLedger": "dpllm.ledger.postgres",
    "RedactionResult": "dpllm.redact",
    "Redactor": "dpllm.redact",
    "Vault": "dpllm.redact",
    "wrap": "dpllm.chat.wrapper",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpllm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ActiveUsers",
    "AuditEvent",
    "AuditResult",
    "Balance",
    "BudgetError",
    "BudgetExceeded",
    "BudgetPending",
    "ChargeInProgress",
    "ChargeRecord",
    "ColumnMap",
    "Completion",
    "ConfigError",
    "Cost",
    "CourseBreakdown",
    "DPLLMError",
    "DataError",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "DuckDBEngine",
    "DuplicateReport",
    "Engine",
    "FeedbackCount",
    "Gaussian",
    "GenerationResult",
    "Guard",
    "GuardError",
    "GuardReport",
    "InputError",
    "InvalidPrivacyParameter",
    "InvalidReport",
    "InvalidText",
    "InvalidWindow",
    "KRandomizedResponse",
    "LDPClient",
    "LDPEstimate",
    "LDPIngest",
    "LDPReport",
    "LDPStore",
    "Laplace",
    "Ledger",
    "LedgerError",
    "LedgerUnavailable",
    "LintIssue",
    "MeanRating",
    "Measure",
    "MissingExtra",
    "ModelAuthError",
    "ModelBadResponse",
    "ModelClient",
    "ModelError",
    "ModelRateLimited",
    "ModelTimeout",
    "ModelUnreachable",
    "NewKeywords",
    "NoiseSource",
    "OfflineWriter",
    "OpenAIModelClient",
    "OptimisedUnaryEncoding",
    "PendingRequest",
    "PoolSpec",
    "PostgresEngine",
    "PostgresLedger",
    "PromptEnvironment",
    "QueryFailed",
    "RatingHistogram",
    "RawReleaseError",
    "RedactionError",
    "RedactionResult",
    "Redactor",
    "Release",
    "RequestRejected",
    "RequestTooLarge",
    "RunLocked",
    "SQLiteEngine",
    "SQLiteLedger",
    "SecureNoise",
    "SeededNoise",
    "Settings",
    "StatsRunner",
    "TemplateError",
    "TemplateLintError",
    "TemplateSecurityError",
    "TemplateUndefinedError",
    "TopTopics",
    "TopicCounts",
    "UnknownPool",
    "UnknownTicket",
    "UnsafeIdentifier",
    "Vault",
    "Violation",
    "Vocabulary",
    "WeeklyJob",
    "WeeklyReport",
    "Window",
    "WindowNotReady",
    "__version__",
    "audit_mechanism",
    "default_catalogue",
    "extract_mentions",
    "generate",
    "generate_demo",
    "lint",
    "make_release",
    "open_ledger",
    "permute_and_flip",
    "rating_shares",
    "ratio_release",
    "release_once",
    "run_weekly",
    "top_k",
    "wrap",
    "write_demo",
]
