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

What to run where is a :class:`~workshop.launch.jobplan.JobSpec`, checked and resolved by
:func:`~workshop.launch.jobplan.plan` against the systems and queues of
:mod:`workshop.launch.systems` (a snapshot of ALCF's published queue policies; sites change
them, so ``allow_unknown_queue``, ``--allow-unknown-queue``, skips every queue check); this
module writes the script (:func:`render`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from workshop.launch.jobplan import JobPlan, JobSpec, hms, plan
from workshop.runspec import RUN_SPEC

#: Switches of ``workshop run`` that are on by default and are turned off with ``--no-<name>``.
NEGATABLE = frozenset(option.field for option in RUN_SPEC if option.negatable)


def _directives(job: JobPlan) -> list[str]:
    """The scheduler's directive lines at the top of the script."""
    spec, walltime = job.spec, hms(job.walltime_s)
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
        # srun -K: when one rank dies (a crash, a signal), srun ends the others, which would
        # otherwise wait for it in their collectives until the job's time limit
        "export SLURM_KILL_BAD_EXIT=1  # srun -K: a rank that dies ends the others",
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
