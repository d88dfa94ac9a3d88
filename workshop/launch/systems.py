"""The batch systems ``workshop jobscript`` writes scripts for, and their queues: a SNAPSHOT of
ALCF's published queue policies (ThetaGPU, Polaris) and any Slurm cluster. Sites change them, so
``allow_unknown_queue`` (``--allow-unknown-queue``) skips every queue check
(:func:`workshop.launch.jobplan.plan`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


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
