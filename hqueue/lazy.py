"""Package exports imported on first use (PEP 562), so that importing one small module
of a package does not import everything the package re-exports.

Not public API.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return the ``__getattr__`` and ``__dir__`` of ``package`` whose names
    ``exports`` maps to the modules defining them.

    The returned ``__getattr__`` imports the module on first access, caches the value
    in ``namespace`` (the package's globals) and raises :class:`AttributeError` for a
    name that is not exported.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
