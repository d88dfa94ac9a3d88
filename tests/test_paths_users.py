"""Per-user run folders (issue 39, item 1): where `workshop run` writes for each user.

The second-user tests run the same install's commands as a temporary Unix user (root only;
skipped with the reason otherwise; see unix_users.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from unix_users import as_user, unix_users

from workshop import paths
from workshop.paths import REPO_DIR, RunsDirError, choose_runs_dir, runs_dir


def test_workshop_runs_wins_and_is_used_as_given(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKSHOP_RUNS", str(tmp_path / "mine"))
    choice = choose_runs_dir(cwd=REPO_DIR)
    assert (choice.folder, choice.rule, choice.problem) == (
        tmp_path / "mine",
        "$WORKSHOP_RUNS",
        "",
    )


def test_own_clone_gives_the_clones_runs_from_any_subfolder(monkeypatch, tmp_path):
    monkeypatch.delenv("WORKSHOP_RUNS", raising=False)
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    (clone / "notebooks").mkdir()
    # tmp_path is this user's: the clone is "your clone", from its top and from notebooks/.
    assert choose_runs_dir(cwd=clone).folder == clone / "runs"
    assert choose_runs_dir(cwd=clone / "notebooks").folder == clone / "runs"


def test_outside_a_clone_the_current_folder_runs(monkeypatch, tmp_path):
    monkeypatch.delenv("WORKSHOP_RUNS", raising=False)
    choice = choose_runs_dir(cwd=tmp_path)
    assert (choice.folder, choice.problem) == (tmp_path / "runs", "")


def test_a_file_in_the_way_is_a_problem_naming_it_and_the_variable(monkeypatch, tmp_path):
    blocker = tmp_path / "runs-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("WORKSHOP_RUNS", str(blocker))
    assert choose_runs_dir().problem == f"{blocker} is a file, not a folder"
    with pytest.raises(RunsDirError, match=r"is a file, not a folder: set WORKSHOP_RUNS"):
        runs_dir()
    assert paths.writable_problem(blocker / "sub") == (
        f"cannot create {blocker / 'sub'}: {blocker} is a file, not a folder"
    )


def test_workshop_run_with_a_file_as_folder_says_one_line(monkeypatch, tmp_path):
    blocker = tmp_path / "runs-file"
    blocker.write_text("")
    env = {**os.environ, "WORKSHOP_RUNS": str(blocker)}
    found = subprocess.run(
        [sys.executable, "-m", "workshop.cli", "run", "-np", "1", "--epochs", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 2, found.stderr
    assert found.stderr.strip().splitlines() == [
        f"workshop run: {blocker} is a file, not a folder: set WORKSHOP_RUNS to a folder of "
        "yours, or give --out"
    ]


# --- as a second Unix user, on this same install --------------------------------------------


@pytest.fixture
def learner():
    """A temporary Unix user; removed (user and files) at teardown whatever happened."""
    with unix_users(1) as (users, _):
        yield users[0]


def as_learner(learner, args, *, cwd=REPO_DIR, env=None, timeout=120):
    return as_user(learner, args, cwd=cwd, env=env, timeout=timeout)


RESOLVE = "from workshop.paths import choose_runs_dir as c; x = c(); print(x.folder, x.problem)"


def test_second_user_in_the_installers_clone_gets_a_home_folder(learner):
    found = as_learner(learner, ["-c", RESOLVE])
    assert found.returncode == 0, found.stderr
    # /work/main (the clone) is root's: this user writes into its own home, not the clone.
    assert found.stdout.split() == [str(learner["home"] / "workshop-runs")]


def test_second_user_in_a_folder_of_its_own_gets_dot_runs(learner):
    mine = learner["home"] / "lessons"
    found = as_learner(learner, ["-c", f"import os; os.makedirs({str(mine)!r}); " + RESOLVE])
    assert found.returncode == 0, found.stderr
    found = as_learner(learner, ["-c", RESOLVE], cwd=mine)
    assert found.stdout.split() == [str(mine / "runs")]


def test_second_user_help_and_unwritable_folders_are_one_line_errors(learner):
    found = as_learner(learner, ["-m", "workshop.cli", "run", "--help"])
    assert found.returncode == 0 and "--out" in found.stdout, found.stderr
    theirs = REPO_DIR / "runs"  # root's
    run = ["-m", "workshop.cli", "run", "-np", "1", "--epochs", "1", "--steps-per-epoch", "5"]
    found = as_learner(learner, run, env={"WORKSHOP_RUNS": str(theirs / "x")})
    assert found.returncode == 2
    assert "Traceback" not in found.stderr
    lines = found.stderr.strip().splitlines()
    assert len(lines) == 1, found.stderr
    assert lines[0].startswith(f"workshop run: cannot write {theirs / 'x'}")
    assert "set WORKSHOP_RUNS to a folder of yours" in lines[0]
    found = as_learner(learner, [*run, "--out", str(REPO_DIR)])
    assert found.returncode == 2
    assert found.stderr.strip().splitlines() == [
        f"workshop run: --out: cannot write {REPO_DIR}: permission denied, owned by root: "
        "give a folder of yours"
    ]


@pytest.mark.live
def test_second_user_runs_for_real_into_its_own_folder(learner, horovod_ready, cpu_lock):
    before = sorted((REPO_DIR / "runs").glob("*")) if (REPO_DIR / "runs").is_dir() else []
    run = ["-m", "workshop.cli", "run", "-np", "1", "--epochs", "1", "--steps-per-epoch", "5"]
    found = as_learner(learner, [*run, "--name", "first", "--quiet"], timeout=300)
    assert found.returncode == 0, found.stdout + found.stderr
    run_dir = learner["home"] / "workshop-runs" / "first"
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "ok"
    assert run_dir.stat().st_uid == learner["uid"]
    after = sorted((REPO_DIR / "runs").glob("*")) if (REPO_DIR / "runs").is_dir() else []
    assert after == before  # nothing written into the installer's clone


@pytest.mark.live
def test_second_user_checks_a_script_of_its_own(learner, horovod_ready, cpu_lock):
    mine = learner["home"] / "lesson02"
    script = Path(__file__).parent / "check_scripts" / "torch_correct.py"
    setup = f"import os, shutil; os.makedirs({str(mine)!r}); "
    setup += f"shutil.copy({str(script)!r}, {str(mine)!r})"
    assert as_learner(learner, ["-c", setup]).returncode == 0
    check = ["-m", "workshop.cli", "check", "torch_correct.py", "--json", "--", "--steps", "5"]
    found = as_learner(learner, check, cwd=mine, timeout=300)
    assert found.returncode == 0, found.stdout + found.stderr
    report = json.loads(found.stdout)
    assert report["exit_code"] == 0 and report["error"] is None


@pytest.mark.live
def test_second_user_doctor_names_its_own_folder(learner):
    # live: doctor probes Horovod in child processes (about 15 s)
    found = as_learner(learner, ["-m", "workshop.cli", "doctor", "--json"], timeout=300)
    runs = json.loads(found.stdout)["runs"]
    assert runs["folder"] == str(learner["home"] / "workshop-runs")
    assert runs["rule"] == f"~/workshop-runs (the current folder is in root's clone {REPO_DIR})"
    assert runs["problem"] == ""
    assert runs["by_status"] == {}  # not the installer's runs
