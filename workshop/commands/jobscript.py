"""``workshop jobscript``: a ready-to-submit batch script for ThetaGPU, Polaris or Slurm."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from workshop.launch.jobplan import JobScriptError, JobSpec
from workshop.launch.jobscript import render, run_arguments
from workshop.launch.options import add_run_options, config_from_args
from workshop.launch.systems import SYSTEMS
from workshop.paths import runs_dir
from workshop.runspec import CLI_OPTIONS

#: ``workshop run`` options the job script sets itself (from nodes, ranks and the system), and
#: why (:attr:`workshop.runoption.RunOption.job_script_sets`).
COMPUTED = {o.field: o.job_script_sets for o in CLI_OPTIONS if o.job_script_sets}
#: ``workshop run`` options that jobscript resolves (defaults depend on the system).
RESOLVED = tuple(o.field for o in CLI_OPTIONS if o.job_script_resolves)


def run_flags() -> dict[str, str]:
    """``{destination: flag}`` of every ``workshop run`` option a job script passes on."""
    return {
        o.field: o.flag for o in CLI_OPTIONS if o.field not in COMPUTED and o.field not in RESOLVED
    }


def register(subparsers) -> None:
    systems = "; ".join(f"{s.name}: {s.title}" for s in SYSTEMS.values())
    parser = subparsers.add_parser(
        "jobscript",
        help="write a batch script that runs the workshop on a cluster",
        description="Write a ready-to-submit batch script that runs `workshop run` on a "
        f"cluster, with the system's MPI launcher instead of horovodrun. Systems: {systems}. "
        "The run directory has the same layout as a laptop run (docs/run-directory.md).",
        epilog="See docs/clusters.md. Example: workshop jobscript --system polaris --nodes 2 "
        "--account MyProject --queue debug --walltime 00:20:00 --timeline -o polaris.sh",
    )
    job = parser.add_argument_group("the job")
    add = job.add_argument
    add("--system", required=True, choices=tuple(SYSTEMS))
    add("--nodes", type=int, default=1)
    add(
        "--gpus-per-node",
        type=int,
        default=None,
        help="GPUs used per node (default: all of the system's; 0: a CPU-only job)",
    )
    add("--ranks-per-node", type=int, default=None, help="default: one per GPU")
    add("--queue", default=None, help="queue (Cobalt/PBS) or partition (Slurm)")
    add("--account", default=None, help="project allocation to charge (required at ALCF)")
    add("--walltime", default="00:30:00", help="HH:MM:SS (default 00:30:00)")
    add(
        "--filesystems",
        default=None,
        help="ALCF filesystems the job needs (default: polaris home:eagle, thetagpu home,grand)",
    )
    add("--job-name", default=None)
    add(
        "--setup",
        action="append",
        default=[],
        metavar="LINE",
        help="shell line run before the launch, e.g. 'module load conda' (repeatable)",
    )
    add(
        "--python",
        default=None,
        help="the workshop environment's Python on the cluster (default: this Python)",
    )
    add(
        "--out",
        default=None,
        help="parent of the run directory (default: runs/ of this checkout, absolute)",
    )
    add("--name", default=None, help="run directory name (default from time and config)")
    add(
        "--allow-unknown-queue",
        action="store_true",
        help="skip the queue checks (the known-queue table is a snapshot)",
    )
    add("-o", "--output", type=Path, default=None, help="write the script here (default: stdout)")
    add("--force", action="store_true", help="overwrite --output if it exists")
    add_run_options(parser.add_argument_group("the run (as for `workshop run`)"))
    parser.set_defaults(func=main, device=None, **dict.fromkeys(COMPUTED))
    parser.set_defaults(_parser=parser)


def spec_from_args(args: argparse.Namespace) -> JobSpec:
    """The :class:`JobSpec` of parsed ``workshop jobscript`` arguments.

    Raises:
        JobScriptError: a ``workshop run`` option that the job script computes was given.
    """
    for dest, why in COMPUTED.items():
        if getattr(args, dest, None) is not None:
            raise JobScriptError(f"--{dest} is set by the job script: {why}")
    _check_run_options(args)
    run_options = run_arguments(vars(args), run_flags())
    if args.name:
        run_options += ["--name", args.name]
    python = args.python or sys.executable
    out_dir = args.out or str(runs_dir().resolve())
    spec = JobSpec(
        system=args.system,
        nodes=args.nodes,
        run_options=run_options,
        python=python,
        gpus_per_node=args.gpus_per_node,
        ranks_per_node=args.ranks_per_node,
        threads_per_rank=args.threads_per_rank,
        device=args.device,
        queue=args.queue,
        account=args.account,
        walltime=args.walltime,
        filesystems=args.filesystems,
        job_name=args.job_name,
        setup=tuple(args.setup),
        out_dir=out_dir,
        allow_unknown_queue=args.allow_unknown_queue,
    )
    spec.command = canonical_command(spec, args)
    spec.script_name = args.output.name if args.output is not None else None
    return spec


def _check_run_options(args: argparse.Namespace) -> None:
    """Apply ``workshop run``'s own checks now, not after the job waited in the queue."""
    config = config_from_args(args)
    config.np, config.controller, config.launcher = 1, "mpi", "mpiexec"
    config.device = args.device or "auto"
    try:
        config.validate()
    except ValueError as exc:
        raise JobScriptError(f"run options: {exc}") from None


def canonical_command(spec: JobSpec, args: argparse.Namespace) -> list[str]:
    """The ``workshop jobscript`` command line that regenerates ``spec`` (written into it)."""
    command = ["workshop", "jobscript", "--system", spec.system, "--nodes", str(spec.nodes)]
    job_options = {
        "--gpus-per-node": spec.gpus_per_node,
        "--ranks-per-node": spec.ranks_per_node,
        "--threads-per-rank": spec.threads_per_rank,
        "--device": spec.device,
        "--queue": spec.queue,
        "--account": spec.account,
        "--walltime": spec.walltime,
        "--filesystems": spec.filesystems,
        "--job-name": spec.job_name,
        "--python": spec.python,
        "--out": spec.out_dir,
    }
    for flag, value in job_options.items():
        if value is not None:
            command += [flag, str(value)]
    for line in spec.setup:
        command += ["--setup", line]
    if spec.allow_unknown_queue:
        command.append("--allow-unknown-queue")
    command += list(spec.run_options)
    if args.output is not None:
        command += ["-o", str(args.output)]
    return command


def main(args: argparse.Namespace) -> int:
    try:
        script = render(spec_from_args(args))
    except JobScriptError as exc:
        print(f"workshop jobscript: {exc}", file=sys.stderr)
        return 2
    if args.output is None:
        sys.stdout.write(script)
        return 0
    if args.output.exists() and not args.force:
        print(
            f"workshop jobscript: {args.output} exists; not overwriting it (add --force)",
            file=sys.stderr,
        )
        return 2
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(script)
    os.chmod(args.output, 0o755)
    submit = "sbatch" if args.system == "slurm" else "qsub"
    print(f"wrote {args.output}; submit it on {args.system} with:  {submit} {args.output}")
    print(f"run directories will appear under {shlex.quote(spec_out(args))}")
    return 0


def spec_out(args: argparse.Namespace) -> str:
    """Where the job's run directory will be created."""
    return args.out or str(runs_dir().resolve())
