"""Every notebook: anatomy, no committed outputs, and a papermill run in replay mode whose
recorded values must match data/expected/<notebook>.json within the documented tolerances."""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import nbformat
import pytest

from workshop.notebook_check import execute

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb"))
EXPECTED = REPO / "data" / "expected"
BINDER_MEMORY_BYTES = 2 * 2**30


def ids(paths):
    return [p.stem for p in paths]


EXERCISE_ID = re.compile(r"\*\*Exercise (\d\d\.\d+)\*\*")


def exercise_ids(notebook) -> list[str]:
    """Ids of the cells tagged ``exercise``, from their "**Exercise NN.k**" heading."""
    ids = []
    for cell in notebook.cells:
        if "exercise" in cell.metadata.get("tags", []):
            found = EXERCISE_ID.search(cell.source)
            ids.append(found.group(1) if found else f"<no id in: {cell.source[:40]!r}>")
    return ids


def test_every_lesson_is_there():
    # 00 welcome ... 08 tuning: the lessons the README and the instructor guide list.
    numbers = [p.name[:2] for p in NOTEBOOKS]
    assert numbers == [f"{n:02d}" for n in range(9)], numbers


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    dirty = [
        i
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count)
    ]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_anatomy_and_parameters_cell(path):
    notebook = nbformat.read(path, as_version=4)
    markdown = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    titles = [line for line in markdown.splitlines() if line.startswith("# ")]
    assert len(titles) == 1, f"{path.name}: needs exactly one H1 title, has {titles}"
    for heading in ("## Overview", "## Prerequisites", "## Summary", "## What's next"):
        assert heading in markdown, f"{path.name}: missing section {heading!r}"
    code = [c for c in notebook.cells if c.cell_type == "code"]
    first = code[0]
    assert "parameters" in first.metadata.get("tags", []), f"{path.name}: first code cell untagged"
    for node in ast.parse(first.source).body:
        assert isinstance(node, ast.Assign), f"{path.name}: parameters cell holds only literals"
        ast.literal_eval(node.value)
    assert "LIVE = False" in first.source and "RESULTS_PATH" in first.source
    assert "from workshop import" in code[1].source, f"{path.name}: imports come second"


@pytest.mark.parametrize("path", NOTEBOOKS[1:], ids=ids(NOTEBOOKS[1:]))
def test_exercises_have_answer_check_and_hidden_solution(path):
    notebook = nbformat.read(path, as_version=4)
    cells = notebook.cells
    found = exercise_ids(notebook)
    assert len(found) >= 2, f"{path.name}: needs >= 2 exercises, has {found}"
    prefix = path.name[:2] + "."
    assert all(i.startswith(prefix) for i in found), f"{path.name}: ids {found}"
    assert len(set(found)) == len(found), f"{path.name}: repeated exercise ids {found}"
    for index, cell in enumerate(cells):
        if "exercise" not in cell.metadata.get("tags", []):
            continue
        answer, check, solution = cells[index + 1 : index + 4]
        name = f"{path.name} exercise at cell {index}"
        assert cell.cell_type == "markdown", name
        assert answer.cell_type == "code" and "= None" in answer.source, (
            f"{name}: next comes an answer cell the learner fills in (`answer_... = None`)"
        )
        assert check.cell_type == "code" and "exercises.check(" in check.source, (
            f"{name}: then a check cell calling exercises.check"
        )
        assert "solution" in solution.metadata.get("tags", []), f"{name}: then a solution"
        assert solution.metadata.get("jupyter", {}).get("source_hidden") is True, (
            f"{name}: the solution is collapsed (metadata jupyter.source_hidden)"
        )
        assert "exercises.check(" in solution.source, f"{name}: the solution checks itself"


def check_value(name: str, got, spec: dict) -> str | None:
    expected = spec["expected"]
    if isinstance(expected, (bool, str)) or expected is None:
        return None if got == expected else f"{name}: got {got!r}, expected {expected!r}"
    if got is None or not math.isclose(
        got, expected, rel_tol=spec.get("rel_tol", 1e-6), abs_tol=spec.get("abs_tol", 0.0)
    ):
        return f"{name}: got {got!r}, expected {expected!r} ({spec})"
    return None


