"""The findings lesson 04 (notebooks/04-horovod-timelines.ipynb) states, in sentences with their
numbers, from the timeline analyses of :mod:`workshop.analysis`: each function takes the
lesson's Runs (each with a ``timeline.json``; ``bench``, the cycle-time benchmark's folder) and
returns Markdown, or, for the lesson's test, the numbers behind it. The lesson shows them
through ``wk.finding`` (the registry, :mod:`workshop.lessons.l04_timelines.exercises`, says which
give an answer away).
"""

from __future__ import annotations

import pandas as pd

from workshop.analysis import (
    allreduce_overlap,
    backend,
    compare_overlap,
    compare_timelines,
    early_vs_steady,
    fusion_groups,
    negotiation_share,
    negotiation_waits,
    one_time_activities,
    overlap_by_step,
    paired_ratios,
    step_starts,
    stragglers,
)
from workshop.findings.markdown import markdown_table
from workshop.readers import read_benchmark_runs

#: The steps counted as the beginning (the first steps' cache misses), and exercise 04.5's
#: edges between its choices, ms later with 5 ms cycles than with 1 ms.
FIRST_STEPS = 5
DELAY_EDGES_MS = (1, 3, 8)
#: Figure 04.1's margin on each side of the step it draws, a share of the step's records.
FIGURE_MARGIN = 0.03


# --- the numbers ---------------------------------------------------------------------------


def negotiations(run) -> int:
    """The timeline's negotiations: NEGOTIATE_* spans, all collectives."""
    return int((run.timeline.spans.kind == "negotiate").sum())


def share(run) -> float:
    """Negotiation / (negotiation + op time), all collectives, in tensor time."""
    shares = negotiation_share(run.timeline.spans).set_index("op")
    return float(shares.loc["all", "negotiation_share"])


def ticks_per_rank(run) -> int:
    """Readiness ticks per rank (the fewest of any rank)."""
    return int(run.timeline.ticks.groupby("rank").size().min())


def response_ratio(recorded, fusion0) -> float:
    """Responses without fusion over responses with fusion, the same training run."""
    return len(fusion_groups(fusion0.timeline.spans)) / len(fusion_groups(recorded.timeline.spans))


def first_op_start_ms(recorded, cycle5) -> pd.Series:
    """The median step's first allreduce start after its first gradient, ms, per cycle time."""
    table = compare_overlap({"1 ms cycle": recorded.timeline, "5 ms cycle": cycle5.timeline})
    return table.first_op_start_us / 1e3


def cycle5_delay_ms(recorded, cycle5) -> float:
    """How much later the first allreduce starts with 5 ms cycles than with 1 ms, ms."""
    start = first_op_start_ms(recorded, cycle5)
    return float(start["5 ms cycle"] - start["1 ms cycle"])


def delay_choice(delay_ms: float) -> str:
    """Exercise 04.5's letter for a delay: a (< 1 ms), b (1-3), c (3-8), d (>= 8)."""
    return "abcd"[sum(delay_ms >= edge for edge in DELAY_EDGES_MS)]


def first_step_window(run) -> tuple[float, float]:
    """Figure 04.1's window, in timeline microseconds: the first training step from its first
    record to its last, with :data:`FIGURE_MARGIN` each side. Its negotiations are the first of
    each gradient, the only ones with ticks (a cache miss), and they last long enough to see."""
    spans = run.timeline.spans
    first = step_starts(spans).iloc[0]
    inside = spans[(spans.start_us >= first.start_us) & (spans.start_us < first.end_us)]
    lo, hi = float(inside.start_us.min()), float(inside.end_us.max())
    return lo - FIGURE_MARGIN * (hi - lo), hi + FIGURE_MARGIN * (hi - lo)


