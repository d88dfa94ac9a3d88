"""The findings lesson 08 (notebooks/08-tuning-horovod.ipynb) states, in sentences with their
numbers, from :mod:`workshop.analysis.tuning`: each function takes the lesson's recordings (a
Run of a sweep folder, of a timeline or of a benchmark) and returns Markdown; the tables the
lesson's exercises and findings read are computed here once per folder. The registry
(:mod:`workshop.lessons.l08_tuning.exercises`) says which give an answer away.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd

from workshop.analysis import (
    autotune_summary,
    comm_table,
    knob_effect,
    negotiation_table,
    paired_ratios,
    tuning_table,
)
from workshop.readers import (
    read_autotune_log,
    read_benchmark_runs,
    read_manifest,
    read_mpitrace,
    read_sweep,
    read_timeline,
    run_dirs,
)


def _path(run) -> str:
    return str(Path(getattr(run, "path", run)).resolve())


@cache
def _sweep(path: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    return read_sweep(path)


def sweep_runs(sweep) -> pd.DataFrame:
    """The runs of a sweep folder (:func:`workshop.readers.read_sweep`)."""
    return _sweep(_path(sweep))[0]


@cache
def _comm(path: str, knob: str) -> pd.DataFrame:
    runs = _sweep(path)[0]
    traced = runs[runs.timeline]
    timelines = {run.run: read_timeline(run.path) for run in traced.itertuples()}
    table = comm_table(timelines, traced.set_index("run").np).merge(
        traced[["run", knob, "epochs"]]
    )
    return table.set_index(knob)


def fusion_comm(fusion) -> pd.DataFrame:
    """Per fusion threshold (MB): tensors, operations and bytes per step (the traced runs)."""
    return _comm(_path(fusion), "fusion_threshold_mb")


def compression_comm(compression) -> pd.DataFrame:
    """Per compression ("none", "fp16"): the gradients' dtypes and bytes per step."""
    return _comm(_path(compression), "compression")


def accumulation_comm(accumulation) -> pd.DataFrame:
    """Per backward passes per step: operations per step and per epoch."""
    table = _comm(_path(accumulation), "backward_passes_per_step").copy()
    table["ops_per_epoch"] = table.allreduce_ops / table.epochs
    return table


@cache
def _cycle_table(path: str) -> pd.DataFrame:
    runs = _sweep(path)[0]
    profiles = {run.run: read_mpitrace(run.path) for run in runs.itertuples()}
    return negotiation_table(profiles).merge(
        runs[["run", "cycle_time_ms", "seed", "samples_per_s", "steady_epoch_time_s"]]
    )


def rounds_per_s(cycle) -> pd.Series:
    """Rank 0's negotiation rounds per second, median per cycle time (ms)."""
    return _cycle_table(_path(cycle)).groupby("cycle_time_ms").rounds_per_s.median()


def nocache_ticks(nocache) -> float:
    """Readiness ticks per training step in a timeline (both ranks)."""
    tl = nocache.timeline if hasattr(nocache, "timeline") else read_timeline(nocache)
    return float(comm_table({"run": tl}, 2).ticks_per_step.iloc[0])


def _effect(sweep, knob: str, baseline, metric: str = "samples_per_s", runs=None):
    runs = sweep_runs(sweep) if runs is None else runs
    return knob_effect(runs, knob, metric, baseline).set_index(knob)


def _side(row) -> str:
    return "within" if row["overlaps"] else "outside"


def _markdown(frame: pd.DataFrame) -> str:
    def cell(value) -> str:
        if not isinstance(value, float):
            return str(value)
        return f"{value:,.0f}" if value.is_integer() else f"{value:,.2f}"

    head = "| " + " | ".join([str(frame.index.name or ""), *map(str, frame.columns)]) + " |"
    rule = "| " + " | ".join("---" for _ in range(len(frame.columns) + 1)) + " |"
    rows = ["| " + " | ".join([cell(i), *map(cell, row)]) + " |" for i, row in frame.iterrows()]
    return "\n".join([head, rule, *rows])


# --- the findings ------------------------------------------------------------------------------


def loads(cache_sweep) -> str:
    points = read_manifest(_path(cache_sweep))["points"]
    values = [point["loadavg_1min"] for point in points]
    return (
        f"While the runs of `{Path(_path(cache_sweep)).name}` started, the load average was "
        f"{min(values):.1f} to {max(values):.1f}."
    )


