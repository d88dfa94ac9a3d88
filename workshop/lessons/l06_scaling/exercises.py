"""Lesson 06 (notebooks/06-scaling-experiments.ipynb): its exercises and the findings it states.

The lesson's data: ``seeds``, the folder of the sources' tables and logs (the Horovod lab
report's ``004-*.tsv``, the ALCF timeline tutorial's ``000-pytorch_cifar10.out.*``); ``cpu``
and ``net``, sweeps recorded in rounds (compute-bound on 2 cores; 1 + 1 ranks across
100 Mbit/s); ``sweep``, our np 1 / 2 sweep (or the learner's); ``timed``, runs with timelines
for the ring model; ``overhead``, the one-worker benchmark; ``allreduce`` and ``placed``, the
emulated cluster's measurements.
"""

from __future__ import annotations

import math

from workshop import analysis
from workshop.lessons.entries import Exercise, Finding, Slip
from workshop.lessons.l06_scaling import findings as said

#: The recordings the lesson opens by default (its parameters cell names the same).
RECORDINGS = {
    "seeds": "seeds",
    "cpu": "sweeps/scaling-cpu",
    "net": "cluster/scaling-100mbit",
    "sweep": "sweeps/scaling-mnist",
    "timed": "sweeps/fusion-tuning-mnist",
    "overhead": "benchmarks/horovod-overhead",
    "allreduce": "cluster/allreduce",
    "placed": "cluster/mnist-placement",
}


def _efficiency(seeds) -> float:
    return float(said.lab_report(seeds)[1].efficiency_train.iloc[-1])


def _speedup(seeds) -> float:
    return float(said.lab_report(seeds)[1].speedup_train.iloc[-1])


def _gpus(seeds) -> int:
    return int(said.lab_report(seeds)[1].np.iloc[-1])


def _unsplit_ms(timed) -> float:
    """k allreduces of all m bytes each: the m bytes not split over the k allreduces."""
    model = said.comm_model(timed)
    fit, inputs = model["fit"], model["inputs"]
    n, k, m = inputs["np_run"], inputs["allreduces_per_step"], inputs["bytes_per_step"]
    alpha_s, bandwidth = 1e-6 * fit["alpha_us"], fit["bandwidth_bytes_per_s"]
    return 1e3 * k * (2 * (n - 1) * alpha_s + 2 * (n - 1) / n * m / bandwidth)


EXERCISES = (
    Exercise(
        "06.1",
        data=("seeds",),
        recorded={"seeds": RECORDINGS["seeds"]},
        expected=_efficiency,
        sig_figs=2,
        minutes=8,
        hints=(
            "Which is larger, the time on 1 GPU or on 32? Which way round is the speedup of a "
            "time, and how does an efficiency follow from a speedup?",
            "Speedup of a time: the 1-GPU time over the 32-GPU time; efficiency: that speedup "
            "over the number of GPUs.",
        ),
        slips=(
            Slip("the speedup, not divided by N", _speedup),
            Slip("the time ratio upside down", lambda seeds: 1 / _speedup(seeds) / _gpus(seeds)),
        ),
        solution="Speedup of a time is T(1) / T(N); the efficiency divides it by N.",
    ),
    Exercise(
        "06.2",
        data=("seeds",),
        recorded={"seeds": RECORDINGS["seeds"]},
        expected=said.three_ways,
        decimals=2,
        minutes=15,
        hints=(
            "For each log, what do you add up, and which of the two logs' totals goes on top "
            "of the fraction?",
            "Pull the two numbers out of each line (a regular expression with two groups); sum "
            "per log; speedup = the 1-GPU total / the 4-GPU total, once per way of timing.",
        ),
        slips=(
            Slip("the first way three times", lambda seeds: (said.three_ways(seeds)[0],) * 3),
            Slip(
                "4-GPU over 1-GPU time: upside down",
                lambda seeds: tuple(1 / x for x in said.three_ways(seeds)),
            ),
        ),
        solution="For each way of timing, the 1-GPU total over the 4-GPU total.",
    ),
    Exercise(
        "06.3",
        data=("seeds",),
        recorded={"seeds": RECORDINGS["seeds"]},
        expected=said.half_efficiency_workers,
        minutes=6,
        hints=(
            "What is Amdahl's efficiency S(N) / N as a function of N and f?",
            "Write the efficiency with Amdahl's S(N), set it equal to one half, solve for N, "
            "and take the next whole number.",
        ),
        slips=(
            Slip(
                "N > 1/f instead of N > 1 + 1/f: one worker too few",
                lambda seeds: math.floor(1 / said.amdahl(seeds)["serial_fraction"]) + 1,
            ),
        ),
        solution="E(N) = 1 / (f N + 1 - f) falls below 1/2 where N > 1 + 1/f.",
    ),
    Exercise(
        "06.4",
        data=("timed",),
        recorded={"timed": RECORDINGS["timed"]},
        expected=said.model_comm_ms,
        sig_figs=2,
        minutes=10,
        hints=(
            "How many allreduces does a step make, and what does the ring formula charge for "
            "one of them?",
            "Per step: k times t(N, m / k) with the section's formula; alpha is given in "
            "microseconds and B in MB/s: convert both to seconds and bytes.",
        ),
        # (With the recorded fit's alpha at its bound 0, "k latencies forgotten" gives the
        # answer itself: no slip a tolerance could reject.)
        slips=(
            Slip("the m bytes not split: k allreduces of m bytes each", _unsplit_ms),
            Slip("seconds, not ms", lambda timed: said.model_comm_ms(timed) / 1e3),
        ),
        solution="k allreduces of m / k bytes, each 2(N-1) latencies and 2(N-1)/N of its "
        "bytes over B.",
    ),
)


