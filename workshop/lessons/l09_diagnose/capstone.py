"""Lesson 09, the capstone: diagnose a run. Recorded real runs, each with a problem the learner
is not told, the numbers that give each problem away, and the fixed runs that show the gain.

Every case is a folder ``data/capstone/<case>/`` with::

    broken/                    the run to diagnose (workshop run directory, timeline.json with
                               cycle marks, logs, run.json, metrics.jsonl)
    fixed/                     the same run with the fix (timeline too)
    repeats/broken-N, fixed-N  5 rounds without a timeline, broken and fixed back to back in
                               alternating order, for the gain and its spread
    provenance.json            every command, the fault injected, host, versions, load
    README.md                  what is there (its commands give the answer away)

Re-record a case: :mod:`workshop.lessons.l09_diagnose.record` (the recorder). The numbers are
computed by :mod:`workshop.analysis` (``diagnose``'s evidence, ``benchmarks``' paired ratios);
this module reads a case's files and grades a diagnosis.

In the notebook::

    case = capstone.load("case-1")
    key = capstone.answer_key(case)         # computed from the files; it never prints itself
    # the registry's 09.1-09.5 (workshop.lessons.l09_diagnose.exercises) check against it
    capstone.parts(answer, key)             # which of problem / evidence / fix is right
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd

from workshop.analysis.benchmarks import value_ranges
from workshop.analysis.diagnose import evidence
from workshop.lessons.answers import precision_tolerance
from workshop.paths import data_path
from workshop.readers.benchmarks import read_benchmark_runs
from workshop.readers.runs import read_calibration, read_run_files

FOLDER = "capstone"
#: Rounds of repeats per case: one broken and one fixed run each.
REPEATS = 5


@dataclass(frozen=True)
class Problem:
    """One diagnosis the learner can choose, with the number that is its evidence."""

    title: str
    evidence: str
    fix: str  # the key of MENU_FIXES that cures it


#: The diagnoses offered, by letter (the notebook lists them in this order); two of them
#: (a, f) have no case: they are there to be ruled out.
PROBLEMS: dict[str, Problem] = {
    "a": Problem(
        "the input pipeline is slow: the steps wait for data",
        "the share of a step spent taking the batch (median, the slowest rank; "
        "logs/rank.N.steps.csv)",
        "d",
    ),
    "b": Problem(
        "tensor fusion is off: every gradient is reduced on its own",
        "gradient allreduce responses per training step",
        "e",
    ),
    "c": Problem(
        "one rank is slower than the other (a straggler) and the other waits for it",
        "the slowest rank's compute per step divided by the other rank's (lower quartiles "
        "over the steps; logs/rank.N.steps.csv)",
        "f",
    ),
    "d": Problem(
        "Horovod's background thread cycles too slowly",
        "the median time between background cycle starts, in ms",
        "c",
    ),
    "e": Problem(
        "the learning rate is not scaled to the global batch",
        "the learning rate used divided by the one linear scaling gives",
        "a",
    ),
    "f": Problem(
        "the ranks' compute threads oversubscribe the CPU cores",
        "compute threads per core: every rank's compute threads together, per core",
        "b",
    ),
}
#: The fixes offered, by letter.
MENU_FIXES: dict[str, str] = {
    "a": "scale the learning rate with the global batch (--lr-scaling linear)",
    "b": "one compute thread per core: threads per rank = cores / ranks on the node",
    "c": "set the cycle time back to Horovod's default (HOROVOD_CYCLE_TIME=1, in ms)",
    "d": "load the data in background workers and prefetch the next batch",
    "e": "set the fusion threshold back to Horovod's default (HOROVOD_FUSION_THRESHOLD, 128 MB)",
    "f": "give every rank a core of its own: move the competing work off the ranks' cores",
    "g": "double the batch size per worker",
}


@dataclass(frozen=True)
class CaseSpec:
    """How a case is recorded: the options of its broken and fixed runs.

    Attributes:
        problem: the letter of :data:`PROBLEMS` that the broken run has.
        broken, fixed: ``workshop run`` options added to
            :data:`workshop.lessons.l09_diagnose.record.COMMON`.
        measure: what the fix should improve: ``samples_per_s`` (the training throughput of
            the epochs after the first) or ``test_accuracy`` (after the last epoch).
        straggler: the ranks are bound to cores in both runs, and the broken run shares rank
            1's core with busy processes (:mod:`workshop.lessons.l09_diagnose.record`).
    """

    problem: str
    broken: tuple[str, ...]
    fixed: tuple[str, ...]
    measure: str = "samples_per_s"
    straggler: bool = False


CASES: dict[str, CaseSpec] = {
    "case-1": CaseSpec("c", (), (), straggler=True),
    "case-2": CaseSpec(
        "e",
        ("--batch-size", "128", "--base-batch-size", "32", "--lr-scaling", "none"),
        ("--batch-size", "128", "--base-batch-size", "32", "--lr-scaling", "linear"),
        "test_accuracy",
    ),
    "case-3": CaseSpec("b", ("--fusion-threshold-mb", "0"), ("--fusion-threshold-mb", "128")),
    "case-4": CaseSpec("d", ("--cycle-time-ms", "50"), ("--cycle-time-ms", "1")),
}


# ---------------------------------------------------------------------------------------------
# Reading a case and computing its numbers


def menu() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The diagnoses (with the evidence number each one asks for, and its range over the
    healthy calibration runs) and the fixes on offer, as two tables indexed by letter. Show
    them whole: ``with pd.option_context("display.max_colwidth", None): ...``."""
    healthy = healthy_reference()

    def healthy_range(letter: str) -> str:
        if letter not in healthy.index or pd.isna(healthy.loc[letter, "max"]):
            return "(not measured)"
        row = healthy.loc[letter]
        return f"{row['min']:#.3g} / {row['median']:#.3g} / {row['max']:#.3g}"  # 1.80, not 1.8

    problems = pd.DataFrame(
        [(k, p.title, p.evidence, healthy_range(k)) for k, p in PROBLEMS.items()],
        columns=[
            "problem",
            "diagnosis",
            "evidence number to report",
            "healthy runs: min / median / max",
        ],
    ).set_index("problem")
    fixes = pd.DataFrame(list(MENU_FIXES.items()), columns=["fix", "what to change"])
    return problems, fixes.set_index("fix")


