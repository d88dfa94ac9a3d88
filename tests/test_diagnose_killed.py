"""The rank that started a failure: a rank killed by a signal is named before the ranks that
failed only because their peer vanished (``workshop run``'s message, run.json's ``failure``,
``workshop diagnose``: one attribution, :func:`workshop.analysis.failure.attribute`), each
against its near miss: a rank that raised an exception."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from workshop.analysis.failure import attribute
from workshop.findings.diagnose import diagnose, diagnose_lines, diagnose_run
from workshop.findings.failure import failure_lines, launcher_problem
from workshop.readers.exits import oom_in_log, rank_ends, rank_exits, signal_of_exit
from workshop.readers.runs import read_run


def first_failure(launcher_log: str, rank_logs: dict[int, str], **said) -> tuple[dict, list]:
    """The attribution of a run's logs, and its lines (``said``: oom_kills, oom_in_log)."""
    found = attribute(rank_ends(launcher_log, rank_logs))
    return found, failure_lines(found, **said) if found else []


def _consequences(found: dict) -> dict[int, str | None]:
    return {e["rank"]: e["peer_words"] for e in found["consequences"]}


# horovodrun (Gloo) after rank 1 was SIGKILLed: rank 0's Gloo allreduce lost its peer. The
# launcher prints one "Process N exit" line per failed rank as each ends, then its error names
# the first to end (sorted by time).
GLOO_KILLED = """\
[0]<stdout>:Epoch 1: loss 2.1
Process 1 exit with status code 137.
Terminating remaining workers after failure of Process 1.
[0]<stderr>:RuntimeError: Gloo allreduce failed: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection reset by peer
Process 0 exit with status code 143.
RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job to be terminated. The first process to do so was:
Process name: 1
Exit code: 137
"""  # noqa: E501
RANK0_PEER_GONE = (
    "Traceback (most recent call last):\n  ...\nhorovod.common.exceptions.HorovodInternalError: "
    "Gloo allreduce failed: ... Connection reset by peer\n"
)
# The near miss, as horovodrun 0.28.1 printed it (tests/test_diagnose_killed.py's live run):
# rank 1 raised, and horovodrun then ended rank 0 itself (SIGTERM: 143).
GLOO_RAISED = """\
Process 1 exit with status code 1.
Terminating remaining workers after failure of Process 1.
Process 0 exit with status code 143.
RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job to be terminated. The first process to do so was:
Process name: 1
Exit code: 1
"""  # noqa: E501
RANK1_RAISED = (
    'Traceback (most recent call last):\n  File "/w/train.py", line 7, in <module>\n'
    "    next(batches)\nRuntimeError: fault injected on rank 1\n"
)
RANK0_SHUT_DOWN = (
    'Traceback (most recent call last):\n  File "/w/train.py", line 9, in <module>\n'
    "    optimizer.step()\nhorovod.common.exceptions.HorovodInternalError: Horovod has been "
    "shut down. This was caused by an exception on one of the ranks\n"
)


def test_signal_of_exit_reads_a_shells_and_pythons_codes():
    # a shell reports signal N as 128 + N (137 = 128 + 9); Python's Popen as -N
    assert [signal_of_exit(c) for c in (137, -9, 143, -15, 139)] == [
        "SIGKILL", "SIGKILL", "SIGTERM", "SIGTERM", "SIGSEGV",
    ]  # fmt: skip
    # ordinary exit statuses, and 255 (ssh's own failure: 255 - 128 = 127 is no signal)
    assert [signal_of_exit(c) for c in (0, 1, 2, 128, 255)] == [None] * 5