def replay_params() -> list:
    """One param per notebook; those whose replay still starts real processes (notebook 01's
    Gloo workers, ``demo.Workers``) are also marked ``live``."""
    return [
        pytest.param(p, id=p.stem, marks=[pytest.mark.live] if "Workers(" in p.read_text() else [])
        for p in NOTEBOOKS
    ]


@pytest.mark.notebook
@pytest.mark.parametrize("path", replay_params())
def test_replay_matches_expected_values(path, tmp_path):
    expected_path = EXPECTED / f"{path.stem}.json"
    assert expected_path.exists(), f"no expected values: {expected_path}"
    results_path = tmp_path / "results.json"
    run = execute(path, tmp_path / path.name, {"RESULTS_PATH": str(results_path)})
    got = json.loads(results_path.read_text())
    expected = json.loads(expected_path.read_text())["values"]
    problems = [check_value(name, got.get(name), spec) for name, spec in expected.items()]
    problems = [p for p in problems if p]
    assert not problems, "\n".join(problems)
    # Every solution ran and passed its own check (strict mode raises on a wrong one).
    want = sorted(exercise_ids(nbformat.read(path, as_version=4)))
    assert got.get("exercises_passed", []) == want, (
        f"{path.name}: exercises passed {got.get('exercises_passed')}, expected {want}"
    )
    # PSS: a library page the kernel and its workers share counts once, as in Binder's cgroup.
    assert run.peak_memory_bytes < BINDER_MEMORY_BYTES, (
        f"{path.name} peaked at {run.peak_memory_bytes / 2**20:.0f} MiB PSS "
        f"({run.peak_rss_bytes / 2**20:.0f} MiB RSS; Binder allows 2 GiB)"
    )


@pytest.mark.live
@pytest.mark.notebook
def test_notebook_03_live_launches_real_runs(tmp_path, monkeypatch, cpu_lock, horovod_ready):
    monkeypatch.setenv("WORKSHOP_RUNS", str(tmp_path / "runs"))
    results_path = tmp_path / "results.json"
    notebook = REPO / "notebooks" / "03-launching-runs.ipynb"
    execute(
        notebook,
        tmp_path / notebook.name,
        {"RESULTS_PATH": str(results_path), "LIVE": True, "EPOCHS": 1, "STEPS": 5, "NP": 2},
    )
    assert json.loads(results_path.read_text())["live"] is True
    statuses = sorted(
        json.loads(p.read_text())["status"] for p in (tmp_path / "runs").glob("*/run.json")
    )
    assert statuses == ["failed", "ok"], statuses  # the normal run and the injected crash


@pytest.mark.live
@pytest.mark.notebook
def test_notebook_02_live_runs_the_programs(tmp_path, monkeypatch, cpu_lock, horovod_ready):
    # LIVE: the serial, Horovod (PyTorch, TensorFlow, Keras) and DDP programs, the checker, the
    # Keras probe and one benchmark repeat all run for real; the learner's files go to WORK_DIR.
    monkeypatch.setenv("WORKSHOP_RUNS", str(tmp_path / "runs"))
    results_path = tmp_path / "results.json"
    notebook = REPO / "notebooks" / "02-your-first-horovod-program.ipynb"
    parameters = {
        "RESULTS_PATH": str(results_path),
        "LIVE": True,
        "BENCHMARK_REPEATS": 1,
        "WORK_DIR": str(tmp_path / "mine"),
    }
    execute(notebook, tmp_path / notebook.name, parameters)
    got = json.loads(results_path.read_text())
    assert got["live"] is True and got["solution_checks_ok"] == 6
    assert got["hvd_final_train_loss"] < got["hvd_first_train_loss"]
    assert got["resumed_first_epoch"] == 3 and got["resume_matches_uninterrupted"] is True
    assert (tmp_path / "mine" / "hvd_torch_skeleton.py").exists()
    assert (tmp_path / "mine" / "checkpoints" / "checkpoint.pt").exists()
