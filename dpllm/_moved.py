"""Old module paths kept for one release after the layout change (dpllm 0.2).

A module that moved leaves a two-line stub at its old path that calls :func:`alias`:
importing the old path warns with a :class:`DeprecationWarning` naming the new one and
then *is* the new module (``sys.modules`` holds the same object), so everything that was
importable from the old path still is, private names included, and ``isinstance`` and
monkeypatching see one module, not a copy.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from typing import Any

REMOVED_IN = "0.3"


class _CallableAlias(types.ModuleType):
    """The new module under the old name, also callable as the package attribute it shadows.

    ``dpllm.generate`` is both a function (``dpllm.generate(...)``) and, until 0.3, the old
    path of :mod:`dpllm.chat.generate`. Importing a submodule sets it as an attribute of
    its package, which would replace the function by a module; this alias forwards calls
    to the function, so ``dpllm.generate(...)`` keeps working after ``import dpllm.generate``.
    """

    _target: types.ModuleType
    _call: str

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._target, self._call)(*args, **kwargs)


def alias(old: str, new: str, *, callable_as: str | None = None) -> None:
    """Make the module being imported as ``old`` the module ``new``, with a warning.

    Args:
        old: the old dotted path (the stub's ``__name__``).
        new: the dotted path the module lives at now.
        callable_as: when the old path shadows a function of the same package, the name
            of that function in ``new``; the alias is then callable (see
            :class:`_CallableAlias`).
    """
    warnings.warn(
        f"{old} moved to {new}; import from {new} (the old path is removed in dpllm {REMOVED_IN})",
        DeprecationWarning,
        stacklevel=3,
    )
    target = importlib.import_module(new)
    if callable_as is None:
        sys.modules[old] = target
        return
    stub = _CallableAlias(old, target.__doc__)
    stub._target = target
    stub._call = callable_as
    sys.modules[old] = stub
