"""The one way a package of the workshop hands on its modules' names without importing them
first (PEP 562): a package's ``__init__`` says which module holds which name, and a name is
imported on first use, once. So ``wk.exercise("04.1")`` loads lesson 04's entries and the
checking engine, and ``workshop timeline summary`` no pandas.

Usage, in a package's ``__init__.py``::

    from workshop.lazy import exports

    __getattr__, __dir__, __all__ = exports(__name__, {"runs": ["Run", "open_run"]})

Standard library only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["exports"]


def exports(
    package: str,
    names: Mapping[str, Iterable[str]],
    modules: Iterable[str] = (),
    aliases: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``.

    Args:
        package: the package's ``__name__``.
        names: submodule (relative to the package) -> the names it hands on.
        modules: submodules reachable as attributes themselves (``io.runs``).
        aliases: a name -> the module (absolute) it stands for (``wk.exercises``: the engine).

    >>> getattr_, dir_, all_ = exports("workshop", {"units": ["format_bytes"]})
    >>> getattr_("format_bytes")(2048)
    '2 KiB'
    >>> getattr_("nothing")
    Traceback (most recent call last):
    ...
    AttributeError: module 'workshop' has no attribute 'nothing'
    """
    modules, aliases = tuple(modules), dict(aliases or {})
    module_of = {name: module for module, said in names.items() for name in said}
    everything = [*modules, *aliases, *module_of]

    def __getattr__(name: str) -> Any:
        if name in modules:
            return importlib.import_module(f"{package}.{name}")
        if name in aliases:
            return importlib.import_module(aliases[name])
        if name in module_of:
            value = getattr(importlib.import_module(f"{package}.{module_of[name]}"), name)
            vars(importlib.import_module(package))[name] = value  # once
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(importlib.import_module(package))) | set(everything))

    return __getattr__, __dir__, everything
