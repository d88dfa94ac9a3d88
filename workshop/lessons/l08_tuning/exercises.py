"""Lesson 08 (notebooks/08-tuning-horovod.ipynb): its exercises and the findings it states.

The lesson's data: Runs of its recordings (a sweep folder, a timeline, a benchmark), the ones
:data:`RECORDINGS` names (its parameters cell names the same); with ``LIVE`` or ``RUN_DIR``,
the learner's fusion sweep.
"""

from __future__ import annotations

from workshop.lessons.entries import Exercise, Finding, Slip
from workshop.lessons.l08_tuning import findings as said
from workshop.lessons.l08_tuning.findings import (
    accumulation_comm,
    compression_comm,
    fusion_comm,
    nocache_ticks,
    rounds_per_s,
)

#: The recordings the lesson opens by default.
RECORDINGS = {
    "fusion": "sweeps/fusion-mnist",
    "fusion_grid": "sweeps/fusion-tuning-mnist",
    "cycle": "sweeps/cycle-time-mnist",
    "cycle_benchmark": "benchmarks/cycle-time",
    "cache": "sweeps/cache-mnist",
    "nocache": "timelines/tl-torch-gloo-np2-nocache",
    "autotune": "sweeps/autotune-mnist",
    "compression": "sweeps/compression-mnist",
    "accumulation": "sweeps/accumulation-mnist",
    "knobs": "cluster/knobs-100mbit",
}


def _on(*names: str) -> dict[str, str]:
    return {name: RECORDINGS[name] for name in names}


def _bytes(fusion) -> float:
    return float(fusion_comm(fusion).bytes_per_step[128])


def _ops_ratio(accumulation) -> float:
    ops = accumulation_comm(accumulation).ops_per_epoch
    return float(ops[4] / ops[1])


EXERCISES = (
    Exercise(
        "08.1",
        data=("fusion",),
        recorded=_on("fusion"),
        expected=_bytes,
        hints=(
            "Which records tell a tensor's size, and how many bytes does one element of each "
            "dtype take?",
            "For each gradient tensor, once: the product of its shape times the bytes of its "
            "dtype; add them up. A stack of open B names per pid tells which span an E closes.",
        ),
        slips=(
            Slip("elements, not bytes", lambda fusion: _bytes(fusion) / 4),
            Slip(
                "both ranks' gradients: every rank reduces the same ones", lambda f: 2 * _bytes(f)
            ),
        ),
        solution="Each gradient tensor once: its elements times its dtype's bytes, summed.",
        minutes=15,
    ),
    Exercise(
        "08.2",
        data=("cycle",),
        recorded=_on("cycle"),
        expected=lambda cycle: float(rounds_per_s(cycle)[20]),
        rel_tol=0.06,
        hints=(
            "How long does one cycle last at least, and how many such cycles fit into a second?",
            "A cycle lasts at least the cycle time, longer when its work takes longer: the "
            "rounds per second stay a little below one second divided by the cycle time. Lesson "
            "05's 20 ms MPI profile says how far below.",
        ),
        slips=(Slip("the naive bound 1000 / 20, as if no cycle outlasted 20 ms", lambda c: 50.0),),
        solution="At most 1000 / 20 = 50 rounds per second; some cycles last longer (a step's "
        "reductions, a busy core), so about a tenth fewer, as in lesson 05's 20 ms profile.",
        minutes=5,
    ),
    Exercise(
        "08.3",
        data=("nocache",),
        recorded=_on("nocache"),
        expected=nocache_ticks,
        rel_tol=0.05,
        hints=(
            "Which negotiations write ticks, and how many ticks does one write?",
            "With the cache off every negotiation is a full one, which writes one tick per "
            "rank; a step negotiates each gradient tensor once.",
        ),
        slips=(Slip("one rank's ticks", lambda nocache: nocache_ticks(nocache) / 2),),
        solution="Every step, every gradient tensor, one tick from each rank.",
        minutes=5,
    ),
    Exercise(
        "08.4",
        data=("compression",),
        recorded=_on("compression"),
        expected=lambda c: float(compression_comm(c).bytes_per_step["fp16"]),
        hints=(
            "What does fp16 compression change about each gradient element before the "
            "allreduce, and what does it leave as it is?",
            "The number of elements stays; each element shrinks from float32's size to float16's.",
        ),
        slips=(
            Slip(
                "compression forgotten",
                lambda c: float(compression_comm(c).bytes_per_step["none"]),
            ),
            Slip(
                "a quarter: 1 byte per element",
                lambda c: float(compression_comm(c).bytes_per_step["none"] / 4),
            ),
        ),
        solution="The same elements, 2 bytes each instead of 4.",
        minutes=3,
    ),
    Exercise(
        "08.5",
        data=("accumulation",),
        recorded=_on("accumulation"),
        expected=_ops_ratio,
        rel_tol=0.2,
        hints=(
            "How many optimizer steps does an epoch make with 4 backward passes per step, "
            "compared with 1?",
            "The allreduces happen once per optimizer step, and an epoch covers the same "
            "samples either way.",
        ),
        slips=(Slip("unchanged", lambda a: 1.0), Slip("four times more", lambda a: 4.0)),
        solution="4 times fewer optimizer steps, each with the same fused allreduces.",
        minutes=3,
    ),
)


def _finding(name: str, text, data: tuple[str, ...], after: tuple[str, ...] = ()) -> Finding:
    return Finding(f"08.{name}", data, text, after=after)


FINDINGS = (
    _finding("loads", said.loads, ("cache",)),
    _finding("fusion-table", said.fusion_table, ("fusion",), after=("08.1",)),
    _finding("fusion-off", said.fusion_off, ("fusion",), after=("08.1",)),
    _finding("grid", said.grid, ("fusion_grid", "fusion")),
    _finding("rounds-1ms", said.rounds_1ms, ("cycle",)),
    _finding("cycle", said.cycle, ("cycle",), after=("08.2",)),
    _finding("cycle-benchmark", said.cycle_benchmark, ("cycle_benchmark",)),
    _finding("cache-outliers", said.cache_outliers, ("cache",)),
    _finding("cache-off", said.cache_off, ("cache",)),
    _finding("autotune", said.autotune, ("autotune",)),
    _finding("bytes-uncompressed", said.bytes_uncompressed, ("compression",)),
    _finding("fp16-table", said.fp16_table, ("compression",), after=("08.4",)),
    _finding("fp16", said.fp16, ("compression",)),
    _finding("accumulation-table", said.accumulation_table, ("accumulation",), after=("08.5",)),
    _finding("accumulation", said.accumulation, ("accumulation",), after=("08.5",)),
    _finding(
        "effects",
        said.effects,
        ("fusion", "cache", "compression", "accumulation", "cycle_benchmark"),
    ),
    _finding("knobs-100mbit", said.knobs_100mbit, ("knobs",)),
    _finding("link-mechanisms", said.link_mechanisms, ("fusion",), after=("08.1",)),
    _finding("fp16-both", said.fp16_both, ("compression", "knobs")),
)