def test_a_sigkilled_rank_is_named_before_the_rank_that_lost_its_peer():
    found, lines = first_failure(
        GLOO_KILLED, {0: RANK0_PEER_GONE, 1: "Epoch 1 ...\n"}, oom_kills=0
    )
    cause = found["cause"]
    assert cause["rank"] == 1 and cause["how"] == "killed"
    assert cause["signal"] == "SIGKILL" and cause["exit_code"] == 137
    # its log says why it failed
    assert _consequences(found) == {0: "Connection reset by peer"} and found["also"] == []
    assert lines[0] == (
        "rank 1 died first: killed by SIGKILL from outside (exit code 137, horovodrun: "
        '"Process 1 exit with status code 137.")'
    )
    assert lines[1].startswith('rank 0 failed only because its peer vanished ("Connection')
    assert "out-of-memory killer" in lines[-1] and "memory.events" in lines[-1]
    assert "dmesg" in lines[-1] and "--batch-size" in lines[-1]


def test_the_killed_rank_comes_first_even_when_the_launcher_names_its_peer_first():
    # rank 0 noticed first and exited first: the launcher's "first process" is rank 0, but it
    # only lost its peer; the rank a signal ended is the cause
    log = (
        "Process 0 exit with status code 1.\nProcess 1 exit with status code -9.\n"
        "RuntimeError: ... The first process to do so was:\nProcess name: 0\nExit code: 1\n"
    )
    found, _ = first_failure(log, {0: RANK0_PEER_GONE})
    cause = found["cause"]
    assert (cause["rank"], cause["signal"], cause["exit_code"]) == (1, "SIGKILL", -9)
    assert _consequences(found) == {0: "Connection reset by peer"}
    # near miss: rank 0 ended first with an error of its own: it is the cause, not rank 1
    found, _ = first_failure(log, {0: "ValueError: bad batch\n"})
    assert (found["cause"]["rank"], found["cause"]["how"]) == (0, "exited")
    assert [e["rank"] for e in found["also"]] == [1]  # killed too, after it


def test_a_rank_that_raised_is_no_death_by_signal():
    exits = rank_exits(GLOO_RAISED)
    # rank 1's own exit first, then horovodrun's SIGTERM of rank 0, then its summary block
    assert [(e["rank"], e["exit_code"], e["signal"]) for e in exits] == [
        (1, 1, None), (0, 143, "SIGTERM"), (1, 1, None),
    ]  # fmt: skip
    # rank 0's SIGTERM is horovodrun's teardown after rank 1 raised: no death by signal
    raised = {0: RANK0_PEER_GONE, 1: RANK1_RAISED}
    found, lines = first_failure(GLOO_RAISED, raised)
    assert (found["cause"]["rank"], found["cause"]["how"]) == (1, "raised")
    assert _consequences(found) == {0: "Connection reset by peer"}
    assert (
        lines[0] == "rank 1 crashed at line 7 of train.py (next(batches)): RuntimeError: "
        "fault injected on rank 1"
    )
    assert not any("SIGTERM" in line or "died first" in line for line in lines)
    # without the teardown line, rank 1 ending first with an error of its own still decides
    found, _ = first_failure(GLOO_RAISED.replace("Terminating remaining", "x"), raised)
    assert (found["cause"]["rank"], found["cause"]["how"]) == (1, "raised")


def test_a_rank_that_raised_is_named_before_the_rank_horovod_shut_down():
    # issue 49's case: rank 1 raised in its input pipeline, rank 0 then failed with Horovod's
    # "has been shut down"; the launcher happened to report rank 0 first
    log = (
        "Process 0 exit with status code 1.\nProcess 1 exit with status code 1.\n"
        "RuntimeError: ... The first process to do so was:\nProcess name: 0\nExit code: 1\n"
    )
    found, lines = first_failure(log, {0: RANK0_SHUT_DOWN, 1: RANK1_RAISED})
    assert (found["cause"]["rank"], found["cause"]["how"]) == (1, "raised")
    assert lines[0].startswith("rank 1 crashed at line 7 of train.py (next(batches))")
    assert lines[1] == (
        "rank 0 then failed (horovod.common.exceptions.HorovodInternalError: Horovod has been "
        "shut down. This was caused by an exception on one of the ranks): a consequence of "
        "rank 1's end, not a cause"
    )
    # near miss: a rank killed from outside, not one that raised: the signal is the cause
    killed = log.replace(
        "Process 1 exit with status code 1.", "Process 1 exit with status code 137."
    )
    found, _ = first_failure(killed, {0: RANK0_SHUT_DOWN, 1: "Epoch 1\n"})
    assert (found["cause"]["rank"], found["cause"]["how"]) == (1, "killed")


