"""Lesson 10 (notebooks/10-from-horovod-to-ddp.ipynb): its exercises and the findings it states.

The lesson's data: Runs of its recordings (folders under ``data/``), the ones
:data:`RECORDINGS` names (its parameters cell names the same): lesson 08's fusion sweep (the
Horovod runs of lesson 02's model), lesson 10's DDP traces of the same model
(``ddp-lesson/buckets``: rounds of DDP's default buckets against ``bucket_cap_mb=0``) and the
recorded ``workshop check`` reports of the lesson's DDP script (``ddp-lesson/check``).
"""

from __future__ import annotations

from workshop.lessons.entries import Exercise, Finding, Slip
from workshop.lessons.l10_ddp import findings as said
from workshop.lessons.l10_ddp.findings import (
    buckets_per_step,
    cap0_cost,
    failed_practices,
    horovod_fusion,
    others_compute_ms,
    overlap_fraction,
    straggler_answer,
)

#: The recordings the lesson opens by default.
RECORDINGS = {
    "fusion": "sweeps/fusion-mnist",
    "ddp": "ddp-lesson/buckets/round-1/default",
    "ddp_cap0": "ddp-lesson/buckets/round-1/cap0",
    "buckets": "ddp-lesson/buckets",
    "check": "ddp-lesson/check",
    "straggler": "diagnose/ddp/ddp-straggler",
}


def _on(*names: str) -> dict[str, str]:
    return {name: RECORDINGS[name] for name in names}


def _one_practice(check) -> str:
    failed = failed_practices(check)
    if len(failed) != 1:
        raise ValueError(f"the recorded check of the mistake fails {failed}, not one practice")
    return failed[0]


EXERCISES = (
    Exercise(
        "10.1",
        data=("ddp_cap0", "ddp"),
        recorded=_on("ddp_cap0", "ddp"),
        expected=lambda cap0, ddp: buckets_per_step(cap0),
        hints=(
            "How many tensors does the model's gradient have (lesson 08 counted them), and "
            "how many of them fit into a bucket of 0 bytes?",
            "A bucket is closed as soon as it holds at least its cap: with a cap of 0 every "
            "gradient tensor is a bucket of its own, and each bucket is one allreduce.",
        ),
        slips=(
            Slip("the default's bucket count", lambda cap0, ddp: buckets_per_step(ddp)),
            Slip("one bucket per layer", lambda cap0, ddp: buckets_per_step(cap0) / 2),
        ),
        solution="One bucket per gradient tensor: each layer's weight and bias, 4 layers.",
        minutes=5,
    ),
    Exercise(
        "10.2",
        data=("ddp", "ddp_cap0"),
        recorded=_on("ddp", "ddp_cap0"),
        expected=lambda ddp, cap0: overlap_fraction(ddp),
        decimals=1,
        hints=(
            "When can DDP start the allreduce of a bucket, and when is the only bucket of "
            "this model complete?",
            "A bucket's allreduce starts once every gradient in it is ready: with one bucket "
            "for the whole model, when the backward pass has produced its last gradient.",
        ),
        slips=(
            Slip("all of it hidden behind the backward pass", lambda ddp, cap0: 1.0),
            Slip("the small buckets' share", lambda ddp, cap0: overlap_fraction(cap0)),
        ),
        solution="The one bucket is ready at the end of the backward pass: almost nothing of "
        "its allreduce can overlap it.",
        minutes=5,
    ),
    Exercise(
        "10.3",
        data=("buckets", "fusion"),
        recorded=_on("buckets", "fusion"),
        expected=lambda buckets, fusion: cap0_cost(buckets),
        sig_figs=2,
        hints=(
            "Which is larger here: what 7 more allreduces per step cost, or what reducing "
            "during the backward pass hides? Lesson 08 measured Horovod's fusion off.",
            "Per round, divide the cap-0 run's median step by the default run's (they ran back "
            "to back), then take the median over the rounds.",
        ),
        slips=(
            Slip("no cost: the same bytes", lambda buckets, fusion: 1.0),
            Slip(
                "the default over cap 0 (the inverse)",
                lambda buckets, fusion: 1 / cap0_cost(buckets),
            ),
            Slip(
                "Horovod's fusion-off throughput ratio",
                lambda buckets, fusion: float(horovod_fusion(fusion).ratio[0.0]),
            ),
        ),
        solution="The median over the rounds of cap 0's step over the default's step.",
        minutes=8,
    ),
    Exercise(
        "10.4",
        data=("check",),
        recorded=_on("check"),
        expected=_one_practice,
        hints=(
            "Run `workshop check` on the script: which practice says FAIL?",
            "Compare the script's DataLoader with lesson 02's ddp_torch.py: which samples "
            "does each rank see?",
        ),
        slips=(
            Slip("a practice that holds", lambda check: "averaged"),
            Slip("a practice that holds", lambda check: "broadcast"),
            Slip("a warning, not a failure", lambda check: "rank0_checkpoint"),
        ),
        solution="`sharded`: without a DistributedSampler every rank trains on the same "
        "samples in the same order.",
        minutes=10,
    ),
)


def _other_rank(run) -> tuple[float, float, float]:
    compute, saving, share = straggler_answer(run)
    return others_compute_ms(run), saving, share


def _whole_compute(run) -> tuple[float, float, float]:
    compute, saving, share = straggler_answer(run)
    return compute, compute, share * compute / saving


DIAGNOSE = Exercise(
    "10.5",
    data=("straggler",),
    recorded=_on("straggler"),
    expected=straggler_answer,
    rel_tol=0.2,
    hints=(
        "Which rank's own compute per step (`compute_s` in the step files) is longer, step by "
        "step, and by how much?",
        "The rank whose compute is longer in every step is the one the other waits for at the "
        "allreduce: its extra compute per step (its compute minus the other's, median over the "
        "steps) is what its fix saves, and that over the median step is the share.",
    ),
    slips=(
        Slip("the compute of the rank that waits, not of the one it waits for", _other_rank),
        Slip("the slow rank's whole compute as the saving, not its extra", _whole_compute),
    ),
    solution="workshop diagnose's straggler: its median compute per step, its extra compute "
    "per step that the other waits for (the fix's saving), and that share of the step.",
    minutes=8,
)
EXERCISES = (*EXERCISES, DIAGNOSE)


def _finding(name: str, text, data: tuple[str, ...], after: tuple[str, ...] = ()) -> Finding:
    return Finding(f"10.{name}", data, text, after=after)


FINDINGS = (
    _finding("same-model", said.same_model, ("fusion", "ddp")),
    _finding("rank-branch", said.rank_branch, ("check",)),
    _finding("one-bucket", said.one_bucket, ("ddp",), after=("10.2",)),
    _finding("buckets-table", said.buckets_table, ("buckets",), after=("10.3",)),
    _finding("buckets-cost", said.buckets_cost, ("buckets", "fusion"), after=("10.3",)),
    _finding("check-mistake", said.check_report, ("check",), after=("10.4",)),
    _finding("check-fixed", said.check_fixed, ("check",), after=("10.4",)),
    _finding("diagnosis", said.diagnosis, ("straggler",), after=("10.5",)),
)
