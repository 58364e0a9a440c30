"""Prompt templates: sandboxed Jinja, DP filters with error bands, and the linter.

Re-exports only; see :mod:`~dpllm.templates.filters` (the granularity rule and the
filters), :mod:`~dpllm.templates.declaration` (the front matter),
:mod:`~dpllm.templates.lint` (the linter and its codes) and
:mod:`~dpllm.templates.environment` (rendering).
"""

from dpllm.templates.declaration import Declaration
from dpllm.templates.environment import (
    SEEDED_MARK,
    Messages,
    PromptEnvironment,
    RenderedText,
    builtin_prompts_dir,
)
from dpllm.templates.filters import FILTERS, Phrase, approx, band, count, interval, pct
from dpllm.templates.lint import LintIssue, lint
from dpllm.templates.synthetic import synthetic_context

__all__ = [
    "FILTERS",
    "SEEDED_MARK",
    "Declaration",
    "LintIssue",
    "Messages",
    "Phrase",
    "PromptEnvironment",
    "RenderedText",
    "approx",
    "band",
    "builtin_prompts_dir",
    "count",
    "interval",
    "lint",
    "pct",
    "synthetic_context",
]
