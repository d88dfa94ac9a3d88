"""``workshop run``: one real Horovod training run into a new run directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workshop.launch.run import CONTROLLERS, FRAMEWORKS, RunConfig, RunError, launch


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a run (shared with ``workshop sweep`` and ``workshop jobscript``)."""
    defaults = RunConfig()
    add = parser.add_argument
    add("--framework", default=defaults.framework, choices=tuple(FRAMEWORKS))
    add("--dataset", default=defaults.dataset, choices=("mnist", "cifar10", "materials"))
    add("--data", default=defaults.data, choices=("auto", "full", "subset", "synthetic"),
        help="auto: full set if cached/downloadable, else MNIST's offline 5,000-image subset")
    add("-np", "--np", type=int, default=defaults.np, help="number of processes (workers)")
    add("--controller", default=defaults.controller, choices=CONTROLLERS,
        help="Horovod controller (horovodrun --gloo / --mpi)")
    add("--epochs", type=int, default=defaults.epochs)
    add("--batch-size", type=int, default=defaults.batch_size, help="per worker")
    add("--lr", type=float, default=defaults.lr, help="learning rate for --base-batch-size")
    add("--base-batch-size", type=int, default=None,
        help="batch size that --lr suits (default: --batch-size, so LR scales with np)")
    add("--lr-scaling", default=defaults.lr_scaling, choices=("none", "linear", "sqrt"))
    add("--warmup-epochs", type=float, default=defaults.warmup_epochs)
    add("--steps-per-epoch", type=int, default=None, help="cap on steps per epoch")
    add("--timeline", action=argparse.BooleanOptionalAction, default=True,
        help="write timeline.json (HOROVOD_TIMELINE); on by default")
    add("--mark-cycles", action="store_true", help="HOROVOD_TIMELINE_MARK_CYCLES")
    add("--fusion-threshold-mb", type=float, default=None)
    add("--cycle-time-ms", type=float, default=None)
    add("--autotune", action="store_true", help="Horovod autotune, log in autotune.csv")
    add("--mpi-profile", action="store_true",
        help="preload the workshop's PMPI profiler (needs --controller mpi)")
    add("--seed", type=int, default=defaults.seed)
    add("--threads-per-rank", type=int, default=None)
    add("--device", default=defaults.device, choices=("auto", "cpu", "cuda"))
    add("--oversubscribe", action="store_true", help="allow np > cores (timings mislead)")


def config_from_args(args: argparse.Namespace) -> RunConfig:
    fields = RunConfig.__dataclass_fields__
    return RunConfig(**{key: value for key, value in vars(args).items() if key in fields})


def summarize(run_dir: Path) -> str:
    """A few lines on a finished run: epoch times, samples/s, files written."""
    from workshop.io.runs import read_metrics, read_run

    run = read_run(run_dir)
    metrics = read_metrics(run_dir)
    lines = [
        f"\nrun {run['name']}: {run['status']} in {run['duration_s']:.1f} s "
        f"(np={run['config']['np']}, {run['config']['framework']}, "
        f"{run['config']['controller']}, data: {run['data'].get('source', run['data'])})",
        "epoch  train_s  test_s  samples/s  test_acc",
    ]
    for row in metrics.itertuples():
        lines.append(
            f"{row.epoch:5d} {row.train_time_s:8.3f} {row.test_time_s:7.3f} "
            f"{row.samples_per_s:10.1f} {row.test_accuracy:9.4f}"
        )
    files = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())
    lines.append("files: " + ", ".join(files))
    return "\n".join(lines)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help="launch a real Horovod training run",
        description="Launch a real Horovod data-parallel training run into a new run "
        "directory. With no options: 2 processes, PyTorch, MNIST, Gloo, timeline on.",
    )
    add_run_options(parser)
    parser.add_argument("--out", type=Path, default=None, help="parent of the run directory")
    parser.add_argument("--name", default=None, help="run directory name")
    parser.add_argument("--launcher", default=None,
                        help='start ranks with this command instead of horovodrun, e.g. '
                        '"mpiexec -n 8 -ppn 4" (clusters; see workshop jobscript)')
    parser.add_argument("--quiet", action="store_true")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    try:
        run_dir = launch(config, out_dir=args.out, name=args.name, quiet=args.quiet,
                         command=["workshop", *sys.argv[1:]])
    except ValueError as exc:
        print(f"workshop run: {exc}", file=sys.stderr)
        return 2
    except RunError as exc:
        print(f"workshop run: {exc}", file=sys.stderr)
        return 130 if "interrupted" in str(exc) else 1
    print(summarize(run_dir))
    return 0
