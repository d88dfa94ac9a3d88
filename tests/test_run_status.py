"""A run whose launcher died without recording its end reads as `stale`, not `running`."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import psutil

from workshop.readers.runs import launcher_identity, list_runs, read_run


def _run_dir(root: Path, name: str, status: str, launcher: dict | None) -> Path:
    run_dir = root / name
    run_dir.mkdir(parents=True)
    record = {
        "name": name,
        "status": status,
        "started_at": f"2026-01-0{len(name) % 9}T00:00:00",
        "config": {"framework": "torch", "np": 2},
    }
    if launcher is not None:
        record["launcher"] = launcher
    (run_dir / "run.json").write_text(json.dumps(record))
    return run_dir


def _unused_pid() -> int:
    """A pid no process has: above the kernel's limit (Linux), or simply unused."""
    limit = Path("/proc/sys/kernel/pid_max")
    pid = int(limit.read_text()) + 1 if limit.exists() else 999_999
    assert not psutil.pid_exists(pid)
    return pid


def test_a_live_launcher_keeps_its_run_running(tmp_path):
    me = launcher_identity()  # this test process stands in for a launcher that is alive
    assert me["host"] == socket.gethostname() and isinstance(me["pid"], int)
    run = read_run(_run_dir(tmp_path, "alive", "running", me))
    assert run["status"] == "running" and "stale_reason" not in run


def test_a_dead_launcher_makes_the_run_stale(tmp_path):
    gone = launcher_identity() | {"pid": _unused_pid()}
    run = read_run(_run_dir(tmp_path, "dead", "running", gone))
    assert run["status"] == "stale"
    assert f"pid {gone['pid']} on {gone['host']}" in run["stale_reason"]


def test_a_reused_pid_or_a_reboot_makes_the_run_stale(tmp_path):
    me = launcher_identity()
    # same pid, but a process that started an hour later than the recorded launcher
    earlier = me | {"process_started_s": me["process_started_s"] - 3600}
    reused = read_run(_run_dir(tmp_path, "reused", "running", earlier))
    assert reused["status"] == "stale" and "now another process" in reused["stale_reason"]
    if me["boot_id"]:
        rebooted = read_run(_run_dir(tmp_path, "rebooted", "running", me | {"boot_id": "x"}))
        assert rebooted["status"] == "stale" and "booted" in rebooted["stale_reason"]


def test_what_cannot_be_checked_from_here_is_left_alone(tmp_path):
    elsewhere = launcher_identity() | {"pid": _unused_pid(), "host": "another-node"}
    assert read_run(_run_dir(tmp_path, "remote", "running", elsewhere))["status"] == "running"
    # runs recorded before run.json had a launcher entry
    assert read_run(_run_dir(tmp_path, "old", "running", None))["status"] == "running"
    # a finished run is never stale, whatever became of its launcher
    gone = launcher_identity() | {"pid": _unused_pid()}
    assert read_run(_run_dir(tmp_path, "done", "ok", gone))["status"] == "ok"


def test_the_run_listing_shows_stale_runs(tmp_path):
    gone = launcher_identity() | {"pid": _unused_pid()}
    _run_dir(tmp_path, "a-ok", "ok", gone)
    _run_dir(tmp_path / "sweep-1", "p00-np1", "running", gone)
    _run_dir(tmp_path, "b-live", "running", launcher_identity())
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.json").write_text("{")
    runs = list_runs(tmp_path).set_index("run")
    assert runs.loc["a-ok", "status"] == "ok"
    assert runs.loc["sweep-1/p00-np1", "status"] == "stale"
    assert "no longer running" in runs.loc["sweep-1/p00-np1", "stale_reason"]
    assert runs.loc["b-live", "status"] == "running"
    assert runs.loc["broken", "status"].startswith("unreadable: ")
    assert str(tmp_path / "broken" / "run.json") in runs.loc["broken", "status"]
    assert list_runs(tmp_path / "nothing-here").empty


def test_doctor_names_the_stale_runs(tmp_path):
    from workshop.launch.environment import run_overview

    gone = launcher_identity() | {"pid": _unused_pid()}
    stale = _run_dir(tmp_path, "killed", "running", gone)
    _run_dir(tmp_path, "fine", "ok", gone)
    overview = run_overview(tmp_path)
    assert overview["by_status"] == {"stale": 1, "ok": 1}
    assert [s["path"] for s in overview["stale"]] == [str(stale)]
    assert "no longer running" in overview["stale"][0]["reason"]
