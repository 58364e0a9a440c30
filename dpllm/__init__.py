"""dpllm: differentially private statistics for LLM prompts.

Re-exports only; see the modules for the concepts.
"""

from dpllm.errors import (
    BudgetError,
    BudgetExceeded,
    BudgetPending,
    ChargeInProgress,
    ConfigError,
    DataError,
    DPLLMError,
    GuardError,
    InvalidPrivacyParameter,
    LedgerError,
    LedgerUnavailable,
    ModelAuthError,
    ModelBadResponse,
    ModelError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnreachable,
    RawReleaseError,
    RedactionError,
    TemplateError,
    UnsafeIdentifier,
)
from dpllm.release import Cost, Measure, Release

__version__ = "0.1.0"

__all__ = [
    "BudgetError",
    "BudgetExceeded",
    "BudgetPending",
    "ChargeInProgress",
    "ConfigError",
    "Cost",
    "DPLLMError",
    "DataError",
    "GuardError",
    "InvalidPrivacyParameter",
    "LedgerError",
    "LedgerUnavailable",
    "Measure",
    "ModelAuthError",
    "ModelBadResponse",
    "ModelError",
    "ModelRateLimited",
    "ModelTimeout",
    "ModelUnreachable",
    "RawReleaseError",
    "RedactionError",
    "Release",
    "TemplateError",
    "UnsafeIdentifier",
    "__version__",
]
