"""The findings lesson 01 (notebooks/01-data-vs-model-parallelism.ipynb) states, in sentences
with their numbers, from the demos' results (:mod:`workshop.launch.parallelism`: dicts with
``params``, ``initial``, ``events``, ...) and the analyses of
:mod:`workshop.analysis.parallelism`. Each function returns Markdown; the lesson shows them
through ``wk.finding`` (the registry, :mod:`workshop.lessons.l01_parallelism.exercises`, says
which give an answer away).
"""

from __future__ import annotations

import pandas as pd

from workshop.analysis.benchmarks import ranges_overlap
from workshop.analysis.parallelism import (
    LITERATURE,
    VALUE_BYTES,
    compare_runs,
    crossover_bytes,
    max_param_diff,
    pipeline_bubble_fraction,
    stage_utilisation,
    step_times,
)

#: The demos' parameters agree with one process's to float32 rounding: at most this much.
SAME_PARAMS = 1e-5
#: The model the exchange-cost exercises and findings use: latency (s), bandwidth (bytes/s).
ALPHA_S, BANDWIDTH = 5e-6, 12.5e9


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.1f} ms"


def _table(frame: pd.DataFrame, columns: dict[str, str]) -> str:
    """A small frame as a Markdown table: column -> header (numbers with thousands commas)."""
    rows = [" | ".join(columns.values()), " | ".join("---" for _ in columns)]
    for _, row in frame.iterrows():
        cells = [f"{row[c]:,}" if not isinstance(row[c], str) else row[c] for c in columns]
        rows.append(" | ".join(cells))
    return "\n".join(f"| {row} |" for row in rows)


def same_update(single: dict, other: dict, label: str) -> str:
    """How far ``other``'s trained parameters are from one process's, against how far
    training moved them."""
    diff = max_param_diff(single["params"], other["params"])
    moved = max_param_diff(single["initial"], single["params"])
    verdict = "the same update" if diff < SAME_PARAMS else "**not** the same update"
    rounding = "bit for bit" if diff == 0 else "to float32 rounding"
    text = (
        f"Training moved the parameters by up to {moved:.3g}; {label} and one process differ "
        f"by at most **{_diff(diff)}**: {verdict}, {rounding}."
    )
    if "rank_max_diff" in other:
        text += f" The replicas differ from each other by {other['rank_max_diff']:.2g}."
    return text


def _diff(value: float) -> str:
    """A parameter difference: 0 says so (bit for bit), anything else in 2 significant digits."""
    return "0" if value == 0 else f"{value:.2g}"


def idle_shares(result: dict, stages: int, microbatches: int) -> str:
    """Each stage's measured idle share against a perfect pipeline's."""
    idle = stage_utilisation(result["events"])["idle_fraction"]
    perfect = pipeline_bubble_fraction(stages, microbatches)
    shares = ", ".join(f"{x:.0%}" for x in idle)
    return (
        f"{microbatches} micro-batch{'es' if microbatches > 1 else ''}: idle share per stage "
        f"**{shares}**; a perfect {stages}-stage pipeline: {perfect:.0%}."
    )


def _spread(events: pd.DataFrame) -> tuple[float, float, float]:
    """Median, lowest and highest time of a demo's steady steps, s."""
    s = step_times(events).step_s
    return float(s.median()), float(s.min()), float(s.max())


