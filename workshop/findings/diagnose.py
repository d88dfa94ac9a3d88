"""``workshop diagnose`` in words: each problem's cost (the time per step its fix would save,
from the run's own evidence), the largest first, with its fix; what could not be measured and
what would measure it. The decisions are :func:`workshop.analysis.diagnose.verdict.judge`'s;
this module only words them.

:func:`diagnose` returns the JSON of ``workshop diagnose --json``: the verdict's fields
(``healthy``, ``step_ms``, ``costs``, ``not_measured``, ``settings``, ``min_share``) with
``findings`` as objects (``problem``, ``saving_ms``, ``share``, ``rank``, ``evidence``,
``fix``), ``notes`` and ``calibration`` (where the noise comes from); :func:`diagnose_lines`
the text.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from workshop.analysis.diagnose.costs import step_ms
from workshop.analysis.diagnose.verdict import calibrate, costs, judge
from workshop.analysis.failure import attribute
from workshop.findings.failure import failure_fix, failure_lines
from workshop.findings.problems import MISSING_HOW, PROBLEM_FIXES, TITLES
from workshop.runspec import style_of_framework

if TYPE_CHECKING:
    from workshop.readers.runs import Run
    from workshop.readers.timeline import Timeline

__all__ = [
    "PROBLEM_FIXES",
    "TITLES",
    "diagnose",
    "diagnose_lines",
    "diagnose_run",
    "diagnose_text",
    "explain",
    "noise_for",
    "verdict_line",
]


def _ms(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g} ms"


def explain(row: dict, step: float) -> str:
    """One sentence a learner can follow: how the cost of ``row`` (a ``judge`` cost) was
    estimated from the run's own numbers."""
    n, p = row["numbers"], row["problem"]
    if not row["measured"]:
        return f"not measured: needs {row['missing']}"
    saving = _ms(row["saving_ms"])
    if p == "straggler":
        text = (
            f"rank {row['rank']} computes {_ms(n['extra_compute_ms'])} more per step than the "
            f"others (median over {n['steps']} steps, step by step)"
        )
        if "others_wait_ms" in n:
            text += f", and the others wait {_ms(n['others_wait_ms'])} per step at the allreduce"
        if n.get("cause") == "other_work":
            text += (
                f"; it waited {_ms(n['extra_cpu_wait_ms'])} more for a CPU, which other work "
                f"({n['other_work_cores']:.2g} cores beside the ranks) took: other work on "
                "its core"
            )
        elif n.get("cause") == "own_threads":
            text += (
                f"; {_ms(max(n['extra_cpu_wait_ms'], 0))} of it was waiting for a CPU that the "
                "run's own threads took (no other work ran to take it), which no fix to one rank "
                "removes and is left out"
            )
        else:
            text += "; the ranks' CPU wait is not recorded, so its cause is not measured"
        text += f": giving it the others' speed saves {saving} per step"
        if n.get("cause") == "other_work" and "at_most_ms" in n:
            # its own wait is the allreduce itself, which the shared core may slow as well
            text += (
                f", up to {_ms(n['at_most_ms'])} if the shared core also slowed its part of "
                f"the allreduce (it waits {_ms(n['own_wait_ms'])} per step there itself)"
            )
        return text
    if p == "long_cycle_time":
        if n["cycle_ms"] <= 1:
            return f"the cycle time is {n['cycle_ms']:g} ms (Horovod's default): nothing to save"
        return (
            f"a background cycle starts every {n['cycle_ms']:g} ms ({n['cycle_source']}), so "
            f"the gradients wait for the next cycle: the cycle model predicts "
            f"{_ms(n['predicted_wait_ms'])} of waiting per step, the least-waiting rank "
            f"waited {_ms(n['measured_wait_ms'])}; at the default 1 ms it would save {saving}"
        )
    if p == "fusion_off":
        if "responses_per_step" not in n:
            return "tensor fusion is on (a threshold above 0): nothing to save"
        return (
            f"{n['responses_per_step']:.1f} gradient responses per step in "
            f"{n['cycles_per_step']:.1f} cycles; each response costs "
            f"{_ms(n['response_latency_ms'])} on its own (the intercept of its duration "
            f"against its bytes), so fusing each cycle's into one saves {saving} per step"
            + (
                f" (at most the {_ms(n['least_wait_ms'])} the least-waiting rank waits: the "
                "responses processed during the backward pass are hidden)"
                if "least_wait_ms" in n
                else ""
            )
        )
    if p == "cache_off":
        if "coordination_ms" not in n:
            return "the response cache is on: nothing to save"
        return (
            f"with the response cache off, each cycle's negotiation takes "
            f"{_ms(n['coordination_ms'])} of messages to and from the coordinator after every "
            f"rank is ready, {n['cycles_per_step']:.1f} cycles per step: at most {saving} per "
            "step to save"
        )
    if p == "small_batch":
        # explained_ms is Horovod's cycle, fusion and cache; a DDP run has none of them
        unexplained = (
            f", {_ms(n['unhidden_ms'])} of it not explained by the cycle, fusion or cache"
            if n["explained_ms"] else ""
        )  # fmt: skip
        return (
            f"the rank that waits least waits {_ms(n['least_wait_ms'])} per step for the "
            f"allreduces{unexplained}: communication no compute hides; twice the compute per "
            f"allreduce halves it per sample: {saving} per step"
        )
    if p == "input_pipeline":
        return (
            f"a step waits {_ms(n['data_ms'])} for its batch (the slowest rank, median): a "
            f"loader that prefetches in the background saves {saving} per step"
        )
    if p == "lr_not_scaled":
        return f"the learning rate is {n['lr_ratio']:.3g}x what the linear rule gives"
    if p == "oversubscribed":
        threads = int(n["threads_per_rank"])
        return (
            f"{int(n['ranks'])} ranks x {threads} thread{'s' * (threads > 1)} on "
            f"{int(n['cores'])} cores of {n['host']}: {n['threads_per_core']:.2g} threads per core"
            " (run.json: np, threads per rank, host cores)"
        )
    return ""


