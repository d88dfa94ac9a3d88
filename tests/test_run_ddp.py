"""``workshop run --script`` on a PyTorch DDP script (issue 58, item 1): torchrun starts the
ranks into a run directory like any run's, DDP's knobs are recorded as evidence, each step's
wait for DDP's allreduces is measured, ``--profile-steps`` writes a torch.profiler trace per
rank, and ``workshop diagnose`` names the rank slowed from outside.

One real run serves the live tests (busy processes on rank 1's core, as
tests/test_diagnose_live.py injects them into a Horovod run).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workshop.launch.harness import record_run
from workshop.launch.run import RunConfig, launch_command, train_args
from workshop.launch.torchrun import LINE_PREFIX, ddp_settings, runs_ddp
from workshop.readers.runs import read_step_times
from workshop.readers.torch_trace import read_torch_traces

DDP_SCRIPT = "workshop/lessons/l02_first_program/programs/ddp_torch.py"
HOROVOD_SCRIPT = "workshop/lessons/l02_first_program/programs/hvd_torch_solution.py"


def test_a_ddp_script_is_started_by_torchrun_with_each_line_tagged_by_its_rank(tmp_path):
    config = RunConfig(np=2, script=DDP_SCRIPT, profile_steps=3, script_args="--epochs 1")
    assert runs_ddp(config) and not runs_ddp(RunConfig(np=2, script=HOROVOD_SCRIPT))
    assert not runs_ddp(RunConfig(np=2))  # the workshop's own program: horovodrun
    argv, env = launch_command(config, tmp_path, "script")
    assert argv[1:4] == ["-m", "torch.distributed.run", "--standalone"]
    assert argv[argv.index("--log-line-prefix-template") + 1] == LINE_PREFIX
    # the runner with the run directory, the profiler, then the script and its arguments
    runner = argv[argv.index("--no-python") + 1 :]
    assert runner == train_args(config, tmp_path, "script")
    assert runner[runner.index("--profile-steps") + 1] == "3" and runner[-2:] == ["--epochs", "1"]
    assert "horovodrun" not in " ".join(argv) and env["OMP_NUM_THREADS"]


def test_profile_steps_needs_a_script():
    with pytest.raises(ValueError, match="--profile-steps profiles a script of yours"):
        RunConfig(np=2, profile_steps=3).validate()
    with pytest.raises(ValueError, match="profile_steps must be >= 1"):
        RunConfig(np=2, script=DDP_SCRIPT, profile_steps=0).validate()


def test_ddp_settings_are_rank_0s_and_name_a_knob_the_ranks_disagree_on(tmp_path):
    (tmp_path / "observations").mkdir()
    base = {"bucket_cap_mb": 25.0, "gradient_as_bucket_view": False,
            "find_unused_parameters": False, "static_graph": False}  # fmt: skip
    for rank, cap in ((0, 25.0), (1, 1.0)):
        observed = {"ddp": [base | {"bucket_cap_mb": cap}]}
        (tmp_path / "observations" / f"rank.{rank}.json").write_text(json.dumps(observed))
    settings = ddp_settings(tmp_path)["ddp_settings"]
    assert settings["bucket_cap_mb"] == 25.0 and settings["ranks_differ"] == ["bucket_cap_mb"]
    assert ddp_settings(tmp_path / "nothing-here") == {}


@pytest.fixture(scope="module")
def slowed_ddp_run(tmp_path_factory, cpu_alone_module):
    """Lesson 02's DDP program, 2 ranks, 1 epoch of 20 steps, rank 1 sharing its core with
    four busy processes, 3 profiled steps."""
    out = tmp_path_factory.mktemp("ddp")
    command = ["workshop", "run", "--np", "2", "--script", DDP_SCRIPT, "--profile-steps", "3"]
    command += ["--quiet", "--out", str(out), "--name", "slowed", "--"]
    command += ["--epochs", "1", "--steps", "20"]
    record = record_run(command, out / "slowed", rank_cores={0: 0, 1: 1}, hog_core=1, hogs=4)
    assert record["straggler"]["rank_cores"] == {"0": 0, "1": 1}
    return out / "slowed"


@pytest.mark.live
def test_a_ddp_run_writes_the_run_directory_of_any_run(slowed_ddp_run):
    run = json.loads((slowed_ddp_run / "run.json").read_text())
    assert (run["status"], run["engine"], run["rank_status"]) == (
        "ok", "ddp", {"0": "ok", "1": "ok"}
    )  # fmt: skip
    assert "horovod_env" not in run  # no Horovod in a DDP run's ranks
    # DDP's knobs as the script built its model: DDP(model) takes torch's 25 MiB buckets
    assert run["ddp_settings"] == {
        "bucket_cap_mb": 25.0, "gradient_as_bucket_view": False,
        "find_unused_parameters": False, "static_graph": False, "models": 1, "ranks_differ": [],
    }  # fmt: skip
    for rank in (0, 1):  # each rank's own log, split from torchrun's tagged lines
        log = (slowed_ddp_run / "logs" / f"rank.{rank}.log").read_text()
        assert f"rank {rank}/2" in log
    steps = read_step_times(slowed_ddp_run)
    assert sorted(steps["rank"].unique()) == [0, 1] and len(steps) == 2 * 20
    # the wait at DDP's allreduces is measured, and the fast rank waits for the slow one
    later = steps[steps["step"] >= 2]
    assert later["wait_s"].notna().all()
    wait = later.groupby("rank")["wait_s"].median()
    compute = later.groupby("rank")["compute_s"].median()
    assert wait[0] > wait[1] and compute[1] > compute[0], (wait.to_dict(), compute.to_dict())


@pytest.mark.live
def test_profile_steps_write_one_trace_per_rank_that_the_trace_tools_read(slowed_ddp_run):
    traces = read_torch_traces([slowed_ddp_run / "traces"])
    assert [t.rank for t in traces] == [0, 1]
    for trace in traces:  # schedule(wait=1, warmup=1, active=3): three steps recorded
        assert trace.steps["step"].nunique() == 3, trace.steps
        work = trace.comms[trace.comms["kind"] == "work"]
        assert len(work) >= 3 and work["bytes"].notna().all(), trace.comms


@pytest.mark.live
def test_a_ddp_rank_slowed_from_outside_is_diagnosed_as_the_straggler(slowed_ddp_run):
    found = subprocess.run(
        [sys.executable, "-m", "workshop.cli", "diagnose", str(slowed_ddp_run), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(found.stdout)
    top = result["findings"][0]
    assert (top["problem"], top["rank"]) == ("straggler", 1), result
    assert top["share"] >= 0.10 and top["saving_ms"] > top["uncertainty_ms"], top
    # Horovod's mechanisms are not a DDP run's: neither judged nor "not measured"
    judged = {c["problem"] for c in result["costs"]}
    assert not judged & {"long_cycle_time", "fusion_off", "cache_off"}
    assert result["engine"] == "ddp" and result["settings"]["bucket_cap_mb"] == 25.0
