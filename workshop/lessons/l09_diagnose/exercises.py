"""Lesson 09 (notebooks/09-diagnose-a-run.ipynb): its exercises and the findings it states.

The lesson's data: each case's ``broken`` run (a Run of ``data/capstone/case-N/broken``, or of
the LIVE re-recording); the case's folder (its provenance, fixed run and repeats) is the run's
parent. A diagnosis is (problem letter, evidence number, fix letter): the evidence is measured
by the analysis of ``workshop diagnose`` (:func:`.capstone.answer_key`).
"""

from __future__ import annotations

import statistics

from workshop.analysis import fusion_groups
from workshop.analysis.diagnose import late_cycles
from workshop.lessons.entries import Exercise, Finding, Slip
from workshop.lessons.l09_diagnose import capstone, gains
from workshop.lessons.l09_diagnose import findings as said
from workshop.readers import read_timeline
from workshop.readers.runs import read_metrics, read_run, read_step_times

#: The broken run of each case, as the lesson opens it by default.
RECORDINGS = {f"case-{n}": f"capstone/case-{n}/broken" for n in range(1, 5)}
#: The case whose gain exercise 09.5 computes from the raw metrics (the parameters' GAIN_CASE).
GAIN_RECORDING = RECORDINGS["case-1"]


def case_of(broken) -> capstone.Case:
    """The case whose broken run is ``broken`` (a Run or a run directory)."""
    path = getattr(broken, "path", broken)
    return capstone.load(path.parent.name, path.parent.parent)


def key(broken) -> tuple[str, float, str]:
    """The right diagnosis of the case of ``broken``: (problem, evidence, fix)."""
    return capstone.answer_key(case_of(broken)).expected


def _on_fixed(broken) -> tuple[str, float, str]:
    problem, _, fix = key(broken)
    return (problem, capstone.evidence_number(problem, case_of(broken).fixed), fix)


def _with(broken, evidence: float) -> tuple[str, float, str]:
    problem, _, fix = key(broken)
    return (problem, float(evidence), fix)


def _per_rank(broken, column: str, how: str) -> float:
    steps = read_step_times(case_of(broken).broken)
    per_rank = steps[steps.step >= 1].groupby("rank")[column].agg(how)
    return float(per_rank.max() / per_rank.min())


def _linear_lr(broken, global_batch: bool = True, power: float = 1.0) -> float:
    config = read_run(case_of(broken).broken)["config"]
    batch = config["batch_size"] * (config["np"] if global_batch else 1)
    used = read_metrics(case_of(broken).broken).lr.iloc[-1]
    return float(used / (config["lr"] * (batch / config["base_batch_size"]) ** power))


def _gain(broken):
    return gains.gains(case_of(broken))


def _first_epoch_kept(broken) -> float:
    repeats = case_of(broken).folder / "repeats"

    def throughput(run_dir) -> float:
        epochs = read_metrics(run_dir)
        return epochs.samples.sum() / epochs.train_time_s.sum()

    rounds = _gain(broken)["round"]
    gains = [
        throughput(repeats / f"fixed-{n}") / throughput(repeats / f"broken-{n}") for n in rounds
    ]
    return float(statistics.median(gains))


FIRST_HINT = (
    "Which of the menu's evidence numbers can you compute from this run's files, and which of "
    "them lies far outside the healthy runs' range?"
)


def _hints(case: str, first: str = FIRST_HINT) -> tuple[str, ...]:
    return (first, capstone.HINTS[case]["problem"], capstone.HINTS[case]["evidence"])


#: A diagnosis with the right problem and number but another fix: told so by the slip itself
#: (hints follow the slip an answer matches, not the number of tries).
WRONG_FIX_HINT = (
    "The problem and its evidence number are right; that fix does not remove this problem. "
    "Which change in the fixes table acts on what the number measures?"
)


def _wrong_fixes(case: str) -> tuple[Slip, ...]:
    right = capstone.PROBLEMS[capstone.CASES[case].problem].fix
    return tuple(
        Slip(
            f"the right problem and number with fix {fix}",
            lambda b, fix=fix: (key(b)[0], key(b)[1], fix),
            WRONG_FIX_HINT,
        )
        for fix in capstone.MENU_FIXES
        if fix != right
    )


def _diagnosis(n: int, slips: tuple[Slip, ...], solution: str, minutes: int, **more) -> Exercise:
    case = f"case-{n}"
    slips = (*slips, *_wrong_fixes(case))
    return Exercise(
        f"09.{n}",
        data=("broken",),
        recorded={"broken": RECORDINGS[case]},
        expected=key,
        hints=_hints(case),
        slips=(Slip("the fixed run's number, a healthy value", _on_fixed), *slips),
        solution=solution,
        minutes=minutes,
        **more,
    )