def fusion_table(fusion) -> str:
    columns = ["tensors_per_step", "ops_per_step", "tensors_per_op", "bytes_per_step"]
    return "Per step, with fusion (128 MB) and without (0):\n\n" + _markdown(
        fusion_comm(fusion)[columns]
    )


def fusion_off(fusion) -> str:
    comm, off = fusion_comm(fusion), _effect(fusion, "fusion_threshold_mb", 128).loc[0]
    return (
        f"Fusion off: **{comm.ops_per_step[0]:.1f}** collective operations per step instead of "
        f"**{comm.ops_per_step[128]:.1f}**, for the same {comm.bytes_per_step[0]:,.0f} bytes. "
        f"Throughput with fusion off: {off['ratio']:.2f}x the default's median over "
        f"{off['runs']} runs each ({_side(off)} the spread of the repeats)."
    )


def grid(fusion_grid, fusion) -> str:
    runs = sweep_runs(fusion_grid)
    table = tuning_table(runs[runs.fusion_threshold_mb.notna()])
    fused = table[table.fusion_threshold_mb > 0].groupby("cycle_time_ms").samples_per_s
    same = fused.max() / fused.min()
    off = _effect(fusion, "fusion_threshold_mb", 128).loc[0]
    return (
        f"At the same cycle time, 4 MB and 64 MB differ by {same.min():.1f}x to "
        f"{same.max():.1f}x; fusion off reached at best "
        f"{table[table.fusion_threshold_mb == 0].relative.max():.2f}x of the fastest setting. "
        f"With three runs per setting (above), fusion off was {_side(off)} the spread of the "
        "repeats."
    )


def rounds_1ms(cycle) -> str:
    return (
        f"At a 1 ms cycle, rank 0 made **{rounds_per_s(cycle)[1]:.0f}** negotiation rounds per "
        "second (at most 1000 if a cycle took no work)."
    )


def cycle(cycle_sweep) -> str:
    rounds = rounds_per_s(cycle_sweep)
    by_cycle = _cycle_table(_path(cycle_sweep)).groupby("cycle_time_ms").median(numeric_only=True)
    slow = _effect(cycle_sweep, "cycle_time_ms", 1).loc[20]
    return (
        f"20 ms instead of 1 ms: {rounds[20]:.0f} instead of {rounds[1]:.0f} negotiation rounds "
        f"per second; {by_cycle.gradient_allreduces[20]:.0f} instead of "
        f"{by_cycle.gradient_allreduces[1]:.0f} gradient allreduces in the run (more tensors per "
        f"fused operation), {by_cycle.negotiation_time_s[20]:.1f} s instead of "
        f"{by_cycle.negotiation_time_s[1]:.1f} s of rank 0 inside negotiation calls, and "
        f"{slow['ratio']:.2f}x the throughput: the medians of {slow['runs']} runs per setting, "
        "run one after the other, not interleaved."
    )


def cycle_benchmark_table(benchmark) -> pd.DataFrame:
    runs = read_benchmark_runs(_path(benchmark))
    return paired_ratios(runs, "cycle_time_ms", "step_time_ms", 1)


def cycle_benchmark(benchmark) -> str:
    lines = [
        f"- {row.cycle_time_ms:g} ms cycle: step time {row.min:.1f} / {row.median:.1f} / "
        f"{row.max:.1f} ms (min / median / max of {row.rounds} runs); per round "
        f"x{row.ratio_min:.2f} to x{row.ratio_max:.2f} of the 1 ms run: {row.verdict}."
        for row in cycle_benchmark_table(benchmark).iloc[1:].itertuples()
    ]
    return "\n".join(lines)


