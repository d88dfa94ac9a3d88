"""No false stall under load: a rank starved of CPU (its progress not rewritten) or collectives
younger than the stall timeout are not a stall; a real stall is still named. Unit tests on the
watch, and a live run of correct checks and a real stall beside competing Horovod training runs
(the room of learners on one node that showed the false stall) and CPU-burning processes."""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from processes import processes_with

from workshop import check
from workshop.check import stalls

SCRIPTS = Path(__file__).parent / "check_scripts"
GRADS = "t.py:28: loss.backward()"


def _pending(age: float, name: str) -> list[dict]:
    return [{"op": "allreduce", "name": name, "where": GRADS, "age_s": age}]


def _progress(beat: int, age: float) -> dict:
    """Both ranks frozen (same counters), rank 0 in 'acc', rank 1 in 'grads', each written
    ``beat`` times, their collectives ``age`` seconds old."""
    return {
        0: {"counters": "8 8", "pending": _pending(age, "acc"), "beat": beat},
        1: {"counters": "9 8", "pending": _pending(age, "grads"), "beat": beat},
    }


def test_a_real_stall_is_named_once_every_rank_waited_the_timeout():
    watch = stalls.StallWatch(stall_s=20)
    # each second: both ranks rewrite their progress (beat) and wait a second longer
    found = [watch.feed(_progress(beat=t, age=t + 3.0), now=float(t)) for t in range(21)]
    assert found[:20] == [None] * 20
    assert found[20] is not None and found[20].waited_s == 23.0


def test_a_rank_starved_of_cpu_is_not_a_stall():
    # rank 1 does not rewrite its progress for 30 s (the machine is loaded): its counters prove
    # nothing, even though nothing changed and both wait in collectives
    watch = stalls.StallWatch(stall_s=20)
    for t in range(31):
        progress = _progress(beat=t, age=t + 3.0)
        progress[1]["beat"] = 0
        assert watch.feed(progress, now=float(t)) is None
    # it writes again from t=31: the clock restarted at t=30, the last moment it was starved,
    # so a stall takes until t=50
    for t in range(31, 50):
        assert watch.feed(_progress(beat=t, age=t + 3.0), now=float(t)) is None
    assert watch.feed(_progress(beat=50, age=53.0), now=50.0) is not None


def test_collectives_younger_than_the_timeout_are_not_a_stall():
    # the false stall of issue 42: "for 20 s no rank made progress ... (the oldest had waited
    # 0 s)": rank 0's collective is a second old (it was submitted after the counters were
    # last read), so it has not waited
    watch = stalls.StallWatch(stall_s=20)
    for t in range(25):
        progress = _progress(beat=t, age=t + 3.0)
        progress[0]["pending"] = _pending(0.0, "acc")
        assert watch.feed(progress, now=float(t)) is None


# ---------------------------------------------------------------------------------------------
# Live: checks beside CPU-burning processes on this machine's cores


def _burn(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.mark.live
def test_live_no_false_stall_under_load_and_a_real_stall_still_named(
    tmp_path, cpu_lock, horovod_ready
):
    # Two competing 2-rank training runs (workshop run, as other learners' would) and 2 busy
    # processes on 2 cores, then 3 checks of a correct script and 1 of a stalling one at once:
    # 6 + 2 checked ranks beside 4 training ranks and 2 burners. A short stall timeout (4 s)
    # makes a false stall likely where the watch cannot tell starved ranks from waiting ones.
    training = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "workshop.cli",
                "run",
                "-np",
                "2",
                "--epochs",
                "500",
                "--steps-per-epoch",
                "40",
                "--no-timeline",
                "--quiet",
                "--out",
                str(tmp_path / "competing"),
                "--name",
                f"learner-{i}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for i in range(2)
    ]
    burners = [multiprocessing.Process(target=_burn, args=(240,)) for _ in range(2)]
    for burner in burners:
        burner.start()
    try:
        time.sleep(5)  # the competing runs past their start-up, training
        assert all(run.poll() is None for run in training), "a competing run ended early"

        def run(name: str, index: int) -> check.Report:
            folder = tmp_path / f"{index}"
            folder.mkdir()
            return check.check_script(SCRIPTS / name, cwd=folder, quiet=True, base_run=False,
                                      stall_s=4, timeout_s=200)  # fmt: skip

        names = ["torch_correct.py"] * 3 + ["torch_rank0_metric_allreduce.py"]
        with ThreadPoolExecutor(len(names)) as pool:
            reports = list(pool.map(run, names, range(len(names))))
        assert all(run.poll() is None for run in training), "the competition stopped early"
    finally:
        for burner in burners:
            burner.kill()
            burner.join()
        for competing in training:  # workshop run stops its ranks on SIGTERM
            competing.send_signal(signal.SIGTERM)
        for competing in training:
            competing.wait(timeout=60)
    assert processes_with(str(tmp_path / "competing")) == [], "competing ranks left running"
    for report in reports:
        print(report)
    correct, stalled = reports[:3], reports[3]
    assert [r.stalled for r in correct] == [False] * 3, [r.error for r in correct]
    assert all(r.exit_code == 0 for r in correct)
    assert stalled.stalled and "never submitted by rank" in stalled.error
    assert stalled.stalled_for_s >= 3.0  # the oldest collective waited the timeout
