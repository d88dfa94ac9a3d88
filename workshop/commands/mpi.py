"""``workshop mpi``: read mpitrace-layout MPI profiles and explain them.

    workshop mpi report PATH [--job J]          diagnosis in words, with the numbers
    workshop mpi summary PATH [--job J] --json  one JSON object (see profile_summary)
    workshop mpi summary DIR                    one row per job when DIR holds several jobs
                                                (its own files, or its sub-folders')
    workshop mpi compare PATH_A PATH_B [--labels A B] [--json]
    workshop mpi plot PATH -o FIGURE.png        routine times, message sizes, ranks

PATH is an ``mpi_profile.<jobid>.<rank>`` file, a directory holding such files (a run
directory), or a glob.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path

from workshop.analysis import mpi as analysis
from workshop.analysis import mpi_compare
from workshop.findings import mpi as findings
from workshop.readers.mpitrace import (
    FILE_NAME,
    MpiProfile,
    MpiTraceError,
    MpiTraceWarning,
    read_mpitrace_jobs,
)
from workshop.units import json_safe


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``workshop mpi report|summary|compare|plot``."""
    parser = subparsers.add_parser(
        "mpi",
        help="read and explain MPI profiles (mpitrace layout)",
        description=(
            "Read mpi_profile.<jobid>.<rank> files (mpitrace, or `workshop run --mpi-profile`) "
            "from a file, a directory or a glob, and explain them."
        ),
    )
    sub = parser.add_subparsers(dest="mpi_command", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("path", help="profile file, directory of profiles, or glob")
        p.add_argument("--job", help="job id, when PATH holds profiles of several jobs")
        p.add_argument(
            "--small-bytes",
            type=float,
            default=None,
            help="allreduces of at most this many bytes count as negotiation (default 16; 8, "
            "one 64-bit word, in summary's one-row-per-job table)",
        )

    report = sub.add_parser("report", help="diagnosis in words, with numbers")
    common(report)
    report.set_defaults(func=_report)

    summary = sub.add_parser("summary", help="the numbers (JSON with --json)")
    common(summary)
    summary.add_argument("--json", action="store_true", help="print one JSON object")
    summary.set_defaults(func=_summary)

    compare = sub.add_parser("compare", help="two profiles side by side")
    compare.add_argument("path_a", help="first profile (file, directory or glob)")
    compare.add_argument("path_b", help="second profile")
    compare.add_argument("--labels", nargs=2, default=["a", "b"], metavar=("A", "B"))
    compare.add_argument("--job-a", help="job id in PATH_A")
    compare.add_argument("--job-b", help="job id in PATH_B")
    compare.add_argument("--json", action="store_true", help="print one JSON object")
    compare.set_defaults(func=_compare)

    plot = sub.add_parser("plot", help="save a figure: routine times, message sizes, ranks")
    common(plot)
    plot.add_argument("-o", "--out", required=True, help="image file to write (.png, .svg)")
    plot.set_defaults(func=_plot)


def _load(path: str, job: str | None) -> tuple[list[str], MpiProfile]:
    """Read PATH; return all job ids found and the chosen job's profile.

    Raises:
        SystemExit-free errors are turned into messages by the callers.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MpiTraceWarning)  # reported from profile.warnings
        jobs = read_mpitrace_jobs(path)
    ids = list(jobs)
    if job is not None:
        if job not in jobs:
            raise MpiTraceError(
                f"{path}: no profiles of job {job!r} (jobs found: {', '.join(ids)})"
            )
        return ids, jobs[job]
    if len(jobs) > 1:
        raise MpiTraceError(
            f"{path} holds profiles of {len(jobs)} jobs ({', '.join(ids)}); choose one with --job"
        )
    return ids, jobs[ids[0]]


def _metrics(path: str):
    """The run's per-epoch metrics when PATH is a run directory with training steps, else None
    (the report then cannot put MPI time against training time)."""
    from workshop.readers.runs import read_metrics

    if not (Path(path) / "metrics.jsonl").is_file():
        return None
    try:
        metrics = read_metrics(path)
    except ValueError:
        return None
    if "steps" not in metrics or metrics["steps"].sum() <= 0:
        return None
    return metrics


def _fail(command: str, exc: Exception) -> int:
    print(f"workshop mpi {command}: {exc}", file=sys.stderr)
    return 1


def _report(args: argparse.Namespace) -> int:
    try:
        ids, prof = _load(args.path, args.job)
    except (MpiTraceError, FileNotFoundError, ValueError) as exc:
        return _fail("report", exc)
    if len(ids) > 1:
        print(f"(PATH holds jobs {', '.join(ids)}; this is job {prof.jobid})")
    for line in findings.mpi_findings(
        prof, small_bytes=_small_bytes(args), metrics=_metrics(args.path)
    ):
        print(line)
    table = analysis.routine_table(prof)
    if len(table):
        rank = analysis.dominant_routine(prof)["rank"]
        print(f"\nRoutine table of rank {rank}:")
        shown = table[["routine", "calls", "avg_bytes", "time_s", "time_share"]].copy()
        shown["time_share"] = (100 * shown["time_share"]).map("{:.1f}%".format)
        print(shown.to_string(index=False))
    return 0


def _load_jobs(path: str) -> dict[str, MpiProfile]:
    """Every job PATH holds, labelled by job id; a directory without profile files of its own
    is read one level down, each job labelled ``<sub-folder>/<job id>``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MpiTraceWarning)
        folder = Path(path)
        if folder.is_dir() and not any(FILE_NAME.match(p.name) for p in folder.iterdir()):
            jobs = {}
            for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
                if any(FILE_NAME.match(p.name) for p in sub.iterdir() if p.is_file()):
                    for jobid, prof in read_mpitrace_jobs(sub).items():
                        jobs[f"{sub.name}/{jobid}"] = prof
            if not jobs:
                raise FileNotFoundError(
                    f"no mpi_profile.<jobid>.<rank> files in {folder} nor in its sub-folders"
                )
            return jobs
        return read_mpitrace_jobs(path)


