"""The findings lesson 03 (notebooks/03-launching-runs.ipynb) states, in sentences with their
numbers: each function takes the lesson's data (``sweep``, a Run whose folder holds run
directories: ``data/runs`` or the learner's ``RUN_DIR``; other Runs where named) and returns
Markdown. The lesson shows them through ``wk.finding`` (the registry,
:mod:`workshop.lessons.l03_launching.exercises`, says which give an answer away).
"""

from __future__ import annotations

import math

import pandas as pd

from workshop.analysis import scaling_groups, speedup_table
from workshop.analysis.benchmarks import ranges_overlap
from workshop.findings.markdown import markdown_table
from workshop.readers import read_metrics, read_run, read_sweep

#: Exercise 03.2's choices: first-epoch time over a later epoch's, [low, high).
FIRST_EPOCH_RANGES = {"a": (0, 1.5), "b": (1.5, 3), "c": (3, 10), "d": (10, math.inf)}


def tables(sweep) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sweep's runs (one row per run) and epochs (:func:`workshop.readers.read_sweep`)."""
    return read_sweep(sweep.path)


def example(sweep) -> pd.Series:
    """The run with the most workers and, among those, the most steps per epoch."""
    return tables(sweep)[0].sort_values(["np", "steps", "run"]).iloc[-1]


def steps_per_rank(sweep) -> int:
    """The example run's optimizer steps per rank in its first epoch (its metrics.jsonl)."""
    return int(read_metrics(example(sweep).path).steps.iloc[0])


def first_epoch_x(sweep) -> pd.Series:
    """First-epoch time over a steady epoch's, per run."""
    runs = tables(sweep)[0]
    return (runs.first_epoch_s / runs.steady_epoch_time_s).set_axis(runs.run)


def first_epoch_choice(ratio: float) -> str:
    """The letter of :data:`FIRST_EPOCH_RANGES` that ``ratio`` falls in."""
    return next(k for k, (low, high) in FIRST_EPOCH_RANGES.items() if low <= ratio < high)


def worker_group(sweep) -> pd.DataFrame:
    """The runs that differ only in the worker count, the group with the most counts."""
    groups = scaling_groups(tables(sweep)[0])
    if not groups:
        raise ValueError(
            f"{sweep.path}: no runs that differ only in the worker count (e.g. `workshop sweep "
            "--np 1 2`); set RUN_DIR to a folder holding such runs"
        )
    return groups[0][1]


def throughput_speedup(sweep) -> float:
    """Steady samples/s of the group's run with the most workers over the fewest's."""
    return float(speedup_table(worker_group(sweep)).speedup_throughput.iloc[-1])


def runs_read(sweep) -> str:
    runs = tables(sweep)[0]
    return f"**{len(runs)} finished runs**: {', '.join(runs.run)}."


def example_data(sweep) -> str:
    record = read_run(example(sweep).path)
    return (
        f"**{example(sweep).run}** trains on {record['data']['source']}: "
        f"**{record['data']['train_samples']:,} training images**."
    )


def synthetic(sweep) -> str:
    runs = tables(sweep)[0]
    lines = [
        f"- {run.run}: test accuracy {run.final_test_accuracy:.3f}; its data, random images with "
        f"random labels: {read_run(run.path)['data']['note']}. Such a run measures speed only."
        for run in runs[runs.synthetic_data].itertuples()
    ]
    return "\n".join(lines) or "No run here trains on synthetic data."


def first_epoch(sweep) -> str:
    """The run whose first epoch costs the most against the median of its later epochs, and
    the PyTorch run that does (PyTorch builds no graph, yet its first epoch is not free)."""
    ratios = first_epoch_x(sweep)
    runs = tables(sweep)[0].set_index("run")
    worst = runs.loc[ratios.idxmax()]
    text = (
        f"{worst.name} ({worst.framework}) pays the most: its first epoch took "
        f"{worst.first_epoch_s:.2f} s, the median of its later epochs "
        f"{worst.steady_epoch_time_s:.2f} s (**{ratios.max():.1f}x**)."
    )
    torch_runs = ratios[(runs.framework == "torch").reindex(ratios.index)]
    if torch_runs.empty or torch_runs.idxmax() == worst.name:
        return text
    top = runs.loc[torch_runs.idxmax()]
    text += (
        f" Among the PyTorch runs, {top.name} pays the most: {top.first_epoch_s:.2f} s against "
        f"{top.steady_epoch_time_s:.2f} s (**{torch_runs.max():.2f}x**)"
    )
    if top.np == 1:
        # horovod/torch/optimizer.py:105 (0.28.1): hooks only when size() > 1
        text += (
            ", a run of one rank, which reduces no gradient: Horovod's PyTorch optimizer "
            "registers its gradient hooks only when `size() > 1` "
            "(`horovod/torch/optimizer.py:105`), so this cost is not the gradients' first "
            "negotiation but PyTorch's and the program's own first steps"
        )
    return text + "."


