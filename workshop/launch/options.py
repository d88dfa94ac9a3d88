"""The options of a run, declared once.

:data:`RUN_OPTIONS` is the one list of ``workshop run`` options: ``workshop run``,
``workshop sweep`` (options marked ``grid`` take several values there) and
``workshop jobscript`` build their command lines from it with :func:`add_run_options`. Each
option sets the :class:`~workshop.launch.run.RunConfig` field of the same name; defaults come
from RunConfig and choice lists from the modules that implement them.

:data:`HOROVOD_KNOBS` maps the options that are Horovod settings to horovodrun's flag and the
``HOROVOD_*`` variable that flag sets for the ranks (horovodrun does that translation itself in
``horovod/runner/common/util/config_parser.py``, ``set_env_from_args``). Runs started by
horovodrun get the flags; runs started by a cluster's own MPI launcher get the variables.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workshop.launch.run import CONTROLLERS, FRAMEWORKS, RunConfig
from workshop.train.common import COMPRESSIONS, LR_SCALINGS
from workshop.train.data import DATA_MODES, DATASETS
from workshop.train.device import MODES as DEVICES


@dataclass(frozen=True)
class RunOption:
    """One ``workshop run`` option.

    Attributes:
        field: the RunConfig field it sets (also the argparse destination); the flag is
            ``--`` + the field with dashes.
        help: the --help text.
        type: ``int``, ``float`` or ``str`` for a value; ``bool`` for an on/off switch.
        choices: the allowed values.
        grid: ``workshop sweep`` takes several values and runs each ("[grid]").
        short: another spelling, e.g. ``-np``.
        negatable: a switch that is on by default, so it also has ``--no-<flag>``.
        unset_by_default: ``workshop run`` and ``workshop jobscript`` leave it unset (``None``)
            unless given: RunConfig's default applies, and job scripts pass it on only when it
            was asked for (so scripts written before the option existed stay the same).
        run_default: ``workshop run``'s (and job scripts') default where it differs from
            RunConfig's (None: RunConfig's).
        sweep_default: ``workshop sweep``'s default where it differs from a single run's
            (None: the same).
        label: for grid options, what stands before the value in a sweep's run names
            (``bs`` in ``p03-np2-bs64``; ``""``: the value alone, e.g. ``torch``).
    """

    field: str
    help: str = ""
    type: type = str
    choices: tuple | None = None
    grid: bool = False
    short: str | None = None
    negatable: bool = False
    unset_by_default: bool = False
    run_default: Any = None
    sweep_default: Any = None
    label: str | None = None

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")


RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("framework", choices=tuple(FRAMEWORKS), grid=True, label=""),
    RunOption("dataset", choices=DATASETS, grid=True, label=""),
    RunOption(
        "data",
        choices=DATA_MODES,
        help="auto: full set if cached/downloadable, else MNIST's offline 5,000-image subset",
    ),
    RunOption(
        "np",
        "number of processes (workers)",
        int,
        grid=True,
        short="-np",
        sweep_default=[1, 2],
        label="np",
    ),
    RunOption(
        "controller",
        "Horovod controller (horovodrun --gloo / --mpi)",
        choices=CONTROLLERS,
        grid=True,
        label="",
    ),
    RunOption("epochs", type=int),
    RunOption("batch_size", "per worker", int, grid=True, label="bs"),
    RunOption("lr", "learning rate for --base-batch-size", float, grid=True, label="lr"),
    RunOption(
        "base_batch_size",
        "batch size that --lr suits (default: the global batch of "
        "one worker, --batch-size x --backward-passes-per-step, so LR scales with np)",
        int,
        grid=True,
        label="base",
    ),
    RunOption("lr_scaling", choices=LR_SCALINGS, grid=True, label="lr"),
    RunOption("warmup_epochs", type=float, grid=True, label="wu"),
    RunOption("steps_per_epoch", "cap on optimizer steps per epoch", int),
    RunOption(
        "timeline",
        "write timeline.json (HOROVOD_TIMELINE); on by default for one run, off for a sweep",
        bool,
        negatable=True,
        run_default=True,
        sweep_default=False,
    ),
    RunOption("mark_cycles", "HOROVOD_TIMELINE_MARK_CYCLES", bool),
    RunOption(
        "fusion_threshold_mb",
        "tensor fusion buffer, MB (HOROVOD_FUSION_THRESHOLD; "
        "Horovod's default 128, 0 = no fusion)",
        float,
        grid=True,
        label="fus",
    ),
    RunOption(
        "cycle_time_ms",
        "time between negotiation cycles, ms (HOROVOD_CYCLE_TIME; Horovod's default 1)",
        float,
        grid=True,
        label="cyc",
    ),
    RunOption(
        "cache_capacity",
        "response cache entries (HOROVOD_CACHE_CAPACITY; Horovod's default 1024, 0 = no cache)",
        int,
        grid=True,
        label="cache",
    ),
    RunOption("autotune", "Horovod autotune, log in autotune.csv", bool),
    RunOption(
        "compression",
        "gradient compression for the allreduce (hvd.Compression; default none)",
        choices=COMPRESSIONS,
        grid=True,
        unset_by_default=True,
        label="",
    ),
    RunOption(
        "backward_passes_per_step",
        "backward passes (batches) accumulated per "
        "allreduce and optimizer step (PyTorch only; default 1)",
        int,
        grid=True,
        unset_by_default=True,
        label="bpps",
    ),
    RunOption(
        "mpi_profile", "preload the workshop's PMPI profiler (needs --controller mpi)", bool
    ),
    RunOption("seed", type=int, grid=True, label="seed"),
    RunOption("threads_per_rank", type=int),
    RunOption("device", choices=DEVICES),
    RunOption("oversubscribe", "allow np > cores (recorded in run.json; timings mislead)", bool),
)

#: RunConfig fields that ``workshop sweep`` can vary (several values each).
GRID_FIELDS: tuple[str, ...] = tuple(option.field for option in RUN_OPTIONS if option.grid)


def add_run_options(parser: argparse.ArgumentParser, *, sweep: bool = False) -> None:
    """Add every run option to ``parser``.

    Args:
        parser: the parser (or argument group) of ``workshop run``, ``sweep`` or ``jobscript``.
        sweep: grid options take several values (``nargs="+"``, marked "[grid]"), and
            ``sweep_default`` replaces the single run's default.
    """
    defaults = RunConfig()
    for option in RUN_OPTIONS:
        default = getattr(defaults, option.field)
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


# ---------------------------------------------------------------------------------------------
# Horovod's knobs: horovodrun flag <-> HOROVOD_* variable (the values written as horovodrun
# writes them: tests/test_tuning_options.py checks them against horovodrun's own parser)

MIB = 1024 * 1024


def _number(value: float, run_dir: Path) -> str:
    return f"{value:g}"


def _float(value: float, run_dir: Path) -> str:
    return str(float(value))


def _fusion_bytes(value: float, run_dir: Path) -> str:
    return str(int(value * MIB))


def _timeline_path(value: bool, run_dir: Path) -> str:
    return str(run_dir / "timeline.json")


def _autotune_log_path(value: bool, run_dir: Path) -> str:
    return str(run_dir / "autotune.csv")


def _on(value: bool, run_dir: Path) -> str:
    return "1"


@dataclass(frozen=True)
class HorovodKnob:
    """A Horovod setting that a run option turns on.

    Attributes:
        field: the RunConfig field; the knob is active when it is neither None nor False.
        flag: horovodrun's flag.
        variable: the ``HOROVOD_*`` variable the flag sets for the ranks.
        flag_value: the flag's argument from (field value, run directory); None: a bare flag.
        variable_value: the variable's value from (field value, run directory).
    """

    field: str
    flag: str
    variable: str
    flag_value: Callable[[Any, Path], str] | None
    variable_value: Callable[[Any, Path], str]


HOROVOD_KNOBS: tuple[HorovodKnob, ...] = (
    HorovodKnob(
        "timeline", "--timeline-filename", "HOROVOD_TIMELINE", _timeline_path, _timeline_path
    ),
    HorovodKnob(
        "mark_cycles", "--timeline-mark-cycles", "HOROVOD_TIMELINE_MARK_CYCLES", None, _on
    ),
    # horovodrun takes whole MB and sets the variable in bytes
    HorovodKnob(
        "fusion_threshold_mb",
        "--fusion-threshold-mb",
        "HOROVOD_FUSION_THRESHOLD",
        _number,
        _fusion_bytes,
    ),
    HorovodKnob("cycle_time_ms", "--cycle-time-ms", "HOROVOD_CYCLE_TIME", _number, _float),
    HorovodKnob("cache_capacity", "--cache-capacity", "HOROVOD_CACHE_CAPACITY", _number, _number),
    HorovodKnob("autotune", "--autotune", "HOROVOD_AUTOTUNE", None, _on),
    HorovodKnob(
        "autotune",
        "--autotune-log-file",
        "HOROVOD_AUTOTUNE_LOG",
        _autotune_log_path,
        _autotune_log_path,
    ),
)


def _active(config: RunConfig) -> list[tuple[HorovodKnob, Any]]:
    knobs = []
    for knob in HOROVOD_KNOBS:
        value = getattr(config, knob.field)
        if value is not None and value is not False:
            knobs.append((knob, value))
    return knobs


def horovod_variables(config: RunConfig, run_dir: Path) -> dict[str, str]:
    """The ``HOROVOD_*`` variables of ``config``'s Horovod settings (what horovodrun's flags
    set), e.g. ``{"HOROVOD_CACHE_CAPACITY": "0"}``."""
    return {k.variable: k.variable_value(v, Path(run_dir)) for k, v in _active(config)}


def horovodrun_flags(config: RunConfig, run_dir: Path) -> list[str]:
    """horovodrun's flags for ``config``'s Horovod settings, e.g. ``["--cache-capacity", "0"]``."""
    flags: list[str] = []
    for knob, value in _active(config):
        flags.append(knob.flag)
        if knob.flag_value is not None:
            flags.append(knob.flag_value(value, Path(run_dir)))
    return flags