def cache_outliers(cache_sweep) -> str:
    epochs = _sweep(_path(cache_sweep))[1]
    steady = epochs[epochs.epoch > 1]
    per_run = steady.groupby("run").agg(
        low=("samples_per_s", "min"),
        high=("samples_per_s", "max"),
        fastest_epoch_s=("train_time_s", "min"),
    )
    odd = per_run[per_run.high > 3 * per_run.low]
    if odd.empty:
        return "No run of this sweep has a steady epoch more than 3x faster than its other one."
    lines = []
    for run, row in odd.iterrows():
        others = steady[steady.run != run].samples_per_s.max()
        lines.append(
            f"- `{run}`: its two steady epochs ran at {row.low:,.0f} and {row.high:,.0f} "
            f"samples/s (one epoch in {row.fastest_epoch_s:.2f} s); no epoch of any other run "
            f"of this sweep passed {others:,.0f}. A run's samples/s is the median of its steady "
            "epochs, here the mean of these two."
        )
    return "\n".join(lines)


def cache_off(cache_sweep) -> str:
    runs = sweep_runs(cache_sweep)
    profiles = {run.run: read_mpitrace(run.path) for run in runs.itertuples()}
    table = negotiation_table(profiles).merge(runs[["run", "cache_capacity"]])
    by_cache = table.groupby("cache_capacity").median(numeric_only=True)
    no_cache = _effect(cache_sweep, "cache_capacity", 1024).loc[0]
    return (
        f"Cache off: {by_cache.gathers[0]:.0f} gathers of requests (full negotiations) instead "
        f"of {by_cache.gathers[1024]:.0f}, and {by_cache.bitvector_allreduces[0]:.0f} bit-vector "
        f"allreduces instead of {by_cache.bitvector_allreduces[1024]:.0f} (medians). "
        f"Throughput: {no_cache['ratio']:.2f}x the default's median ({_side(no_cache)} the "
        "spread of the repeats)."
    )


def autotune_log(autotune) -> pd.DataFrame:
    (run_dir,) = run_dirs(_path(autotune))
    return read_autotune_log(run_dir / "autotune.csv")


def autotune(autotune_sweep) -> str:
    log = autotune_log(autotune_sweep)
    s = autotune_summary(log)
    on_off = [
        "hierarchical_allreduce",
        "hierarchical_allgather",
        "torus_allreduce",
        "cache_enabled",
    ]
    values = ", ".join(f"`{n}` {sorted(log[n].unique().tolist())}" for n in on_off)
    return (
        f"Autotune scored {s['samples']} settings; tuning "
        f"{'finished' if s['finished'] else 'had not finished when the run ended'}. Best: "
        f"{s['best_cycle_time_ms']:.1f} ms cycle, {s['best_fusion_threshold_mb']:.1f} MB "
        f"fusion, {s['best_score']:.1f} bytes/us: {s['gain_vs_first']:.2f}x its first sample "
        f"and {s['gain_vs_median']:.2f}x the median one (worst {s['worst_score']:.1f}). The "
        f"on/off parameters took these values in the logged samples: {values}."
    )


def bytes_uncompressed(compression) -> str:
    comm = compression_comm(compression)
    return (
        f"Without compression a step reduces **{comm.bytes_per_step['none']:,.0f} bytes** "
        f"({comm.gradient_dtypes['none']})."
    )


def fp16_table(compression) -> str:
    columns = ["gradient_dtypes", "bytes_per_step", "ops_per_step"]
    return "Per step, without compression and with fp16:\n\n" + _markdown(
        compression_comm(compression)[columns]
    )


def fp16(compression) -> str:
    acc = _effect(compression, "compression", "none", "final_test_accuracy")
    speed = _effect(compression, "compression", "none").loc["fp16"]
    return (
        f"fp16: test accuracy {acc.loc['fp16', 'low']:.3f}-{acc.loc['fp16', 'high']:.3f} "
        f"against {acc.loc['none', 'low']:.3f}-{acc.loc['none', 'high']:.3f} without "
        f"compression (the seeds' spread); throughput {speed['ratio']:.2f}x ({_side(speed)} "
        "the spread of the repeats)."
    )


def accumulation_table(accumulation) -> str:
    columns = ["ops_per_step", "bytes_per_step", "ops_per_epoch"]
    return "Per number of backward passes per step:\n\n" + _markdown(
        accumulation_comm(accumulation)[columns]
    )