def _crash_finding(record: dict) -> dict | None:
    status = record.get("status")
    if status in (None, "ok"):
        return None
    failed = record.get("failed_ranks") or []
    which = f"; failed rank(s) {', '.join(map(str, failed))}" if failed else ""
    signal = f" by {record['signal']}" if record.get("signal") else ""
    found = record.get("failure") if status == "failed" else None
    style = style_of_framework((record.get("config") or {}).get("framework"))
    fix = PROBLEM_FIXES["crashed"]
    if status == "interrupted":
        text = f"the run was interrupted{signal} before it finished"
    elif status == "stale":
        text = f"the run never recorded its end ({record.get('stale_reason', 'stale')})"
    elif status == "running":
        text = "the run is still running (or its launcher is on another host)"
    elif found:
        # the cause first: the ranks that failed after it are said as consequences
        said = failure_lines(
            found, style=style, oom_kills=found.get("oom_kills"),
            oom_in_log=found.get("oom_in_log"),
        )  # fmt: skip
        fix = failure_fix(found, style)
        text = "; ".join(line.strip() for line in said if line != fix)
    else:
        text = f"the run {status}{which}"
    if status == "failed" and record.get("launcher_problem"):
        cause, _, fix = record["launcher_problem"].partition(". Fix: ")
        text += f"; {cause}"
    # the rank that started it is analysis.failure.attribute's answer, or none is named
    first = found["cause"]["rank"] if found else None
    return {
        "problem": "crashed",
        "measure": "status",
        "value": status,
        "rank": first,
        "reference": {"expected": "ok"},
        "evidence": f"run.json: status {status}: {text}",
        "fix": fix,
    }


def _share(x: float) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.0%}"


