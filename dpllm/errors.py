"""The dpllm exception tree.

Every error dpllm raises on purpose is a :class:`DPLLMError`. Each class also
subclasses the builtin a caller would naturally catch, so ``except ValueError``
keeps working for code that does not know dpllm::

    DPLLMError (Exception)
    ├── ConfigError (ValueError)                 malformed dpllm.toml / settings
    │   ├── UnknownPool (ConfigError)            a budget pool that is not configured
    │   └── MissingExtra (ConfigError, ImportError)  an optional extra is not installed
    ├── InvalidPrivacyParameter (ValueError)     ε ≤ 0, NaN, δ ∉ (0, 1), overflow …
    ├── BudgetError
    │   ├── BudgetExceeded (BudgetError, ValueError)   a charge would pass a cap
    │   ├── BudgetPending (BudgetError)                queued for human approval
    │   ├── ChargeInProgress (BudgetError, RuntimeError)  same query id being charged
    │   ├── QueryFailed (BudgetError, RuntimeError)  failed after reading; charge stands
    │   ├── UnknownTicket (BudgetError, LookupError)   no such approval ticket
    │   └── LedgerError (BudgetError, RuntimeError)    ledger storage unusable
    │       ├── LedgerUnavailable (LedgerError, ConnectionError)
    │       └── RunLocked (LedgerError)              another process runs the same job
    ├── DataError (ValueError)                   bad data / SQL identifiers / sources
    │   ├── InvalidWindow (DataError)            not a canonical ISO week in range
    │   │   └── WindowNotReady (InvalidWindow)   a future or unfinished window
    │   ├── UnsafeIdentifier (DataError)         not a plain SQL name
    │   └── InvalidReport (DataError)            a malformed local-DP report
    │       └── DuplicateReport (InvalidReport)  second report of a user/metric/window
    ├── TemplateError (ValueError)               template syntax, lint, render
    │   ├── RawReleaseError (TemplateError, TypeError)  a Release printed raw
    │   ├── TemplateLintError (TemplateError)         the linter found problems
    │   ├── TemplateSecurityError (TemplateError)     the sandbox refused an operation
    │   └── TemplateUndefinedError (TemplateError, NameError)  a variable is missing
    ├── RedactionError (RuntimeError)            Presidio set-up or analysis
    │   └── InvalidText (RedactionError, ValueError)  not valid Unicode (lone surrogate) → 400
    ├── GuardError (ValueError)                  guard input (e.g. releases file)
    ├── RequestRejected (ValueError)             a request the server refuses to work on
    │   └── RequestTooLarge (RequestRejected)    over a [server.limits] size
    ├── InputError (ValueError)                  an unusable file or value given by a user
    └── ModelError (RuntimeError)                the language-model call
        ├── ModelUnreachable (ModelError, ConnectionError)
        ├── ModelAuthError (ModelError, PermissionError)
        ├── ModelRateLimited (ModelError)
        ├── ModelTimeout (ModelError, TimeoutError)
        └── ModelBadResponse (ModelError)

Messages say what went wrong *and* what to do next.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "BudgetExceeded",
    "BudgetPending",
    "ChargeInProgress",
    "ConfigError",
    "DPLLMError",
    "DataError",
    "DuplicateReport",
    "GuardError",
    "InputError",
    "InvalidPrivacyParameter",
    "InvalidReport",
    "InvalidText",
    "InvalidWindow",
    "LedgerError",
    "LedgerUnavailable",
    "MissingExtra",
    "ModelAuthError",
    "ModelBadResponse",
    "ModelError",
    "ModelRateLimited",
    "ModelTimeout",
    "ModelUnreachable",
    "QueryFailed",
    "RawReleaseError",
    "RedactionError",
    "RequestRejected",
    "RequestTooLarge",
    "RunLocked",
    "TemplateError",
    "TemplateLintError",
    "TemplateSecurityError",
    "TemplateUndefinedError",
    "UnknownPool",
    "UnknownTicket",
    "UnsafeIdentifier",
    "WindowNotReady",
]


class DPLLMError(Exception):
    """Base class of every error dpllm raises on purpose."""


class ConfigError(DPLLMError, ValueError):
    """A configuration value is missing or malformed.

    ``field`` names the offending setting (dotted path) and ``line`` the line of
    the config file, when known.
    """

    def __init__(self, message: str, *, field: str | None = None, line: int | None = None) -> None:
        where = ""
        if field is not None:
            where = f"[{field}"
            if line is not None:
                where += f", line {line}"
            where += "] "
        super().__init__(where + message)
        self.field = field
        self.line = line


class UnknownPool(ConfigError):
    """A budget pool is named that the ledger does not know; configure it first."""


class MissingExtra(ConfigError, ImportError):
    """A feature needs an optional dependency ("extra") that is not installed.

    The message names the command that installs it (``pip install "dpllm[duckdb]"``);
    ``module`` is the missing module and ``extra`` the extra that provides it. It is
    also an :class:`ImportError`, so ``except ImportError`` keeps working.
    """

    def __init__(self, message: str, *, module: str, extra: str) -> None:
        super().__init__(message)
        self.module = module
        self.extra = extra


class InvalidPrivacyParameter(DPLLMError, ValueError):
    """A privacy parameter (ε, δ, ρ, sensitivity, bounds, scale) is not usable."""


class BudgetError(DPLLMError):
    """Base class of errors about the privacy budget and its ledger."""


class BudgetExceeded(BudgetError, ValueError):
    """A charge would push some pool past its cap. Nothing was spent.

    ``pool`` is the first pool on the path that cannot take the charge,
    ``requested`` and ``remaining`` are in the pool's own unit (ε or ρ).
    """

    def __init__(
        self,
        message: str,
        *,
        pool: str | None = None,
        requested: float | None = None,
        remaining: float | None = None,
        window: str | None = None,
    ) -> None:
        super().__init__(message)
        self.pool = pool
        self.requested = requested
        self.remaining = remaining
        self.window = window


class BudgetPending(BudgetError):
    """The request was queued for human approval; ``ticket`` identifies it."""

    def __init__(self, message: str, *, ticket: str) -> None:
        super().__init__(message)
        self.ticket = ticket


class ChargeInProgress(BudgetError, RuntimeError):
    """Another caller is charging the same query id right now; retry shortly."""


class QueryFailed(BudgetError, RuntimeError):
    """This query id failed after its data was read; its charge stands and it is not run again.

    A failure after the read may depend on the data, so it is itself a signal:
    running the query again for free would let it be probed. ``query_id`` names
    the query and ``error_class`` the class of the original exception (never its
    message, which may carry record contents).
    """

    def __init__(self, message: str, *, query_id: str, error_class: str) -> None:
        super().__init__(message)
        self.query_id = query_id
        self.error_class = error_class


class UnknownTicket(BudgetError, LookupError):
    """No approval ticket has this id; ``dpllm budget pending`` lists the open ones."""


class LedgerError(BudgetError, RuntimeError):
    """The ledger's storage cannot be used (unwritable file, corrupt schema …)."""