def test_mpirun_and_srun_reports_of_a_killed_rank():
    mpirun = (
        "Primary job  terminated normally, but 1 process returned\n"
        "mpirun noticed that process rank 1 with PID 4242 on node nodeb exited on signal 9 "
        "(Killed).\n"
    )
    cause = first_failure(mpirun, {})[0]["cause"]
    assert (cause["rank"], cause["signal"], cause["launcher"]) == (1, "SIGKILL", "mpirun")
    srun = (
        "slurmstepd: error: Detected 1 oom_kill event in StepId=12.0. Some of the step tasks "
        "have been OOM Killed.\nsrun: error: nodeb: task 1: Killed\n"
    )
    found, lines = first_failure(srun, {}, oom_in_log=oom_in_log(srun))
    cause = found["cause"]
    assert (cause["rank"], cause["signal"], cause["launcher"]) == (1, "SIGKILL", "srun")
    assert 'the launcher\'s log reports it: "oom_kill"' in lines
    # a task that exited with a status of its own is not killed (srun names no rank's exit)
    assert first_failure("srun: error: nodeb: task 1: Exited with exit code 1\n", {})[0] is None


def test_an_oom_kill_counted_in_the_cgroup_is_said():
    _, lines = first_failure(GLOO_KILLED, {0: RANK0_PEER_GONE}, oom_kills=1)
    assert any("rank 1 ran out of memory" in line for line in lines)
    # none counted: nothing claimed
    _, quiet = first_failure(GLOO_KILLED, {0: RANK0_PEER_GONE}, oom_kills=0)
    assert not any("rank 1 ran out of memory" in line for line in quiet)


# A run that died before any number: no metrics, no step times, no timeline, no reference.
NO_NUMBERS = (
    pd.DataFrame(),
    pd.DataFrame(),
    None,
    pd.DataFrame(columns=["problem", "measure", "min", "median", "max"]),
    "t",
)


def _record(**fields) -> dict:
    return {"config": {"np": 2}, "status": "failed", "failed_ranks": [0]} | fields


def test_diagnose_names_the_killed_rank_and_what_sigkill_means():
    found, _ = first_failure(GLOO_KILLED, {0: RANK0_PEER_GONE})
    result = diagnose(_record(failure=found), *NO_NUMBERS)
    top = result["findings"][0]
    assert top["problem"] == "crashed" and top["rank"] == 1
    assert top["evidence"].startswith(
        "run.json: status failed: rank 1 died first: killed by SIGKILL from outside"
    )
    assert "rank 0 failed only because its peer vanished" in top["evidence"]
    assert top["fix"].startswith("SIGKILL from outside usually means the out-of-memory killer")
    assert diagnose_lines(result)[0].startswith(
        "most likely: the run did not finish, rank 1: run.json: status failed: rank 1 died first"
    )


def test_diagnose_of_a_rank_that_raised_still_sends_to_its_log():
    result = diagnose(_record(failed_ranks=[1], failure=None), *NO_NUMBERS)
    top = result["findings"][0]
    assert top["evidence"] == "run.json: status failed: the run failed; failed rank(s) 1"
    # which rank started it is analysis.failure.attribute's alone: without its answer, none
    # is named (the first of the failed ranks was a second rule)
    assert top["rank"] is None
    assert "logs/rank.N.log" in top["fix"] and "SIGKILL" not in top["fix"]