#: Per case, a hint for each part of the diagnosis that is not right yet (never the value).
HINTS: dict[str, dict[str, str]] = {
    "case-1": {
        "problem": "Nothing in run.json is unusual. Compare the ranks with each other: "
        "logs/rank.N.steps.csv has each rank's own compute per step, without the waiting.",
        "evidence": "Per rank, the lower quartile of compute_s over the steps (run.steps), "
        "as workshop diagnose: the slower rank's divided by the other's.",
        "fix": "The code and the settings are the same on both ranks: what else on the "
        "machine could slow one rank's compute down?",
    },
    "case-2": {
        "problem": "The speed is fine: look at what the run learned (test accuracy) and at "
        "the learning rate it used against its global batch (the batch-size lesson).",
        "evidence": "The lr column of metrics.jsonl (last epoch) divided by the LR that the "
        "linear rule gives: run.json's lr x global batch / base_batch_size.",
        "fix": "Which rule makes the LR grow with the global batch?",
    },
    "case-3": {
        "problem": "Count the allreduce responses of one training step against the model's "
        "gradient tensors (the tuning lesson: fusion).",
        "evidence": "Responses that carry a gradient (analysis.fusion_groups), divided by the "
        "steps (analysis.step_starts).",
        "fix": "Which Horovod setting decides how many tensors go into one response?",
    },
    "case-4": {
        "problem": "How often does Horovod's background thread look for ready tensors here? "
        "tl.cycles has one row per cycle start.",
        "evidence": "The median of the differences between consecutive cycle starts, in ms.",
        "fix": "Which Horovod setting sets the time between cycles, and what is its default?",
    },
}


@dataclass
class Case:
    """A recorded case: its folder, provenance, and the two diagnosis runs."""

    name: str
    folder: Path
    provenance: dict

    @property
    def broken(self) -> Path:
        return self.folder / "broken"

    @property
    def fixed(self) -> Path:
        return self.folder / "fixed"

    def __repr__(self) -> str:  # the provenance names the problem: do not show it
        return f"Case({self.name!r}, {str(self.folder)!r})"


