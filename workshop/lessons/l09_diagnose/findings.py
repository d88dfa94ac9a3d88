"""The findings lesson 09 (notebooks/09-diagnose-a-run.ipynb) states, in sentences with their
numbers: each function takes the lesson's runs (each case's broken run, whose folder is the
case's) and returns Markdown. The registry (:mod:`workshop.lessons.l09_diagnose.exercises`) says
which give an answer away.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import pandas as pd

from workshop.analysis.benchmarks import ranges_overlap
from workshop.findings.diagnose import diagnose_run, diagnose_text
from workshop.lessons.l09_diagnose import capstone
from workshop.lessons.l09_diagnose import gains as repeats
from workshop.readers.runs import open_run
from workshop.readers.timeline import TimelineWarning


def _case(broken) -> capstone.Case:
    path = Path(getattr(broken, "path", broken))
    return capstone.load(path.parent.name, path.parent.parent)


def _block(text: str) -> str:
    return "```text\n" + text.rstrip() + "\n```"


def diagnosis(broken) -> str:
    case = _case(broken)
    return f"What `workshop diagnose` says about {case.name}'s broken run:\n\n" + _block(
        diagnose_text(case.broken)
    )


def injected(*broken) -> str:
    rows = [
        "| case | problem | what was done | fix | measure |",
        "| --- | --- | --- | --- | --- |",
    ]
    for case in map(_case, broken):
        i = case.provenance["injected"]
        rows.append(
            f"| {case.name} | {i['problem']} | {i['title']} | {i['fix']} | {i['measure']} |"
        )
    return "What was done to each case's broken run (its `provenance.json`):\n\n" + "\n".join(rows)


def compute_ratio_table(*broken) -> pd.DataFrame:
    """Each case's compute ratio (menu problem c) on its broken and fixed run."""
    return pd.DataFrame(
        {
            case.name: {
                v: capstone.evidence_number("c", getattr(case, v)) for v in ("broken", "fixed")
            }
            for case in map(_case, broken)
        }
    ).T


def compute_ratios(*broken) -> str:
    table = compute_ratio_table(*broken)
    healthy = capstone.healthy_reference().loc["c"]
    rows = [f"| {name} | {r.broken:.2f} | {r.fixed:.2f} |" for name, r in table.iterrows()]
    straggler = table.broken.idxmax()
    return (
        "The straggler's number, the compute ratio, on every diagnosis run:\n\n"
        "| case | broken | fixed |\n| --- | ---: | ---: |\n" + "\n".join(rows) + "\n\n"
        f"Only {straggler}'s broken run lies outside the healthy calibration runs' range "
        f"({healthy['min']:.2f} to {healthy['max']:.2f} over {int(healthy['runs'])} runs); its "
        f"fixed run, without the busy processes, is back at {table.fixed[straggler]:.2f}."
        if table.broken.drop(straggler).max() <= healthy["max"] < table.broken[straggler]
        else "The straggler's number, the compute ratio, on every diagnosis run:\n\n"
        "| case | broken | fixed |\n| --- | ---: | ---: |\n" + "\n".join(rows) + "\n\n"
        f"The healthy calibration runs range from {healthy['min']:.2f} to {healthy['max']:.2f}."
    )


def tick_lateness() -> str:
    late = capstone.tick_lateness()
    healthy, straggler = late.loc["healthy"], late.loc["straggler"]
    apart = not ranges_overlap(straggler["min"], straggler["max"], healthy["min"], healthy["max"])
    return (
        f"The latest rank's lateness in whole cycles, on the straggler benchmark's runs with the "
        f"response cache off: healthy runs {healthy['min']:.2f} to {healthy['max']:.2f} "
        f"(median {healthy['median']:.2f}, {int(healthy['runs'])} runs), stragglers "
        f"{straggler['min']:.2f} to {straggler['max']:.2f} (median {straggler['median']:.2f}, "
        f"{int(straggler['runs'])} runs): "
        + (
            "the ranges are apart."
            if apart
            else "the medians differ, but the ranges overlap, so the lateness is no finding by "
            "itself."
        )
    )


def gain_table(*broken) -> pd.DataFrame:
    return pd.DataFrame({case.name: repeats.gain_summary(case) for case in map(_case, broken)}).T


def gains(*broken) -> str:
    lines = []
    for name, row in gain_table(*broken).iterrows():
        size = "larger" if abs(row["median"] - 1) > row["noise"] - 1 else "smaller"
        lines.append(
            f"- {name} ({row['measure']}): fixed / broken **{row['median']:.2f}x** over "
            f"{row['rounds']} rounds ({row['min']:.2f} to {row['max']:.2f}, {row['verdict']}); "
            f"the broken runs alone vary {row['noise']:.2f}x, so the gain is {size} than that "
            f"noise. The single diagnosis pair said {row['single_run_gain']:.2f}x."
        )
    return "\n".join(lines)


#: The menu's problems in ``workshop diagnose``'s words (its problem ids).
DIAGNOSIS_OF = {
    "a": "input_pipeline",
    "b": "fusion_off",
    "c": "straggler",
    "d": "long_cycle_time",
    "e": "lr_not_scaled",
    "f": "oversubscribed",
}


