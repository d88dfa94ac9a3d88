"""Finding Horovod's programs next to the running interpreter, so that `.venv/bin/workshop`,
a JupyterLab kernel or an IDE works without `source .venv/bin/activate`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workshop.launch import environment
from workshop.readers.runs import read_run

# A PATH without the virtual environment: what a shell has before `source .venv/bin/activate`.
BARE_PATH = "/usr/bin:/bin"
WORKSHOP = Path(sys.executable).parent / "workshop"


def test_the_interpreters_folder_comes_before_path(tmp_path, monkeypatch, fake_program):
    venv_bin, other_bin = tmp_path / "venv" / "bin", tmp_path / "elsewhere"
    venv_bin.mkdir(parents=True)
    other_bin.mkdir()
    ours = fake_program(venv_bin / "horovodrun")
    fake_program(other_bin / "horovodrun")
    only_on_path = fake_program(other_bin / "mpirun")
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.setenv("PATH", str(other_bin))
    assert environment.find_program("horovodrun") == str(ours)
    assert environment.find_program("mpirun") == str(only_on_path)
    assert environment.find_program("no-such-program-here") is None
    (venv_bin / "notexec").write_text("")  # present but not executable: not a program
    assert environment.find_program("notexec") is None


def _bare_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    return env | {"PATH": BARE_PATH}


@pytest.mark.live
def test_doctor_finds_horovod_without_an_activated_venv(cpu_lock, horovod_ready):
    result = subprocess.run(
        [str(WORKSHOP), "doctor", "--json"],
        capture_output=True,
        text=True,
        env=_bare_env(),
        timeout=300,
    )
    facts = json.loads(result.stdout)
    assert facts["problems"] == [], facts["problems"]
    assert result.returncode == 0
    assert facts["programs"]["horovodrun"] == str(Path(sys.executable).parent / "horovodrun")


@pytest.mark.live
def test_run_works_without_an_activated_venv(tmp_path, cpu_lock, horovod_ready, tiny_run_argv):
    result = subprocess.run(
        tiny_run_argv(tmp_path, "bare", executable=str(WORKSHOP)),
        capture_output=True,
        text=True,
        env=_bare_env(),
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert read_run(tmp_path / "bare")["status"] == "ok"
