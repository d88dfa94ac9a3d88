"""``workshop diagnose`` on cases recorded for it (data/diagnose/cases/, tools/
record_diagnosis_cases.py): problems injected from outside the program (a Horovod variable in
the ranks' environment, busy processes on one rank's core) into a script the workshop did not
write (Horovod 0.28.1's own PyTorch synthetic benchmark) and into the workshop's own job, each
beside its healthy twin, and folders that hold only a timeline. A verdict is right when it
names what the twin's measured step says: a problem is a finding when removing it shortened the
step by at least the diagnosis's 10 % (MIN_SHARE), and its predicted saving is within its
uncertainty and a third of the measured one."""

from __future__ import annotations

import warnings

import pytest

from workshop.analysis.diagnose.costs import step_ms
from workshop.findings.diagnose import diagnose_run
from workshop.paths import data_dir
from workshop.readers.runs import open_run

CASES = data_dir() / "diagnose" / "cases"

pytestmark = pytest.mark.skipif(
    not CASES.is_dir(), reason="data/diagnose/cases not recorded in this copy"
)


def _diagnose(name: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return diagnose_run(CASES / name)


def _step(name: str) -> float:
    return step_ms(open_run(CASES / name).steps)


def _cost(result: dict, problem: str) -> dict:
    return next(c for c in result["costs"] if c["problem"] == problem)


#: case -> what its diagnosis must name, by the mechanism (the first finding; [] for none).
#: The synthetic benchmark's steps take 140-205 ms here (its five recorded runs), so a 10 ms
#: cycle costs under half a cycle per step (5 ms, 4 %) and a 50 ms one about 10 ms (7 %):
#: below the 10 % a finding needs, the near misses of the 50 ms cycle in the workshop's
#: 10 ms-step MNIST job, where a 10 ms cycle costs a quarter of the step.
EXPECTED = {
    "foreign-healthy": [],
    "foreign-cycle10": [],
    "foreign-cycle50": [],
    "foreign-fusion0": ["fusion_off"],
    "foreign-straggler": ["straggler"],
    "mnist-healthy": [],
    "mnist-cycle10": ["long_cycle_time"],
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_each_recorded_case_is_named_by_its_mechanism(case):
    result = _diagnose(case)
    named = [f["problem"] for f in result["findings"]]
    assert named == EXPECTED[case], result["costs"]  # the first, and nothing else
    cycle = _cost(result, "long_cycle_time")
    if case.endswith(("cycle10", "cycle50")):  # the setting is read from the environment
        assert result["settings"]["cycle_time_ms"] == float(case[-2:])
        assert cycle["measured"] and 0 < cycle["saving_ms"] < cycle["numbers"]["cycle_ms"]
    if case == "foreign-fusion0":
        fusion = _cost(result, "fusion_off")
        # 142 responses per step, each ~1 ms on its own, most hidden behind the backward
        # pass: the saving is bounded by what the least-waiting rank waits
        assert fusion["saving_ms"] <= fusion["numbers"]["least_wait_ms"]
        assert fusion["numbers"]["responses_per_step"] > 100


@pytest.mark.parametrize("case", ["foreign-straggler", "mnist-cycle10"])
def test_the_predicted_saving_is_what_the_healthy_twin_measures(case):
    # one run each: the twins' steps differ by the fix and by the noise between runs (the
    # benchmark's healthy runs took 183 and 206 ms), so only effects well beyond that noise are
    # compared: within a factor of 1.6 (the straggler: 479 ms predicted, 451 measured; the
    # 10 ms cycle: 3.0 predicted, 2.0 measured)
    problem = EXPECTED[case][0]
    twin = "foreign-healthy" if case.startswith("foreign") else "mnist-healthy"
    predicted = _cost(_diagnose(case), problem)["saving_ms"]
    measured = _step(case) - _step(twin)
    assert measured / 1.6 <= predicted <= measured * 1.6, (predicted, measured)


def test_the_straggler_is_named_with_its_rank_and_its_cause():
    result = _diagnose("foreign-straggler")
    cost = next(c for c in result["costs"] if c["problem"] == "straggler")
    assert result["findings"][0]["problem"] == "straggler" and cost["rank"] == 1
    assert cost["numbers"]["cause"] == "other_work"


@pytest.mark.parametrize("healthy", ["foreign-healthy", "mnist-healthy"])
def test_no_healthy_run_is_named(healthy):
    result = _diagnose(healthy)
    assert result["findings"] == []
    if healthy.startswith("foreign"):
        # a script's learning rate lives in the script: not measured, so never "healthy"
        assert result["not_measured"] == ["lr_not_scaled"] and not result["healthy"]
    else:
        assert result["healthy"], result["not_measured"]


def test_the_settings_a_run_ran_with_are_its_evidence():
    settings = open_run(CASES / "foreign-cycle50").record["horovod_env"]
    assert settings["HOROVOD_CYCLE_TIME"] == "50"
    assert _diagnose("foreign-cycle50")["settings"]["cycle_time_ms"] == 50.0


@pytest.mark.parametrize("folder", ["timeline-only-healthy", "timeline-only-cycle50"])
def test_a_timeline_alone_is_diagnosed_on_what_it_shows(folder):
    result = _diagnose(folder)
    assert not result["healthy"] and result["findings"] == []
    assert {"straggler", "small_batch", "input_pipeline"} <= set(result["not_measured"])
    note = next(n for n in result["notes"] if n.startswith("The timeline alone"))
    assert "gradient responses per step" in note and "by Gloo" in note
    if folder.endswith("cycle50"):
        assert "a cycle every 5" in note  # the marks' 50 ms: the setting is not known
