"""What this environment can run: Horovod's build, versions, cores, data (``workshop doctor``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from workshop.launch.programs import find_program

FIX_SETUP = "run `bash scripts/setup.sh --no-run` from the repository"


def _probe_horovod(framework: str) -> dict:
    """Ask Horovod's ``<framework>`` binding what it was built with, in a child process
    (importing TensorFlow and PyTorch into one process costs seconds and memory)."""
    module = {"torch": "horovod.torch", "tensorflow": "horovod.tensorflow"}[framework]
    code = (
        "import json, os; os.environ.setdefault('TF_USE_LEGACY_KERAS', '1');"
        "os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3');"
        f"import {module} as hvd;"
        "names = ['mpi_built', 'gloo_built', 'nccl_built', 'ddl_built', 'ccl_built',"
        " 'cuda_built', 'rocm_built'];"
        "print(json.dumps({n[:-6]: bool(getattr(hvd, n)()) for n in names}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["unknown error"])[-1]
        return {"error": last}
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_overview(root: Path | None = None) -> dict:
    """The runs under ``root`` (default: where ``workshop run`` writes) by status, naming the
    stale ones (launcher killed before it recorded the end:
    :func:`workshop.readers.runs.stale_reason`).

    Returns:
        ``folder``, ``rule`` (why this folder: :func:`workshop.paths.choose_runs_dir`),
        ``problem`` ("" when this user can write it), ``by_status`` ({status: count}),
        ``stale`` (list of {``path``, ``reason``}).
    """
    from workshop.paths import choose_runs_dir
    from workshop.readers.runs import list_runs

    choice = choose_runs_dir()
    root = root or choice.folder
    runs = list_runs(root)
    stale = runs[runs["status"] == "stale"]
    return {
        "folder": str(root),
        "rule": choice.rule if root == choice.folder else "given",
        "problem": choice.problem if root == choice.folder else "",
        "by_status": {str(k): int(v) for k, v in runs["status"].value_counts().items()},
        "stale": stale[["path", "stale_reason"]]
        .rename(columns={"stale_reason": "reason"})
        .to_dict("records"),
    }


def diagnose_environment() -> tuple[dict, list[str]]:
    """Facts about this environment and the problems found (each with its fix)."""
    from workshop.launch.record import provenance
    from workshop.train.data import available_offline

    facts = provenance()
    problems = []
    for package in ("torch", "tensorflow", "horovod"):
        if not facts["versions"].get(package):
            problems.append(f"{package} is not installed: {FIX_SETUP}")
    facts["horovod_build"] = {}
    if facts["versions"].get("horovod"):
        for framework in ("torch", "tensorflow"):
            built = _probe_horovod(framework)
            facts["horovod_build"][framework] = built
            if "error" in built:
                problems.append(
                    f"horovod.{framework} does not load ({built['error']}): {FIX_SETUP}"
                )
                continue
            for controller in ("gloo", "mpi"):
                if not built[controller]:
                    problems.append(
                        f"Horovod was built without {controller} for {framework}: "
                        f"rebuild it: {FIX_SETUP}"
                    )
    facts["programs"] = {name: find_program(name) for name in ("horovodrun", "mpirun")}
    if not facts["programs"]["horovodrun"]:
        problems.append(f"horovodrun is neither beside {sys.executable} nor on PATH: {FIX_SETUP}")
    if not facts["programs"]["mpirun"]:
        problems.append("mpirun not found: sudo apt-get install -y openmpi-bin libopenmpi-dev")
    facts["cores"] = os.cpu_count()
    facts["datasets_offline"] = available_offline()
    facts["runs"] = run_overview()
    try:
        from workshop.launch.profiler import library_path

        facts["mpi_profiler"] = str(library_path())
    except Exception as exc:  # the profiler is optional for most lessons
        facts["mpi_profiler"] = f"unavailable ({exc})"
    return facts, problems