def model_parallel_speed(single: dict, model_parallel: dict, stages: int) -> str:
    """Model parallel (one micro-batch) against one process, with the spread of their step
    times: a difference inside the spread is called noise, one outside it is not. The span of
    one step (first start to last end, :func:`step_times`) is named apart from the table's
    time between finished steps (:func:`compare_runs`): they measure different things."""
    one, split = _spread(single["events"]), _spread(model_parallel["events"])
    ratio = one[0] / split[0]
    overlap = bool(ranges_overlap(split[1], split[2], one[1], one[2]))
    table = compare_runs({"single": single["events"], "split": model_parallel["events"]})
    between = table.set_index("run").step_s
    head = (
        f"The table above divides the steady window by the steps: the time **between two "
        f"finished steps**, {_ms(between['single'])} for one process and "
        f"{_ms(between['split'])} for model parallel ({table.speedup.iloc[1]:.2f}x). Here each "
        "step's **span**, from its first start to its last end on any process (the spans of "
        "a pipeline's steps overlap, so they can be longer than the time between them): "
        f"one process: median {_ms(one[0])} (steps from {_ms(one[1])} to {_ms(one[2])}); "
        f"model parallel on {stages} processes: {_ms(split[0])} ({_ms(split[1])} to "
        f"{_ms(split[2])}), **{ratio:.2f}x** the single process's speed."
    )
    if overlap:
        why = (
            " The two ranges of step times overlap: the difference is within this machine's "
            "noise, as it should be, since with one micro-batch the stages take turns and "
            "splitting the layers adds no parallel work by itself."
        )
    else:
        side = "faster" if ratio > 1 else "slower"
        why = (
            f" The ranges do not overlap: here the split was measurably {side}. The stages "
            "still take turns, so that is not parallel work: each process also runs its own "
            "threads, and the hand-overs cost time on shared cores."
        )
    return head + why


def data_parallel_speed(
    steps: pd.DataFrame, single: dict, dp: dict, threads: int, np_: int
) -> str:
    """Data parallel's speed-up and its allreduce share (``steps``: compare_runs, second row),
    with the other work on the machine while the demos ran (what makes it no faster)."""
    row = steps.iloc[1]
    busy = max(single["foreign_cores"], dp["foreign_cores"])
    text = (
        f"Data parallel: **{row.speedup:.2f}x** the single process's speed, with "
        f"{row.communication_s / row.step_s:.0%} of each step in the allreduce. Every process, "
        f"the single one too, computes with {threads} thread(s): the {np_} processes use "
        f"{np_ * threads} cores where one process used {threads}. Other work on this machine "
        f"while the demos ran: {busy:.2f} cores (quiet: about 0)."
    )
    if row.speedup <= 1:
        text += (
            f" Data parallel was not faster here: {np_} processes need {np_} free cores; run "
            "the demos again on a quiet machine."
        )
    return text


def published_counts(estimates: pd.DataFrame) -> str:
    """The calculators' parameter counts against published ones, and the thesis talk's CNN
    against the workshop's stand-in."""
    counts = estimates.set_index("model")["params"]
    rows = [
        f"| {name} | {int(counts[name]):,} | {LITERATURE[name]['params']:,} |"
        for name in ("resnet50", "vgg19", "gpt2-small", "gpt2-xl")
    ]
    seed, standin = LITERATURE["materials-cnn-seed003"], int(counts["materials-cnn"])
    return (
        "| model | computed | published |\n| --- | ---: | ---: |\n" + "\n".join(rows) + "\n\n"
        f"The thesis talk's CNN has {seed['params']:,} parameters "
        f"({seed['params'] * VALUE_BYTES / 1e6:.2f} MB in fp32); the workshop's "
        f"`materials-cnn` has the same kinds of layers and {standin:,} parameters, "
        f"{seed['params'] / standin:.0f}x fewer: a small stand-in, not the talk's network."
    )


def fits(fit: pd.DataFrame, gpu: str) -> str:
    """Which parallelism each model gets on one ``gpu``, and why."""
    return f"On one {gpu}:\n\n" + _table(
        fit, {"model": "model", "strategy": "parallelism", "reason": "why"}
    )


def compute_per_communication(balance: pd.DataFrame, n_workers: int) -> str:
    """Compute time over allreduce time per step, for the big and the small models."""
    b = balance.set_index("model")["compute_to_comm"]
    return (
        f"With {n_workers} workers ResNet-50 computes **{b['resnet50']:.1f}x** as long as it "
        f"communicates; the MNIST CNN {b['mnist-cnn']:.2f}x and the materials stand-in "
        f"{b['materials-cnn']:.2f}x: small models are communication-bound."
    )