def beginning_numbers(run) -> dict:
    """Start-up and the first steps: negotiation time, its share in cache misses, the waits."""
    spans, ticks = run.timeline.spans, run.timeline.ticks
    phases = early_vs_steady(spans, first_steps=FIRST_STEPS).set_index("phase")
    first, steady = phases.loc["first"], phases.loc["steady"]
    waits = negotiation_waits(spans, ticks)
    early = waits[waits.start_us < steady.start_us]
    early_negotiation = phases.loc[phases.index != "steady", "negotiate_us"].sum()
    worst = waits.loc[waits.wait_us.idxmax()]
    return {
        "first_steps": int(first.steps),
        "early_negotiation_s": early_negotiation / 1e6,
        "early_wait_share": early.wait_us.sum() / early_negotiation,
        "misses": len(early),
        "miss_wait_share": early.wait_us.sum() / early.dur_us.sum(),
        "max_wait_ms": worst.wait_us / 1e3,
        "worst": worst,
        "first_per_step_ms": first.negotiate_per_step_us / 1e3,
        "steady_per_step_ms": steady.negotiate_per_step_us / 1e3,
        "first_vs_steady_negotiation_x": first.negotiate_per_step_us
        / steady.negotiate_per_step_us,
        "steady_step_ms": steady.step_us / 1e3,
        "startup_negotiation_s": phases.loc["startup", "negotiate_us"] / 1e6,
        "startup_share": phases.loc["startup", "negotiate_us"] / early_negotiation,
    }


def in_training(nocache) -> pd.DataFrame:
    """The cache-off recording's ticks after its first steps: lateness during training."""
    start = step_starts(nocache.timeline.spans).start_us.iloc[FIRST_STEPS]
    ticks = nocache.timeline.ticks
    return ticks[ticks.ts_us >= start]


def training_waits(nocache) -> pd.DataFrame:
    start = step_starts(nocache.timeline.spans).start_us.iloc[FIRST_STEPS]
    waits = negotiation_waits(nocache.timeline.spans, nocache.timeline.ticks)
    return waits[waits.start_us >= start]


def fusion_numbers(recorded, fusion0) -> dict:
    wall_ms = {
        label: fusion_groups(run.timeline.spans).dur_us.sum() / 1e3
        for label, run in (("fusion", recorded), ("no fusion", fusion0))
    }
    table = compare_timelines(recorded.timeline, fusion0.timeline, labels=("fusion", "no fusion"))
    return {"wall_ms": wall_ms, "wall_x": wall_ms["no fusion"] / wall_ms["fusion"], "table": table}


def overlap_steps(marked) -> pd.DataFrame:
    """Per step after the first (its cache misses), the allreduces against the backward pass."""
    overlap = allreduce_overlap(marked.timeline.spans, cycles=marked.timeline.cycles)
    return overlap_by_step(overlap).query("step >= 1")