def prediction_table(*broken) -> pd.DataFrame:
    """What ``workshop diagnose`` predicts each case's fix saves, beside what it gained.

    Returns:
        One row per case: ``problem`` (diagnose's id), ``step_ms`` (the broken run's median
        step), ``predicted_ms`` (its cost of that problem: the time per step the fix saves)
        and ``uncertainty_ms``, ``fixed_step_ms`` (the fixed run's median step),
        ``measured_ms`` (broken step - fixed step), ``predicted_gain`` (broken step / the
        step less the saving), ``measured_gain`` (the repeats' median throughput gain).
        NaN for a problem that costs accuracy, not time.
    """
    from workshop.analysis.diagnose.costs import step_ms

    rows = {}
    for case in map(_case, broken):
        problem = DIAGNOSIS_OF[capstone.answer_key(case).problem]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TimelineWarning)
            result = diagnose_run(case.broken)
        cost = next(c for c in result["costs"] if c["problem"] == problem)
        step, fixed = result["step_ms"], step_ms(open_run(case.fixed).steps)
        gain = repeats.gain_summary(case)
        rows[case.name] = {
            "problem": problem,
            "step_ms": step,
            "predicted_ms": cost["saving_ms"],
            "uncertainty_ms": cost["uncertainty_ms"],
            "fixed_step_ms": fixed,
            "measured_ms": step - fixed,
            "predicted_gain": step / (step - cost["saving_ms"]),
            "measured_gain": gain["median"] if gain["measure"] == "samples_per_s" else math.nan,
        }
    return pd.DataFrame(rows).T.rename_axis("case")


def predictions(*broken) -> str:
    """The prediction table in sentences, one per case."""
    lines = []
    for name, r in prediction_table(*broken).iterrows():
        if pd.isna(r["predicted_ms"]):
            lines.append(
                f"- {name} ({r['problem']}): costs accuracy, not time; no time to predict."
            )
            continue
        lines.append(
            f"- {name} ({r['problem']}): predicted from the broken run alone, the fix saves "
            f"**{r['predicted_ms']:.1f} ms** ± {r['uncertainty_ms']:.1f} of its "
            f"{r['step_ms']:.1f} ms step ({r['predicted_gain']:.2f}x the throughput); the fixed "
            f"run's step is {r['fixed_step_ms']:.1f} ms, **{r['measured_ms']:.1f} ms** shorter, "
            f"and the repeats gained {r['measured_gain']:.2f}x (median of the rounds)."
        )
    return "\n".join(lines)


def summary(*broken) -> str:
    lines = []
    for case in map(_case, broken):
        key = capstone.answer_key(case)
        problem = capstone.PROBLEMS[key.problem]
        lines.append(
            f"- {case.name}: {problem.title}; evidence {key.evidence:.3g} ({problem.evidence}); "
            f"fix: {capstone.MENU_FIXES[key.fix]}."
        )
    return "\n".join(lines)


#: The recorded run of a learner's script that lesson 09 diagnoses by default (its
#: parameters' SCRIPT_RUN): ``workshop run --script`` of a script whose ranks end unevenly.
SCRIPT_RECORDING = "scripts/uneven-join"


def own_run(run) -> str:
    """``workshop diagnose`` on a run of a learner's script (a Run, a run directory or a
    recording's name); while the recording is not in ``data/`` yet, a sentence saying so."""
    try:
        run = open_run(run)
    except FileNotFoundError:
        return (
            f"The recorded run of a learner's script (`{run}`) is not in this copy of `data/` "
            "yet: record one with `workshop run --script FILE -np 2 --timeline --mark-cycles`, "
            "or set `RUN_DIR` to a run directory of yours."
        )
    config = run.config
    script = Path(str(config.get("script") or "(not a script run)")).name
    args = config.get("script_args") or ""
    command = " ".join([script, *(args if isinstance(args, list) else [args])]).strip()
    with warnings.catch_warnings():
        # a script's timeline may start or stop with tensors in flight (hvd.join's zeros): the
        # reader's note on it is not the lesson's
        warnings.simplefilter("ignore", TimelineWarning)
        text = diagnose_text(run.path)
    return (
        f"`workshop diagnose` on `{run.name}`, a run of `{command}` on {run.np} ranks:\n\n"
        + _block(text)
    )


#: Command-line options and Horovod variables in a cell: set as code, so that a reader sees
#: them as typed (the book's typography would make "--" an en dash).
_CODE = re.compile(r"(--[a-z][\w-]*(?: [a-z0-9.]+\b)?|HOROVOD_[A-Z_]+(?:=\w+)?)")


def _markdown(frame: pd.DataFrame) -> str:
    def cell(value) -> str:
        return _CODE.sub(r"`\1`", str(value))

    head = "| " + " | ".join([frame.index.name or "", *map(str, frame.columns)]) + " |"
    rule = "| " + " | ".join("---" for _ in range(len(frame.columns) + 1)) + " |"
    rows = ["| " + " | ".join([str(i), *map(cell, row)]) + " |" for i, row in frame.iterrows()]
    return "\n".join([head, rule, *rows])


def menu() -> str:
    problems, fixes = capstone.menu()
    return (
        "**Problems**\n\n" + _markdown(problems) + "\n\n**Fixes**\n\n" + _markdown(fixes) + "\n\n"
        f"Give the evidence number to {capstone.SIG_FIGS} significant figures, as each "
        "exercise asks: it counts as right within half a unit of the last of them from the "
        "value measured on the broken run (so a count must be exact)."
    )


def overview(*broken) -> str:
    from workshop.analysis.benchmarks import final_test_accuracy, steady_samples_per_s

    rows = {}
    for run in broken:
        case = _case(run)
        metrics = run.metrics
        rows[case.name] = {
            "samples/s after epoch 1": f"{steady_samples_per_s(metrics):.0f}",
            "test accuracy": f"{final_test_accuracy(metrics):.3f}",
            "global batch": run.summary["global_batch_size"],
        }
    frame = pd.DataFrame(rows).T.rename_axis("case")
    return "The four broken runs at a glance:\n\n" + _markdown(frame)
