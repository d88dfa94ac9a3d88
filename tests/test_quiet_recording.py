"""The quiet-machine recording path (workshop.launch.quiet) and sweeps in interleaved rounds.

The re-recording rule is tested with a scripted load (the measurement stands in, the run
directories and run.json are real); the measurement itself against real busy processes, one
that is not ours (foreign: must be seen) and one that is our own waited child (must not)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from workshop.launch import quiet, sweep
from workshop.readers.sweep import read_compute_baseline, read_sweep

# busy for {s} CPU seconds (not wall seconds: the machine may be shared while tests run)
BUSY = "import time\nwhile time.process_time() < {s}:\n    pass\n"


class ScriptedLoad:
    """Stands in for quiet.ForeignLoad: each use reports the next of ``loads`` (cores)."""

    def __init__(self, loads):
        self.loads = list(loads)

    def __call__(self):
        load = self.loads.pop(0)

        class Measured:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.seconds, self.foreign_cpu_s, self.remote_cpu_s = 10.0, 10.0 * load, 0.0
                self.foreign_cores = load

        return Measured()


def no_wait(**_):
    return {"waited_s": 0.0, "quiet_before_cores": 0.0}


def make_run(tmp_path):
    made = []

    def run():
        run_dir = tmp_path / f"run-{len(made)}"
        run_dir.mkdir()
        (run_dir / "run.json").write_text(json.dumps({"status": "ok"}))
        made.append(run_dir)
        return run_dir

    return run, made


def test_a_disturbed_run_is_deleted_and_recorded_again(tmp_path):
    run, made = make_run(tmp_path)
    lines = []
    kept = quiet.recorded(run, wait=no_wait, measure=ScriptedLoad([0.4, 0.06, 0.02]),
                          report=lines.append, extra={"round": 2})  # fmt: skip
    assert kept == made[2] and not made[0].exists() and not made[1].exists()
    record = json.loads((kept / "run.json").read_text())["recording"]
    assert record["quiet"] is True and record["foreign_cores"] == 0.02
    assert record["disturbed_attempts"] == [0.4, 0.06]  # 0.06: just above the 0.05 threshold
    assert record["max_foreign_cores"] == quiet.MAX_FOREIGN_CORES == 0.05
    assert record["round"] == 2 and record["waited_s"] == 0.0
    assert any("0.40 cores (threshold 0.05); recording it again" in line for line in lines)


def test_the_threshold_itself_is_quiet(tmp_path):
    # the near miss of the test above: exactly at the threshold counts as quiet
    run, made = make_run(tmp_path)
    kept = quiet.recorded(run, wait=no_wait, measure=ScriptedLoad([0.05]))
    assert kept == made[0]
    assert json.loads((kept / "run.json").read_text())["recording"]["disturbed_attempts"] == []


def test_every_attempt_disturbed_keeps_the_last_and_says_so(tmp_path):
    run, made = make_run(tmp_path)
    with pytest.raises(quiet.BusyMachine, match="every one of 2 attempts was disturbed"):
        quiet.recorded(run, attempts=2, wait=no_wait, measure=ScriptedLoad([0.3, 0.2]))
    assert not made[0].exists() and made[1].exists()
    record = json.loads((made[1] / "run.json").read_text())["recording"]
    assert record["quiet"] is False and record["disturbed_attempts"] == [0.3]
    # a sweep does not take such a run as finished: resuming records the point again
    (made[1] / "run.json").write_text(json.dumps({"status": "ok", "config": {}, "recording":
                                                  record}))  # fmt: skip
    assert sweep.finished_runs(tmp_path) == []


def test_a_wait_that_never_ends_quiet_names_the_load(monkeypatch):
    monkeypatch.setattr(quiet, "foreign_cores_now", lambda window_s: 1.3)
    monkeypatch.setattr(quiet, "busiest_others", lambda: [("pytest", 0.9)])
    with pytest.raises(quiet.BusyMachine, match=r"other work used 1\.30 cores .*pytest 0\.90"):
        quiet.wait_for_quiet(timeout_s=0.0)


def test_a_process_that_is_not_ours_is_foreign_load():
    # a busy process started by another session (not our child while measured) counts
    other = subprocess.Popen([sys.executable, "-c", BUSY.format(s=30)], start_new_session=True)
    try:
        time.sleep(0.3)
        before = quiet._proc_stat(str(other.pid))[2]
        with quiet.ForeignLoad() as load:
            time.sleep(1.5)
        taken = quiet._proc_stat(str(other.pid))[2] - before
    finally:
        other.kill()
        other.wait()
    # other work can only add to the foreign load; the busy process alone took `taken`
    assert taken >= 0.3, taken
    assert load.foreign_cpu_s >= 0.9 * taken, (load.foreign_cpu_s, taken)


def test_our_own_waited_child_is_not_foreign_load():
    # the near miss: the same busy loop as our own child (a rank of the run, waited for by its
    # launcher) is the run's own CPU time, not other work; the slip would be to count only
    # this process's own time (the child's 1.5 s would then be foreign)
    with quiet.ForeignLoad() as load:
        subprocess.run([sys.executable, "-c", BUSY.format(s=1.5)], check=True)
    assert load.own_cpu_s >= 1.2, load.own_cpu_s
    assert load.foreign_cpu_s <= load.busy_cpu_s - load.own_cpu_s + 0.01


def test_sweep_rounds_interleave_and_resume(tmp_path, sweep_base, fake_launcher):
    fake = fake_launcher()
    summary = sweep.run_sweep(tmp_path, sweep_base, {"np": [1, 2]}, rounds=3, launcher=fake,
                              progress=False)  # fmt: skip
    assert fake.calls == ["r1-p00-np1", "r1-p01-np2", "r2-p00-np1", "r2-p01-np2",
                          "r3-p00-np1", "r3-p01-np2"]  # fmt: skip
    assert summary["round"].tolist() == [1, 1, 2, 2, 3, 3]
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    assert manifest["rounds"] == 3 and manifest["record"] is False
    # one run lost: resuming runs that one point only (each finished run stands for one round)
    (tmp_path / "r2-p01-np2" / "run.json").unlink()
    again = fake_launcher()
    sweep.run_sweep(tmp_path, sweep_base, {"np": [1, 2]}, rounds=3, launcher=again,
                    progress=False)  # fmt: skip
    assert again.calls == ["r3-p01-np2"]  # r3's finished run now stands for round 2's point


def test_rounds_below_one_are_refused(tmp_path, sweep_base, fake_launcher):
    with pytest.raises(ValueError, match="--rounds must be at least 1, not 0"):
        sweep.run_sweep(tmp_path, sweep_base, {"np": [1]}, rounds=0, launcher=fake_launcher(),
                        progress=False)  # fmt: skip


def test_recorded_sweep_writes_the_record_into_each_run(tmp_path, sweep_base, fake_launcher,
                                                        monkeypatch):  # fmt: skip
    monkeypatch.setattr(quiet, "wait_for_quiet", no_wait)
    loads = ScriptedLoad([0.01, 0.2, 0.0])
    monkeypatch.setattr(quiet, "ForeignLoad", loads)
    real_recorded = quiet.recorded
    monkeypatch.setattr(quiet, "recorded", lambda run, **kw: real_recorded(
        run, wait=no_wait, measure=loads, **kw))  # fmt: skip
    sweep.run_sweep(tmp_path, sweep_base, {"np": [1, 2]}, record=True, launcher=fake_launcher(),
                    progress=False)  # fmt: skip
    runs, _ = read_sweep(tmp_path)
    assert runs["foreign_cores"].tolist() == [0.01, 0.0]
    second = json.loads((tmp_path / "p01-np2" / "run.json").read_text())["recording"]
    assert second["disturbed_attempts"] == [0.2] and second["point"] == "p01-np2"
    assert sorted(p.name for p in tmp_path.glob("p01*")) == ["p01-np2"]  # the first attempt went


def test_compute_baseline_file_is_read_and_checked(tmp_path):
    entry = {"round": 1, "procs": 2, "dataset": "mnist", "batch_size": 32, "window_s": 10.0,
             "samples_per_s": [100.0, 90.0], "total_samples_per_s": 190.0,
             "recording": {"foreign_cores": 0.01}}  # fmt: skip
    (tmp_path / "compute-baseline.jsonl").write_text(json.dumps(entry) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"compute-baseline.jsonl, line 2: not a"):
        read_compute_baseline(tmp_path)
    (tmp_path / "compute-baseline.jsonl").write_text(json.dumps(entry) + "\n")
    table = read_compute_baseline(tmp_path)
    assert table.total_samples_per_s.tolist() == [190.0] and table.foreign_cores[0] == 0.01
    assert read_compute_baseline(tmp_path / "nowhere").empty


def test_one_at_a_time_compares_each_knob_with_the_baseline(sweep_base):
    grid = {"compression": ["none", "fp16"], "cache_capacity": [1024, 0], "np": [2]}
    points = sweep.expand_grid(sweep_base, grid, one_at_a_time=True)
    assert [name for name, _ in points] == ["p00-baseline", "p01-fp16", "p02-cache0"]
    configs = {name: (c.compression, c.cache_capacity, c.np) for name, c in points}
    assert configs == {"p00-baseline": ("none", 1024, 2), "p01-fp16": ("fp16", 1024, 2),
                       "p02-cache0": ("none", 0, 2)}  # fmt: skip
    # the near miss: the full grid would also run fp16 with the cache off
    assert len(sweep.expand_grid(sweep_base, grid)) == 4


def test_compute_baseline_refuses_a_grid_of_networks_or_batches(tmp_path, sweep_base,
                                                                fake_launcher):  # fmt: skip
    fake = fake_launcher()
    with pytest.raises(ValueError, match=r"the grid varies batch_size \(\[32, 64\]\)"):
        sweep.run_sweep(tmp_path / "s", sweep_base, {"np": [1, 2], "batch_size": [32, 64]},
                        compute_baseline=True, launcher=fake, progress=False)  # fmt: skip
    assert fake.calls == [] and not (tmp_path / "s").exists()


def test_compute_baseline_times_the_points_network_and_batch(
    tmp_path, sweep_base, fake_launcher, monkeypatch
):
    # the near miss: the base configuration's defaults (mnist, 32) instead of the grid's values
    from workshop.train import compute_probe

    asked = []

    def stand_in(dataset, batch_size, procs, window_s=10.0):
        asked.append((dataset, batch_size, procs))
        return {"procs": procs, "dataset": dataset, "batch_size": batch_size, "window_s": 1.0,
                "samples_per_s": [1.0] * procs, "total_samples_per_s": float(procs),
                "parameters": 10, "gradient_bytes": 40}  # fmt: skip

    monkeypatch.setattr(compute_probe, "measure", stand_in)
    grid = {"np": [1, 2], "dataset": ["cifar10"], "batch_size": [64]}
    sweep.run_sweep(tmp_path, sweep_base, grid, rounds=2, compute_baseline=True,
                    launcher=fake_launcher(), progress=False)  # fmt: skip
    assert asked == [("cifar10", 64, 1), ("cifar10", 64, 2)] * 2
    assert read_compute_baseline(tmp_path)["round"].tolist() == [1, 1, 2, 2]


@pytest.mark.live
def test_the_compute_probe_times_real_steps_in_pinned_processes():
    from workshop.train.compute_probe import measure

    result = measure("mnist", 16, 2, window_s=1.0)
    assert result["parameters"] == 80_202 and result["gradient_bytes"] == 320_808
    assert len(result["samples_per_s"]) == 2 and min(result["samples_per_s"]) > 0
    assert result["total_samples_per_s"] == pytest.approx(sum(result["samples_per_s"]), abs=0.2)


def test_long_lived_processes_of_ours_count_as_ours():
    # lesson 01's demo workers live across experiments and are never waited for: named in
    # ``pids`` they are ours; unnamed (the near miss) their CPU would be other work
    worker = subprocess.Popen([sys.executable, "-c", BUSY.format(s=30)])
    try:
        time.sleep(0.3)
        before = quiet._proc_stat(str(worker.pid))[2]
        with quiet.ForeignLoad(pids=(worker.pid,)) as load:
            time.sleep(1.0)
        taken = quiet._proc_stat(str(worker.pid))[2] - before
    finally:
        worker.kill()
        worker.wait()
    assert taken >= 0.2, taken
    assert load.own_cpu_s >= 0.9 * taken, (load.own_cpu_s, taken)


def test_a_high_load_average_keeps_a_quiet_cpu_window_waiting(monkeypatch):
    # the near miss of the CPU window alone: the last minute's work (a sweep's previous run)
    # still in the 1-minute load average; 1.5 on 2 cores is too much, 1.4 is not
    monkeypatch.setattr(quiet, "foreign_cores_now", lambda window_s: 0.0)
    monkeypatch.setattr(quiet, "busiest_others", lambda: [])
    monkeypatch.setattr(quiet.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(quiet.os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    with pytest.raises(quiet.BusyMachine, match=r"load average 1\.50 \(under 1\.5 wanted\)"):
        quiet.wait_for_quiet(timeout_s=0.0)
    monkeypatch.setattr(quiet.os, "getloadavg", lambda: (1.4, 1.0, 1.0))
    assert quiet.wait_for_quiet(timeout_s=0.0)["quiet_before_cores"] == 0.0


def _fake_workshop_run(monkeypatch, tmp_path, loads):
    """`workshop run` in-process with its launch and the quiet path's wait and measurement
    standing in (run directories and run.json are real files)."""
    from workshop.commands import run as run_command

    run, made = make_run(tmp_path)
    monkeypatch.setattr(run_command, "run_one", lambda config, **kw: run())
    monkeypatch.setattr(run_command, "summarize", lambda run_dir: "")
    measure = ScriptedLoad(loads)
    real_recorded = quiet.recorded
    monkeypatch.setattr(quiet, "recorded", lambda launch, **kw: real_recorded(
        launch, wait=no_wait, measure=measure, **kw))  # fmt: skip
    return made


@pytest.mark.parametrize("how", ["--record", "WORKSHOP_RECORD=1"])
def test_workshop_run_records_through_the_quiet_path(tmp_path, monkeypatch, how):
    from workshop.cli import main

    made = _fake_workshop_run(monkeypatch, tmp_path, [0.3, 0.02])
    if how == "--record":
        args = ["--record"]
    else:  # how recorders that start `workshop run` themselves (benchmarks) ask for it
        monkeypatch.setenv("WORKSHOP_RECORD", "1")
        args = []
    assert main(["run", "--out", str(tmp_path), "--name", "r", *args]) == 0
    assert not made[0].exists()  # disturbed (0.3 cores): deleted and recorded again
    recording = json.loads((made[1] / "run.json").read_text())["recording"]
    assert recording["quiet"] and recording["disturbed_attempts"] == [0.3]


def test_workshop_run_without_record_writes_no_record(tmp_path, monkeypatch):
    from workshop.cli import main

    made = _fake_workshop_run(monkeypatch, tmp_path, [0.3])
    monkeypatch.delenv("WORKSHOP_RECORD", raising=False)
    assert main(["run", "--out", str(tmp_path), "--name", "r"]) == 0
    assert "recording" not in json.loads((made[0] / "run.json").read_text())


def test_workshop_run_on_a_machine_never_quiet_fails_with_the_loads(tmp_path, monkeypatch,
                                                                  capsys):  # fmt: skip
    from workshop.cli import main

    _fake_workshop_run(monkeypatch, tmp_path, [0.3] * 5)
    assert main(["run", "--out", str(tmp_path), "--name", "r", "--record"]) == 3
    assert "every one of 5 attempts was disturbed" in capsys.readouterr().err


def test_the_capstone_harness_records_through_the_quiet_path(tmp_path, monkeypatch):
    from workshop.launch import harness

    attempts = []

    def once(command, run_dir, *injected):
        attempts.append(run_dir.exists())
        run_dir.mkdir()
        (run_dir / "run.json").write_text(json.dumps({"status": "ok"}))
        return {"command": command, "foreign_cpu_s": 0.0}

    monkeypatch.setattr(harness, "_record_once", once)
    measure = ScriptedLoad([0.08, 0.01])  # 0.08: disturbed (above 0.05), recorded again
    monkeypatch.setattr(harness, "quietly", lambda make, **kw: quiet.quietly(
        make, wait=no_wait, measure=measure, **kw))  # fmt: skip
    record = harness.record_run(["workshop", "run"], tmp_path / "broken", quiet=True)
    assert attempts == [False, False]  # the disturbed attempt's folder was deleted first
    saved = json.loads((tmp_path / "broken" / "run.json").read_text())["recording"]
    assert saved == record["recording"] and saved["disturbed_attempts"] == [0.08]
