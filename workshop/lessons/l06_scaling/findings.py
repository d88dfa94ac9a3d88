"""The findings lesson 06 (notebooks/06-scaling-experiments.ipynb) states, in sentences with
their numbers, from :mod:`workshop.analysis.scaling` and :mod:`workshop.analysis.cluster`: each
function takes the lesson's data (Runs of recordings or of the learner's folders) and returns
Markdown. The registry (:mod:`workshop.lessons.l06_scaling.exercises`) says which give an
exercise's answer away. The sources are named as docs/sources.md names them.
"""

from __future__ import annotations

import warnings
from functools import cache
from pathlib import Path

import pandas as pd

from workshop import analysis, readers

#: Horovod's cost on one GPU that the thesis talk quotes.
THESIS_OVERHEAD = 0.17


# --- the data, read once per folder --------------------------------------------------------


@cache
def _seed004(folder: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    tables = [readers.read_table(p) for p in sorted(Path(folder).glob("004-*.tsv"))]
    raw = readers.merge_tables(tables)
    return raw, analysis.speedup_table(raw)


def lab_report(seeds) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The Horovod lab report's merged tables and their speedup table."""
    return _seed004(str(seeds.path))


@cache
def _epochs000(folder: str) -> pd.DataFrame:
    return readers.read_epoch_logs(sorted(Path(folder).glob("000-pytorch_cifar10.out.*")))


def alcf_epochs(seeds) -> pd.DataFrame:
    """The ALCF timeline tutorial's per-epoch times (1, 2 and 4 GPUs)."""
    return _epochs000(str(seeds.path))


def three_ways(seeds) -> tuple[float, float, float]:
    """Training speedup at the most GPUs with and without the first epoch, and by training +
    testing time (exercise 06.2)."""
    epochs = alcf_epochs(seeds)
    with_first = analysis.speedup_table(analysis.runs_from_epochs(epochs)).set_index("np")
    later = analysis.runs_from_epochs(epochs[epochs.epoch > 1])
    without = analysis.speedup_table(later).set_index("np")
    n = with_first.index.max()
    return (
        float(with_first.speedup_train[n]),
        float(without.speedup_train[n]),
        float(with_first.speedup_wall[n]),
    )


def amdahl(seeds) -> dict:
    table = lab_report(seeds)[1]
    return analysis.amdahl_fit(table.np, table.speedup_train)


def half_efficiency_workers(seeds) -> int:
    """The fewest workers at which Amdahl's law with the fitted f predicts efficiency < 0.5."""
    f = amdahl(seeds)["serial_fraction"]
    return next(n for n in range(1, 100_000) if analysis.amdahl_speedup(n, f) / n < 0.5)


@cache
def _rounds(folder: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    runs, _ = readers.read_sweep(folder)
    raw = readers.read_compute_baseline(folder)
    return runs, raw, analysis.round_speedups(runs, raw)


def rounds(sweep) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A sweep recorded in rounds: its runs, the raw compute baseline, the round speedups."""
    return _rounds(str(sweep.path))


def _row(sweep, what: str) -> pd.Series:
    return rounds(sweep)[2].set_index("what").loc[what]


@cache
def _group(folder: str) -> tuple[pd.DataFrame, pd.DataFrame, list]:
    runs, epochs = readers.read_sweep(folder)
    groups = analysis.scaling_groups(runs)
    if not groups:
        raise ValueError(f"{folder}: no runs that differ only in the worker count")
    return runs, epochs, groups


def scaling_group(sweep) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sweep's group with the most worker counts: its runs and their epochs."""
    _, epochs, groups = _group(str(sweep.path))
    group = groups[0][1]
    return group, epochs[epochs.run.isin(group.run)]


@cache
def _comm_model(folder: str) -> dict:
    timed, _ = readers.read_sweep(folder)
    with warnings.catch_warnings():
        # a timeline stopped while its last tensors were in flight says so; the model reads
        # the finished allreduces only, so the note is not the lesson's
        warnings.simplefilter("ignore", readers.TimelineWarning)
        spans = {
            r.run: readers.read_timeline(f"{r.path}/timeline.json").spans
            for r in timed.itertuples()
            if r.np >= 2 and r.timeline
        }
    return analysis.comm_model_vs_measurement(timed, spans, strict=True)


def comm_model(timed) -> dict:
    """The alpha-beta fit to the timelines' allreduces and its prediction from one run."""
    return _comm_model(str(timed.path))


def model_comm_ms(timed) -> float:
    """The ring model's transfer time per step at the run's worker count, ms (exercise 06.4)."""
    return 1e3 * comm_model(timed)["inputs"]["comm_time_s"]


def _at_run(timed) -> pd.Series:
    model = comm_model(timed)
    comparison = model["comparison"].dropna(subset=["speedup_measured"])
    return comparison.set_index("np").loc[model["inputs"]["np_run"]]


def _overhead(overhead) -> pd.DataFrame:
    runs = readers.read_benchmark_runs(overhead.path)
    return analysis.paired_ratios(runs, "kind", "samples_per_s", "hvd-np1").set_index("kind")


@cache
def _cluster(folder: str) -> pd.DataFrame:
    return readers.read_allreduce_sweep(folder)


def link_fit(allreduce) -> dict:
    return analysis.cluster.fit_link_alpha(_cluster(str(allreduce.path)), "cross-1gbit")


def _table(frame: pd.DataFrame, digits: int = 2) -> str:
    """A small frame as a Markdown table."""
    rows = [" | ".join(map(str, frame.columns)), " | ".join("---:" for _ in frame.columns)]
    for row in frame.itertuples(index=False):
        rows.append(" | ".join(f"{v:.{digits}f}" if isinstance(v, float) else f"{v}" for v in row))
    return "\n".join(f"| {row} |" for row in rows)


# --- core: speedup three ways, the first epoch, Amdahl, the sweeps ------------------------


def lab_speedups(seeds) -> str:
    table = lab_report(seeds)[1]
    top = table.iloc[-1]
    shown = table[
        ["np", "speedup_wall", "speedup_train", "speedup_throughput", "efficiency_train"]
    ]
    return (
        f"{_table(shown)}\n\nAt {top.np:.0f} GPUs: throughput speedup "
        f"**{top.speedup_reported_throughput:.2f}** as reported "
        f"({top.speedup_throughput:.2f} recomputed from the rounded examples/s), training-time "
        f"speedup **{top.speedup_train:.2f}** (reported {top.speedup_reported_train:.2f}), "
        f"wall-time speedup with initialisation **{top.speedup_wall:.2f}**."
    )


def init_cost(seeds) -> str:
    raw, table = lab_report(seeds)
    top = table.iloc[-1]
    share = raw.init_time_s / raw.total_time_s
    steady_s = table.time_train_s.iloc[0] / top.speedup_throughput
    return (
        f"- Initialisation: {raw.init_time_s.iloc[0]:.0f} s at 1 GPU ({share.iloc[0]:.0%} of "
        f"the wall time), {raw.init_time_s.iloc[-1]:.0f} s at {top.np:.0f} GPUs "
        f"({share.iloc[-1]:.0%}).\n"
        f"- At its steady-state rate the loop on {top.np:.0f} GPUs would take {steady_s:.1f} s "
        f"(taking the 1-GPU loop as all steady state); it took {top.time_train_s:.0f} s: "
        f"{top.time_train_s - steady_s:.1f} s that the throughput hook does not see."
    )


def first_epoch(seeds) -> str:
    overhead = analysis.first_epoch_overhead(alcf_epochs(seeds))
    worst = overhead.loc[overhead.overhead_share.idxmax()]
    return (
        f"At {worst.np:.0f} GPUs the first epoch took **{worst.first_epoch_s:.2f} s** and a "
        f"later one {worst.steady_epoch_s:.2f} s: {worst.first_epoch_overhead_s:.1f} s of "
        f"one-off cost, {worst.overhead_share:.0%} of all its training time."
    )


def first_epoch_speedups(seeds) -> str:
    train, later, wall = three_ways(seeds)
    n = int(alcf_epochs(seeds).np.max())
    return (
        f"Training-time speedup at {n} GPUs: **{train:.2f}** with the first epoch, "
        f"**{later:.2f}** without it; **{wall:.2f}** by training + testing time."
    )


def amdahl_fit(seeds) -> str:
    fit, table = amdahl(seeds), lab_report(seeds)[1]
    line = analysis.linear_fit(table.np, table.speedup_train)
    return (
        f"Training time of the lab report's runs: serial fraction **f = "
        f"{fit['serial_fraction']:.3f}** (a limit of {fit['max_speedup']:.1f}x, rmse "
        f"{fit['rmse']:.2f}); the straight line gains {line['slope']:.2f} speedup per added GPU "
        f"(R^2 {line['r2']:.3f})."
    )


def amdahl_check(seeds) -> str:
    f, table = amdahl(seeds)["serial_fraction"], lab_report(seeds)[1]
    measured = table.set_index("np").efficiency_train
    karp = analysis.karp_flatt(table.np, table.speedup_train)
    return (
        f"Amdahl with f = {f:.3f}: efficiency below 50% from **{half_efficiency_workers(seeds)}"
        f"** workers on; S(4) = {analysis.amdahl_speedup(4, f):.2f}. The lab report measured "
        "training-time efficiencies of "
        + ", ".join(f"{e:.2f} at {n}" for n, e in measured.items() if n > 1)
        + " GPUs; the Karp-Flatt serial fraction by GPUs: "
        + ", ".join(f"{n}: {e:.3f}" for n, e in zip(table.np, karp, strict=True) if n > 1)
        + "."
    )


def _spread(row: pd.Series) -> str:
    return (
        f"**{row.speedup_median:.2f}x** (median of {row.rounds} rounds; "
        f"{row.speedup_min:.2f}x to {row.speedup_max:.2f}x: {row.verdict})"
    )


def cpu_sweep(cpu) -> str:
    hvd, two = _row(cpu, "Horovod np=2"), _row(cpu, "2 independent processes")
    return (
        f"- Horovod np=2 ran {_spread(hvd)} the samples/s of np=1.\n"
        f"- Two independent processes, no Horovod, ran **{two.speedup_median:.2f}x** one "
        f"process ({two.speedup_min:.2f}x to {two.speedup_max:.2f}x): the machine's own "
        "ceiling."
    )


def net_sweep(net, cpu) -> str:
    hvd, cpu_hvd = _row(net, "Horovod np=2"), _row(cpu, "Horovod np=2")
    runs = rounds(net)[0]
    one = runs[runs.np == 1]
    step_ms = (1e3 * one.batch_size / one.samples_per_s).median()
    return (
        f"- Across 100 Mbit/s, Horovod np=2 ran {_spread(hvd)} the samples/s of np=1; on "
        f"the compute-bound sweep {cpu_hvd.speedup_median:.2f}x.\n"
        f"- One worker computes a step of {one.batch_size.iloc[0]} images in "
        f"{step_ms:.2f} ms (median of the rounds)."
    )


def our_sweep(sweep) -> str:
    lines = []
    for key, each in _group(str(sweep.path))[2]:
        last = analysis.speedup_table(each).iloc[-1]
        lines.append(
            f"- batch {key['batch_size']} per worker, np={last.np:.0f} vs np={each.np.min()}: "
            f"wall {last.speedup_wall:.2f}x, training {last.speedup_train:.2f}x, throughput "
            f"{last.speedup_throughput:.2f}x"
        )
    return "\n".join(lines)


def start_up(sweep, seeds) -> str:
    group, epochs = scaling_group(sweep)
    fewest, most = group.np.min(), group.np.max()
    start = group.groupby("np")[["init_time_s", "train_time_s"]].median()
    first = analysis.first_epoch_overhead(epochs).set_index("np").loc[most]
    alcf = analysis.first_epoch_overhead(alcf_epochs(seeds)).set_index("np")
    return (
        f"- Start-up (imports, hvd.init(), data, broadcast): {start.init_time_s[fewest]:.1f} s "
        f"at np={fewest}, {start.init_time_s[most]:.1f} s at np={most}; the training loop: "
        f"{start.train_time_s[fewest]:.1f} s and {start.train_time_s[most]:.1f} s.\n"
        f"- Our first epoch at np={most}: {first.first_epoch_s:.2f} s against "
        f"{first.steady_epoch_s:.2f} s for a later one ({first.first_epoch_overhead_s:+.2f} s, "
        f"{first.overhead_share:+.0%} of the training time); the ALCF tutorial's first epoch at "
        f"2 GPUs cost {alcf.first_epoch_overhead_s[2]:.1f} s extra on ThetaGPU."
    )


def sync_cost(sweep) -> str:
    group, _ = scaling_group(sweep)
    sync = analysis.sync_overhead(group)
    top = sync.set_index("np").loc[group.np.max()]
    return (
        f"At np={group.np.max()}: {top.step_time_ms:.1f} ms per step against "
        f"{sync.step_time_ms.iloc[0]:.1f} ms at np={group.np.min()}: at most "
        f"**{top.sync_time_per_step_ms:.1f} ms** per synchronisation x {top.steps:.0f} steps = "
        f"{top.sync_time_per_epoch_s:.2f} s per epoch ({top.sync_share:.0%} of the epoch)."
    )


# --- optional: the ring model, Horovod at one worker, the emulated cluster ----------------


def comm_fit(timed) -> str:
    model = comm_model(timed)
    fit, ops, inputs = model["fit"], model["ops"], model["inputs"]
    bound = (
        " alpha sits at its bound 0: the best line through these durations has no positive "
        "intercept, so the fit charges no latency and puts all the time on the bytes."
        if fit["alpha_us"] == 0
        else ""
    )
    return (
        f"{len(ops)} allreduces from {model['timelines']} timelines, {ops.bytes.min():,} to "
        f"{ops.bytes.max():,} bytes: alpha = **{fit['alpha_us']:.0f} us**, B = "
        f"**{fit['bandwidth_bytes_per_s'] / 1e6:.0f} MB/s** (1 MB = 10^6 bytes; R^2 "
        f"{fit['r2']:.2f} over "
        f"{fit['ops']} message sizes).{bound}\n\nThe run the model starts from, "
        f"{model['run']} (np={inputs['np_run']}): m = {inputs['bytes_per_step']:,.0f} bytes "
        f"in k = {inputs['allreduces_per_step']:.2f} allreduces per step."
    )


def prediction(timed) -> str:
    model, at_run = comm_model(timed), _at_run(timed)
    inputs = model["inputs"]
    step_ms = 1e3 * (inputs["comm_time_s"] + inputs["compute_time_s"])
    unexplained = 1e3 * inputs["unexplained_s"]
    sign = (
        " (negative: the model charges more than the measured step leaves beside one worker's "
        "compute)"
        if unexplained < 0
        else ""
    )
    return (
        f"- At np={inputs['np_run']} the model predicts a throughput speedup of "
        f"**{at_run.speedup_predicted:.2f}**; the runs measured "
        f"**{at_run.speedup_measured:.2f}**: the prediction is "
        f"{at_run.speedup_predicted / at_run.speedup_measured:.2f}x the measurement, with a "
        f"fit whose R^2 is {model['fit']['r2']:.2f}.\n"
        f"- The measured step takes {step_ms:.1f} ms; the model charges "
        f"{model_comm_ms(timed):.1f} ms of transfers, which leaves "
        f"{1e3 * inputs['compute_time_s']:.1f} ms for compute; one worker alone computes a step "
        f"in {1e3 * inputs['np1_step_time_s']:.1f} ms. The other {unexplained:.1f} ms per "
        f"step are what the model does not contain{sign}."
    )


def one_worker_cost(overhead) -> str:
    by_kind = _overhead(overhead)
    plain, two = by_kind.loc["plain"], by_kind.loc["hvd-np2"]
    says = {
        "higher in every round": "plain PyTorch was faster in every round",
        "lower in every round": "Horovod np=1 was faster in every round",
        "within the noise": "the rounds disagree on which is faster: within the noise",
    }
    return (
        f"- One worker, {plain.rounds} rounds: plain PyTorch ran x{plain.ratio_min:.2f} to "
        f"x{plain.ratio_max:.2f} the samples/s of Horovod np=1 (median "
        f"x{plain.ratio_median:.2f}): Horovod's cost {plain.ratio_median - 1:+.0%}, from "
        f"{plain.ratio_min - 1:+.0%} to {plain.ratio_max - 1:+.0%}; {says[plain.verdict]}. "
        f"The thesis talk: about {THESIS_OVERHEAD:.0%} on one GPU.\n"
        f"- np=2: x{two.ratio_min:.2f} to x{two.ratio_max:.2f} the samples/s of np=1 per round "
        f"(median x{two.ratio_median:.2f})."
    )


def cluster_link(allreduce) -> str:
    sweep = _cluster(str(allreduce.path))
    j64 = analysis.cluster.internode_jump(sweep).set_index("size_mib").loc[64]
    fit = link_fit(allreduce)
    check = analysis.cluster.model_vs_measured(sweep, "cross-1gbit")
    outside = check[check.error.abs() > 0.15]
    row = check.set_index("size_mib").loc[64]
    effective = 64 * 2**20 / (row.median_s - 2 * fit["alpha_s"])
    ten = analysis.cluster.allreduce_spread(sweep).set_index(["config", "size_mib"])
    ten = ten.loc[("cross-10gbit", 64)]
    wire_s = 64 * 2**20 / (10e9 / 8 * analysis.cluster.TCP_PAYLOAD_SHARE)
    missed = ", ".join(f"{r.size_mib} MiB ({r.error:+.0%})" for r in outside.itertuples())
    return (
        f"- 64 MiB: {1e3 * j64.intra_median_s:.0f} ms inside one node, "
        f"{1e3 * j64.cross_median_s:.0f} ms across a 1 Gbit/s link: "
        f"**x{j64.ratio_median:.1f}** (x{j64.ratio_min:.1f} to x{j64.ratio_max:.1f} over the "
        "repeats).\n"
        f"- The ring model with B = {fit['bandwidth_bytes_per_s'] / 1e6:.1f} MB/s (from tbf) "
        f"and a fitted alpha = {1e3 * fit['alpha_s']:.2f} ms is within 15 % of the median at "
        f"{len(check) - len(outside)} of {len(check)} sizes; outside: {missed or 'none'}.\n"
        f"- At 64 MiB the link moved {effective / 1e6:.0f} MB/s of payload, "
        f"{effective / fit['bandwidth_bytes_per_s']:.0%} of what tbf lets through.\n"
        f"- 64 MiB across 10 Gbit/s: {1e3 * ten.median_s:.0f} ms ({1e3 * ten.min_s:.0f} to "
        f"{1e3 * ten.max_s:.0f}); the link alone needs {1e3 * wire_s:.0f} ms, and inside one "
        f"node the same allreduce took {1e3 * j64.intra_median_s:.0f} ms."
    )


def hierarchical(allreduce) -> str:
    hier = analysis.cluster.hierarchical_effect(_cluster(str(allreduce.path)))
    return (
        f"Hierarchical over flat, per repeat: medians x{hier.ratio_median.min():.2f} to "
        f"x{hier.ratio_median.max():.2f} over the sizes; every repeat moved the same way at "
        f"{hier.differs.sum()} of {len(hier)} sizes."
    )


def placement(placed) -> str:
    table = analysis.cluster.placement_table(readers.read_placement_runs(placed.path))
    lines = []
    for np_, by_np in table.groupby("np"):
        packed, spread = by_np[by_np.nodes == 1].iloc[0], by_np[by_np.nodes == 2].iloc[0]
        overlap = spread["min"] <= packed["max"] and packed["min"] <= spread["max"]
        lines.append(
            f"- np={np_}: {spread.placement} ran x{spread.vs_one_node:.2f} the samples/s of "
            f"{packed.placement} (medians); ranges {'overlap' if overlap else 'do not overlap'}"
        )
    return "\n".join(lines)


def net_check(net, allreduce) -> pd.DataFrame:
    """The ring model with the 100 Mbit/s link's known bandwidth and the 1 Gbit/s alpha."""
    runs, raw, _ = rounds(net)
    bandwidth = 100e6 / 8 * analysis.cluster.TCP_PAYLOAD_SHARE
    return analysis.ring_check(
        runs, raw, bandwidth_bytes_per_s=bandwidth, alpha_s=link_fit(allreduce)["alpha_s"]
    )


def net_model(net, allreduce) -> str:
    check = net_check(net, allreduce)
    pred, meas = check.speedup_predicted, check.speedup_measured
    return (
        f"Ring model: {check.comm_model_ms.median():.1f} ms of transfer per step; predicted "
        f"**{pred.median():.2f}x**, measured **{meas.median():.2f}x** ({meas.min():.2f}-"
        f"{meas.max():.2f}): off by {check.error.median():+.0%}."
    )


# --- the summary and the numbers the tests compare -----------------------------------------


def summary(cpu, net) -> str:
    hvd, two = _row(cpu, "Horovod np=2"), _row(cpu, "2 independent processes")
    far = _row(net, "Horovod np=2")
    return (
        f"- Compute-bound on 2 cores: np=2 ran {hvd.speedup_median:.2f}x np=1 (median of "
        f"{hvd.rounds} rounds, {hvd.speedup_min:.2f}-{hvd.speedup_max:.2f}), against the "
        f"machine's own ceiling of {two.speedup_median:.2f}x.\n"
        f"- Network-bound (1 + 1 ranks, 100 Mbit/s): np=2 ran {far.speedup_median:.2f}x np=1 "
        f"({far.speedup_min:.2f}-{far.speedup_max:.2f})."
    )


def summary_answers(seeds) -> str:
    top = lab_report(seeds)[1].iloc[-1]
    return (
        f"The lab report at {top.np:.0f} GPUs: {top.speedup_throughput:.1f}x by throughput, "
        f"{top.speedup_train:.1f}x by training time (efficiency {top.efficiency_train:.0%}), "
        f"{top.speedup_wall:.2f}x by wall time."
    )