def diagnose(
    record: dict,
    metrics: pd.DataFrame,
    steps: pd.DataFrame,
    tl: Timeline | None,
    noise: pd.DataFrame,
    source: str,
) -> dict[str, Any]:
    """The diagnosis of one run (:func:`workshop.analysis.diagnose.verdict.judge`), in words.

    Args:
        record: run.json as a dict (``{}`` for a timeline without its run directory).
        metrics, steps: ``read_metrics`` and ``read_step_times`` of the run (may be empty).
        tl: the run's timeline, or None.
        noise: the estimators' noise (``readers.runs.read_calibration``, or :func:`noise_for`).
        source: where the noise comes from, in words.

    Returns:
        The JSON object of ``workshop diagnose --json`` (module docstring).
    """
    result = judge(record, metrics, steps, tl, noise)
    step = result["step_ms"]
    by_problem = {row["problem"]: row for row in result["costs"]}
    for row in result["costs"]:
        row["evidence"] = explain(row, step)
    findings = []
    for problem in result["findings"]:
        if problem == "crashed":
            findings.append(_crash_finding(record))
            continue
        row = by_problem[problem]
        value = {"oversubscribed": "threads_per_core", "lr_not_scaled": "lr_ratio"}.get(problem)
        findings.append(
            {
                "problem": problem,
                "value": row["numbers"][value] if value else row["saving_ms"],
                "saving_ms": row["saving_ms"],
                "uncertainty_ms": row["uncertainty_ms"],
                "share": row["share"],
                "rank": row["rank"],
                "evidence": row["evidence"],
                "fix": PROBLEM_FIXES[problem],
            }
        )
    notes = []
    for problem in result["not_measured"]:
        notes.append(
            f"{problem} not measured: needs {by_problem[problem]['missing']}"
            f"{MISSING_HOW.get(problem, '')}."
        )
    if "oversubscribed" in result["findings"]:
        timed = [p for p in result["findings"] if p not in ("crashed", "oversubscribed")]
        timed = [p for p in timed if p != "lr_not_scaled"]
        if timed:
            notes.insert(
                0,
                f"{', '.join(timed)}: measured while the ranks shared cores (oversubscribed): a "
                "rank that waits for a core looks slow, and the others wait for it in the "
                "allreduces; fix the oversubscription and measure again before acting on "
                f"{'it' if len(timed) == 1 else 'them'}.",
            )
    shown = result.get("timeline") or {}
    if shown and (steps is None or steps.empty):
        notes.append(_timeline_note(shown))
    settings = result["settings"]
    if result.get("engine") == "ddp":
        notes.append(_ddp_note(settings))
    elif settings.get("source") is None:
        notes.append(
            "No run.json: the Horovod settings the run ran with are unknown; the cycle time is "
            "read from the cycle marks where there are."
        )
    return result | {
        "findings": findings,
        "notes": notes,
        "calibration": source,
    }


def _ddp_note(settings: dict) -> str:
    """What a DDP run is judged on, and the knobs it ran with (run.json's ``ddp_settings``)."""
    shown = {k: v for k, v in settings.items() if k not in ("models", "ranks_differ")}
    knobs = ", ".join(f"{k} {v}" for k, v in shown.items())
    said = (
        "A PyTorch DDP run: Horovod's cycle time, fusion buffer and response cache are not its "
        "mechanisms (DDP allreduces each gradient bucket as soon as it is ready, in a fixed "
        "order), so they are not judged"
    )
    said += f"; DDP ran with {knobs}" if knobs else "; no DDP model's settings were recorded"
    if settings.get("ranks_differ"):
        said += f" (not the same on every rank: {', '.join(settings['ranks_differ'])})"
    return said + "."


def _timeline_note(shown: dict) -> str:
    """What the timeline shows, said for a folder without the ranks' step times."""
    said = []
    if not math.isnan(shown["negotiate_share"]):
        said.append(f"a gradient's negotiation lasts {shown['negotiate_share']:.0%} of a step")
    if shown["late_rank"] is not None:
        said.append(
            f"rank {shown['late_rank']} is ready {shown['late_cycles']:.2f} background cycles "
            "after the others at the gradients' negotiations (the coordinator's bias taken out)"
        )
    if not math.isnan(shown["responses_per_step"]):
        said.append(f"{shown['responses_per_step']:.1f} gradient responses per step")
    if not math.isnan(shown["cycle_interval_ms"]):
        said.append(f"a cycle every {shown['cycle_interval_ms']:.2f} ms")
    libraries = ", ".join(f"{op} by {lib}" for op, lib in shown["libraries"].items())
    if libraries:
        said.append(libraries)
    return (
        "The timeline alone (no per-rank step times): "
        + "; ".join(said)
        + ". Without step times it cannot tell how long each rank computes, so not whether a "
        "late rank is a straggler or how much of a step the waits cost."
    )


