"""The public API is exactly ``dpllm.__all__``."""

from __future__ import annotations

import types

import dpllm


def test_all_is_sorted_and_matches_public_names() -> None:
    public = {
        name
        for name, value in vars(dpllm).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    exported = set(dpllm.__all__) - {"__version__"}
    assert exported == public
    assert list(dpllm.__all__) == sorted(dpllm.__all__, key=str.lower) or list(
        dpllm.__all__
    ) == sorted(dpllm.__all__)


def test_every_exception_derives_from_dpllm_error() -> None:
    from dpllm import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, dpllm.DPLLMError)
