"""What mybinder.org's image will do, read from the Dockerfile repo2docker generates for a clean
checkout of this repository (``repo2docker --no-build --debug``: no Docker engine, no network).

mybinder.org builds with its own repo2docker release; the one pinned in requirements/test.txt is
the one these checks describe. Binder runs as uid 1000 (``--user-id 1000 --user-name jovyan``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workshop.paths import REPO_DIR

BINDER = REPO_DIR / "binder"


def _clean_checkout(dest: Path) -> Path:
    """The repository's files as a fresh clone of this working tree would have them: tracked and
    untracked-but-not-ignored files only (no .venv, runs/, caches), modes kept."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_DIR,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (entry.decode() for entry in listed)):
        source = REPO_DIR / name
        if source.is_file():  # listed but deleted in the working tree: skip
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """``(Dockerfile, log)`` that repo2docker generates for a clean checkout."""
    pytest.importorskip("repo2docker", reason="jupyter-repo2docker: bash scripts/setup.sh --test")
    repo = _clean_checkout(tmp_path_factory.mktemp("clone"))
    result = subprocess.run(
        [sys.executable, "-m", "repo2docker", "--no-build", "--debug"]
        + ["--user-id", "1000", "--user-name", "jovyan", str(repo)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "FROM " in result.stdout, "repo2docker printed no Dockerfile"
    return result.stdout, result.stderr


def _apt_txt() -> list[str]:
    lines = (
        line.split("#", 1)[0].strip() for line in (BINDER / "apt.txt").read_text().splitlines()
    )
    return sorted(filter(None, lines))


def test_base_image_is_ubuntu_24_04(generated: tuple[str, str]) -> None:
    # The README's Binder row (gcc 13, cmake 3.28, Open MPI 4.1.6) describes this base image.
    dockerfile, _ = generated
    assert re.search(r"^FROM \S*buildpack-deps:24\.04$", dockerfile, re.M), dockerfile[:300]


def test_apt_packages_are_exactly_binder_apt_txt(generated: tuple[str, str]) -> None:
    dockerfile, _ = generated
    installs = re.findall(r"apt-get install --yes --no-install-recommends ([^&\\]+)", dockerfile)
    assert len(installs) == 1, f"expected one apt-get install of apt.txt, found {installs}"
    assert sorted(installs[0].split()) == _apt_txt()


def test_notebook_environment_is_conda_python_of_runtime_txt(generated: tuple[str, str]) -> None:
    dockerfile, log = generated
    version = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    assert f"Building conda environment for python={version}" in log
    # The lock file repo2docker installs pins exactly that Python (conda-forge build).
    # (repo2docker names the files it copies with escapism: "-2e" is ".", "-2d" is "-" ...)
    unescaped = re.sub(r"-([0-9a-f]{2})", lambda m: chr(int(m[1], 16)), dockerfile)
    lock = re.search(
        r"environment\.py-(\d+\.\d+)-linux-64\.lock[^\n]* /tmp/env/environment\.lock$",
        unescaped,
        re.M,
    )
    assert lock and lock[1] == version, "the conda lock file is not the runtime.txt Python"
    import repo2docker

    lock_file = (
        Path(repo2docker.__file__).parent / "buildpacks" / "conda" / f"environment.py-{version}"
        "-linux-64.lock"
    )
    assert re.search(rf"/python-{re.escape(version)}\.\d+-", lock_file.read_text())
    # postBuild installs into this prefix (WORKSHOP_VENV=$NB_PYTHON_PREFIX), first on PATH.
    assert "ENV NB_PYTHON_PREFIX=${CONDA_DIR}/envs/notebook" in dockerfile
    assert re.search(r"^ENV PATH=\$\{NB_PYTHON_PREFIX\}/bin:", dockerfile, re.M)
    assert "NB_PYTHON_PREFIX" in (BINDER / "postBuild").read_text()


def test_no_second_recipe_is_installed_by_repo2docker(generated: tuple[str, str]) -> None:
    # With binder/ present, repo2docker must not pip-install pyproject.toml or requirements.
    dockerfile, _ = generated
    assert not re.search(r"pip install", dockerfile), "repo2docker installs Python packages itself"


def test_post_build_runs_as_the_notebook_user_on_its_own_checkout(
    generated: tuple[str, str],
) -> None:
    dockerfile, _ = generated
    lines = dockerfile.splitlines()
    run_post_build = lines.index("RUN ./binder/postBuild")
    users = [line for line in lines[:run_post_build] if line.startswith("USER ")]
    assert users[-1] == "USER ${NB_USER}", "postBuild would not run as the notebook user"
    # The checkout belongs to that user, so setup.sh's `pip install -e` can write egg-info there.
    copy = [line for line in lines if re.match(r"COPY .*src/ \$\{REPO_DIR\}/", line)]
    assert copy == ["COPY --chown=1000:1000 src/ ${REPO_DIR}/"]
    assert lines.index(copy[0]) < run_post_build
    assert "ARG REPO_DIR=${HOME}" in dockerfile  # the repository is the home folder


def test_binder_start_is_the_entrypoint_hook(generated: tuple[str, str]) -> None:
    dockerfile, _ = generated
    assert 'ENV R2D_ENTRYPOINT="${REPO_DIR}/binder/start"' in dockerfile
