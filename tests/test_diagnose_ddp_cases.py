"""``workshop diagnose`` on PyTorch DDP runs recorded for it (data/diagnose/ddp/, tools/
record_diagnosis_cases.py): lesson 02's DDP program under ``workshop run --script`` (torchrun),
healthy and with busy processes on rank 1's core, each with 3 profiled steps. The straggler is
named with its rank, its predicted saving is what the healthy twin measures, Horovod's own
mechanisms are not judged on a DDP run, and the traces agree with the step files on who waits
for whom."""

from __future__ import annotations

import warnings

import pytest

from workshop.analysis.diagnose.costs import step_ms
from workshop.analysis.torch_trace import slowest_rank, step_breakdown, waited_for
from workshop.findings.diagnose import diagnose_run
from workshop.paths import data_dir
from workshop.readers.runs import open_run
from workshop.readers.torch_trace import read_torch_traces

CASES = data_dir() / "diagnose" / "ddp"

pytestmark = pytest.mark.skipif(
    not CASES.is_dir(), reason="data/diagnose/ddp not recorded in this copy"
)


def _diagnose(name: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return diagnose_run(CASES / name)


def test_the_ddp_straggler_is_named_with_its_rank_and_cause():
    result = _diagnose("ddp-straggler")
    top = result["findings"][0]
    assert (top["problem"], top["rank"]) == ("straggler", 1), result["costs"]
    cost = next(c for c in result["costs"] if c["problem"] == "straggler")
    assert cost["numbers"]["cause"] == "other_work"


def test_the_healthy_ddp_run_is_named_nothing_and_judged_on_ddps_mechanisms_only():
    result = _diagnose("ddp-healthy")
    assert result["findings"] == [], result["costs"]
    judged = {c["problem"] for c in result["costs"]}
    assert not judged & {"long_cycle_time", "fusion_off", "cache_off"}
    # a script's learning rate lives in the script: not measured, so never "healthy"
    assert result["not_measured"] == ["lr_not_scaled"] and not result["healthy"]
    assert result["engine"] == "ddp" and result["settings"]["bucket_cap_mb"] == 25.0
    assert any(n.startswith("A PyTorch DDP run") for n in result["notes"])


def test_the_measured_saving_lies_between_the_predicted_saving_and_its_upper_end():
    # The straggler's extra compute is the saving's lower end; its own wait, the allreduce
    # itself, is slowed by the shared core too (here 16 ms against the twin's 2.4 ms), so
    # the fix saves up to that wait more. One run each, so both ends get the noise between
    # two runs of the same job: 13 % (the foreign benchmark's healthy runs, 183 and 206 ms).
    cost = next(c for c in _diagnose("ddp-straggler")["costs"] if c["problem"] == "straggler")
    steps = {n: step_ms(open_run(CASES / n).steps) for n in ("ddp-straggler", "ddp-healthy")}
    measured = steps["ddp-straggler"] - steps["ddp-healthy"]
    low, high = cost["saving_ms"], cost["numbers"]["at_most_ms"]
    assert low / 1.13 <= measured <= high * 1.13, (low, high, measured, steps)


def test_the_traces_name_the_rank_the_others_wait_for():
    # the step files say rank 0 waits at the allreduces for rank 1; the profiled steps agree
    traces = read_torch_traces([CASES / "ddp-straggler" / "traces"])
    who = slowest_rank(waited_for(step_breakdown(traces)))
    assert who["rank"] == 1 and who["steps_last"] > who["by_chance"], who
    steps = open_run(CASES / "ddp-straggler").steps
    wait = steps[steps["step"] >= 2].groupby("rank")["wait_s"].median()
    assert wait[0] > wait[1], wait.to_dict()
