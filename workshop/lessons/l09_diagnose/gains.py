"""Lesson 09's fixes against their broken runs: each case's interleaved repeats (one broken and
one fixed run per round), the gain of the fix per round and over the rounds, beside the noise
(:func:`workshop.analysis.benchmarks.paired_ratios`, broken as the baseline).
"""

from __future__ import annotations

import pandas as pd

from workshop.analysis.benchmarks import RUN_MEASURES, paired_ratios, round_ratios
from workshop.lessons.l09_diagnose.capstone import Case
from workshop.readers.runs import read_metrics

__all__ = ["gain_summary", "gains", "repeat_runs"]


def repeat_runs(case: Case) -> pd.DataFrame:
    """The repeats of a case, one row per run: ``round``, ``variant`` (broken / fixed),
    ``seed``, ``position`` (1: first of its round), and the case's measure (``samples_per_s``
    or ``test_accuracy``, :data:`workshop.analysis.benchmarks.RUN_MEASURES`, named by
    ``attrs["measure"]``)."""
    measure = case.provenance["injected"]["measure"]
    rows, position = [], {}
    for run in case.provenance["runs"]:
        if not run["name"].startswith("repeats/"):
            continue
        repeat = int(run["name"].rsplit("-", 1)[1])
        position[repeat] = position.get(repeat, 0) + 1
        rows.append(
            {
                "round": repeat,
                "variant": run["variant"],
                "seed": run["seed"],
                "position": position[repeat],
                measure: RUN_MEASURES[measure](read_metrics(case.folder / run["name"])),
            }
        )
    table = pd.DataFrame(rows)
    table.attrs["measure"] = measure
    return table


def gains(case: Case) -> pd.DataFrame:
    """Broken against fixed per round of repeats
    (:func:`workshop.analysis.benchmarks.round_ratios`).

    Returns:
        One row per round: ``round``, ``seed``, ``broken``, ``fixed`` (the case's measure),
        ``gain`` (fixed / broken); ``attrs["measure"]`` names the measure.
    """
    runs = repeat_runs(case)
    measure = runs.attrs["measure"]
    runs["gain"] = round_ratios(runs, "variant", measure, "broken")
    broken, fixed = (runs[runs["variant"] == v].set_index("round") for v in ("broken", "fixed"))
    table = pd.DataFrame(
        {"seed": fixed["seed"], "broken": broken[measure], "fixed": fixed[measure],
         "gain": fixed["gain"]}
    ).sort_index().reset_index()  # fmt: skip
    table.attrs["measure"] = measure
    return table


def gain_summary(case: Case) -> dict[str, object]:
    """The gain of a case's fix over its rounds, against the noise
    (:func:`workshop.analysis.benchmarks.paired_ratios`, broken as the baseline).

    Returns:
        ``measure``; ``rounds``; ``min``, ``median``, ``max`` of the per-round gain (fixed /
        broken); ``verdict``: ``"fixed ahead in every round"``, ``"fixed behind in every
        round"`` or ``"within the noise"`` (rounds on both sides of 1); ``noise``: the
        broken runs' own spread over the rounds (largest / smallest); ``single_run_gain``:
        the two diagnosis runs' fixed / broken (one run each).
    """
    runs = repeat_runs(case)
    measure = runs.attrs["measure"]
    table = paired_ratios(runs, "variant", measure, "broken").set_index("variant")
    broken, fixed = table.loc["broken"], table.loc["fixed"]
    of = RUN_MEASURES[measure]
    # paired_ratios' verdict on the fixed runs, in the capstone's words
    verdict = fixed["verdict"].replace("higher", "fixed ahead").replace("lower", "fixed behind")
    single = of(read_metrics(case.fixed)) / of(read_metrics(case.broken))
    return {
        "measure": measure,
        "rounds": int(fixed["rounds"]),
        "min": float(fixed["ratio_min"]),
        "median": float(fixed["ratio_median"]),
        "max": float(fixed["ratio_max"]),
        "verdict": verdict,
        "noise": float(broken["max"] / broken["min"]),
        "single_run_gain": float(single),
    }