def _small_bytes(args: argparse.Namespace, default: float = analysis.SMALL_BYTES) -> float:
    return default if args.small_bytes is None else args.small_bytes


def _jobs_summary(args: argparse.Namespace, jobs: dict[str, MpiProfile]) -> int:
    small = _small_bytes(args, analysis.NEGOTIATION_WORD_BYTES)
    table = mpi_compare.jobs_table(jobs, small_bytes=small)
    if args.json:
        rows = [{k: json_safe(v) for k, v in row.items()} for row in table.to_dict("records")]
        print(json.dumps({"jobs": rows}, indent=2, allow_nan=False))
        return 0
    shown = table.copy()
    for column in ("mpi_time_share", "small_allreduce_share", "top_routine_share"):
        shown[column] = shown[column].map(lambda v: "?" if v != v else f"{100 * v:.1f}%")
    shown = shown.rename(columns={"small_allreduce_share": f"<={small:g}B_share"})
    print(f"{len(table)} jobs in {args.path} (rank: the rank of the allreduce and top-routine "
          "columns)")  # fmt: skip
    print(shown.to_string(index=False))
    return 0


def _summary(args: argparse.Namespace) -> int:
    try:
        if args.job is None:
            jobs = _load_jobs(args.path)
            if len(jobs) > 1:
                return _jobs_summary(args, jobs)
            ids, prof = [p.jobid for p in jobs.values()], next(iter(jobs.values()))
        else:
            ids, prof = _load(args.path, args.job)
    except (MpiTraceError, FileNotFoundError, ValueError) as exc:
        return _fail("summary", exc)
    data = {"jobs": ids, **analysis.profile_summary(prof, small_bytes=_small_bytes(args))}
    if args.json:
        print(json.dumps(data, indent=2, allow_nan=False))
        return 0
    for warning in prof.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"job {data['job']}: {data['ntasks']} tasks, files for ranks {data['ranks']}")
    for rank in map(str, data["ranks"]):
        comm, elapsed = data["comm_s"][rank], data["elapsed_s"][rank]
        frac = data["comm_fraction"][rank]
        frac_text = f"{100 * frac:.1f}%" if frac is not None else "?"
        print(f"  rank {rank}: comm {comm} s of {elapsed} s elapsed ({frac_text})")
    print(
        f"small (<= {_small_bytes(args):g} B) MPI_Allreduce on rank {data['signature_rank']}: "
        f"{data['small_allreduce_calls']} calls, {data['small_allreduce_time_s']} s; "
        f"larger: {data['large_allreduce_calls']} calls, {data['large_allreduce_time_s']} s"
    )
    return 0


def _compare(args: argparse.Namespace) -> int:
    try:
        _, a = _load(args.path_a, args.job_a)
        _, b = _load(args.path_b, args.job_b)
        labels = (args.labels[0], args.labels[1])
        table = mpi_compare.compare_profiles(a, b, labels)
        headline = mpi_compare.compare_summary(a, b, labels)
    except (MpiTraceError, FileNotFoundError, ValueError) as exc:
        return _fail("compare", exc)
    if args.json:

        def clean(value: object) -> object:
            if hasattr(value, "item"):
                value = value.item()  # numpy scalar
            if isinstance(value, float) and not math.isfinite(value):
                return None
            return value

        data = {
            "labels": list(labels),
            "jobs": [a.jobid, b.jobid],
            "summary": {
                label: {k: clean(v) for k, v in headline[label].items()} for label in labels
            },
            "routines": {
                str(routine): {k: clean(v) for k, v in row.items()}
                for routine, row in table.iterrows()
            },
        }
        print(json.dumps(data, indent=2, allow_nan=False))
        return 0
    print(headline.to_string())
    print()
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    return 0


def _plot(args: argparse.Namespace) -> int:
    try:
        _, prof = _load(args.path, args.job)
    except (MpiTraceError, FileNotFoundError, ValueError) as exc:
        return _fail("plot", exc)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from workshop.plot import mpi as plots

    fig, axes = plt.subplots(3, 1, figsize=(8, 11), constrained_layout=True)
    rank = analysis.dominant_routine(prof)["rank"]
    plots.plot_routine_times(
        analysis.routine_table(prof), ax=axes[0], title=f"Job {prof.jobid}, rank {rank}: time"
    )
    plots.plot_message_sizes(
        analysis.message_size_bins(prof), ax=axes[1], title=f"Rank {rank}: message sizes"
    )
    plots.plot_comm_vs_elapsed(analysis.comm_fraction(prof), ax=axes[2])
    out = Path(args.out)
    try:
        fig.savefig(out, dpi=100)
    except (OSError, ValueError) as exc:
        return _fail("plot", exc)
    plt.close(fig)
    print(f"wrote {out}")
    return 0