class LedgerUnavailable(LedgerError, ConnectionError):
    """The ledger's database cannot be reached. Nothing was charged."""


class RunLocked(LedgerError):
    """Another process holds the run lock of this job (the same week): nothing was done.

    ``key`` names the lock (``weekly:<dataset>:<pool>:<week>``).
    """

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class DataError(DPLLMError, ValueError):
    """The data or its source is unusable (missing file, unknown column, bad value)."""


class InvalidWindow(DataError):
    """A window is not a canonical ISO week (``2026-W47``) in the supported year range.

    Raised at the edge that parsed it, before anything is read or charged
    (HTTP 400, CLI exit 2).
    """


class WindowNotReady(InvalidWindow):
    """The window has not ended yet (or has not begun): its data is not complete.

    An unfinished week is released only on explicit opt-in (``allow_incomplete``);
    a future week never.
    """


class UnsafeIdentifier(DataError):
    """An SQL identifier is not a plain name (letters, digits, underscore)."""


class InvalidReport(DataError):
    """A local-DP report is malformed or does not match its metric's mechanism and ε."""


class DuplicateReport(InvalidReport):
    """This user already reported this metric in this window; only one report counts."""


class TemplateError(DPLLMError, ValueError):
    """A prompt template failed to parse, lint or render."""


class RawReleaseError(TemplateError, TypeError):
    """A Release was converted to text without a DP filter (band, approx, …)."""


class TemplateLintError(TemplateError):
    """A template failed the linter; ``issues`` lists each finding (line, column, code)."""

    def __init__(self, message: str, *, issues: tuple[object, ...] = ()) -> None:
        super().__init__(message)
        self.issues = issues


class TemplateSecurityError(TemplateError):
    """The template sandbox refused an operation (private attribute, huge range …)."""


class TemplateUndefinedError(TemplateError, NameError):
    """A template used a variable that the render context does not define."""


class RedactionError(DPLLMError, RuntimeError):
    """The redactor could not be built or could not analyse a text."""


class InvalidText(RedactionError, ValueError):
    """A text to redact is not valid Unicode (a lone surrogate); send UTF-8 text."""


class GuardError(DPLLMError, ValueError):
    """The precision guard was given unusable input."""


class InputError(DPLLMError, ValueError):
    """A file or value given by a user cannot be used (missing, a directory, unreadable,
    binary, not in the stated encoding …); the message says what to do instead."""


class RequestRejected(DPLLMError, ValueError):
    """A request the server will not work on (its shape or its size); nothing was done.

    ``status`` is the HTTP status it is answered with (400 unless a subclass says).
    """

    status = 400

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class RequestTooLarge(RequestRejected):
    """A request over one of the ``[server.limits]``: raise the limit or send less."""

    status = 413


class ModelError(DPLLMError, RuntimeError):
    """The language-model call failed.

    ``status`` is the model server's HTTP status when it answered with an error
    (``None`` otherwise).
    """

    def __init__(self, message: str = "", *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ModelUnreachable(ModelError, ConnectionError):
    """The model server could not be reached."""


class ModelAuthError(ModelError, PermissionError):
    """The model server refused the credentials."""


class ModelRateLimited(ModelError):
    """The model server kept answering 429 after the allowed retries."""


class ModelTimeout(ModelError, TimeoutError):
    """The model call timed out after the allowed retries."""


class ModelBadResponse(ModelError):
    """The model server answered with an error or a malformed response."""
