"""Every notebook: anatomy, no committed outputs, and a papermill run in replay mode whose
recorded values must match data/expected/<notebook>.json within the documented tolerances."""

from __future__ import annotations

import ast
import json
import math
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


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    dirty = [i for i, cell in enumerate(notebook.cells)
             if cell.cell_type == "code" and (cell.outputs or cell.execution_count)]
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


def check_value(name: str, got, spec: dict) -> str | None:
    expected = spec["expected"]
    if isinstance(expected, (bool, str)) or expected is None:
        return None if got == expected else f"{name}: got {got!r}, expected {expected!r}"
    if got is None or not math.isclose(got, expected, rel_tol=spec.get("rel_tol", 1e-6),
                                       abs_tol=spec.get("abs_tol", 0.0)):
        return f"{name}: got {got!r}, expected {expected!r} ({spec})"
    return None


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
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
    assert run.peak_rss_bytes < BINDER_MEMORY_BYTES, (
        f"{path.name} peaked at {run.peak_rss_bytes / 2**20:.0f} MiB (Binder allows 2 GiB)")


@pytest.mark.live
@pytest.mark.notebook
def test_notebook_03_live_launches_real_runs(tmp_path, monkeypatch, cpu_lock, horovod_ready):
    monkeypatch.setenv("WORKSHOP_RUNS", str(tmp_path / "runs"))
    results_path = tmp_path / "results.json"
    notebook = REPO / "notebooks" / "03-launching-runs.ipynb"
    execute(notebook, tmp_path / notebook.name,
            {"RESULTS_PATH": str(results_path), "LIVE": True, "EPOCHS": 1, "STEPS": 5, "NP": 2})
    assert json.loads(results_path.read_text())["live"] is True
    statuses = sorted(json.loads(p.read_text())["status"]
                      for p in (tmp_path / "runs").glob("*/run.json"))
    assert statuses == ["failed", "ok"], statuses  # the normal run and the injected crash
