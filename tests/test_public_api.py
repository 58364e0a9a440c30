"""The public API is exactly ``dpllm.__all__``, sorted, and every name resolves."""

from __future__ import annotations

import subprocess
import sys
import types

import dpllm


def test_all_is_sorted() -> None:
    assert list(dpllm.__all__) == sorted(dpllm.__all__)
    assert len(set(dpllm.__all__)) == len(dpllm.__all__)


def test_every_exported_name_resolves() -> None:
    for name in dpllm.__all__:
        assert getattr(dpllm, name) is not None, name


def test_no_public_name_is_left_out_of_all() -> None:
    public = {
        name
        for name, value in vars(dpllm).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in {"annotations", "importlib", "TYPE_CHECKING", "Any"}
    }
    assert public <= set(dpllm.__all__)


def test_every_exception_is_exported_and_derives_from_dpllm_error() -> None:
    from dpllm import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, dpllm.DPLLMError)
        assert name in dpllm.__all__


def test_import_does_not_load_presidio() -> None:
    """``import dpllm`` stays light: Presidio (and spaCy) load only when used."""
    code = "import sys, dpllm; print('presidio_analyzer' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_lazy_names_survive_their_modules_being_imported() -> None:
    """Importing the module behind a lazy name must not shadow the name (``dpllm.wrap``)."""
    import dpllm.chat.wrapper
    import dpllm.redact

    assert callable(dpllm.wrap) and dpllm.wrap is dpllm.chat.wrapper.wrap
    assert isinstance(dpllm.Redactor, type)