def workers(sweep) -> str:
    group = worker_group(sweep)
    table = speedup_table(group).set_index("np")
    columns = ["rate_throughput_per_s", "speedup_throughput", "speedup_train", "speedup_wall"]
    return (
        f"np={group.np.max()} trains **{throughput_speedup(sweep):.2f}x** the samples/s of "
        f"np={group.np.min()} on {group.cores.iloc[0]:.0f} cores.\n\n"
        + markdown_table(table[columns])
    )


def controller_spread(frame: pd.DataFrame, runs: pd.Series) -> pd.DataFrame:
    """Per controller: runs, median start-up and min / median / max samples/s of ``frame``."""
    return frame.groupby("controller").agg(
        runs=(runs.name, "nunique"),
        start_up_s=("init_time_s", "median"),
        min_samples_per_s=("samples_per_s", "min"),
        median_samples_per_s=("samples_per_s", "median"),
        max_samples_per_s=("samples_per_s", "max"),
    )


def pair(sweep) -> pd.DataFrame:
    """The torch MNIST 2-worker runs of the sweep, per controller, over their steady epochs."""
    runs, epochs = tables(sweep)
    chosen = runs[(runs.framework == "torch") & (runs.dataset == "mnist") & (runs.np == 2)]
    steady = epochs[epochs.run.isin(chosen.run) & (epochs.epoch > 1)].merge(
        chosen[["run", "controller", "init_time_s"]], on="run"
    )
    return controller_spread(steady, steady.run)


def interleaved(controllers) -> pd.DataFrame:
    """The interleaved Gloo / MPI runs (a Run whose folder holds them), per controller."""
    runs = read_sweep(controllers.path)[0]
    return controller_spread(runs, runs.run)


def controller_ranges(spread: pd.DataFrame) -> tuple[float, bool, str]:
    """MPI / Gloo median samples/s, whether the two ranges overlap, and that in words."""
    g, m = spread.loc["gloo"], spread.loc["mpi"]
    ratio = m.median_samples_per_s / g.median_samples_per_s
    overlap = bool(
        ranges_overlap(
            m.min_samples_per_s, m.max_samples_per_s, g.min_samples_per_s, g.max_samples_per_s
        )
    )
    faster, slower = (
        ("MPI", "Gloo") if m.min_samples_per_s > g.max_samples_per_s else ("Gloo", "MPI")
    )
    said = (
        "overlap: the spread is larger than the difference, no controller wins here"
        if overlap
        else f"do not overlap: every {faster} run beat every {slower} run"
    )
    return ratio, overlap, said


def mpi_over_gloo(sweep) -> float:
    """MPI / Gloo median steady samples/s of the sweep's single pair (nan without both)."""
    spread = pair(sweep)
    if not {"gloo", "mpi"} <= set(spread.index):
        return math.nan
    return float(controller_ranges(spread)[0])


def controllers_pair(sweep) -> str:
    spread = pair(sweep)
    if not {"gloo", "mpi"} <= set(spread.index):
        return f"{sweep.path}: no torch MNIST runs on 2 workers with both controllers to compare."
    ratio, overlap, _ = controller_ranges(spread)
    return (
        f"One run each: MPI / Gloo median samples/s of the steady epochs **{ratio:.2f}x**; the "
        f"epoch ranges {'overlap' if overlap else 'do not overlap'}.\n\n"
        f"{markdown_table(spread.round(1), 1)}"
    )


def controllers_repeated(sweep, controllers) -> str:
    spread = interleaved(controllers)
    ratio, _, said = controller_ranges(spread)
    return (
        f"{spread.runs.sum()} interleaved runs: MPI / Gloo median samples/s **{ratio:.2f}x** "
        f"(the single pair above: {mpi_over_gloo(sweep):.2f}x); the ranges {said}.\n\n"
        f"{markdown_table(spread.round(1), 1)}"
    )


def killed(run) -> str:
    record = read_run(run.path)
    ranks = ", ".join(f"rank {r}: {s}" for r, s in record["rank_status"].items())
    return (
        f"The killed run's run.json: status **{record['status']}**, exit code "
        f"{record['exit_code']} (killed by signal {-record['exit_code']}); the ranks' own status "
        f"files: {ranks}."
    )


def cluster_hosts(run) -> str:
    cluster = read_run(run.path)["cluster"]
    seen = ", ".join(f"rank {r} on {host}" for r, host in cluster["rank_hosts_seen"].items())
    return f"Hosts {cluster['hosts']} over a {cluster['link']} link: {seen}."


def slurm(run) -> str:
    record = read_run(run.path)
    return (
        f"Status **{record['status']}**, Slurm job {record['env'].get('SLURM_JOB_ID')}, "
        f"launcher: `{' '.join(record['launch_command'][:6])} ...`"
    )


def summary_answers(sweep) -> str:
    record = read_run(example(sweep).path)
    worst = first_epoch_x(sweep)
    return (
        f"- {example(sweep).run} started {example(sweep).np} ranks, each taking "
        f"{steps_per_rank(sweep)} steps per epoch on its share of "
        f"{record['data']['train_samples']:,} images.\n"
        f"- The first epoch of {worst.idxmax()} took {worst.max():.1f}x the median of its "
        "later ones."
    )