FINDINGS = (
    Finding("06.lab-speedups", ("seeds",), said.lab_speedups, after=("06.1",)),
    Finding("06.init-cost", ("seeds",), said.init_cost),
    Finding("06.first-epoch", ("seeds",), said.first_epoch),
    Finding("06.first-epoch-speedups", ("seeds",), said.first_epoch_speedups, after=("06.2",)),
    Finding("06.amdahl", ("seeds",), said.amdahl_fit),
    Finding("06.amdahl-check", ("seeds",), said.amdahl_check, after=("06.1", "06.3")),
    Finding("06.cpu-sweep", ("cpu",), said.cpu_sweep),
    Finding("06.net-sweep", ("net", "cpu"), said.net_sweep),
    Finding("06.our-sweep", ("sweep",), said.our_sweep),
    Finding("06.start-up", ("sweep", "seeds"), said.start_up),
    Finding("06.sync", ("sweep",), said.sync_cost),
    Finding("06.summary", ("cpu", "net"), said.summary),
    Finding("06.summary-answers", ("seeds",), said.summary_answers, after=("06.1",)),
    Finding("06.comm-fit", ("timed",), said.comm_fit),
    Finding("06.prediction", ("timed",), said.prediction, after=("06.4",)),
    Finding("06.one-worker", ("overhead",), said.one_worker_cost),
    Finding("06.cluster-link", ("allreduce",), said.cluster_link),
    Finding("06.hierarchical", ("allreduce",), said.hierarchical),
    Finding("06.placement", ("placed",), said.placement),
    Finding("06.net-model", ("net", "allreduce"), said.net_model),
)


def numbers(seeds, cpu, net, sweep, timed, overhead, allreduce) -> dict:
    """The values the lesson's replay keeps (data/expected/06-scaling-experiments.json)."""
    table004 = said.lab_report(seeds)[1]
    top = table004.iloc[-1]
    fit = said.amdahl(seeds)
    worst = analysis.first_epoch_overhead(said.alcf_epochs(seeds))
    worst = worst.loc[worst.overhead_share.idxmax()]
    three = said.three_ways(seeds)
    group, _ = said.scaling_group(sweep)
    most = int(group.np.max())
    ours = analysis.speedup_table(group).set_index("np")
    sync = analysis.sync_overhead(group).set_index("np").loc[most]
    model = said.comm_model(timed)
    at_run = said._at_run(timed)
    by_kind = said._overhead(overhead)
    plain, two = by_kind.loc["plain"], by_kind.loc["hvd-np2"]
    cpu_hvd, cpu_two = said._row(cpu, "Horovod np=2"), said._row(cpu, "2 independent processes")
    net_hvd = said._row(net, "Horovod np=2")
    net_check = said.net_check(net, allreduce)
    values = {
        "seed004_throughput_speedup": top.speedup_throughput,
        "seed004_reported_throughput_speedup": top.speedup_reported_throughput,
        "seed004_train_speedup": top.speedup_train,
        "seed004_train_efficiency": top.efficiency_train,
        "seed004_wall_speedup": top.speedup_wall,
        "seed004_amdahl_f_train": fit["serial_fraction"],
        "amdahl_speedup_4": analysis.amdahl_speedup(4, fit["serial_fraction"]),
        "amdahl_half_efficiency_workers": said.half_efficiency_workers(seeds),
        "seed000_first_epoch_s": worst.first_epoch_s,
        "seed000_train_speedup_with_first": three[0],
        "seed000_train_speedup_without_first": three[1],
        "seed000_train_test_speedup": three[2],
        "ours_np": most,
        "ours_speedup_throughput": ours.speedup_throughput[most],
        "ours_sync_ms": sync.sync_time_per_step_ms,
        "comm_alpha_us": model["fit"]["alpha_us"],
        "comm_r2": model["fit"]["r2"],
        "model_comm_ms_run": said.model_comm_ms(timed),
        "model_speedup": at_run.speedup_predicted,
        "measured_speedup": at_run.speedup_measured,
        "model_unexplained_ms": 1e3 * model["inputs"]["unexplained_s"],
        "overhead_rounds": int(plain.rounds),
        "horovod_np1_overhead_median": plain.ratio_median - 1,
        "horovod_np1_overhead_min": plain.ratio_min - 1,
        "horovod_np1_overhead_max": plain.ratio_max - 1,
        "horovod_np1_overhead_verdict": plain.verdict,
        "horovod_np2_over_np1_median": two.ratio_median,
        "net_ring_comm_ms": net_check.comm_model_ms.median(),
        "net_ring_predicted_median": net_check.speedup_predicted.median(),
        "net_ring_measured_median": net_check.speedup_measured.median(),
    }
    for prefix, row in (("cpu", cpu_hvd), ("net", net_hvd)):
        values |= {
            f"{prefix}_rounds": int(row.rounds),
            f"{prefix}_speedup_min": row.speedup_min,
            f"{prefix}_speedup_median": row.speedup_median,
            f"{prefix}_speedup_max": row.speedup_max,
            f"{prefix}_verdict": row.verdict,
        }
    values |= {f"cpu_raw_speedup_{s}": cpu_two[f"speedup_{s}"] for s in ("min", "median", "max")}
    return values