def shown_step(marked) -> int:
    """The middle one of the steps with an allreduce certainly inside every rank's backward."""
    steps = overlap_steps(marked)
    inside = steps[steps.ops_in_backward_all > 0].step
    return int(inside.iloc[len(inside) // 2])


def cycle_effect(bench) -> pd.DataFrame:
    """Step time per cycle time, each run against the 1 ms run of its round."""
    return paired_ratios(read_benchmark_runs(bench.path), "cycle_time_ms", "step_time_ms", 1)


# --- the findings --------------------------------------------------------------------------


def beginning(run) -> str:
    b = beginning_numbers(run)
    worst = b["worst"]
    return (
        f"- Start-up and the first {b['first_steps']} steps: **{b['early_negotiation_s']:.2f} s** "
        f"of negotiation (tensor time), {b['early_wait_share']:.0%} of it in {b['misses']} "
        f"cache-miss negotiations (their wait / duration is {b['miss_wait_share']:.3f}: 1 by "
        "construction).\n"
        f"- Largest wait: rank {worst.last_rank} handed `{worst.tensor}` over "
        f"{b['max_wait_ms']:.1f} ms after rank {worst.first_rank}.\n"
        f"- Start-up, the broadcasts of the weights before the first step: "
        f"**{b['startup_negotiation_s']:.2f} s** of the {b['early_negotiation_s']:.2f} s "
        f"({b['startup_share']:.0%}).\n"
        f"- Negotiation per step: {b['first_per_step_ms']:.1f} ms of tensor time in the first "
        f"{b['first_steps']} steps against {b['steady_per_step_ms']:.1f} ms in the steady state "
        f"(**{b['first_vs_steady_negotiation_x']:.2f}x**): the first steps negotiate "
        f"{'less' if b['first_vs_steady_negotiation_x'] < 1 else 'more'} per step than later "
        "ones, their cache misses included."
    )


def one_time(run) -> str:
    found = one_time_activities(run.timeline.spans)
    b = beginning_numbers(run)
    return (
        f"`INIT_NCCL` in this run: {(found.activity == 'INIT_NCCL').sum()} (no GPU); "
        f"`INIT_FUSION_BUFFER`: {(found.activity == 'INIT_FUSION_BUFFER').sum()}, "
        f"{found.dur_us.sum() / 1e3:.2f} ms in all, against a median steady step (after the "
        f"first {b['first_steps']}) of {b['steady_step_ms']:.1f} ms."
    )


def backends(run, other) -> str:
    return (
        f"This run: **{backend(run.timeline.spans)}**; the comparison run: "
        f"**{backend(other.timeline.spans)}**."
    )


def ticked(run) -> str:
    tl = run.timeline
    count = tl.ticks.groupby(["pid", "negotiation"]).ngroups
    return f"{count} negotiations have ticks, of {tl.spans.tensor.nunique()} tensors."


def late(nocache) -> str:
    top = stragglers(in_training(nocache)).iloc[0]
    waits = training_waits(nocache)
    return (
        f"During training (after step {FIRST_STEPS}, cache off): rank {top['rank']:.0f} was last "
        f"in **{top.share_last:.0%}** of the negotiations, on average "
        f"{top.mean_lateness_us / 1e3:.2f} ms late (p95 {top.p95_lateness_us / 1e3:.2f} ms); "
        f"{waits.wait_us.mean() / 1e3:.2f} ms between the first and the last rank's request in "
        "the mean negotiation."
    )


def groups(run) -> str:
    found = fusion_groups(run.timeline.spans)
    return (
        f"{len(found)} responses for {found.tensors.sum()} tensor operations, "
        f"{found.bytes.mean() / 1024:.0f} KiB per response on average."
    )


def fusion(recorded, fusion0) -> str:
    f = fusion_numbers(recorded, fusion0)
    t, wall = f["table"], f["wall_ms"]
    rows = ["ops", "fusion_groups", "tensors_per_group", "median_step_ms", "processing_ms"]
    return (
        f"- Without fusion: the same {t.loc['ops', 'fusion']} tensor operations in "
        f"**{t.loc['fusion_groups', 'no fusion']} responses** instead of "
        f"{t.loc['fusion_groups', 'fusion']} ({response_ratio(recorded, fusion0):.2f}x), and no "
        "copies into a fusion buffer.\n"
        f"- The responses take {wall['no fusion']:.0f} ms of wall-clock time instead of "
        f"{wall['fusion']:.0f} ms ({f['wall_x']:.2f}x): each small allreduce pays the "
        "library's fixed cost.\n"
        f"- Tensor time says the opposite ({t.loc['processing_ms', 'ratio']:.2f}x): a fused "
        "response's span counts once for every tensor in it.\n\n"
        f"{markdown_table(t.loc[rows].rename_axis('fusion against no fusion'))}"
    )


def shares(run) -> str:
    table = negotiation_share(run.timeline.spans).set_index("op")
    return (
        f"Negotiation is **{share(run):.1%}** of the collective tensor time in this run "
        f"({negotiations(run)} negotiations).\n\n{markdown_table(table, 3)}"
    )


def side_by_side(run, other) -> str:
    table = compare_timelines(run.timeline, other.timeline, labels=("this run", "comparison"))
    return markdown_table(table.rename_axis("this run against the comparison (COMPARE)"))


def overlap(marked) -> str:
    steps = overlap_steps(marked)
    inside = steps[steps.ops_in_backward_all > 0]
    return (
        f"{len(inside)} of {len(steps)} steps have an allreduce that certainly ran inside every "
        f"rank's backward pass; the figure shows the middle one of them (step "
        f"{shown_step(marked)})."
    )


def overlap_median(marked) -> str:
    steps = overlap_steps(marked)
    med = steps.median()
    return (
        f"- Median step: the first allreduce starts {med.first_op_start_us / 1e3:.1f} ms after "
        f"the first gradient is seen; the last gradient is seen at "
        f"{med.backward_end_us / 1e3:.1f} ms (first rank) and "
        f"{med.all_backward_end_us / 1e3:.1f} ms (every rank).\n"
        f"- {steps.overlap_us.sum() / steps.op_us.sum():.0%} of the allreduce time runs before "
        f"the last gradient is seen; cycle-exact: **{steps.ops_in_backward_all.sum()} of "
        f"{steps.ops.sum()}** allreduces ran entirely inside every rank's backward pass, "
        f"{steps.ops_in_backward_some.sum()} inside at least one rank's."
    )


def cycle1(recorded, marked) -> str:
    """The first allreduce's start with 1 ms cycles in the recording exercise 04.5 compares with,
    beside the cycle-marked recording's (the same configuration, run again)."""
    runs = {"recorded": recorded.timeline, "marked": marked.timeline}
    start = compare_overlap(runs).first_op_start_us / 1e3
    return (
        f"In `{recorded.path.name}` (1 ms cycles, the recording exercise 04.5 compares with), the "
        f"median step's first allreduce starts **{start['recorded']:.1f} ms** after its first "
        f"gradient is seen; in the cycle-marked recording above, {start['marked']:.1f} ms: two "
        f"runs of the same configuration, {abs(start['recorded'] - start['marked']):.1f} ms "
        "apart."
    )


def cycle5(recorded, cycle5_run, fusion0) -> str:
    runs = {"1 ms cycle": recorded.timeline, "5 ms cycle": cycle5_run.timeline}
    table = compare_overlap(runs | {"no fusion": fusion0.timeline})
    t = table / 1e3
    delay = cycle5_delay_ms(recorded, cycle5_run)
    return (
        f"- 5 ms cycle: the first allreduce starts {t.first_op_start_us['5 ms cycle']:.1f} ms "
        f"after the first gradient instead of {t.first_op_start_us['1 ms cycle']:.1f} ms with "
        f"1 ms cycles: **{abs(delay):.1f} ms {'later' if delay >= 0 else 'earlier'}**; "
        f"responses per step: {table.ops_per_step['5 ms cycle']:.0f}.\n"
        f"- No fusion: {table.ops_per_step['no fusion']:.0f} allreduces per step instead of "
        f"{table.ops_per_step['1 ms cycle']:.0f}, {t.op_us['no fusion']:.1f} ms of allreduce per "
        f"step instead of {t.op_us['1 ms cycle']:.1f} ms.\n\n"
        f"{markdown_table(table.round(3).rename_axis('one run each'), 3)}"
    )


def cycle_bench(bench) -> str:
    lines = [
        f"- {row.cycle_time_ms:g} ms cycle: step time {row.min:.1f} / {row.median:.1f} / "
        f"{row.max:.1f} ms (min / median / max of {row.rounds} runs); per round "
        f"x{row.ratio_min:.2f} to x{row.ratio_max:.2f} of the 1 ms run: **{row.verdict}**."
        for row in cycle_effect(bench).iloc[1:].itertuples()
    ]
    return "\n".join(lines)


def killed(run) -> str:
    tl = run.timeline
    return (
        f"The killed run's timeline: cut inside a record: {tl.truncated}, array closed: "
        f"{tl.metadata['closed_array']}, {tl.metadata['unclosed']} spans without an end."
    )


def summary_answers(run, nocache, recorded, fusion0) -> str:
    found = fusion_groups(recorded.timeline.spans)
    return (
        f"- This run holds {negotiations(run)} negotiations.\n"
        f"- With the cache off, every negotiation writes ticks: {ticks_per_rank(nocache)} per "
        "rank.\n"
        f"- Fusion packs {found.tensors.mean():.2f} tensors per response here; turning it off "
        f"makes {response_ratio(recorded, fusion0):.2f}x the responses."
    )