# ---------------------------------------------------------------------------------------------
# Live: real 2-rank runs (Gloo)


def _workshop(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "workshop.cli", *args], capture_output=True, text=True,
        timeout=300, env=os.environ | (env or {}),
    )  # fmt: skip


def _rank_processes(launcher) -> dict[int, object]:
    import psutil

    ranks = {}
    for child in psutil.Process(launcher.pid).children(recursive=True):
        try:
            if child.cmdline()[1:3] == ["-m", "workshop.train.torch_train"]:
                env = child.environ()
                rank = env.get("HOROVOD_RANK") or env["OMPI_COMM_WORLD_RANK"]
                ranks[int(rank)] = child
        except (psutil.Error, KeyError):
            continue
    return ranks


def _kill_tree(process: subprocess.Popen) -> None:
    import psutil

    try:
        for child in psutil.Process(process.pid).children(recursive=True):
            child.kill()
    except psutil.Error:
        pass
    process.kill()


@pytest.mark.live
@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_live_a_sigkilled_rank_is_named_first(controller, tmp_path, cpu_lock, horovod_ready):
    run_dir = tmp_path / "killed"
    argv = [sys.executable, "-m", "workshop.cli", "run", "-np", "2", "--epochs", "50",
            "--controller", controller, "--no-timeline", "--out", str(tmp_path),
            "--name", "killed"]  # fmt: skip
    launcher = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(240, _kill_tree, [launcher])  # never leave a 50-epoch run
    watchdog.start()
    try:
        for line in launcher.stdout:
            if line.startswith("Epoch 1:"):
                break
        ranks = _rank_processes(launcher)
        assert sorted(ranks) == [0, 1]
        ranks[1].send_signal(signal.SIGKILL)  # as the out-of-memory killer does
        output = launcher.stdout.read()
        launcher.wait(timeout=120)
    finally:
        watchdog.cancel()
        _kill_tree(launcher)
    print(output)
    assert launcher.returncode == 1, output
    run = read_run(run_dir)
    death = run["failure"]["cause"]
    assert death["rank"] == 1 and death["signal"] == "SIGKILL", death
    # horovodrun (Gloo) gives the exit status; mpirun only the signal
    if controller == "gloo":
        assert death["exit_code"] in (137, -9) and death["launcher"] == "horovodrun"
    else:
        assert death["exit_code"] is None and death["launcher"] == "mpirun"
    assert "rank 1 died first: killed by SIGKILL from outside" in output
    if controller == "gloo":  # mpirun ends rank 0 before it notices: nothing in its log
        peers = {e["rank"]: e["peer_words"] for e in run["failure"]["consequences"]}
        assert peers.get(0), (run_dir / "logs" / "rank.0.log").read_text()[-2000:]
        # rank 0 lost its peer (Gloo) or was shut down by Horovod: a consequence either way
        assert re.search(r"rank 0 (failed only because its peer vanished|then failed)", output)
        assert "a consequence of rank 1's end, not a cause" in output
    assert "rank 0 crashed" not in output  # its own "crash" is only the consequence
    diagnosed = _workshop("diagnose", str(run_dir), "--json")
    top = json.loads(diagnosed.stdout)["findings"][0]
    assert top["rank"] == 1 and "out-of-memory killer" in top["fix"], top
    text = _workshop("diagnose", str(run_dir)).stdout
    print(text)
    assert text.startswith("most likely: the run did not finish, rank 1: run.json: status failed")


