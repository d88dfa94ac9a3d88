"""A job to run on a cluster (:class:`JobSpec`), checked against its batch system and queue
(:mod:`workshop.launch.systems`) with every default resolved (:func:`plan`): what
:func:`workshop.launch.jobscript.render` writes into the script. Every error names the option
and the allowed values."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from workshop.launch.systems import HOUR_S, SYSTEMS, System
from workshop.runspec import OPTIONS

WALLTIME_RE = re.compile(r"^(\d{1,3}):([0-5]\d):([0-5]\d)$")
NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


class JobScriptError(ValueError):
    """The requested job cannot run as asked; the message says which option and why."""


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


def hms(seconds: int) -> str:
    """``seconds`` as ``HH:MM:SS``."""
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
            f"--walltime {hms(walltime_s)}: queue {queue} allows at most "
            f"{hms(limits.max_walltime_s)} {hint}"
        )