def accumulation(accumulation) -> str:
    runs = sweep_runs(accumulation)
    fixed_lr = runs[runs.lr_scaling == "none"]
    four = _effect(accumulation, "backward_passes_per_step", 1, runs=fixed_lr).loc[4]
    acc = _effect(
        accumulation, "backward_passes_per_step", 1, "final_test_accuracy", runs=fixed_lr
    )["median"]
    scaled = runs[runs.lr_scaling == "linear"].set_index("backward_passes_per_step")
    ops = accumulation_comm(accumulation).ops_per_epoch
    return (
        f"4 passes per step: {ops[4]:.0f} instead of {ops[1]:.0f} allreduce operations per "
        f"epoch; throughput {four['ratio']:.2f}x ({_side(four)} the spread of the repeats). "
        f"Test accuracy after 3 epochs at a fixed LR: {acc[1]:.3f} (1 pass), {acc[2]:.3f} (2), "
        f"{acc[4]:.3f} (4); with the LR scaled linearly to the global batch: "
        f"{scaled.final_test_accuracy[2]:.3f} (2), {scaled.final_test_accuracy[4]:.3f} (4)."
    )


def effects(fusion, cache_sweep, compression, accumulation, benchmark) -> str:
    acc_runs = sweep_runs(accumulation)
    rows = {
        "fusion off": _effect(fusion, "fusion_threshold_mb", 128).loc[0],
        "cache off": _effect(cache_sweep, "cache_capacity", 1024).loc[0],
        "fp16": _effect(compression, "compression", "none").loc["fp16"],
        "4 backward passes": _effect(
            accumulation,
            "backward_passes_per_step",
            1,
            runs=acc_runs[acc_runs.lr_scaling == "none"],
        ).loc[4],
    }
    lines = [
        f"- {name}: {row['ratio']:.2f}x throughput, "
        f"{'within the spread of repeats' if row['overlaps'] else 'outside the spread'} "
        f"({row['runs']} runs)"
        for name, row in rows.items()
    ]
    lines += [
        f"- cycle {row.cycle_time_ms:g} ms: x{row.ratio_median:.2f} step time (median of "
        f"{row.rounds} interleaved rounds, x{row.ratio_min:.2f} to x{row.ratio_max:.2f}): "
        f"{row.verdict}"
        for row in cycle_benchmark_table(benchmark).iloc[1:].itertuples()
    ]
    return "\n".join(lines)


KNOB_NAMES = {
    "baseline": "Horovod's defaults",
    "fus0": "fusion off (threshold 0)",
    "cyc20": "cycle time 20 ms",
    "cache0": "response cache off",
    "fp16": "fp16 compression",
    "bpps2": "2 backward passes per step",
}


def knobs_table(knobs) -> pd.DataFrame:
    """Each knob against the defaults, per round, at 100 Mbit/s (``paired_ratios``)."""
    return paired_ratios(sweep_runs(knobs), "setting", "samples_per_s", "baseline")


def knobs_100mbit(knobs) -> str:
    return "\n".join(
        f"- {KNOB_NAMES[row.setting]}: x{row.ratio_min:.2f} / x{row.ratio_median:.2f} / "
        f"x{row.ratio_max:.2f} the defaults' samples/s (min / median / max of {row.rounds} "
        f"rounds): {row.verdict}"
        for row in knobs_table(knobs).iloc[1:].itertuples()
    )


def link_mechanisms(fusion) -> str:
    comm = fusion_comm(fusion)
    return (
        "- **fp16 compression** halves the bytes each step sends, so it shortens the part of "
        "the step that the link limits;\n"
        "- **2 backward passes per step** allreduce once per two batches: half the bytes per "
        "sample;\n"
        f"- **fusion off** sends the same bytes in {comm.ops_per_step[0]:.1f} collective "
        f"operations per step instead of {comm.ops_per_step[128]:.1f} (the fusion table's "
        "counts, the same model): it adds latencies, not bytes;\n"
        "- **a 20 ms cycle** makes a gradient wait up to a cycle before its allreduce can "
        "start;\n"
        "- **the response cache off** makes every cycle a full negotiation of the ready "
        "tensors: a few small messages next to a step's gradients."
    )


def fp16_both(compression, knobs) -> str:
    speed = _effect(compression, "compression", "none").loc["fp16"]
    link = knobs_table(knobs).set_index("setting").loc["fp16"]
    return (
        f"fp16 on the loopback device: {speed['ratio']:.2f}x the default's median "
        f"({_side(speed)} the spread of its repeats); across the 100 Mbit/s link: "
        f"{link.ratio_median:.2f}x ({link.verdict})."
    )
