"""Real 2-process Horovod runs (Gloo and MPI, PyTorch and TensorFlow) on this machine's CPU."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workshop.readers.runs import read_metrics, read_run

pytestmark = pytest.mark.live


def workshop(*args: str, env: dict | None = None, timeout: int = 300):
    return subprocess.run(
        [sys.executable, "-m", "workshop.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ | (env or {}),
    )


def timeline_ranks(path: Path) -> set[str]:
    """Ranks that announced readiness in the timeline (negotiation ticks are X events named
    by the rank number)."""
    events = json.loads(path.read_text())
    return {e["name"] for e in events if e.get("ph") == "X" and e.get("name", "").isdigit()}


@pytest.mark.parametrize(
    "framework, controller",
    [("torch", "gloo"), ("torch", "mpi"), ("tensorflow", "gloo")],
)
def test_two_process_run_writes_the_run_directory(
    framework, controller, tmp_path, cpu_lock, horovod_ready
):
    result = workshop(
        "run",
        "--framework",
        framework,
        "--controller",
        controller,
        "-np",
        "2",
        "--epochs",
        "3",
        "--steps-per-epoch",
        "25",
        "--lr",
        "0.02",
        "--out",
        str(tmp_path),
        "--name",
        "run",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = tmp_path / "run"
    run = read_run(run_dir)
    assert run["status"] == "ok" and run["exit_code"] == 0
    assert run["config"]["np"] == 2 and run["config"]["controller"] == controller
    assert run["launch_command"][:6] == [
        "horovodrun",
        "-np",
        "2",
        "-H",
        "localhost:2",
        f"--{controller}",
    ]
    assert run["data"]["synthetic"] is False and run["data"]["train_samples"] > 0
    assert run["versions"]["horovod"] == "0.28.1"
    assert run["rank_status"] == {"0": "ok", "1": "ok"}
    metrics = read_metrics(run_dir)
    assert list(metrics["epoch"]) == [1, 2, 3]
    assert metrics["train_loss"].iloc[-1] < metrics["train_loss"].iloc[0]
    assert (metrics["samples"] == 2 * 25 * 32).all()
    assert timeline_ranks(run_dir / "timeline.json") == {"0", "1"}
    assert (run_dir / "logs" / "rank.0.log").read_text().count("Epoch") == 3
    assert (run_dir / "logs" / "rank.1.log").exists()
    assert "samples/s" in result.stdout and "timeline.json" in result.stdout


def test_a_crashing_rank_is_named(tmp_path, cpu_lock, horovod_ready, tiny_run_argv):
    result = workshop(*tiny_run_argv(tmp_path, "crash"), env={"WORKSHOP_FAIL_RANK": "1"})
    assert result.returncode == 1
    log = tmp_path / "crash" / "logs" / "rank.1.log"
    assert "rank 1 crashed" in result.stderr and str(log) in result.stderr
    assert "fault injected on rank 1" in log.read_text()
    run = read_run(tmp_path / "crash")
    assert run["status"] == "failed" and run["failed_ranks"] == [1]


def long_run_argv(out: Path, name: str, *options: str) -> list[str]:
    """`workshop run -np 2 --epochs 50 [options] --out OUT --name NAME`: a run that is still
    training when a test stops it."""
    cmd = [sys.executable, "-m", "workshop.cli", "run", "-np", "2", "--epochs", "50"]
    return [*cmd, *options, "--out", str(out), "--name", name]


def _stop_signals_default() -> None:
    # These tests stop a run started in the foreground. A test run started in the background
    # (`pytest &`) hands its children an ignored SIGINT, one under `nohup` an ignored SIGHUP,
    # and the launcher keeps an ignored signal ignored on purpose (a `nohup workshop run`
    # outlives its terminal): give the run the dispositions of a foreground command.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def test_ctrl_c_stops_every_rank_and_keeps_the_files(tmp_path, cpu_alone, horovod_ready):
    process = subprocess.Popen(
        long_run_argv(tmp_path, "stopped"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_stop_signals_default,
    )
    deadline = time.time() + 120
    for line in process.stdout:
        if line.startswith("Epoch 1:") or time.time() > deadline:
            break
    process.send_signal(signal.SIGINT)
    output = process.communicate(timeout=60)[0]
    assert process.returncode == 130, output
    run_dir = tmp_path / "stopped"
    run = read_run(run_dir)
    assert run["status"] == "interrupted" and run["signal"] == "SIGINT"
    assert run["exit_code"] == 130  # the launcher's own, not horovodrun's
    assert len(read_metrics(run_dir)) >= 1
    leftovers = subprocess.run(["pgrep", "-f", str(run_dir)], capture_output=True, text=True)
    assert leftovers.stdout == ""


def _start_long_run(run_dir: Path) -> tuple[subprocess.Popen, list]:
    """Start `workshop run` for many epochs; return it, once epoch 1 has finished, and the
    processes it started (horovodrun, Horovod's middlemen and shells, both ranks)."""
    import threading

    import psutil

    process = subprocess.Popen(
        long_run_argv(run_dir.parent, run_dir.name, "--no-timeline"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_stop_signals_default,
    )
    watchdog = threading.Timer(180, _kill_tree, [process])  # no epoch 1 in 3 minutes: stop
    watchdog.start()
    try:
        for line in process.stdout:
            if line.startswith("Epoch 1:"):
                break
        children = psutil.Process(process.pid).children(recursive=True)
        ranks = [c for c in children if c.cmdline()[1:3] == ["-m", "workshop.train.torch_train"]]
        assert len(ranks) == 2, [c.cmdline() for c in children]
    except BaseException:  # never leave a 50-epoch run behind
        _kill_tree(process)
        raise
    finally:
        watchdog.cancel()
    return process, children


def _kill_all(processes: list) -> None:
    import psutil

    for proc in processes:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


def _kill_tree(process: subprocess.Popen) -> None:
    import psutil

    try:
        _kill_all(psutil.Process(process.pid).children(recursive=True))
    except psutil.Error:
        pass
    process.kill()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_term_and_hup_stop_every_rank_like_ctrl_c(signum, tmp_path, cpu_alone, horovod_ready):
    """What a batch system sends at walltime, a Jupyter kernel restart, a closed terminal."""
    import psutil

    run_dir = tmp_path / "terminated"
    process, children = _start_long_run(run_dir)
    try:
        sent = time.perf_counter()
        process.send_signal(signum)
        output = process.communicate(timeout=60)[0]
        _, alive = psutil.wait_procs(children, timeout=max(0.0, 15 - (time.perf_counter() - sent)))
        gone_s = time.perf_counter() - sent
        assert alive == [], f"survivors: {[p.cmdline() for p in alive]}"
        assert gone_s < 15, gone_s
    finally:
        _kill_all(children)
    assert process.returncode == 128 + signum, output
    run = read_run(run_dir)
    assert run["status"] == "interrupted" and run["signal"] == signal.Signals(signum).name
    assert run["exit_code"] == process.returncode  # the launcher's own exit code
    assert len(read_metrics(run_dir)) >= 1
    assert signal.Signals(signum).name in output


def test_a_killed_launcher_leaves_a_stale_run(tmp_path, cpu_lock, horovod_ready):
    """SIGKILL (or a power cut) gives the launcher no chance to write its outcome: the readers
    say `stale` instead of `running` forever."""
    run_dir = tmp_path / "killed"
    process, children = _start_long_run(run_dir)
    try:
        assert read_run(run_dir)["status"] == "running"
        process.kill()
        process.wait(timeout=30)
    finally:
        _kill_all(children)
    run = read_run(run_dir)
    assert run["status"] == "stale", run["status"]
    assert str(process.pid) in run["stale_reason"]


def test_doctor_reports_both_frameworks_and_controllers(horovod_ready):
    result = workshop("doctor", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    facts = json.loads(result.stdout)
    for framework in ("torch", "tensorflow"):
        assert facts["horovod_build"][framework]["gloo"] is True
        assert facts["horovod_build"][framework]["mpi"] is True
    # torchvision, of torch's build kind (it imports: a mismatch would be a problem listed).
    assert facts["versions"]["torchvision"]
    assert facts["problems"] == []
