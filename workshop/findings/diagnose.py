"""``workshop diagnose`` in words: the most likely problem of a run first, its evidence beside
the healthy reference, the fix; built from :mod:`workshop.analysis.diagnose`.

:func:`diagnose` returns the JSON of ``workshop diagnose --json``::

    {"healthy": false,
     "findings": [{"problem": "straggler", "value": 2.1, "rank": 1, "measure": "compute_ratio",
                   "reference": {"min": .., "median": .., "max": .., "runs": 5, "source": ..},
                   "evidence": "rank 1's compute per step is 2.1x the others' ...",
                   "fix": "..."}, ...],
     "notes": ["..."], "measured": [...every number, finding or not...], "reference": "...",
     "beyond_healthy": ["straggler", ...]}

``beyond_healthy`` names the problems whose number lies outside the healthy runs' range with
no finding of their own (short of where a finding starts, or a setting at Horovod's default),
and ``suspects`` gives each with its number, the healthy edge and what would settle it: the
run is then not ``healthy``, and the verdict names them as suspicions. "Nothing wrong" only
when every number lies within the healthy range.

and :func:`diagnose_lines` the text.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from workshop.analysis.diagnose import (
    MEASURES,
    SETTING_PROBLEMS,
    compare_with_reference,
    core_sharing,
    evidence,
    reference_from_evidence,
    setting_notes,
)
from workshop.analysis.failure import attribute
from workshop.findings.failure import failure_fix, failure_lines
from workshop.findings.problems import (
    BETWEEN,
    BETWEEN_DEFAULT,
    DISTORTED,
    ELSEWHERE,
    EXPLAINS,
    FIXES,
    TITLES,
    WHY,
)

if TYPE_CHECKING:
    from workshop.readers.runs import Run
    from workshop.readers.timeline import Timeline

__all__ = [
    "FIXES",
    "TITLES",
    "diagnose",
    "diagnose_lines",
    "diagnose_run",
    "diagnose_text",
    "reference_for",
    "verdict_line",
]


def _evidence_text(row: dict) -> str:
    """The finding's number in a sentence (the verdict line's second half)."""
    v, name = row["value"], row["measure"]
    rank = None if pd.isna(row.get("rank")) else int(row["rank"])
    texts = {
        "compute_ratio": f"rank {rank}'s compute per step is {v:.2f}x the others'",
        "cpu_wait_gap": f"rank {rank} was kept waiting for a CPU through {v:.0%} more of its "
        "compute than the others: other work shares its core",
        "late_cycles": f"rank {rank} is {v:.2f} background cycles later than the others at "
        "the gradients' negotiations",
        "lr_ratio": f"the learning rate is {v:.3g}x what the linear rule gives for the "
        "global batch",
        "responses_per_step": f"{v:.1f} gradient allreduce responses per step",
        "cycle_interval_ms": f"a background cycle starts every {v:.1f} ms",
        "negotiate_share": f"a gradient's negotiation lasts {v:.0%} of a step (median)",
        "comm_share": f"even the rank that waits least spends {v:.0%} of each step waiting "
        "for the allreduces",
        "data_share": f"{v:.0%} of a step goes to taking the batch",
    }
    return texts[name]


def _reference_text(row: dict) -> str:
    return f"healthy {_num(row['min'])} / {_num(row['median'])} / {_num(row['max'])}"


def _num(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def _crash_finding(record: dict) -> dict | None:
    status = record.get("status")
    if status in (None, "ok"):
        return None
    failed = record.get("failed_ranks") or []
    which = f"; failed rank(s) {', '.join(map(str, failed))}" if failed else ""
    signal = f" by {record['signal']}" if record.get("signal") else ""
    found = record.get("failure") if status == "failed" else None
    style = "torch" if (record.get("config") or {}).get("framework", "torch") == "torch" else "tf"
    fix = FIXES["crashed"]
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
    first = found["cause"]["rank"] if found else failed[0] if failed else None
    return {
        "problem": "crashed",
        "measure": "status",
        "value": status,
        "rank": first,
        "reference": {"expected": "ok"},
        "evidence": f"run.json: status {status}: {text}",
        "fix": fix,
    }


def _oversubscribed_finding(record: dict) -> dict | None:
    """More threads than cores on a host (``analysis.diagnose.core_sharing``), or None."""
    sharing = core_sharing(record)
    over = sharing[sharing["threads_per_core"] > 1]
    if over.empty:
        return None
    worst = over.sort_values("threads_per_core", ascending=False).iloc[0]
    threads = int(worst["threads_per_rank"])
    return {
        "problem": "oversubscribed",
        "measure": "threads_per_core",
        "value": round(float(worst["threads_per_core"]), 6),
        "rank": None,
        "reference": {"expected": "<= 1"},
        "evidence": f"{int(worst['ranks'])} ranks x {threads} thread{'s' * (threads > 1)} "
        f"on {int(worst['cores'])} cores of {worst['host']}: {worst['threads_per_core']:.2g} "
        "threads per core (run.json: np, threads per rank, host cores); every timing of this run "
        "is measured on shared cores",
        "fix": FIXES["oversubscribed"],
    }


def diagnose(
    record: dict,
    metrics: pd.DataFrame,
    steps: pd.DataFrame,
    tl: Timeline | None,
    reference: pd.DataFrame,
    source: str,
) -> dict[str, Any]:
    """The diagnosis of one run against a healthy reference.

    Args:
        record: run.json as a dict (``{}`` for a timeline without its run directory).
        metrics, steps: ``read_metrics`` and ``read_step_times`` of the run (may be empty).
        tl: the run's timeline, or None.
        reference: the healthy reference (``analysis.diagnose.reference_from_evidence``, or
            ``read_healthy_reference``).
        source: where the reference comes from, in words.

    Returns:
        The JSON object of ``workshop diagnose --json`` (module docstring): ``healthy``,
        ``findings`` (most likely first, one per problem), ``notes``, ``measured`` and
        ``reference``.
    """
    table = compare_with_reference(evidence(record, metrics, steps, tl), reference)
    settings = setting_notes(record)
    if record.get("config"):  # a setting's number without the setting is a note (_notes)
        unset = table["problem"].isin(SETTING_PROBLEMS) & ~table["problem"].isin(settings)
        table["finding"] = table["finding"] & ~unset
    for cause, explained in EXPLAINS.items():  # a cause's side effects: notes (_notes)
        if (table["finding"] & (table["problem"] == cause)).any():
            table["finding"] = table["finding"] & ~table["problem"].isin(explained)
    findings, seen = [], set()
    crash = _crash_finding(record)
    if crash:
        findings.append(crash)
        seen.add("crashed")
    oversubscribed = _oversubscribed_finding(record)
    if oversubscribed:
        findings.append(oversubscribed)
        seen.add("oversubscribed")
    measured = []
    for row in table.to_dict("records"):
        ref = {k: row[k] for k in ("min", "median", "max")} | {"source": source}
        item = {
            "problem": row["problem"],
            "measure": row["measure"],
            "value": round(float(row["value"]), 6),
            "rank": None if pd.isna(row["rank"]) else int(row["rank"]),
            "reference": ref,
            "threshold": round(float(row["threshold"]), 6),
            "finding": bool(row["finding"]),
            "what": MEASURES[row["measure"]].what,
        }
        measured.append(item)
        if row["finding"] and row["problem"] not in seen:
            seen.add(row["problem"])
            findings.append(
                {
                    "problem": row["problem"],
                    "measure": row["measure"],
                    "value": item["value"],
                    "rank": item["rank"],
                    "reference": ref,
                    "evidence": f"{_evidence_text(row)} ({_reference_text(row)}; "
                    f"{MEASURES[row['measure']].what})",
                    "fix": FIXES[row["problem"]],
                }
            )
    notes = _notes(record, steps, tl, table, seen, settings)
    distorted = [f["problem"] for f in findings if f["problem"] in DISTORTED]
    if oversubscribed and distorted:
        notes.insert(
            0,
            f"{', '.join(distorted)}: measured while the ranks shared cores (oversubscribed): "
            "a rank that waits for a core looks slow, and the others wait for it in the "
            "allreduces; fix the oversubscription and measure again before acting on "
            f"{'it' if len(distorted) == 1 else 'them'}.",
        )
    suspects = _beyond_healthy(table, seen)
    notes += [
        f"{row['problem']}: {_evidence_text(row)}, beyond the healthy runs' "
        f"{_edge_word(row)} ({_reference_text(row)}) but short of where a finding starts "
        f"({_num(row['threshold'])}): {_settle(row)}"
        for row in suspects
        if row["severity"] < 1 and row["problem"] not in settings
    ]
    return {
        "healthy": not findings and not suspects,
        "findings": findings,
        "notes": notes,
        "measured": measured,
        "reference": source,
        "beyond_healthy": [row["problem"] for row in suspects],
        "suspects": [_suspect(row) for row in suspects],
    }


def _edge_word(row: dict) -> str:
    return "largest" if MEASURES[row["measure"]].bad == "high" else "smallest"


def _settle(row: dict) -> str:
    return BETWEEN.get(row["problem"], BETWEEN_DEFAULT)


def _suspect(row: dict) -> dict:
    """A number beyond the healthy range that is no finding, as the verdict names it."""
    high = MEASURES[row["measure"]].bad == "high"
    return {
        "problem": row["problem"],
        "measure": row["measure"],
        "value": round(float(row["value"]), 6),
        "rank": None if pd.isna(row["rank"]) else int(row["rank"]),
        "edge": round(float(row["max"] if high else row["min"]), 6),
        "edge_word": _edge_word(row),
        "threshold": round(float(row["threshold"]), 6),
        "below_threshold": bool(row["severity"] < 1),
        "settle": _settle(row) if row["severity"] < 1 else "see the notes",
    }


def _beyond_healthy(table: pd.DataFrame, seen: set[str]) -> list[dict]:
    """The rows whose number lies outside the healthy runs' range, in the bad direction, with
    no finding of their own and no found problem that explains them (one per problem): the
    run is then not "healthy", whatever the reason it is no finding (short of the threshold, a
    setting left at Horovod's default)."""
    rows, problems = [], set()
    explained = {p for cause in seen for p in EXPLAINS.get(cause, ())}
    for row in table.to_dict("records"):
        measure = MEASURES[row["measure"]]
        if measure.supporting or row["problem"] in seen | problems | explained:
            continue
        if pd.isna(row["value"]):
            continue
        high = measure.bad == "high"
        if (row["value"] > row["max"]) if high else (row["value"] < row["min"]):
            rows.append(row)
            problems.add(row["problem"])
    return rows


def _notes(record, steps, tl, table, seen, settings) -> list[str]:
    """Settings without effect, settings' numbers without the setting, and the evidence this
    run cannot give."""
    notes, noted = [], set()
    by_problem = {r["problem"]: r for r in table.to_dict("records")}
    for row in table.to_dict("records"):
        beyond = row["severity"] >= 1 and row["problem"] not in seen
        if not beyond or MEASURES[row["measure"]].supporting:
            continue
        noted.add(row["problem"])
        causes = [c for c, explained in EXPLAINS.items() if row["problem"] in explained]
        cause = next((c for c in causes if c in seen), None)
        if cause:
            notes.append(
                f"{_evidence_text(row)} ({_reference_text(row)}): {TITLES[cause]} explains "
                f"it ({WHY[cause]}); fix that first."
            )
        elif row["problem"] in ELSEWHERE and row["problem"] not in settings:
            notes.append(
                f"{_evidence_text(row)} ({_reference_text(row)}), with Horovod's default "
                f"setting: {ELSEWHERE[row['problem']]}."
            )
    for problem, setting in settings.items():
        if problem in seen or problem in noted:
            continue
        row = by_problem.get(problem)
        shown = (
            f"its evidence ({_evidence_text(row)}; {_reference_text(row)}) stays below where "
            f"a finding starts ({_num(row['threshold'])})"
            if row
            else "this run has no number to show its effect"
        )
        notes.append(f"{setting} is set, but {shown}: a note, not a finding.")
    if steps is None or steps.empty:
        notes.append(
            "No per-rank step times (logs/rank.N.steps.csv, which workshop run writes: a "
            "cluster job's folder, or a run recorded before they existed): the straggler, "
            "small-batch and input-pipeline numbers are missing, and readiness ticks alone do "
            "not tell a straggler from a healthy run."
        )
    if (record.get("config") or {}).get("script") or not record:
        notes.append(
            "The healthy reference was recorded with the workshop's own MNIST job: another "
            "script's numbers (its step, its batch, its model) differ for reasons of their "
            "own. Compare with a healthy run of the same script (--baseline RUN) before acting "
            "on a finding."
        )
    if tl is None:
        notes.append(
            "No timeline: fusion, the cycle time and the response cache cannot be judged "
            "(workshop run --timeline --mark-cycles records one)."
        )
    elif len(tl.cycles) < 2:
        notes.append(
            "The timeline has no cycle marks (--mark-cycles): the cycle time is not measured."
        )
    return notes


def reference_for(baseline: str | Path | None = None) -> tuple[pd.DataFrame, str]:
    """(reference table, its source in words): the ``baseline`` run's own numbers, or the
    shipped healthy reference (``readers.runs.read_healthy_reference``).

    Raises:
        FileNotFoundError, ValueError: the baseline or the reference cannot be read.
    """
    from workshop.readers.runs import read_healthy_reference, read_run_files

    if baseline:
        files = read_run_files(baseline)
        found = evidence(files.record, files.metrics, files.steps, files.timeline)
        return reference_from_evidence({str(baseline): found}), f"the baseline run {baseline}"
    table, record = read_healthy_reference()
    runs = len(record.get("runs", []))
    folders = ", ".join([record.get("source", "data/diagnose"), *record.get("also", [])])
    return table, f"{runs} recorded healthy runs ({folders})"


def diagnose_run(run_dir: str | Path | Run, baseline: str | Path | None = None) -> dict[str, Any]:
    """:func:`diagnose` of a run directory or a Run (``workshop diagnose RUN_DIR [--baseline
    B]``): a workshop run, or any folder with a Horovod timeline and the ranks' logs (a
    cluster job), judged on what it has (the notes name what it cannot tell).

    Raises:
        FileNotFoundError, ValueError: a file of the run, the baseline or the reference.
    """
    from workshop.readers.runs import read_run_files

    files = read_run_files(run_dir)
    reference, source = reference_for(baseline)
    record = files.record
    if record.get("status") == "failed" and "failure" not in record:
        # a run recorded before workshop run named the rank that started the failure
        record = record | {"failure": attribute(files.ends)}
    return diagnose(record, files.metrics, files.steps, files.timeline, reference, source)


def diagnose_text(run_dir: str | Path, baseline: str | Path | None = None) -> str:
    """What ``workshop diagnose RUN_DIR [--baseline B]`` prints (:func:`diagnose_lines`)."""
    return "\n".join(diagnose_lines(diagnose_run(run_dir, baseline)))


def verdict_line(result: dict) -> str:
    """The first line: the most likely problem and its number; else each number beyond the
    healthy range named as a suspicion, with what would settle it; else that the run looks
    healthy (every number within the healthy range)."""
    if result["findings"]:
        top = result["findings"][0]
        title = TITLES[top["problem"]]
        if top["problem"] in ("straggler", "crashed") and top.get("rank") is not None:
            title += f", rank {top['rank']}"
        return f"most likely: {title}: {top['evidence'].split(' (')[0]}"
    suspects = result.get("suspects") or []
    if suspects:
        said = []
        for s in suspects:
            rank = f" (rank {s['rank']})" if s["rank"] is not None else ""
            short = (
                f"short of a finding ({_num(s['threshold'])})"
                if s["below_threshold"]
                else "no finding with this run's settings"
            )
            said.append(
                f"{s['problem']} {_num(s['value'])}{rank}, beyond the healthy runs' "
                f"{s['edge_word']} {_num(s['edge'])}, {short}"
            )
        return (
            f"most likely: no finding, but suspect: {'; '.join(said)}. To settle it: "
            f"{suspects[0]['settle']}"
        )
    return "most likely: nothing wrong: every evidence number lies within the healthy reference"


def diagnose_lines(result: dict) -> list[str]:
    """``workshop diagnose``'s text: the verdict, every number beside the healthy reference
    (findings marked), the fix of each finding, then the notes."""
    lines = [
        verdict_line(result),
        "",
        f"evidence (this run; healthy min / median / max from {result['reference']}):",
    ]
    for m in result["measured"]:
        ref = m["reference"]
        mark = "  <- finding" if m["finding"] else ""
        if MEASURES[m["measure"]].supporting:
            mark = "  (supporting only)"
        rank = f" (rank {m['rank']})" if m["rank"] is not None else ""
        lines.append(
            f"  {m['problem']:<15} {_num(m['value'])}{rank} against {_num(ref['min'])} / "
            f"{_num(ref['median'])} / {_num(ref['max'])}: {m['what']}{mark}"
        )
    if result["findings"]:
        lines += ["", "fix:"]
        for i, f in enumerate(result["findings"], start=1):
            lines.append(f"  {i}. {f['problem']}: {f['fix']}")
            lines.append(f"     evidence: {f['evidence']}")
    if result["notes"]:
        lines += ["", "notes:", *[f"  - {n}" for n in result["notes"]]]
    return lines
