"""Lesson 01 (notebooks/01-data-vs-model-parallelism.ipynb): its exercises and the findings it
states.

The exercises are about models, not recordings: 01.1-01.3 take no data (the pipeline's idle
share and the ring / parameter-server cost model of :mod:`workshop.analysis.parallelism`);
01.4 and 01.5 ask what Horovod's collectives return on the lesson's :data:`RANKS` live ranks,
each holding :func:`tensor` (the lesson's ``%%px`` cell builds the same; its worked solutions
read the live ranks' results, so a collective that returned something else fails them). The
findings take the demos' results and tables the lesson has open.
"""

from __future__ import annotations

from workshop.analysis.parallelism import exchange_costs, pipeline_bubble_fraction
from workshop.lessons.entries import Exercise, Finding, Slip
from workshop.lessons.l01_parallelism import findings as said

#: Exercise 01.1: stages of the pipeline and the idle share asked for.
STAGES, IDLE_AT_MOST = 4, 0.10
#: Exercises 01.2 and 01.3: the server's link against a ring worker, and the workers of 01.3.
TRAFFIC_X, N_WORKERS = 10, 8
#: Exercises 01.4 and 01.5: the live ranks, and the rank the broadcast sends from.
RANKS, ROOT = 2, 1


def tensor(rank: int) -> list[float]:
    """The tensor ``t`` that rank ``rank`` holds in the lesson's collectives."""
    return [3.25 + rank, 40.0 + 13 * rank]


def fewest_microbatches() -> int:
    """01.1: the fewest micro-batches that leave each of 4 stages idle at most 10 %."""
    return next(
        m for m in range(1, 10_000) if pipeline_bubble_fraction(STAGES, m) <= IDLE_AT_MOST + 1e-12
    )


def fewest_workers_for_traffic() -> int:
    """01.2: the smallest N at which one server's link carries 10x a ring worker's bytes."""
    costs = exchange_costs(list(range(2, 200)), [1e8])  # the ratio does not depend on bytes
    ratio = costs.ps_bytes_server_link / costs.ring_bytes_per_worker
    return int(costs.loc[ratio >= TRAFFIC_X, "n_workers"].min())


def ring_over_server_8_bytes() -> float:
    """01.3: ring time over one parameter server's for one 8-byte message, N_WORKERS."""
    row = exchange_costs([N_WORKERS], [8]).iloc[0]
    return float(row.ring_s / row.ps_s)


def _average(rank: int, element: int) -> float:
    return sum(tensor(r)[element] for r in range(RANKS)) / RANKS


EXERCISES = (
    Exercise(
        "01.1",
        data=(),
        recorded={},
        expected=fewest_microbatches,
        hints=(
            "What happens to the idle share as M grows, and which inequality must M satisfy?",
            "Write the idle share of 4 stages as a function of M, require it to be at most "
            "0.10 and solve for the smallest whole M",
        ),
        slips=(
            Slip("off by one: the last M still above 10 %", lambda: fewest_microbatches() - 1),
            Slip(
                "(S-1)/M: the S - 1 forgotten below the line",
                lambda: round((STAGES - 1) / IDLE_AT_MOST),
            ),
        ),
        solution="(S-1)/(M+S-1) <= 0.1 with S = 4 is 3 <= 0.1 (M + 3): M >= 27.",
        minutes=5,
    ),
    Exercise(
        "01.2",
        data=(),
        recorded={},
        expected=fewest_workers_for_traffic,
        hints=(
            "How do the server link's bytes and a ring worker's bytes each grow with N?",
            "The server link carries N x bytes, a ring worker sends 2 (N-1)/N x bytes: find the "
            "smallest whole N whose ratio reaches ten",
        ),
        slips=(
            Slip("off by one: the last N below ten", lambda: fewest_workers_for_traffic() - 1),
            Slip("N/2 = 10: the ratio taken as N/2", lambda: 2 * TRAFFIC_X),
        ),
        solution="The ratio is N^2 / (2 (N-1)), about N/2 + 1/2: the first whole N where it "
        "reaches 10.",
        minutes=6,
    ),
    Exercise(
        "01.3",
        data=(),
        recorded={},
        expected=ring_over_server_8_bytes,
        sig_figs=2,
        hints=(
            "For 8 bytes, which terms of the two formulas still matter?",
            "The bandwidth terms are below a nanosecond: count the latencies alpha each one pays",
        ),
        slips=(
            Slip("the ring charged 2N latencies, not 2 (N-1)", lambda: float(N_WORKERS)),
            Slip(
                "server over ring: the ratio upside down", lambda: 1 / ring_over_server_8_bytes()
            ),
        ),
        solution="For 8 bytes only the latencies count: the ring pays 2 (N-1) of them, the "
        "server 2.",
        minutes=5,
    ),
    Exercise(
        "01.4",
        data=(),
        recorded={},
        expected=lambda: _average(ROOT, 1),
        rel_tol=1e-6,
        hints=(
            "Does a rank keep its own tensor after an allreduce, or get something computed "
            "from every rank's tensor?",
            "The average over the ranks (the question names it), the same result on every "
            "rank: add the ranks' second elements and divide by the number of ranks",
        ),
        slips=(
            Slip("the sum (op=Sum), not the average", lambda: RANKS * _average(ROOT, 1)),
            Slip("rank 1's own element, as if nothing was reduced", lambda: tensor(1)[1]),
        ),
        solution="The default op is Average: the ranks' second elements summed, over their "
        "number.",
        minutes=3,
    ),
    Exercise(
        "01.5",
        data=(),
        recorded={},
        expected=lambda: sum(tensor(ROOT)),
        rel_tol=1e-6,
        hints=(
            "Whose tensor does every rank hold after a broadcast from a root rank?",
            "After the broadcast every rank holds the root's tensor, whatever it held before",
        ),
        slips=(
            Slip("rank 0's own tensor, as if nothing was sent", lambda: sum(tensor(0))),
            Slip(
                "every rank's tensor added up",
                lambda: sum(sum(tensor(r)) for r in range(RANKS)),
            ),
        ),
        solution="Every rank ends with the root's tensor: rank 1's t.",
        minutes=3,
    ),
)


FINDINGS = (
    Finding("01.same-dp", ("single", "dp"), lambda s, d: said.same_update(s, d, "data parallel")),
    Finding("01.same-mp", ("single", "mp"), lambda s, m: said.same_update(s, m, "model parallel")),
    Finding("01.idle", ("result", "stages", "microbatches"), said.idle_shares),
    Finding("01.dp-speed", ("steps", "single", "dp", "threads", "np"), said.data_parallel_speed),
    Finding("01.mp-speed", ("single", "mp", "stages"), said.model_parallel_speed),
    Finding("01.counts", ("estimates",), said.published_counts),
    Finding("01.fits", ("fit", "gpu"), said.fits),
    Finding("01.balance", ("balance", "n_workers"), said.compute_per_communication),
    Finding("01.traffic", ("costs", "n_workers", "bytes"), said.traffic),
    Finding(
        "01.exchange",
        ("costs", "n_workers", "bytes"),
        said.exchange_times,
        after=("01.3",),
    ),
    Finding("01.collectives", ("rows",), said.collectives, after=("01.4", "01.5")),
    Finding(
        "01.summary",
        ("single", "dp", "mp", "mpm", "stages", "microbatches"),
        said.summary,
    ),
)
