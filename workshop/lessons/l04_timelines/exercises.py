"""Lesson 04 (notebooks/04-horovod-timelines.ipynb): its exercises and the findings it states.

The lesson's data, each a Run with a ``timeline.json``: ``run``, the timeline the lesson reads
(the recording :data:`RECORDINGS` names, or the learner's ``RUN_DIR`` or LIVE run);
``recorded``, that recording whatever ``RUN_DIR`` says (the fusion and cycle comparisons are
the same training run); ``fusion0``, ``nocache``, ``marked`` and ``cycle5``, the same run with
fusion off, the response cache off, cycle marks and a 5 ms cycle; ``other``, the comparison run
(``COMPARE``); ``killed``, a run whose ranks got SIGKILL; ``bench``, the cycle-time benchmark.
"""

from __future__ import annotations

from workshop.lessons.entries import Exercise, Finding, Slip
from workshop.lessons.l04_timelines import findings as said
from workshop.lessons.l04_timelines.findings import (
    cycle5_delay_ms,
    delay_choice,
    negotiations,
    response_ratio,
    share,
    ticks_per_rank,
)

#: The recordings the lesson opens by default (its parameters cell names the same).
RECORDINGS = {
    "run": "timelines/tl-torch-gloo-np2",
    "recorded": "timelines/tl-torch-gloo-np2",
    "fusion0": "timelines/tl-torch-gloo-np2-fusion0",
    "nocache": "timelines/tl-torch-gloo-np2-nocache",
    "cycle5": "timelines/tl-torch-gloo-np2-cycle5ms",
}


def _recorded(*names: str) -> dict[str, str]:
    return {name: RECORDINGS[name] for name in names}


EXERCISES = (
    Exercise(
        "04.1",
        data=("run",),
        recorded=_recorded("run"),
        expected=negotiations,
        hints=(
            "Which records open a negotiation, and what are they named?",
            "Count the records that open a span (ph 'B') and whose name starts with NEGOTIATE_.",
        ),
        slips=(Slip("B and E records both counted", lambda run: 2 * negotiations(run)),),
        solution="A negotiation is a span: one 'B' record named NEGOTIATE_<OP> opens it.",
        minutes=8,
    ),
    Exercise(
        "04.2",
        data=("run",),
        recorded=_recorded("run"),
        expected=share,
        sig_figs=2,
        hints=(
            "How do you get one span's duration from B and E records, when spans nest?",
            "Keep a stack of open B records per pid: an E closes the top one. A span named "
            "NEGOTIATE_* is negotiation; a span that closes with nothing left open under it on "
            "its pid is an op.",
        ),
        slips=(
            Slip(
                "negotiation over op time, not over both",
                lambda run: share(run) / (1 - share(run)),
            ),
        ),
        solution="An 'E' closes the latest open 'B' of its pid: one stack per pid gives every "
        "span's length; negotiation over negotiation plus the outermost (op) spans.",
        minutes=15,
    ),
    Exercise(
        "04.3",
        data=("nocache", "run"),
        recorded=_recorded("nocache", "run"),
        expected=lambda nocache, run: ticks_per_rank(nocache),
        rel_tol=0.02,
        hints=(
            "With the cache off, which negotiations take the path that writes ticks?",
            "Every negotiation is then a cache miss, and a miss writes one tick per rank; count "
            "the negotiations of the same training run.",
        ),
        slips=(
            Slip("the cache-on recording's ticks", lambda nocache, run: ticks_per_rank(run)),
            Slip("both ranks' ticks", lambda nocache, run: 2 * ticks_per_rank(nocache)),
        ),
        solution="With the cache off every negotiation takes the uncached path: one tick per "
        "rank each.",
        minutes=4,
    ),
    Exercise(
        "04.4",
        data=("recorded", "fusion0"),
        recorded=_recorded("recorded", "fusion0"),
        expected=response_ratio,
        sig_figs=2,
        hints=(
            "Without fusion, how many tensors can one response carry?",
            "Every tensor operation becomes a response of its own: compare that count with the "
            "responses made with fusion.",
        ),
        slips=(
            Slip(
                "responses with fusion over without: upside down",
                lambda recorded, fusion0: 1 / response_ratio(recorded, fusion0),
            ),
        ),
        solution="The same tensor operations, one per response: the ratio is operations over "
        "responses, the mean number of tensors per fused response.",
        minutes=4,
    ),
    Exercise(
        "04.5",
        data=("recorded", "cycle5"),
        recorded=_recorded("recorded", "cycle5"),
        expected=lambda recorded, cycle5: delay_choice(cycle5_delay_ms(recorded, cycle5)),
        behind=cycle5_delay_ms,
        hints=(
            "When does the timeline first see a gradient: when the framework hands it over, or "
            "when a cycle of the background thread starts?",
            "A negotiation opens in the first cycle in which some rank has the gradient. Compare "
            "how long this model's backward pass lasts (the last gradient is seen soon after the "
            "first, above) with a 5 ms cycle: what has arrived by the time the cycle wakes?",
        ),
        slips=(
            Slip(
                "the 4 ms of a longer cycle added to the wait",
                lambda recorded, cycle5: delay_choice(5 - 1),
            ),
            Slip(
                "the range above",
                lambda recorded, cycle5: chr(
                    ord(delay_choice(cycle5_delay_ms(recorded, cycle5))) + 1
                ),
            ),
        ),
        solution="The timeline sees a gradient only when a cycle starts: where a backward pass "
        "fits in one cycle's sleep, the waking cycle finds every gradient of both ranks and "
        "reduces them at once, so the wait lies before the first gradient is seen.",
        minutes=5,
    ),
)


FINDINGS = (
    Finding("04.beginning", ("run",), said.beginning),
    Finding("04.one-time", ("run",), said.one_time),
    Finding("04.backends", ("run", "other"), said.backends),
    Finding("04.ticked", ("run",), said.ticked),
    Finding("04.late", ("nocache",), said.late),
    Finding("04.groups", ("run",), said.groups),
    Finding("04.fusion", ("recorded", "fusion0"), said.fusion, after=("04.4",)),
    Finding("04.shares", ("run",), said.shares, after=("04.1", "04.2")),
    Finding(
        "04.side-by-side", ("run", "other"), said.side_by_side, after=("04.1", "04.2", "04.4")
    ),
    Finding("04.overlap", ("marked",), said.overlap),
    Finding("04.overlap-median", ("marked",), said.overlap_median),
    Finding("04.cycle1", ("recorded", "marked"), said.cycle1),
    Finding("04.cycle5", ("recorded", "cycle5", "fusion0"), said.cycle5, after=("04.5",)),
    Finding("04.cycle-bench", ("bench",), said.cycle_bench),
    Finding("04.killed", ("killed",), said.killed),
    Finding(
        "04.summary-answers",
        ("run", "nocache", "recorded", "fusion0"),
        said.summary_answers,
        after=("04.1", "04.3", "04.4"),
    ),
)
