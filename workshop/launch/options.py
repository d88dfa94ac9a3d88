"""``workshop run``'s options, built from the run spec.

The options themselves are declared once, one row each, in :data:`workshop.runspec.RUN_SPEC`;
``workshop run``, ``workshop sweep`` (options marked ``grid`` take several values there) and
``workshop jobscript`` build their command lines from those rows with
:func:`add_run_options`, and :func:`config_from_args` turns the parsed options into a
:class:`~workshop.launch.run.RunConfig`.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from workshop.launch.run import RunConfig
from workshop.runspec import CLI_OPTIONS

__all__ = ["add_run_options", "config_from_args"]


def add_run_options(parser: argparse.ArgumentParser, *, sweep: bool = False) -> None:
    """Add every run option to ``parser``.

    Args:
        parser: the parser (or argument group) of ``workshop run``, ``sweep`` or ``jobscript``.
        sweep: grid options take several values (``nargs="+"``, marked "[grid]"), and
            ``sweep_default`` replaces the single run's default.
    """
    for option in CLI_OPTIONS:
        default = option.default
        if option.run_default is not None:
            default = option.run_default
        if option.unset_by_default and not sweep:
            default = None
        if sweep and option.sweep_default is not None:
            default = option.sweep_default
        names = [option.short, option.flag] if option.short else [option.flag]
        kwargs: dict[str, Any] = {"dest": option.field, "help": option.help or None}
        if option.type is bool:
            action = argparse.BooleanOptionalAction if option.negatable else "store_true"
            parser.add_argument(*names, action=action, default=bool(default), **kwargs)
            continue
        kwargs |= {"type": option.type, "choices": option.choices}
        if sweep and option.grid:
            default = default if isinstance(default, list) else [default]
            kwargs |= {"nargs": "+", "help": " ".join(filter(None, ["[grid]", option.help]))}
        parser.add_argument(*names, default=default, **kwargs)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The RunConfig of parsed ``workshop run`` options (unset ones keep RunConfig's default)."""
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    given = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    return RunConfig(**given)