def load(case: str, root: Path | str | None = None) -> Case:
    """The recorded case ``case`` (e.g. ``"case-1"``) from ``root`` (default:
    ``data/capstone/``).

    Raises:
        FileNotFoundError: the folder or its provenance.json is missing (names the path).
        ValueError: provenance.json is not valid JSON, or names no injected problem.
    """
    folder = Path(root) / case if root else data_path(FOLDER, case)
    path = folder / "provenance.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: missing; record it with "
            f"python -m workshop.lessons.l09_diagnose.record {case}"
        )
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if record.get("injected", {}).get("problem") not in EVIDENCE:
        raise ValueError(f"{path}: 'injected.problem' must be one of {', '.join(EVIDENCE)}")
    return Case(case, folder, record)


#: The evidence number of each problem with a measure, by letter: the measure of
#: ``workshop diagnose`` (``workshop.analysis.diagnose.MEASURES``) that gives it away.
MEASURE_OF = {
    "a": "data_share",
    "b": "responses_per_step",
    "c": "compute_ratio",
    "d": "cycle_interval_ms",
    "e": "lr_ratio",
}
#: The problems that have a case (their keys need the number on the broken run).
EVIDENCE = ("b", "c", "d", "e")


@cache
def _evidence(run_dir: str) -> pd.DataFrame:
    files = read_run_files(run_dir)
    return evidence(files.record, files.metrics, files.steps, files.timeline).set_index("measure")


def evidence_number(letter: str, run_dir: Path | str) -> float:
    """The evidence number of problem ``letter`` (:data:`MEASURE_OF`) on one run, computed by
    the same analysis as ``workshop diagnose`` (NaN where the run lacks its input)."""
    return float(_evidence(str(Path(run_dir).resolve())).loc[MEASURE_OF[letter], "value"])


def healthy_reference() -> pd.DataFrame:
    """The range of each menu problem's evidence number over the healthy runs of the workshop's
    own job that calibrate ``workshop diagnose`` (data/diagnose/calibration.json: default
    settings, nothing else running; learners' scripts left out: their counts are their
    models'): one row per letter of :data:`MEASURE_OF`, ``min``, ``median``, ``max``,
    ``runs``."""
    mine = [r for r in read_calibration()[1]["runs"] if not r["script"]]  # the same job
    runs = pd.DataFrame([r["evidence"] for r in mine], dtype=float)
    table = runs[list(MEASURE_OF.values())].agg(["min", "median", "max", "count"]).T
    table.index = list(MEASURE_OF)
    return table.rename(columns={"count": "runs"}).rename_axis("problem")


def tick_lateness(folder: Path | None = None) -> pd.DataFrame:
    """The readiness ticks' evidence on the straggler benchmark's runs with the response cache
    off (``data/benchmarks/straggler-signal/`` and its confirmations; ``folder`` another such
    recording): the latest rank's mean lateness in whole background cycles
    (``late_cycles``), one row per group (``healthy``, ``straggler``) with ``runs``, ``min``,
    ``median``, ``max`` (:func:`workshop.analysis.benchmarks.value_ranges`). Whether it could
    be a finding by itself: the straggler runs' smallest above every healthy run's, which the
    ranges say (the medians do not)."""
    folder = Path(folder) if folder else data_path("benchmarks", "straggler-signal")
    rows = []
    for result in sorted(folder.rglob("result.json")):
        for run in read_benchmark_runs(result, ("variant", "cache", "values")).itertuples():
            value = run.values.get("late_cycles")
            if not run.cache and value is not None:
                group = "straggler" if run.variant.startswith("straggler") else "healthy"
                rows.append({"group": group, "late_cycles": value})
    if not rows:
        raise ValueError(f"{folder}: no run with the response cache off and readiness ticks")
    return value_ranges(pd.DataFrame(rows), "group", "late_cycles")


#: The precision lesson 09's diagnoses ask for, which each question states ("to 3 significant
#: figures"): the tolerance is half a unit of the third figure
#: (:func:`workshop.lessons.answers.precision_tolerance`). Case-1's 2.786 within 0.005 rejects
#: the ratio of medians (3.25); case-3's count of 8 within 0.005 is exact (7 and 9 fail), while
#: the four questions, asked alike, do not say which number is a count.
SIG_FIGS = 3
#: Exercise 09.5's gain, computed from the files, to 3 decimal places: 3.852 within 0.0005. At
#: 3 significant figures the rounds' mean (3.859) and the first epoch kept (3.863) both read
#: 3.86, and the hint could not say which slip an answer made; "to 4 significant figures"
#: would put a 4 beside a gain of 3.85 in the question.
GAIN_DECIMALS = 3