def noise_for(baseline: str | Path | None = None) -> tuple[pd.DataFrame, str]:
    """(noise table, its source in words): a ``baseline`` run of your own (its savings are
    then the noise: what a healthy run of the same job shows), or the shipped calibration
    (``readers.runs.read_calibration``).

    Raises:
        FileNotFoundError, ValueError: the baseline or the calibration cannot be read.
    """
    from workshop.readers.runs import read_calibration, read_run_files

    if baseline:
        files = read_run_files(baseline)
        found = costs(files.record, files.metrics, files.steps, files.timeline)
        return calibrate({str(baseline): (step_ms(files.steps), found)}), (
            f"the baseline run {baseline}"
        )
    table, record = read_calibration()
    return (
        table,
        f"{len(record.get('runs', []))} healthy recorded runs (data/diagnose/calibration.json)",
    )


def diagnose_run(run_dir: str | Path | Run, baseline: str | Path | None = None) -> dict[str, Any]:
    """:func:`diagnose` of a run directory or a Run (``workshop diagnose RUN_DIR [--baseline
    B]``): a workshop run, or any folder with a Horovod timeline and the ranks' logs (a
    cluster job), judged on what it has (the notes name what it cannot tell).

    Raises:
        FileNotFoundError, ValueError: a file of the run, the baseline or the calibration.
    """
    from workshop.readers.runs import read_run_files

    files = read_run_files(run_dir)
    noise, source = noise_for(baseline)
    record = files.record
    if record.get("status") == "failed" and "failure" not in record:
        # a run recorded before workshop run named the rank that started the failure
        record = record | {"failure": attribute(files.ends)}
    return diagnose(record, files.metrics, files.steps, files.timeline, noise, source)


def diagnose_text(run_dir: str | Path, baseline: str | Path | None = None) -> str:
    """What ``workshop diagnose RUN_DIR [--baseline B]`` prints (:func:`diagnose_lines`)."""
    return "\n".join(diagnose_lines(diagnose_run(run_dir, baseline)))


def verdict_line(result: dict) -> str:
    """The first line: the problem whose fix saves most (a crash first), with its saving; else
    healthy, when every problem was measured; else no finding, and what was not measured."""
    step = result.get("step_ms", math.nan)
    if result["findings"]:
        top = result["findings"][0]
        title = TITLES[top["problem"]]
        if top.get("rank") is not None and top["problem"] in ("straggler", "crashed"):
            title += f", rank {top['rank']}"
        if top["problem"] == "crashed":
            return f"most likely: {title}: {top['evidence'].split(' (')[0]}"
        if top.get("saving_ms") is None or math.isnan(top["saving_ms"]):
            return f"most likely: {title}: {top['evidence']}"
        return (
            f"most likely: {title}: its fix would save {_ms(top['saving_ms'])} per step "
            f"({_share(top['share'])} of the {_ms(step)} step, ± {_ms(top['uncertainty_ms'])})"
        )
    if result["healthy"]:
        return (
            "healthy: every problem was measured, and no fix would save "
            f"{result['min_share']:.0%} of a step beyond its noise"
        )
    return (
        f"no finding among what was measured, but not healthy: not measured: "
        f"{', '.join(result['not_measured'])} (see the notes)"
    )


def diagnose_lines(result: dict) -> list[str]:
    """``workshop diagnose``'s text: the verdict, every problem's cost (findings marked), the
    fix of each finding, then the notes."""
    step = result.get("step_ms", math.nan)
    lines = [
        verdict_line(result),
        "",
        f"what each fix would save per step of {_ms(step)} (a finding from "
        f"{result['min_share']:.0%} of the step, and beyond its noise on healthy runs: "
        f"{result['calibration']}):",
    ]
    for row in result["costs"]:
        mark = "  <- finding" if row["finding"] else ""
        if not row["measured"]:
            lines.append(f"  {row['problem']:<15} not measured")
        elif math.isnan(row["saving_ms"]):
            lines.append(f"  {row['problem']:<15} (a rule, not a time){mark}")
        else:
            lines.append(
                f"  {row['problem']:<15} {_ms(row['saving_ms'])} ({_share(row['share'])}) "
                f"± {_ms(row['uncertainty_ms'])}, noise up to {_share(row['noise_share'])}{mark}"
            )
        lines.append(f"      {row['evidence']}")
    if result["findings"]:
        lines += ["", "fix:"]
        for i, f in enumerate(result["findings"], start=1):
            lines.append(f"  {i}. {f['problem']}: {f['fix']}")
    if result["notes"]:
        lines += ["", "notes:", *[f"  - {n}" for n in result["notes"]]]
    return lines
