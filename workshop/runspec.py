"""The options of a run, declared once: one row per option in :data:`RUN_SPEC`.

A row says everything the workshop needs to know about one option: its type, default and
allowed values, its ``workshop run`` flag, the horovodrun flag and ``HOROVOD_*`` variable it
sets, the training program's argument that carries it, its label in a sweep's run names,
whether it is a column of the runs table, whether scaling groups hold it equal, and whether it
changes the work of one step. Everything else is derived from these rows:

* :class:`workshop.launch.run.RunConfig` (its fields and defaults, and the checks of
  choices and bounds in ``validate``);
* ``workshop run`` / ``sweep`` / ``jobscript``'s options (:mod:`workshop.launch.options`),
  the training program's arguments (:func:`workshop.train.common.build_parser` and
  :func:`workshop.launch.run.train_args`), the Horovod settings (:data:`HOROVOD_SETTINGS`);
* the runs table's configuration columns (:data:`TABLE_COLUMNS`, :mod:`workshop.readers.sweep`),
  the like-for-like keys of scaling groups (:data:`GROUP_KEYS`,
  :mod:`workshop.analysis.scaling`), the columns that fix a step's work (:data:`WORK_KEYS`,
  :mod:`workshop.analysis.commodel`), and the names of Horovod's autotune log
  (:mod:`workshop.readers.logs`).

Adding an option is one row here (plus the code that uses its value);
``tests/test_runspec.py`` fails when a consumer keeps a list of its own.

What a row says (:class:`~workshop.runoption.RunOption`, its bound and the Horovod settings it
turns on) is :mod:`workshop.runoption`. The module sits on the ground floor: it imports only
that and :mod:`workshop.rules` (which owns the learning-rate rules and so their names), so the
training ranks, the readers and the launchers can all import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workshop.rules import LR_SCALINGS
from workshop.runoption import Bound, HorovodSetting, RunOption

# ---------------------------------------------------------------------------------------------
# Allowed values

#: The training program of each framework (``python -m <module>`` is one rank).
FRAMEWORK_PROGRAMS = {
    "torch": "workshop.train.torch_train",
    "tensorflow": "workshop.train.tf_train",
}
FRAMEWORKS = tuple(FRAMEWORK_PROGRAMS)
#: The API style each framework's fixes are written in (``workshop check``'s and a crash's
#: fixes: :data:`workshop.check.fixes.STYLES` adds ``keras`` and ``ddp``, which a run's
#: framework alone does not tell).
FRAMEWORK_STYLES = {"torch": "torch", "tensorflow": "tf", "ddp": "ddp"}


def style_of_framework(framework: str | None) -> str:
    """The fixes' API style of ``framework`` (``torch`` when unknown).

    >>> style_of_framework("tensorflow"), style_of_framework(None)
    ('tf', 'torch')
    """
    return FRAMEWORK_STYLES.get(framework or "", "torch")


#: Horovod's controllers (horovodrun ``--gloo`` / ``--mpi``).
CONTROLLERS = ("gloo", "mpi")
DATASETS = ("mnist", "cifar10", "materials")
#: ``auto``: the full set if cached or downloadable, else MNIST's offline 5,000-image subset
#: (the launcher resolves it before the ranks start: :func:`workshop.train.data.prepare`).
DATA_MODES = ("auto", "full", "subset", "synthetic")
#: Where a rank computes (:mod:`workshop.train.device`).
DEVICES = ("auto", "cpu", "cuda")
#: Gradient compression for the allreduce: names of ``hvd.Compression`` members (the same in
#: horovod.torch and horovod.tensorflow 0.28.1: ``none``, and ``fp16`` which sends float32
#: gradients as float16 and casts them back after the allreduce).
COMPRESSIONS = ("none", "fp16")

# ---------------------------------------------------------------------------------------------
# Horovod settings: horovodrun flag <-> HOROVOD_* variable (the values written as horovodrun
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


# ---------------------------------------------------------------------------------------------
# The rows


AT_LEAST_ONE = Bound(">=", 1)

RUN_SPEC: tuple[RunOption, ...] = (
    RunOption(
        "framework",
        default="torch",
        choices=FRAMEWORKS,
        grid=True,
        label="",
        work=True,
    ),
    RunOption(
        "dataset",
        default="mnist",
        choices=DATASETS,
        grid=True,
        label="",
        program_flag="--dataset",
        work=True,
    ),
    RunOption(
        "data",
        default="auto",
        help="auto: full set if cached/downloadable, else MNIST's offline 5,000-image subset",
        choices=DATA_MODES,
        # the ranks get the resolved mode (workshop.train.data.prepare), never "auto"
        program_flag="--data",
    ),
    RunOption(
        "np",
        int,
        2,
        "number of processes (workers)",
        bound=AT_LEAST_ONE,
        grid=True,
        label="np",
        short="-np",
        sweep_default=[1, 2],
        same_in_group=False,
        job_script_sets="the number of ranks is --nodes x --ranks-per-node",
    ),
    RunOption(
        "controller",
        default="gloo",
        help="Horovod controller (horovodrun --gloo / --mpi)",
        choices=CONTROLLERS,
        grid=True,
        label="",
        job_script_sets="ranks started by the system's MPI launcher use Horovod's MPI controller",
    ),
    RunOption("epochs", int, 3, bound=AT_LEAST_ONE, program_flag="--epochs"),
    RunOption(
        "batch_size",
        int,
        32,
        "per worker",
        bound=AT_LEAST_ONE,
        grid=True,
        label="bs",
        program_flag="--batch-size",
        work=True,
    ),
    RunOption(
        "lr",
        float,
        0.01,
        "learning rate for --base-batch-size",
        bound=Bound(">", 0),
        grid=True,
        label="lr",
        program_flag="--lr",
    ),
    RunOption(
        "base_batch_size",
        int,
        None,
        "batch size that --lr suits (default: the global batch of "
        "one worker, --batch-size x --backward-passes-per-step, so LR scales with np)",
        grid=True,
        label="base",
        program_flag="--base-batch-size",
    ),
    RunOption(
        "lr_scaling",
        default="linear",
        choices=LR_SCALINGS,
        grid=True,
        label="lr",
        program_flag="--lr-scaling",
    ),
    RunOption("warmup_epochs", float, 0.0, grid=True, label="wu", program_flag="--warmup-epochs"),
    RunOption(
        "steps_per_epoch",
        int,
        None,
        "cap on optimizer steps per epoch",
        program_flag="--steps-per-epoch",
    ),
    RunOption(
        "timeline",
        bool,
        False,
        "write timeline.json (HOROVOD_TIMELINE); on by default for one run, off for a sweep",
        negatable=True,
        run_default=True,
        sweep_default=False,
        horovod=(
            HorovodSetting(
                "--timeline-filename", "HOROVOD_TIMELINE", _timeline_path, _timeline_path
            ),
        ),
    ),
    RunOption(
        "mark_cycles",
        bool,
        False,
        "HOROVOD_TIMELINE_MARK_CYCLES",
        horovod=(
            HorovodSetting("--timeline-mark-cycles", "HOROVOD_TIMELINE_MARK_CYCLES", None, _on),
        ),
        table=False,
    ),
    RunOption(
        "fusion_threshold_mb",
        float,
        None,
        "tensor fusion buffer, MB (HOROVOD_FUSION_THRESHOLD; "
        "Horovod's default 128, 0 = no fusion)",
        bound=Bound(">=", 0),
        grid=True,
        label="fus",
        # horovodrun takes whole MB and sets the variable in bytes
        horovod=(
            HorovodSetting(
                "--fusion-threshold-mb", "HOROVOD_FUSION_THRESHOLD", _number, _fusion_bytes
            ),
        ),
        work=True,
        # Horovod 0.28 logs the joint (cycle time, fusion threshold) parameter in MB
        autotune_name="tensor_fusion_threshold",
    ),
    RunOption(
        "cycle_time_ms",
        float,
        None,
        "time between negotiation cycles, ms (HOROVOD_CYCLE_TIME; Horovod's default 1)",
        grid=True,
        label="cyc",
        horovod=(HorovodSetting("--cycle-time-ms", "HOROVOD_CYCLE_TIME", _number, _float),),
        work=True,
        autotune_name="cycle_time_ms",
    ),
    RunOption(
        "cache_capacity",
        int,
        None,
        "response cache entries (HOROVOD_CACHE_CAPACITY; Horovod's default 1024, 0 = no cache)",
        bound=Bound(">=", 0, " (0: no cache)"),
        grid=True,
        label="cache",
        horovod=(HorovodSetting("--cache-capacity", "HOROVOD_CACHE_CAPACITY", _number, _number),),
    ),
    RunOption(
        "autotune",
        bool,
        False,
        "Horovod autotune, log in autotune.csv",
        horovod=(
            HorovodSetting("--autotune", "HOROVOD_AUTOTUNE", None, _on),
            HorovodSetting(
                "--autotune-log-file",
                "HOROVOD_AUTOTUNE_LOG",
                _autotune_log_path,
                _autotune_log_path,
            ),
        ),
    ),
    RunOption(
        "compression",
        default="none",
        help="gradient compression for the allreduce (hvd.Compression; default none)",
        choices=COMPRESSIONS,
        grid=True,
        label="",
        unset_by_default=True,
        program_flag="--compression",
        program_omits_default=True,
        added_later=True,
        work=True,
    ),
    RunOption(
        "backward_passes_per_step",
        int,
        1,
        "backward passes (batches) accumulated per "
        "allreduce and optimizer step (PyTorch only; default 1)",
        bound=AT_LEAST_ONE,
        grid=True,
        label="bpps",
        unset_by_default=True,
        program_flag="--backward-passes-per-step",
        program_omits_default=True,
        added_later=True,
        work=True,
    ),
    RunOption(
        "mpi_profile",
        bool,
        False,
        "preload the workshop's PMPI profiler (needs --controller mpi)",
        added_later=True,
    ),
    RunOption(
        "seed", int, 42, grid=True, label="seed", program_flag="--seed", same_in_group=False
    ),
    RunOption(
        "threads_per_rank",
        int,
        None,
        program_flag="--threads",
        table=False,
        job_script_resolves=True,
    ),
    RunOption(
        "device",
        default="auto",
        choices=DEVICES,
        program_flag="--device",
        table=False,
        job_script_resolves=True,
    ),
    RunOption(
        "oversubscribe",
        bool,
        False,
        "allow np > cores (recorded in run.json; timings mislead)",
        same_in_group=False,
        job_script_sets="each rank gets its own cores (see --threads-per-rank)",
    ),
    RunOption(
        "launcher",
        default=None,
        help="start ranks with this command instead of horovodrun, e.g. "
        '"mpiexec -n 8 -ppn 4" (clusters; see workshop jobscript)',
        cli=False,
        table=False,
    ),
    RunOption(
        "script",
        default=None,
        help="run this training script of your own on every rank instead of the workshop's "
        "(under workshop check's observation: each rank's log, step times and status go into "
        "the run directory, so workshop diagnose reads it); its arguments follow --",
        cli=False,
        table=False,
    ),
    RunOption(
        "profile_steps",
        int,
        None,
        "with --script: record a torch.profiler trace per rank of this many steps, after one "
        "skipped and one warm-up step (traces/rankN.json.gz; workshop trace report reads them)",
        bound=Bound(">=", 1),
        cli=False,
        table=False,
    ),
    RunOption(
        "script_args",
        default=None,
        help="the script's arguments, as one shell-quoted string (run.json records them)",
        cli=False,
        table=False,
    ),
)

#: Each option by name.
OPTIONS: dict[str, RunOption] = {option.field: option for option in RUN_SPEC}

#: The options ``workshop run``, ``sweep`` and ``jobscript`` declare with
#: :func:`workshop.launch.options.add_run_options`.
CLI_OPTIONS: tuple[RunOption, ...] = tuple(option for option in RUN_SPEC if option.cli)

#: The options ``workshop sweep`` can vary (several values each), in grid order.
GRID_FIELDS: tuple[str, ...] = tuple(option.field for option in RUN_SPEC if option.grid)

#: What stands before each grid option's value in a sweep's run names.
GRID_LABELS: dict[str, str] = {option.field: option.label for option in RUN_SPEC if option.grid}

#: Every Horovod setting, each knowing the option that turns it on.
HOROVOD_SETTINGS: tuple[HorovodSetting, ...] = tuple(
    HorovodSetting(s.flag, s.variable, s.flag_value, s.variable_value, option.field)
    for option in RUN_SPEC
    for s in option.horovod
)

#: The runs table's configuration columns (one per option a run records there).
TABLE_COLUMNS: tuple[str, ...] = tuple(option.field for option in RUN_SPEC if option.table)

#: What runs recorded before an option existed ran with (the option's default then).
TABLE_DEFAULTS: dict[str, Any] = {
    option.field: option.default for option in RUN_SPEC if option.table and option.added_later
}

#: The columns that like-for-like scaling groups hold equal (all but np, seed and what is
#: only recorded): runs that differ in one of them are not compared as scaling.
GROUP_KEYS: tuple[str, ...] = tuple(
    option.field for option in RUN_SPEC if option.table and option.same_in_group
)

#: The columns that fix the work of one step (computation or communication), apart from np.
WORK_KEYS: tuple[str, ...] = tuple(
    option.field for option in RUN_SPEC if option.table and option.work
)

#: Names in Horovod's autotune log -> the option they tune.
AUTOTUNE_NAMES: dict[str, str] = {
    option.autotune_name: option.field for option in RUN_SPEC if option.autotune_name
}


def active_settings(config: Any) -> list[tuple[HorovodSetting, Any]]:
    """The Horovod settings ``config`` turns on, with the option's value."""
    active = []
    for setting in HOROVOD_SETTINGS:
        value = getattr(config, setting.field)
        if value is not None and value is not False:
            active.append((setting, value))
    return active