@dataclass(frozen=True)
class AnswerKey:
    """What a diagnosis of a case must say: ``expected`` is (problem, evidence, fix), the
    evidence within ``abs_tol``, half a unit of its :data:`SIG_FIGS`-th figure."""

    problem: str
    evidence: float
    fix: str
    abs_tol: float
    hints: tuple[tuple[str, str], ...] = ()  # (part, hint) for parts() to print

    @property
    def expected(self) -> tuple[str, float, str]:
        return (self.problem, self.evidence, self.fix)

    def __repr__(self) -> str:  # displaying the key in a notebook must not give it away
        return "AnswerKey(hidden: use capstone.parts and exercises.check)"


def answer_key(case: Case) -> AnswerKey:
    """The right diagnosis of ``case``, computed from its files: the problem injected
    (provenance.json), its evidence number measured on the broken run, and its fix."""
    problem = case.provenance["injected"]["problem"]
    hints = tuple(HINTS.get(case.name, {}).items())
    evidence = evidence_number(problem, case.broken)
    tolerance = precision_tolerance(evidence, sig_figs=SIG_FIGS)
    return AnswerKey(problem, evidence, PROBLEMS[problem].fix, tolerance, hints)


def diagnosis(run_dir: Path | str) -> str:
    """What ``workshop diagnose RUN_DIR`` prints about a run (its verdict, each problem's
    cost, the fix)."""
    from workshop.findings.diagnose import diagnose_text

    return diagnose_text(run_dir)


def evidence_table(case: Case) -> pd.DataFrame:
    """Every evidence number of :data:`MEASURE_OF` on the broken and the fixed run of
    ``case``, beside the healthy range.

    Returns:
        One row per problem letter: ``problem``, ``evidence`` (what is measured),
        ``broken``, ``fixed`` (the number on each run), ``healthy min``, ``healthy max``.
    """
    healthy = healthy_reference()
    rows = [
        {
            "problem": letter,
            "evidence": PROBLEMS[letter].evidence,
            "broken": evidence_number(letter, case.broken),
            "fixed": evidence_number(letter, case.fixed),
            "healthy min": healthy.loc[letter, "min"],
            "healthy max": healthy.loc[letter, "max"],
        }
        for letter in MEASURE_OF
    ]
    return pd.DataFrame(rows)


def _same(given, wanted, abs_tol: float) -> bool:
    """A letter matches ignoring case, spaces and brackets ("(b)" is "b"); a number within
    ``abs_tol``."""
    if isinstance(wanted, str):
        return isinstance(given, str) and given.strip().strip("().").strip().lower() == wanted
    if isinstance(given, bool) or not isinstance(given, numbers.Real) or math.isnan(given):
        return False
    return math.isclose(float(given), wanted, rel_tol=0.0, abs_tol=abs_tol)


def parts(answer, key: AnswerKey) -> dict[str, bool] | None:
    """Print which parts of a diagnosis ``(problem, evidence, fix)`` are right, never the
    right values, and for each part not right yet the case's hint for it (:data:`HINTS`);
    None (and nothing printed) while the answer is None.

    Raises:
        TypeError: the answer is not a (problem letter, number, fix letter) tuple.
    """
    if answer is None:
        return None
    if not isinstance(answer, (tuple, list)) or len(answer) != 3:
        raise TypeError(
            f"a diagnosis is (problem letter, evidence number, fix letter), e.g. "
            f"('x', 1.5, 'y'); got {answer!r}"
        )
    names = ("problem", "evidence", "fix")
    verdicts = {
        name: _same(given, wanted, key.abs_tol)
        for name, given, wanted in zip(names, answer, key.expected, strict=True)
    }
    print(" · ".join(f"{name}: {'right' if ok else 'not yet'}" for name, ok in verdicts.items()))
    for part, hint in key.hints:
        if not verdicts.get(part, True):
            print(f"  hint ({part}): {hint}")
    return verdicts