EXERCISES = (
    _diagnosis(
        1,
        (
            Slip(
                "the ratio of the ranks' medians: the menu asks for the lower quartiles",
                lambda b: _with(b, _per_rank(b, "compute_s", "median")),
            ),
            Slip(
                "the faster rank over the slower: upside down", lambda b: _with(b, 1 / key(b)[1])
            ),
            Slip(
                "step times, waiting included: the other rank waits as long",
                lambda b: _with(b, _per_rank(b, "step_s", "median")),
            ),
            Slip(
                "the readiness ticks the lesson warns about: cycles the latest rank is behind",
                lambda b: _with(b, late_cycles(read_timeline(case_of(b).broken))[0]),
            ),
            Slip("the decoy: oversubscribed cores and their fix", lambda b: ("f", key(b)[1], "b")),
        ),
        "Each rank's own compute per step, without the waiting, as its lower quartile over the "
        "steps (a straggler is slow in every step): one rank's is far above the other's, and "
        "nothing in run.json differs between the ranks, so the cause is other work on its core.",
        minutes=10,
        sig_figs=capstone.SIG_FIGS,
    ),
    _diagnosis(
        2,
        (
            Slip(
                "the linear rule's LR over the one used: upside down",
                lambda b: _with(b, 1 / key(b)[1]),
            ),
            Slip(
                "np forgotten: the per-worker batch over the base",
                lambda b: _with(b, _linear_lr(b, global_batch=False)),
            ),
            Slip("the square-root rule's LR", lambda b: _with(b, _linear_lr(b, power=0.5))),
        ),
        "The accuracy suffers, not the speed: the global batch is np x batch_size, the linear "
        "rule scales the LR by global / base, and the run kept the unscaled LR.",
        minutes=6,
        sig_figs=capstone.SIG_FIGS,
    ),
    _diagnosis(
        3,
        (
            Slip("off by one: a response fewer per step", lambda b: _with(b, key(b)[1] - 1)),
            Slip("off by one: a response more per step", lambda b: _with(b, key(b)[1] + 1)),
            Slip(
                "tensors per response, not responses per step",
                lambda b: _with(
                    b, fusion_groups(read_timeline(case_of(b).broken).spans).tensors.mean()
                ),
            ),
        ),
        "Count the responses that carry a gradient, per training step: one response per "
        "gradient tensor means nothing was fused.",
        minutes=8,
        sig_figs=capstone.SIG_FIGS,  # a count of 8 within 0.005: 7 and 9 fail
    ),
    _diagnosis(
        4,
        (
            Slip("seconds, not ms", lambda b: _with(b, key(b)[1] / 1e3)),
            Slip("cycles per second, not ms between them", lambda b: _with(b, 1e3 / key(b)[1])),
        ),
        "The background thread starts a cycle at most once per HOROVOD_CYCLE_TIME: the median "
        "gap between cycle starts is far above the 1 ms default.",
        minutes=6,
        sig_figs=capstone.SIG_FIGS,
    ),
    Exercise(
        "09.5",
        data=("broken",),
        recorded={"broken": GAIN_RECORDING},
        expected=lambda b: float(_gain(b).gain.median()),
        decimals=capstone.GAIN_DECIMALS,
        hints=(
            "Which lines of each metrics.jsonl count, and which two columns make a throughput?",
            "For each round N: read repeats/broken-N and repeats/fixed-N, drop the first "
            "epoch, sum samples and train_time_s, divide; then fixed over broken, and the "
            "median of those ratios.",
        ),
        slips=(
            Slip("broken over fixed: upside down", lambda b: float(1 / _gain(b).gain.median())),
            Slip("the first epoch kept", _first_epoch_kept),
            Slip("the mean of the rounds' gains", lambda b: float(_gain(b).gain.mean())),
            Slip(
                "the ratio of the medians, not the median of each round's ratio",
                lambda b: float(_gain(b).fixed.median() / _gain(b).broken.median()),
            ),
            Slip(
                "the single diagnosis pair",
                lambda b: gains.gain_summary(case_of(b))["single_run_gain"],
            ),
        ),
        solution="One JSON object per line and epoch; leave out the first epoch (start-up), "
        "sum samples and training time per run, divide, fixed over broken per round, then the "
        "median over the rounds.",
        minutes=15,
    ),
)

ALL_CASES = ("case-1", "case-2", "case-3", "case-4")
DIAGNOSED = ("09.1", "09.2", "09.3", "09.4")

FINDINGS = (
    *(
        Finding(f"09.diagnosis-{n}", ("broken",), said.diagnosis, after=(f"09.{n}",))
        for n in range(1, 5)
    ),
    Finding("09.injected", ALL_CASES, said.injected, after=DIAGNOSED),
    Finding("09.compute-ratio", ALL_CASES, said.compute_ratios, after=DIAGNOSED),
    Finding("09.tick-lateness", (), said.tick_lateness),
    Finding("09.gains", ALL_CASES, said.gains, after=("09.5",)),
    # the measured gains it shows beside each prediction are 09.5's answer too
    Finding("09.predicted", ALL_CASES, said.predictions, after=(*DIAGNOSED, "09.5")),
    Finding("09.summary", ALL_CASES, said.summary, after=DIAGNOSED),
    Finding("09.menu", (), said.menu),
    Finding("09.overview", ALL_CASES, said.overview),
    Finding("09.own-run", ("run",), said.own_run),
)
