"""scripts/setup.sh's choice of Python (3.11, 3.12 or 3.13) and ``workshop doctor``'s torch build.

setup.sh runs against stand-in tools (mpicc, cmake, python3.X...) that only say their version; the
stand-in Pythons refuse ``-m venv``, so setup stops right after it has said which Python it took.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from workshop.commands.doctor import torch_build


@pytest.fixture
def python_stub(fake_program):
    """``python_stub(path, version)``: a stand-in interpreter that prints ``version`` for
    setup.sh's ``-c`` probe and refuses ``-m venv`` (exit 7)."""

    def make(path: Path, version: str) -> Path:
        return fake_program(
            path,
            f'case "$1" in -c) echo {version};; -m) echo "no venv in a stub" >&2; exit 7;; esac\n',
        )

    return make


@pytest.fixture
def setup_sh(tmp_path: Path, run_setup_sh):
    """``setup_sh(**env)``: setup.sh with the stand-in tools in tmp_path/stubs, HOME tmp_path
    and the environment it would make in tmp_path/venv."""

    def run(**env: str) -> subprocess.CompletedProcess:
        return run_setup_sh(
            tmp_path / "stubs", tmp_path, WORKSHOP_VENV=str(tmp_path / "venv"), **env
        )

    return run


def test_newest_supported_python_on_path_is_taken_and_named(
    tmp_path: Path, fake_program, python_stub, setup_sh
) -> None:
    stubs = tmp_path / "stubs"
    # Like a pyenv shim for a version that is not installed: on PATH, but it fails.
    fake_program(
        stubs / "python3.13", 'echo "pyenv: python3.13: command not found" >&2; exit 127\n'
    )
    python_stub(stubs / "python3.12", "3.12")
    python_stub(stubs / "python3.11", "3.11")
    result = setup_sh()
    assert result.returncode == 7, result.stderr
    assert f"Python 3.12: {stubs}/python3.12 (the newest supported Python found" in result.stdout


def test_workshop_python_wins_over_newer_ones(tmp_path: Path, python_stub, setup_sh) -> None:
    stubs = tmp_path / "stubs"
    python_stub(stubs / "python3.13", "3.13")
    chosen = python_stub(tmp_path / "elsewhere" / "py311", "3.11")
    result = setup_sh(WORKSHOP_PYTHON=str(chosen))
    assert result.returncode == 7, result.stderr
    assert f"Python 3.11: {chosen} (WORKSHOP_PYTHON" in result.stdout


@pytest.mark.parametrize("version", ["3.10", "3.14"])
def test_unsupported_workshop_python_is_refused_by_name(
    tmp_path: Path, version: str, python_stub, setup_sh
) -> None:
    chosen = python_stub(tmp_path / "elsewhere" / "python", version)
    result = setup_sh(WORKSHOP_PYTHON=str(chosen))
    assert result.returncode == 1
    assert f"WORKSHOP_PYTHON={chosen} is Python {version}" in result.stderr
    assert "needs Python 3.11, 3.12 or 3.13" in result.stderr


def test_a_pyenv_shim_for_an_unselected_version_gets_a_hint(
    tmp_path: Path, fake_program, setup_sh
) -> None:
    """WORKSHOP_PYTHON=python3.13 where pyenv has 3.13.0 installed but not selected (as on this
    machine): the shim fails, and setup says where pyenv has it and how to choose it."""
    stubs = tmp_path / "stubs"
    fake_program(
        stubs / "python3.13", 'echo "pyenv: python3.13: command not found" >&2; exit 127\n'
    )
    fake_program(
        stubs / "pyenv",
        'case "$1" in whence) [ "$2" = python3.13 ] && echo 3.13.0 || exit 1;;'
        f" root) echo {tmp_path}/pyenv;; esac\n",
    )
    result = setup_sh(WORKSHOP_PYTHON="python3.13")
    assert result.returncode == 1
    assert "WORKSHOP_PYTHON=python3.13 is not a working Python" in result.stderr
    assert (
        "pyenv has python3.13 in: 3.13.0 (not selected). Select one (pyenv shell VERSION) or "
        f"give its path: WORKSHOP_PYTHON={tmp_path}/pyenv/versions/3.13.0/bin/python3.13"
    ) in result.stderr


def test_existing_environment_of_another_python_is_not_mixed(
    tmp_path: Path, python_stub, setup_sh
) -> None:
    python_stub(tmp_path / "venv" / "bin" / "python", "3.11")
    chosen = python_stub(tmp_path / "elsewhere" / "python3.13", "3.13")
    result = setup_sh(WORKSHOP_PYTHON=str(chosen))
    assert result.returncode == 1
    assert f"{tmp_path / 'venv'} already has Python 3.11" in result.stderr
    assert "Remove" in result.stderr and "WORKSHOP_VENV" in result.stderr


def _fake_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version_py: str) -> None:
    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('doctor must not import torch')\n")
    (package / "version.py").write_text(version_py)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)


@pytest.mark.parametrize(
    ("cuda", "hip", "expected"),
    [
        ("None", "None", "CPU build (+cpu)"),
        ("'13.0'", "None", "CUDA 13.0 build (+cu130)"),
        ("None", "'6.4.1'", "ROCm build (HIP 6.4.1)"),
    ],
)
def test_doctor_names_the_torch_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cuda: str, hip: str, expected: str
) -> None:
    # The layout of torch 2.13's torch/version.py.
    _fake_torch(
        tmp_path,
        monkeypatch,
        "from typing import Optional\n__version__ = '2.13.0'\ndebug = False\n"
        f"cuda: Optional[str] = {cuda}\nhip: Optional[str] = {hip}\n",
    )
    assert torch_build().startswith(expected)


def test_setup_installs_tensorflow_cpu_alone() -> None:
    """tf-keras declares a dependency on the distribution "tensorflow" (PyPI's full build); setup
    installs tf-keras without its dependencies (requirements/no-deps.txt) and puts tensorflow-cpu's
    own files back in a venv set up before, so the `tensorflow` module is tensorflow-cpu's."""
    import importlib.util
    from importlib import metadata

    from workshop.paths import REPO_DIR

    requirements = REPO_DIR / "requirements"
    (pin,) = [
        line
        for line in (requirements / "no-deps.txt").read_text().splitlines()
        if line.startswith("tf-keras==")
    ]
    base = (requirements / "base.txt").read_text().splitlines()
    assert not any(line.startswith("tf-keras") for line in base)
    assert metadata.version("tf-keras") == pin.removeprefix("tf-keras==")
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.distribution("tensorflow")
    cpu = metadata.distribution("tensorflow-cpu")
    # the file that differs most: about 0.79 GB in tensorflow-cpu, 1.1 GB in the full build
    package = Path(importlib.util.find_spec("tensorflow").submodule_search_locations[0])
    library = package / "libtensorflow_cc.so.2"
    (recorded,) = [f for f in cpu.files if f.as_posix() == "tensorflow/libtensorflow_cc.so.2"]
    assert library.stat().st_size == recorded.size, f"{library} is not tensorflow-cpu's"