def traffic(costs: pd.DataFrame, n_workers: int, gradient_bytes: float) -> str:
    """Bytes through one server's link against one ring worker's, for one gradient size."""
    c = costs[(costs["bytes"] == gradient_bytes) & (costs["n_workers"] == n_workers)].iloc[0]
    return (
        f"{gradient_bytes / 1e6:.1f} MB of gradients, {n_workers} workers: the server's link "
        f"carries {c.ps_bytes_server_link / 1e6:,.0f} MB each way, a ring worker sends "
        f"{c.ring_bytes_per_worker / 1e6:,.1f} MB: "
        f"**{c.ps_bytes_server_link / c.ring_bytes_per_worker:.1f}x**."
    )


def exchange_times(costs: pd.DataFrame, n_workers: int, gradient_bytes: float) -> str:
    """Ring and server times for the gradients and for 8 bytes, and the crossover size."""
    at_n = costs[costs["n_workers"] == n_workers].set_index("bytes")
    big, tiny = at_n.loc[gradient_bytes], at_n.loc[8]
    cross = crossover_bytes(n_workers, alpha_s=ALPHA_S, bandwidth=BANDWIDTH)
    return (
        f"- {gradient_bytes / 1e6:.1f} MB of gradients, {n_workers} workers: ring "
        f"{_ms(big.ring_s)}, parameter server {_ms(big.ps_s)} ({big.ps_over_ring:.1f}x).\n"
        f"- 8 bytes: ring {1e6 * tiny.ring_s:.0f} us, server {1e6 * tiny.ps_s:.0f} us.\n"
        f"- Below {cross / 1e3:.0f} kB per message one server beats the ring at N = "
        f"{n_workers}, in this model: latency wins over bandwidth."
    )


def collectives(rows: list[dict]) -> str:
    """Every live rank's tensor before and after each collective (rows pulled from the
    ranks: ``rank``, ``before``, ``average``, ``sum``, ``broadcast_from_1``, ``allgather``)."""
    frame = pd.DataFrame(rows).sort_values("rank")
    columns = ["before", "average", "sum", "broadcast_from_1", "allgather"]
    head = "| rank | " + " | ".join(f"`{c}`" for c in columns) + " |"
    lines = [head, "|" + " --- |" * (len(columns) + 1)]
    for _, row in frame.iterrows():
        lines.append(f"| {row['rank']} | " + " | ".join(str(row[c]) for c in columns) + " |")
    return "\n".join(lines)


def summary(single: dict, dp: dict, mp1: dict, mpm: dict, stages: int, microbatches: int) -> str:
    """The lesson's measured results in two lines: how far each split's parameters are
    from one process's, and whether the micro-batches lowered the measured idle share."""
    mp1_diff, mpm_diff, dp_diff = (
        max_param_diff(single["params"], r["params"]) for r in (mp1, mpm, dp)
    )
    idle1 = stage_utilisation(mp1["events"])["idle_fraction"].mean()
    idlem = stage_utilisation(mpm["events"])["idle_fraction"].mean()
    trend = (
        "lower with the micro-batches"
        if idlem < idle1
        else "**not** lower with the micro-batches: here their extra hand-overs cost more "
        "than the bubble they fill"
    )
    return (
        f"- Parameters after training, largest difference from one process: data parallel "
        f"{_diff(dp_diff)}, model parallel {_diff(mp1_diff)} with one micro-batch and "
        f"{_diff(mpm_diff)} with {microbatches}"
        + (
            " (its gradients are summed over the micro-batches, in another order than one "
            "batch's: float32 rounding)"
            if mpm_diff
            else ""
        )
        + ".\n"
        f"- Mean idle share of the {stages} stages: {idle1:.0%} with one micro-batch "
        f"(perfect: {pipeline_bubble_fraction(stages, 1):.0%}), {idlem:.0%} with "
        f"{microbatches} (perfect: {pipeline_bubble_fraction(stages, microbatches):.0%}): "
        f"{trend}."
    )
