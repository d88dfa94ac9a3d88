"""The one rank-start helper (workshop.launch.horovodrun): horovodrun's command line and the ranks'
environment, and that workshop run, the lessons' launcher and workshop check use it."""

from __future__ import annotations

import ast
import doctest
import os
import sys
from pathlib import Path

import pytest

from workshop.launch import horovodrun

WORKSHOP = Path(horovodrun.__file__).resolve().parents[1]


def test_docstring_example():
    result = doctest.testmod(horovodrun)
    assert result.attempted == 1 and result.failed == 0


def test_horovodrun_command_on_one_host_and_across_hosts():
    argv = [sys.executable, "train.py", "--epochs", 2]
    command = horovodrun.horovodrun_command(4, argv, program="hr", flags=["--cache-capacity", "0"])
    assert command == [
        "hr", "-np", "4", "-H", "localhost:4", "--gloo", "--cache-capacity", "0",
        sys.executable, "train.py", "--epochs", "2",
    ]  # fmt: skip
    across = horovodrun.horovodrun_command(
        2, ["python", "t.py"], controller="mpi", hosts="nodea:1,nodeb:1", interface="hsn0",
        program="hr",
    )  # fmt: skip
    assert across[:8] == ["hr", "-np", "2", "-H", "nodea:1,nodeb:1", "--network-interface",
                          "hsn0", "--mpi"]  # fmt: skip


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="'gloo' or 'mpi', not 'nccl'"):
        horovodrun.horovodrun_command(2, ["x"], controller="nccl", program="hr")
    with pytest.raises(ValueError, match="np must be >= 1, got 0"):
        horovodrun.horovodrun_command(0, ["x"], program="hr")
    # The lessons' launcher refuses them before it looks the script up (one check for both).
    from workshop import lessons

    with pytest.raises(ValueError, match="'gloo' or 'mpi', not 'nccl'"):
        lessons.horovodrun("no-such-script.py", controller="nccl")
    with pytest.raises(ValueError, match="np must be >= 1, got 0"):
        lessons.horovodrun("no-such-script.py", np=0)


def test_missing_horovodrun_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(horovodrun.HorovodNotFound, match="bash scripts/setup.sh builds it"):
        horovodrun.horovodrun_program()


def test_rank_environment(monkeypatch):
    env = horovodrun.rank_environment(threads=3)
    assert env["TF_USE_LEGACY_KERAS"] == "1" and env["PYTHONUNBUFFERED"] == "1"
    assert env["OMP_NUM_THREADS"] == "3"
    assert "OMP_NUM_THREADS" not in horovodrun.rank_environment()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert horovodrun.rank_environment()["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in horovodrun.rank_environment()


@pytest.mark.parametrize(
    "module", ["launch/run.py", "lessons/l02_first_program/scripts.py", "check/launch.py"]
)
def test_every_launcher_starts_ranks_through_the_helper(module):
    # No caller writes horovodrun's host list (a "-H" in a command list) or sets the ranks'
    # variables (as keys of a dict) itself any more.
    source = (WORKSHOP / module).read_text()
    tree = ast.parse(source)
    listed = {e.value for n in ast.walk(tree) if isinstance(n, ast.List) for e in n.elts
              if isinstance(e, ast.Constant)}  # fmt: skip
    keys = {k.value for n in ast.walk(tree) if isinstance(n, ast.Dict) for k in n.keys
            if isinstance(k, ast.Constant)}  # fmt: skip
    assert "-H" not in listed, module
    assert not keys & {"TF_USE_LEGACY_KERAS", "PYTHONUNBUFFERED", "OMPI_ALLOW_RUN_AS_ROOT"}, module
    assert "horovodrun_command" in source or "horovodrun_program" in source
