"""Static and sandboxed checks of binder/ (repo2docker cannot run here: no Docker engine).

binder/postBuild must build the workshop with scripts/setup.sh (the README's recipe, not a
second one), stop at the first failing command, and install into Binder's notebook environment;
apt.txt must list what setup.sh would install; binder/ must not carry pins of its own.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tomllib
from pathlib import Path

from workshop.paths import REPO_DIR

BINDER = REPO_DIR / "binder"
SETUP = REPO_DIR / "scripts" / "setup.sh"


def _requirement_lines(path: Path) -> dict[str, str]:
    """``{package: specifier}`` of a requirements file (comments and blank lines skipped)."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            match = re.match(r"([A-Za-z0-9_.+\-]+)\s*(.*)", line)
            assert match, f"{path}: cannot parse requirement {line!r}"
            pins[match[1].lower()] = match[2].replace(" ", "")
    return pins


def _commands(script: Path) -> list[str]:
    """The non-blank, non-comment lines of a shell script, stripped."""
    lines = (line.strip() for line in script.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _setup_apt_packages() -> set[str]:
    """The apt packages scripts/setup.sh installs for a plain setup (not ``--test``, not the
    root-only packages of the emulated cluster: Binder's postBuild is not root), less its
    Python packages (python3-venv, python3.X-dev...): Binder's Python is repo2docker's conda
    environment."""
    packages, in_test_block = set(), False
    for line in SETUP.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith(("if [[ $WITH_TEST", "if [[ $(id -u) == 0 ]]")):
            in_test_block = True
        elif stripped == "fi":
            in_test_block = False
        match = re.search(r"apt_packages\+=\(([^)]+)\)", line)
        if match and not in_test_block:
            packages.update(name for name in match[1].split() if "python" not in name)
    assert packages, f"{SETUP}: found no apt_packages+=(...) lines"
    return packages


def test_binder_files_exist_and_scripts_are_executable() -> None:
    for name in ("apt.txt", "runtime.txt", "postBuild", "start"):
        assert (BINDER / name).is_file(), f"binder/{name} is missing"
    for name in ("postBuild", "start"):
        mode = (BINDER / name).stat().st_mode
        assert mode & stat.S_IXUSR, f"binder/{name} must be executable"


def test_runtime_python_matches_pyproject_and_setup() -> None:
    runtime = (BINDER / "runtime.txt").read_text().strip()
    assert runtime == "python-3.11"
    requires = tomllib.loads((REPO_DIR / "pyproject.toml").read_text())["project"][
        "requires-python"
    ]
    assert requires == ">=3.11,<3.14"
    # setup.sh accepts exactly the Pythons pyproject allows (Binder's 3.11 among them).
    match = re.search(r'^SUPPORTED_PYTHONS="([^"]+)"', SETUP.read_text(), re.M)
    assert match, f"{SETUP}: no SUPPORTED_PYTHONS line"
    assert sorted(match[1].split()) == ["3.11", "3.12", "3.13"]
    assert runtime.removeprefix("python-") in match[1].split()


def test_apt_txt_lists_what_setup_sh_installs() -> None:
    listed = set(_requirement_lines(BINDER / "apt.txt"))
    assert listed == _setup_apt_packages()


def test_binder_has_no_second_recipe_or_pins() -> None:
    # Any of these would make repo2docker install packages on its own, beside setup.sh.
    for name in ("requirements.txt", "environment.yml", "Pipfile", "setup.py", "install.R"):
        assert not (BINDER / name).exists(), f"binder/{name} would be a second recipe"
    post_build = "\n".join(_commands(BINDER / "postBuild"))
    for command in ("pip install", "conda install", "mamba install", "apt-get"):
        assert command not in post_build, f"binder/postBuild runs {command!r} itself"


def test_pyproject_dependencies_have_the_same_pins_as_requirements() -> None:
    base = _requirement_lines(REPO_DIR / "requirements" / "base.txt")
    deps = tomllib.loads((REPO_DIR / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        name, spec = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)", dep).groups()
        assert name.lower() in base, f"pyproject dependency {name} not in requirements/base.txt"
        assert base[name.lower()] == spec.replace(" ", ""), f"{name}: pyproject {spec!r} vs base"


def test_post_build_uses_setup_sh_with_errexit() -> None:
    lines = _commands(BINDER / "postBuild")
    assert lines[0] == "set -euo pipefail", "postBuild must start with set -euo pipefail"
    assert "bash scripts/setup.sh --no-run" in lines


def _sandbox(tmp_path: Path, setup_body: str) -> Path:
    """A copy of binder/ beside a stand-in scripts/setup.sh running ``setup_body``."""
    shutil.copytree(BINDER, tmp_path / "binder")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "setup.sh").write_text(setup_body)
    return tmp_path


def _run_post_build(repo: Path, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "NB_PYTHON_PREFIX": "/srv/conda/envs/notebook",
        **extra,
    }
    return subprocess.run(
        [str(repo / "binder" / "postBuild")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_post_build_calls_setup_with_binder_environment(tmp_path: Path) -> None:
    record = tmp_path / "setup-called"
    repo = _sandbox(
        tmp_path,
        f'echo "$* venv=$WORKSHOP_VENV index=$WORKSHOP_TORCH_INDEX" > {record}\n',
    )
    result = _run_post_build(repo, tmp_path)
    assert result.returncode == 0, result.stderr
    assert record.read_text().split() == [
        "--no-run",
        "venv=/srv/conda/envs/notebook",
        "index=https://download.pytorch.org/whl/cpu",
    ]


def test_post_build_keeps_a_torch_index_already_set(tmp_path: Path) -> None:
    # scripts/binder_conditions.sh sets "none" where PyTorch's index cannot be reached.
    record = tmp_path / "setup-called"
    repo = _sandbox(tmp_path, f'echo "index=$WORKSHOP_TORCH_INDEX" > {record}\n')
    result = _run_post_build(repo, tmp_path, WORKSHOP_TORCH_INDEX="none")
    assert result.returncode == 0, result.stderr
    assert record.read_text().split() == ["index=none"]


def test_post_build_stops_when_setup_fails(tmp_path: Path) -> None:
    marker = tmp_path / "home" / ".cache" / "horovod-workshop" / "wheels" / "keep"
    marker.parent.mkdir(parents=True)
    marker.write_text("")
    repo = _sandbox(tmp_path, "echo 'setup broke' >&2; exit 3\n")
    result = _run_post_build(repo, tmp_path)
    assert result.returncode == 3
    assert "setup broke" in result.stderr
    assert marker.exists(), "postBuild went on after setup.sh failed"


def test_start_sets_runtime_environment_and_execs_the_command() -> None:
    result = subprocess.run(
        [str(BINDER / "start"), "env"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": os.environ["PATH"]},
    )
    assert result.returncode == 0
    env = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    assert env["TF_USE_LEGACY_KERAS"] == "1"
    assert env["OMPI_MCA_btl_vader_single_copy_mechanism"] == "none"


def test_setup_sh_installs_into_an_existing_non_venv_environment(
    tmp_path: Path, fake_program, run_setup_sh
) -> None:
    """setup.sh with WORKSHOP_VENV=<Binder's conda env>, which has bin/python but no
    bin/activate: it must install into that environment (stand-in tools record the calls)."""
    log = tmp_path / "calls.log"
    stubs = tmp_path / "stubs"
    env_dir = tmp_path / "notebook-env"
    fake_program(stubs / "workshop", "echo stub 1.0\n")
    # The environment's python: logs its arguments; says it is 3.11 when asked (`-c`); for
    # build_horovod.sh's probes it prints versions and reports Horovod as already installed.
    fake_program(
        env_dir / "bin" / "python",
        f'echo "$0 $*" >> {log}\n'
        'case "$1" in -) cat >/dev/null; echo "2.13.0 2.21.0 py311";; -c) echo 3.11;; esac\n'
        "exit 0\n",
    )
    result = run_setup_sh(
        stubs,
        tmp_path,
        WORKSHOP_VENV=str(env_dir),
        WORKSHOP_CACHE=str(tmp_path / "cache"),
    )
    assert result.returncode == 0, (
        "scripts/setup.sh cannot install into an existing environment without bin/activate "
        "(Binder's notebook env); see the report of issue 7.\n" + result.stderr[-2000:]
    )
    calls = log.read_text()
    assert f"{env_dir}/bin/python -m pip install" in calls
    assert "-e " + str(REPO_DIR) in calls
    assert not (env_dir / "pyvenv.cfg").exists(), "setup.sh created a venv over the env"
