"""What one row of the run spec (:data:`workshop.runspec.RUN_SPEC`) says: a :class:`RunOption`,
its :class:`Bound` and the :class:`HorovodSetting` it turns on. The rows themselves, and
everything derived from them, are :mod:`workshop.runspec`'s.

Standard library only, like the run spec, so every layer may import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class HorovodSetting:
    """A Horovod setting that a run option turns on.

    horovodrun translates its flags into the variables itself
    (``horovod/runner/common/util/config_parser.py``, ``set_env_from_args``): runs started by
    horovodrun get the flag, runs started by a cluster's own MPI launcher get the variable.

    Attributes:
        field: the option's name (filled in from its row); the setting is active when the
            option's value is neither None nor False.
        flag: horovodrun's flag.
        variable: the ``HOROVOD_*`` variable the flag sets for the ranks.
        flag_value: the flag's argument from (option value, run directory); None: a bare flag.
        variable_value: the variable's value from (option value, run directory).
    """

    flag: str
    variable: str
    flag_value: Callable[[Any, Path], str] | None
    variable_value: Callable[[Any, Path], str]
    field: str = ""


@dataclass(frozen=True)
class Bound:
    """The smallest allowed value: ``op`` is ``">="`` or ``">"``; ``note`` follows the bound in
    the error (e.g. ``" (0: no cache)"``)."""

    op: str
    value: float
    note: str = ""

    def allows(self, value: float) -> bool:
        return value >= self.value if self.op == ">=" else value > self.value


@dataclass(frozen=True)
class RunOption:
    """One run option (a row of :data:`RUN_SPEC`).

    Attributes:
        field: the option's name: the RunConfig field, the argparse destination and the runs
            table's column; the flags are ``--`` + the name with dashes.
        type: ``int``, ``float`` or ``str`` for a value; ``bool`` for an on/off switch.
        default: RunConfig's default (``None``: unset, e.g. Horovod's own default applies).
        help: the --help text.
        choices: the allowed values.
        bound: the smallest allowed value (``RunConfig.validate`` checks it).
        cli: a ``workshop run`` / ``sweep`` / ``jobscript`` option declared by
            :func:`workshop.launch.options.add_run_options` (``launcher`` is ``workshop run``'s
            alone, which adds it with this row's help).
        grid: ``workshop sweep`` takes several values and runs each ("[grid]").
        label: for grid options, what stands before the value in a sweep's run names (``bs`` in
            ``p03-np2-bs64``; ``""``: the value alone, e.g. ``torch``).
        short: another spelling, e.g. ``-np``.
        negatable: a switch that is on by default, so it also has ``--no-<flag>``.
        unset_by_default: ``workshop run`` and ``workshop jobscript`` leave it unset (``None``)
            unless given: RunConfig's default applies, and job scripts pass it on only when it
            was asked for (so scripts written before the option existed stay the same).
        run_default: ``workshop run``'s (and job scripts') default where it differs from
            RunConfig's (None: RunConfig's).
        sweep_default: ``workshop sweep``'s default where it differs from a single run's.
        horovod: the Horovod settings it turns on (horovodrun flag and ``HOROVOD_*`` variable).
        program_flag: the training program's argument that carries it (None: not passed to
            the ranks).
        program_omits_default: the launcher passes it only when it differs from the default.
        table: a configuration column of the runs table
            (:func:`workshop.readers.sweep.read_sweep`).
        added_later: runs recorded before the option existed ran with the default (the runs
            table fills it in for them; other missing options stay empty).
        same_in_group: scaling groups (like-for-like runs that differ only in ``np``) hold it
            equal; False for ``np`` itself, the seed (repeats) and what is only recorded.
        work: it changes the work of one step (computation or communication), so a
            communication model fitted on one run speaks for runs equal in it.
        autotune_name: its name in Horovod's autotune log (``--autotune-log-file``).
        job_script_sets: why ``workshop jobscript`` sets it itself instead of passing it on
            (None: passed on as given).
        job_script_resolves: ``workshop jobscript`` picks its default per system.
    """

    field: str
    type: type = str
    default: Any = None
    help: str = ""
    choices: tuple | None = None
    bound: Bound | None = None
    cli: bool = True
    grid: bool = False
    label: str | None = None
    short: str | None = None
    negatable: bool = False
    unset_by_default: bool = False
    run_default: Any = None
    sweep_default: Any = None
    horovod: tuple[HorovodSetting, ...] = ()
    program_flag: str | None = None
    program_omits_default: bool = False
    table: bool = True
    added_later: bool = False
    same_in_group: bool = True
    work: bool = False
    autotune_name: str | None = None
    job_script_sets: str | None = None
    job_script_resolves: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")

    @property
    def annotation(self) -> Any:
        """The RunConfig field's type (``X | None`` where the default is None)."""
        return self.type if self.default is not None else self.type | None