def horovod_variables(config: Any, run_dir: Path) -> dict[str, str]:
    """The ``HOROVOD_*`` variables of ``config``'s Horovod settings (what horovodrun's flags
    set), e.g. ``{"HOROVOD_CACHE_CAPACITY": "0"}``."""
    return {s.variable: s.variable_value(v, Path(run_dir)) for s, v in active_settings(config)}


def horovodrun_flags(config: Any, run_dir: Path) -> list[str]:
    """horovodrun's flags for ``config``'s Horovod settings, e.g.
    ``["--cache-capacity", "0"]``."""
    flags: list[str] = []
    for setting, value in active_settings(config):
        flags.append(setting.flag)
        if setting.flag_value is not None:
            flags.append(setting.flag_value(value, Path(run_dir)))
    return flags


def program_arguments(config: Any, data_mode: str) -> list[str]:
    """The options' part of one training rank's command line, e.g.
    ``["--dataset", "mnist", "--data", "subset", "--epochs", "3", ...]``.

    Args:
        config: a RunConfig (any object with the options as attributes).
        data_mode: the data mode the launcher resolved (``data`` is never ``auto`` here).
    """
    arguments: list[str] = []
    for option in RUN_SPEC:
        if option.program_flag is None:
            continue
        value = data_mode if option.field == "data" else getattr(config, option.field)
        if value is None or (option.program_omits_default and value == option.default):
            continue
        arguments += [option.program_flag, str(value)]
    return arguments


def check_values(config: Any) -> None:
    """Raise ``ValueError`` naming the first option whose value is not allowed (choices and
    bounds, in :data:`RUN_SPEC` order); checks that involve two options are
    ``RunConfig.validate``'s."""
    for option in RUN_SPEC:
        value = getattr(config, option.field)
        if option.choices is not None and value not in option.choices:
            allowed = ", ".join(option.choices)
            raise ValueError(f"{option.field}={value!r} is not one of {allowed}")
        bound = option.bound
        if bound is not None and value is not None and not bound.allows(value):
            raise ValueError(
                f"{option.field} must be {bound.op} {bound.value:g}{bound.note}, got {value}"
            )
