"""Ready-to-submit batch scripts that run the workshop's training on a cluster.

A job script runs ``workshop run --launcher "<the system's MPI launcher>" ...``: the same
training program, options and run-directory layout (docs/run-directory.md) as on a laptop, so
the notebooks analyse cluster runs unchanged. Only the launcher differs: the batch system's MPI
launcher starts the ranks instead of ``horovodrun``, and each rank pins the GPU of its local rank
itself (:mod:`workshop.train.device`).

- ThetaGPU (Cobalt): ``#COBALT`` directives,
  ``mpirun -hostfile $COBALT_NODEFILE -n N -npernode 8``.
- Polaris (PBS Pro): ``#PBS -l select=N:system=polaris``, ``mpiexec -n N -ppn 4 --depth 8
  --cpu-bind depth``.
- Any Slurm cluster: ``#SBATCH`` directives and ``srun``.

The queue table (:data:`SYSTEMS`) is a snapshot of ALCF's published queue policies; sites change
them, so ``allow_unknown_queue`` (``--allow-unknown-queue``) skips every queue check.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from workshop.runspec import OPTIONS, RUN_SPEC

WALLTIME_RE = re.compile(r"^(\d{1,3}):([0-5]\d):([0-5]\d)$")
NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
#: Switches of ``workshop run`` that are on by default and are turned off with ``--no-<name>``.
NEGATABLE = frozenset(option.field for option in RUN_SPEC if option.negatable)


class JobScriptError(ValueError):
    """The requested job cannot run as asked; the message says which option and why."""


@dataclass(frozen=True)
class Queue:
    """Limits of one queue (``None``: no limit known).

    Attributes:
        min_nodes: fewest nodes a job may ask for.
        max_nodes: most nodes a job may ask for.
        max_walltime_s: longest walltime, seconds.
        max_gpus: most GPUs per job (ThetaGPU's single-gpu queue).
        note: what the queue is for.
    """

    min_nodes: int = 1
    max_nodes: int | None = None
    max_walltime_s: int | None = None
    max_gpus: int | None = None
    note: str = ""


@dataclass(frozen=True)
class System:
    """A batch system the workshop can generate scripts for.

    Attributes:
        name: ``--system`` value.
        title: human name.
        scheduler: ``cobalt``, ``pbs`` or ``slurm``.
        gpus_per_node: GPUs in one node (``None``: site-specific, must be given).
        cores_per_node: CPU cores in one node (``None``: unknown).
        account_required: whether jobs must name a project allocation.
        queues: known queues and their limits (``None``: any name, e.g. Slurm partitions).
        default_queue: queue used when none is given.
        filesystems: default ``filesystems`` resource (``None``: not used).
        fs_separator: separator of the filesystems list in that resource.
    """

    name: str
    title: str
    scheduler: str
    gpus_per_node: int | None
    cores_per_node: int | None
    account_required: bool
    queues: Mapping[str, Queue] | None
    default_queue: str | None
    filesystems: str | None = None
    fs_separator: str = ","


HOUR_S = 3600

#: Known systems and queues. SNAPSHOT of ALCF's queue documentation (2024): queue names and
#: limits change from year to year; pass allow_unknown_queue (--allow-unknown-queue) to use a
#: queue or limit not listed here (e.g. a workshop reservation).
SYSTEMS: dict[str, System] = {
    "thetagpu": System(
        name="thetagpu",
        title="ALCF ThetaGPU (DGX A100, Cobalt)",
        scheduler="cobalt",
        gpus_per_node=8,
        cores_per_node=128,
        account_required=True,
        queues={
            "full-node": Queue(note="whole DGX nodes (8 A100 each)"),
            "single-gpu": Queue(max_nodes=1, max_gpus=1, note="one A100 of a shared node"),
            "bigmem": Queue(note="nodes with 80 GB A100s"),
            "training-gpu": Queue(note="workshop/training reservations"),
        },
        default_queue="full-node",
        filesystems="home,grand",
        fs_separator=",",
    ),
    "polaris": System(
        name="polaris",
        title="ALCF Polaris (4 A100 per node, PBS Pro)",
        scheduler="pbs",
        gpus_per_node=4,
        cores_per_node=32,
        account_required=True,
        queues={
            "debug": Queue(max_nodes=2, max_walltime_s=1 * HOUR_S, note="small tests"),
            "debug-scaling": Queue(max_nodes=10, max_walltime_s=1 * HOUR_S, note="scaling"),
            "prod": Queue(min_nodes=10, max_nodes=496, max_walltime_s=24 * HOUR_S),
            "preemptable": Queue(max_nodes=10, max_walltime_s=72 * HOUR_S),
            "demand": Queue(max_nodes=56, max_walltime_s=1 * HOUR_S, note="by arrangement"),
        },
        default_queue="debug",
        filesystems="home:eagle",
        fs_separator=":",
    ),
    "slurm": System(
        name="slurm",
        title="a Slurm cluster (srun)",
        scheduler="slurm",
        gpus_per_node=None,
        cores_per_node=None,
        account_required=False,
        queues=None,
        default_queue=None,
    ),
}


@dataclass
class JobSpec:
    """What to run where.

    Attributes:
        system: a key of :data:`SYSTEMS`.
        nodes: nodes to allocate.
        run_options: ``workshop run`` options, already as arguments (see
            :func:`run_arguments`); ``--np``, ``--controller`` and ``--launcher`` are set here.
        python: the Python of the workshop environment on the cluster (absolute path).
        gpus_per_node: GPUs to use per node (default: all of the system's; 0 = a CPU job).
        ranks_per_node: ranks per node (default: one per GPU).
        threads_per_rank: compute threads per rank (default: cores per node / ranks per node).
        device: ``cuda`` or ``cpu`` (default: ``cuda`` when the job uses GPUs).
        queue: queue/partition (default: the system's).
        account: project allocation to charge.
        walltime: ``HH:MM:SS``.
        filesystems: filesystems the job needs (ALCF), e.g. ``home:eagle`` on Polaris.
        job_name: the batch job's name.
        setup: shell lines run before the launch (``module load ...``, ``conda activate``).
        out_dir: parent of the run directory (absolute path on the cluster).
        allow_unknown_queue: skip every queue check (names and limits).
        command: the ``workshop jobscript`` command line, written into the script.
        script_name: the script's file name (for the "Submit:" line).
    """

    system: str
    nodes: int
    run_options: Sequence[str]
    python: str
    gpus_per_node: int | None = None
    ranks_per_node: int | None = None
    threads_per_rank: int | None = None
    device: str | None = None
    queue: str | None = None
    account: str | None = None
    walltime: str = "00:30:00"
    filesystems: str | None = None
    job_name: str | None = None
    setup: Sequence[str] = field(default_factory=tuple)
    out_dir: str | None = None
    allow_unknown_queue: bool = False
    command: Sequence[str] = field(default_factory=tuple)
    script_name: str | None = None


@dataclass(frozen=True)
class JobPlan:
    """A validated :class:`JobSpec` with every default resolved (what the script states)."""

    spec: JobSpec
    system: System
    gpus_per_node: int
    ranks_per_node: int
    threads_per_rank: int | None
    device: str
    queue: str | None
    filesystems: str | None
    job_name: str
    walltime_s: int

    @property
    def np(self) -> int:
        """Total ranks."""
        return self.spec.nodes * self.ranks_per_node


def walltime_seconds(walltime: str) -> int:
    """Seconds in an ``HH:MM:SS`` walltime.

    >>> walltime_seconds("01:30:00")
    5400

    Raises:
        JobScriptError: not ``HH:MM:SS``, or zero.
    """
    match = WALLTIME_RE.match(walltime)
    if not match:
        raise JobScriptError(
            f"--walltime {walltime!r} is not HH:MM:SS (e.g. 00:30:00 for half an hour)"
        )
    hours, minutes, seconds = (int(part) for part in match.groups())
    total = hours * HOUR_S + minutes * 60 + seconds
    if total == 0:
        raise JobScriptError("--walltime must be longer than 00:00:00")
    return total


def _hms(seconds: int) -> str:
    return f"{seconds // HOUR_S:02d}:{seconds % HOUR_S // 60:02d}:{seconds % 60:02d}"


def _option_value(options: Sequence[str], flag: str) -> str | None:
    """The value given to ``flag`` in ``options`` (last one wins), or ``None``."""
    value = None
    for index, item in enumerate(options):
        if item == flag and index + 1 < len(options):
            value = options[index + 1]
        elif item.startswith(flag + "="):
            value = item.split("=", 1)[1]
    return value


def plan(spec: JobSpec) -> JobPlan:
    """Check a job against the system and resolve its defaults.

    Args:
        spec: the job.

    Returns:
        The :class:`JobPlan`.

    Raises:
        JobScriptError: naming the option that is wrong and why.
    """
    if spec.system not in SYSTEMS:
        raise JobScriptError(f"--system {spec.system!r}: choose one of {', '.join(SYSTEMS)}")
    system = SYSTEMS[spec.system]
    if spec.nodes < 1:
        raise JobScriptError(f"--nodes must be >= 1, got {spec.nodes}")
    walltime_s = walltime_seconds(spec.walltime)
    gpus = _gpus_per_node(spec, system)
    device = spec.device or ("cuda" if gpus > 0 else "cpu")
    if device not in ("cuda", "cpu"):
        raise JobScriptError(f"--device {device!r}: a job script uses cuda or cpu")
    ranks = _ranks_per_node(spec, system, gpus, device)
    threads = _threads_per_rank(spec, system, ranks)
    _check_account(spec, system)
    queue = spec.queue or system.default_queue
    if queue is not None and not NAME_RE.match(queue):
        raise JobScriptError(f"--queue {queue!r}: letters, digits, _ . - only")
    if not spec.allow_unknown_queue:
        _check_queue(system, queue, spec.nodes, gpus, walltime_s)
    filesystems = _filesystems(spec, system)
    job_name = _job_name(spec, ranks)
    if not spec.python.startswith("/"):
        raise JobScriptError(f"--python {spec.python!r} must be an absolute path")
    return JobPlan(
        spec, system, gpus, ranks, threads, device, queue, filesystems, job_name, walltime_s
    )


def _gpus_per_node(spec: JobSpec, system: System) -> int:
    """``--gpus-per-node``, or the system's, checked against the system's nodes."""
    gpus = spec.gpus_per_node if spec.gpus_per_node is not None else system.gpus_per_node
    if gpus is None:
        raise JobScriptError(
            f"--gpus-per-node is needed for {system.title}: the number of GPUs per node is "
            "site-specific (0 for a CPU-only job)"
        )
    if gpus < 0:
        raise JobScriptError(f"--gpus-per-node must be >= 0, got {gpus}")
    if system.gpus_per_node is not None and gpus > system.gpus_per_node:
        raise JobScriptError(
            f"--gpus-per-node {gpus}: a {system.name} node has {system.gpus_per_node} GPUs"
        )
    return gpus


def _ranks_per_node(spec: JobSpec, system: System, gpus: int, device: str) -> int:
    """``--ranks-per-node``, or one per GPU; a GPU each on cuda, at most a core each."""
    ranks = spec.ranks_per_node if spec.ranks_per_node is not None else gpus
    if ranks < 1:
        raise JobScriptError(
            "--ranks-per-node must be >= 1 (a CPU-only job with --gpus-per-node 0 needs "
            "--ranks-per-node)"
        )
    if device == "cuda":
        if gpus == 0:
            raise JobScriptError("--device cuda with --gpus-per-node 0: no GPU to run on")
        if ranks > gpus:
            raise JobScriptError(
                f"--ranks-per-node {ranks} > --gpus-per-node {gpus}: each rank needs a GPU of "
                "its own (use --device cpu for a CPU run)"
            )
    if system.cores_per_node is not None and ranks > system.cores_per_node:
        raise JobScriptError(
            f"--ranks-per-node {ranks}: a {system.name} node has {system.cores_per_node} cores"
        )
    return ranks


def _threads_per_rank(spec: JobSpec, system: System, ranks: int) -> int | None:
    """``--threads-per-rank``, or the node's cores shared by its ranks (None: unknown)."""
    threads = spec.threads_per_rank
    if threads is None and system.cores_per_node is not None:
        threads = max(1, system.cores_per_node // ranks)
    if threads is not None and threads < 1:
        raise JobScriptError(f"--threads-per-rank must be >= 1, got {threads}")
    return threads


def _check_account(spec: JobSpec, system: System) -> None:
    if system.account_required and not spec.account:
        raise JobScriptError(
            f"--account is required on {system.name}: name the project allocation to charge "
            "(e.g. --account MyProject)"
        )
    if spec.account and not NAME_RE.match(spec.account):
        raise JobScriptError(f"--account {spec.account!r}: letters, digits, _ . - only")


def _filesystems(spec: JobSpec, system: System) -> str | None:
    """``--filesystems``, or the system's default; only on systems that have them."""
    filesystems = spec.filesystems or system.filesystems
    if filesystems is not None:
        if system.filesystems is None:
            raise JobScriptError(f"--filesystems is not used on {system.name}")
        names = filesystems.split(system.fs_separator)
        if not all(re.match(r"^[a-z0-9\-]+$", name) for name in names):
            raise JobScriptError(
                f"--filesystems {filesystems!r}: names separated by "
                f"{system.fs_separator!r} on {system.name}, e.g. {system.filesystems}"
            )
    return filesystems


def _job_name(spec: JobSpec, ranks: int) -> str:
    """``--job-name``, or one made of the framework, data set and shape of the job."""
    framework = _option_value(spec.run_options, "--framework") or OPTIONS["framework"].default
    dataset = _option_value(spec.run_options, "--dataset") or OPTIONS["dataset"].default
    job_name = spec.job_name or f"workshop-{framework}-{dataset}-{spec.nodes}x{ranks}"
    if not NAME_RE.match(job_name):
        raise JobScriptError(f"--job-name {job_name!r}: letters, digits, _ . - only")
    return job_name


def _check_queue(system: System, queue: str | None, nodes: int, gpus: int, walltime_s: int):
    """Raise if ``queue`` is unknown on ``system`` or the job exceeds its limits."""
    if system.queues is None:
        return
    hint = "(queue table is a snapshot: --allow-unknown-queue skips this check)"
    if queue not in system.queues:
        raise JobScriptError(
            f"--queue {queue!r} is not a known {system.name} queue; known: "
            f"{', '.join(system.queues)} {hint}"
        )
    limits = system.queues[queue]
    if nodes < limits.min_nodes:
        raise JobScriptError(
            f"--nodes {nodes}: queue {queue} takes at least {limits.min_nodes} nodes {hint}"
        )
    if limits.max_nodes is not None and nodes > limits.max_nodes:
        raise JobScriptError(
            f"--nodes {nodes}: queue {queue} takes at most {limits.max_nodes} nodes {hint}"
        )
    if limits.max_gpus is not None and nodes * gpus > limits.max_gpus:
        raise JobScriptError(
            f"queue {queue} gives at most {limits.max_gpus} GPU(s) per job; this job asks for "
            f"{nodes * gpus} (--nodes x --gpus-per-node) {hint}"
        )
    if limits.max_walltime_s is not None and walltime_s > limits.max_walltime_s:
        raise JobScriptError(
            f"--walltime {_hms(walltime_s)}: queue {queue} allows at most "
            f"{_hms(limits.max_walltime_s)} {hint}"
        )


def _directives(job: JobPlan) -> list[str]:
    """The scheduler's directive lines at the top of the script."""
    spec, walltime = job.spec, _hms(job.walltime_s)
    if job.system.scheduler == "cobalt":
        # On the single-gpu queue, Cobalt's -n counts GPUs, not nodes.
        count = spec.nodes * job.gpus_per_node if job.queue == "single-gpu" else spec.nodes
        lines = [f"#COBALT -n {count}", f"#COBALT -t {walltime}", f"#COBALT -q {job.queue}"]
        lines.append(f"#COBALT -A {spec.account}")
        if job.filesystems:
            lines.append(f"#COBALT --attrs filesystems={job.filesystems}")
        lines.append(f"#COBALT -O {job.job_name}")
        return lines
    if job.system.scheduler == "pbs":
        lines = [
            f"#PBS -N {job.job_name}",
            f"#PBS -l select={spec.nodes}:system={job.system.name}",
            "#PBS -l place=scatter",
            f"#PBS -l walltime={walltime}",
        ]
        if job.filesystems:
            lines.append(f"#PBS -l filesystems={job.filesystems}")
        lines += [f"#PBS -q {job.queue}", f"#PBS -A {spec.account}", "#PBS -j oe"]
        return lines
    lines = [
        f"#SBATCH --job-name={job.job_name}",
        f"#SBATCH --nodes={spec.nodes}",
        f"#SBATCH --ntasks-per-node={job.ranks_per_node}",
    ]
    if job.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={job.gpus_per_node}")
    if job.threads_per_rank:
        lines.append(f"#SBATCH --cpus-per-task={job.threads_per_rank}")
    lines.append(f"#SBATCH --time={walltime}")
    if job.queue:
        lines.append(f"#SBATCH --partition={job.queue}")
    if spec.account:
        lines.append(f"#SBATCH --account={spec.account}")
    lines.append(f"#SBATCH --output={job.job_name}-%j.out")
    return lines


def _launcher(job: JobPlan) -> tuple[str | None, str, str]:
    """``(working-directory line or None, launcher command, what the launcher does)``."""
    scheduler, rpn = job.system.scheduler, job.ranks_per_node
    if scheduler == "cobalt":
        # Cobalt, like Slurm, starts the script in the directory it was submitted from.
        return (
            None,
            f"mpirun -hostfile $COBALT_NODEFILE -n $NP -npernode {rpn}",
            "Open MPI's mpirun starts the ranks on the nodes of $COBALT_NODEFILE",
        )
    if scheduler == "pbs":
        depth = job.threads_per_rank or 1
        return (
            'cd "$PBS_O_WORKDIR"',
            f"mpiexec -n $NP -ppn {rpn} --depth {depth} --cpu-bind depth",
            f"Cray MPICH's mpiexec starts the ranks, each bound to {depth} core(s) of its own",
        )
    cpus = f" --cpus-per-task={job.threads_per_rank}" if job.threads_per_rank else ""
    return (
        None,
        f"srun --mpi=pmix --nodes={job.spec.nodes} --ntasks=$NP --ntasks-per-node={rpn}{cpus}",
        "Slurm's srun starts the ranks on the allocated nodes, handing them PMIx",
    )


#: Before srun: the ranks need a PMI their MPI speaks (Open MPI: PMIx). A site whose MpiDefault
#: is none starts each rank alone, and Open MPI stops with "not built with SLURM's PMI support".
SLURM_PMIX_CHECK = (
    "",
    "# srun must hand the ranks PMIx (Open MPI's way to find each other); without it each",
    "# rank starts alone. srun --mpi=list shows what this Slurm offers.",
    "if ! srun --mpi=list 2>&1 | grep -qi pmix; then",
    '    echo "workshop job: this srun offers no PMIx (srun --mpi=list:" \\',
    "        \"$(srun --mpi=list 2>&1 | tr '\\n' ' ')); change --mpi= in LAUNCHER to a\" \\",
    '        "plugin it lists that your MPI supports, or ask the site for PMIx" >&2',
    "    exit 1",
    "fi",
)


def _units(words: Sequence[str]) -> list[str]:
    """Shell-quoted ``words`` grouped so that an option stays on one line with its value."""
    units: list[str] = []
    for word in words:
        quoted = word if word.startswith('"$') else shlex.quote(word)
        takes_value = bool(units) and units[-1].startswith("-") and " " not in units[-1]
        if takes_value and not word.startswith("-"):
            units[-1] += " " + quoted
        else:
            units.append(quoted)
    return units


def _wrap(words: Sequence[str], indent: str = "    ", width: int = 96) -> list[str]:
    """``words`` as shell continuation lines no wider than ``width`` (options with values)."""
    lines, current = [], ""
    for word in _units(words):
        if current and len(current) + 1 + len(word) > width - 2:
            lines.append(current + " \\")
            current = indent + word
        else:
            current = f"{current} {word}" if current else word
    lines.append(current)
    return lines


def render(spec: JobSpec) -> str:
    """The job script for ``spec``.

    Args:
        spec: the job.

    Returns:
        The script text (bash), ready for qsub / sbatch.

    Raises:
        JobScriptError: the job cannot run as asked (see :func:`plan`).
    """
    job = plan(spec)
    cd_line, launcher, launcher_note = _launcher(job)
    lines = ["#!/bin/bash -l", *_directives(job), "#", *_about_lines(job, launcher_note)]
    lines += ["", "set -euo pipefail"]
    if cd_line:
        lines.append(cd_line)
    if spec.setup:
        lines += ["", "# Site environment (conda activation scripts may read unset variables)."]
        lines += ["set +u", *spec.setup, "set -u"]
    if job.system.scheduler == "slurm":
        lines += SLURM_PMIX_CHECK
    threads_lines, run = _run_command(job)
    lines += [
        "",
        f"WORKSHOP_PYTHON={shlex.quote(spec.python)}",
        f"NODES={spec.nodes}",
        f"RANKS_PER_NODE={job.ranks_per_node}",
        "NP=$((NODES * RANKS_PER_NODE))",
        *threads_lines,
        f'LAUNCHER="{launcher}"',
        "",
        'echo "workshop job: $NP ranks on $NODES node(s), launcher: $LAUNCHER"',
        *_wrap(run),
        "",
    ]
    return "\n".join(lines)


def _about_lines(job: JobPlan, launcher_note: str) -> list[str]:
    """The comment block under the directives: the job's shape, how it runs, how to submit it
    and the command that made it."""
    spec, system = job.spec, job.system
    submit = {"cobalt": "qsub", "pbs": "qsub", "slurm": "sbatch"}[system.scheduler]
    per_rank = "one GPU per rank" if job.device == "cuda" else "CPU only"
    lines = [
        f"# Horovod workshop job for {system.title}:",
        f"#   {spec.nodes} node(s) x {job.ranks_per_node} rank(s) = {job.np} ranks, {per_rank}"
        + (
            f", {job.threads_per_rank} threads per rank."
            if job.threads_per_rank
            else ", threads per rank = allocated CPUs / ranks per node."
        ),
        "# It runs the same `workshop run` as on a laptop, so the run directory it writes has the",
        "# layout of docs/run-directory.md and the notebooks read it unchanged. Only the launcher",
        f"# differs: {launcher_note}",
        "# (instead of horovodrun).",
    ]
    if job.device == "cuda":
        lines.append(
            "# Each rank pins the GPU of its local rank itself (workshop/train/device.py)."
        )
    lines += ["#", f"# Submit:  {submit} {spec.script_name or job.job_name + '.sh'}"]
    if spec.command:
        lines += ["# Made by (regenerate rather than edit):"]
        lines += ["#   " + line for line in _wrap(spec.command, width=92)]
    return lines


def _run_command(job: JobPlan) -> tuple[list[str], list[str]]:
    """``(shell lines that set THREADS, or none; the words of the workshop run command)``."""
    run = [
        '"$WORKSHOP_PYTHON"',
        "-m",
        "workshop.cli",
        "run",
        "--launcher",
        '"$LAUNCHER"',
        "--np",
        '"$NP"',
        "--controller",
        "mpi",
        "--device",
        job.device,
    ]
    threads_lines = []
    if job.threads_per_rank:
        run += ["--threads-per-rank", str(job.threads_per_rank)]
    else:
        # Cores per node unknown when the script was made: share the CPUs Slurm allocated.
        threads_lines = [
            "THREADS=$(( ${SLURM_CPUS_ON_NODE:-$RANKS_PER_NODE} / RANKS_PER_NODE ))",
            "(( THREADS >= 1 )) || THREADS=1",
        ]
        run += ["--threads-per-rank", '"$THREADS"']
    run += list(job.spec.run_options)
    if job.spec.out_dir:
        run += ["--out", job.spec.out_dir]
    return threads_lines, run


def run_arguments(options: Mapping[str, object], flags: Mapping[str, str]) -> list[str]:
    """``workshop run`` arguments for parsed option values.

    Args:
        options: option values by destination name, e.g. ``{"epochs": 3, "timeline": True}``.
        flags: the flag of each destination to pass on, in order, e.g. ``{"epochs": "--epochs"}``;
            destinations missing here are not passed.

    Returns:
        Arguments such as ``["--epochs", "3", "--timeline"]``: ``None`` values and false
        switches are left out; a false ``--timeline``-style switch whose default is true is
        written as ``--no-timeline``.
    """
    arguments: list[str] = []
    for dest, flag in flags.items():
        value = options.get(dest)
        if value is None:
            continue
        if isinstance(value, bool):
            if value:
                arguments.append(flag)
            elif dest in NEGATABLE:
                arguments.append("--no-" + flag.removeprefix("--"))
            continue
        text = f"{value:g}" if isinstance(value, float) else str(value)
        arguments += [flag, text]
    return arguments