@pytest.mark.live
def test_live_a_rank_that_raised_is_not_called_killed(
    tmp_path, cpu_lock, horovod_ready, tiny_run_argv
):
    result = _workshop(*tiny_run_argv(tmp_path, "raised"), env={"WORKSHOP_FAIL_RANK": "1"})
    print(result.stderr)
    assert result.returncode == 1
    run = read_run(Path(tmp_path / "raised"))
    cause = run["failure"]["cause"]
    assert (cause["rank"], cause["how"]) == (1, "raised") and run["failed_ranks"] == [1]
    assert "rank 1 crashed" in result.stderr and "died first" not in result.stderr
    text = _workshop("diagnose", str(tmp_path / "raised")).stdout
    assert "rank 1 crashed at line " in text and "SIGKILL" not in text


# Open MPI 4.1's message when srun started its ranks without PMI (help-ess-pmi.txt).
OMPI_NO_PMI = """\
--------------------------------------------------------------------------
The application appears to have been direct launched using "srun",
but OMPI was not built with SLURM's PMI support and therefore cannot
execute. There are several options for building PMI support under
SLURM, depending upon the SLURM version you are using:
--------------------------------------------------------------------------
*** An error occurred in MPI_Init_thread
"""


def test_a_launcher_without_pmi_is_explained_with_the_fix():
    problem = launcher_problem(OMPI_NO_PMI)
    assert problem.startswith("srun started the ranks without a PMI their MPI library speaks")
    assert "the launcher's log: \"The application appears to have been direct launched" in problem
    assert "Fix: srun --mpi=pmix (srun --mpi=list shows" in problem
    # near miss: a Gloo run that failed for another reason
    assert launcher_problem(GLOO_RAISED) is None


def test_workshop_run_and_diagnose_name_a_launcher_without_pmi(tmp_path, fake_program):
    # a stand-in srun that prints what Open MPI prints on each rank and fails as srun does
    srun = fake_program(tmp_path / "bin" / "srun", f"cat <<'END' >&2\n{OMPI_NO_PMI}END\nexit 1\n")
    result = _workshop(
        "run", "-np", "2", "--epochs", "1", "--steps-per-epoch", "2", "--no-timeline",
        "--launcher", f"{srun} --nodes=1 --ntasks=2", "--out", str(tmp_path), "--name", "nopmi",
    )  # fmt: skip
    assert result.returncode == 1
    assert "srun started the ranks without a PMI" in result.stderr
    assert "Fix: srun --mpi=pmix" in result.stderr
    run = read_run(tmp_path / "nopmi")
    assert run["launcher_problem"].startswith("srun started the ranks without a PMI")
    top = json.loads(_workshop("diagnose", str(tmp_path / "nopmi"), "--json").stdout)
    assert "srun started the ranks without a PMI" in top["findings"][0]["evidence"]
    assert top["findings"][0]["fix"].startswith("srun --mpi=pmix")


def test_diagnose_reads_the_logs_of_a_run_recorded_before_its_failure(tmp_path):
    # run.json without failure (workshop run before it named the rank that started it): the
    # launcher's and the ranks' logs still tell
    run_dir = tmp_path / "old"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps(_record(name="old")))
    (run_dir / "logs" / "launcher.log").write_text(GLOO_KILLED)
    (run_dir / "logs" / "rank.0.log").write_text(RANK0_PEER_GONE)
    top = diagnose_run(run_dir)["findings"][0]
    assert top["rank"] == 1 and "rank 1 died first: killed by SIGKILL" in top["evidence"]
    # near miss: the same run whose rank 1 raised
    (run_dir / "logs" / "launcher.log").write_text(GLOO_RAISED)
    (run_dir / "logs" / "rank.1.log").write_text(RANK1_RAISED)
    top = diagnose_run(run_dir)["findings"][0]
    # rank 1 raised: it is the cause, named with its line and error, whatever failed_ranks says
    assert top["rank"] == 1
    assert top["evidence"].startswith(
        "run.json: status failed: rank 1 crashed at line 7 of train.py (next(batches)): "
        "RuntimeError: fault injected on rank 1; rank 0 failed only because its peer vanished"
    )
    assert "SIGKILL" not in top["evidence"] and "logs/rank.1.log" in top["fix"]
