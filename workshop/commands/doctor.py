"""``workshop doctor``: what this environment can run, and how to fix what it cannot."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

FIX_SETUP = "run `bash scripts/setup.sh --no-run` from the repository, then `source .venv/bin/activate`"


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


def diagnose() -> tuple[dict, list[str]]:
    """Facts about this environment and the problems found (each with its fix)."""
    from workshop.launch.run import provenance
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
                problems.append(f"horovod.{framework} does not load ({built['error']}): "
                                f"{FIX_SETUP}")
                continue
            for controller in ("gloo", "mpi"):
                if not built[controller]:
                    problems.append(f"Horovod was built without {controller} for {framework}: "
                                    f"rebuild it: {FIX_SETUP}")
    if not shutil.which("horovodrun"):
        problems.append(f"horovodrun is not on PATH: {FIX_SETUP}")
    if not shutil.which("mpirun"):
        problems.append("mpirun not found: sudo apt-get install -y openmpi-bin libopenmpi-dev")
    facts["cores"] = os.cpu_count()
    facts["datasets_offline"] = available_offline()
    try:
        from workshop.launch.profiler import library_path

        facts["mpi_profiler"] = str(library_path())
    except Exception as exc:  # the profiler is optional for most lessons
        facts["mpi_profiler"] = f"unavailable ({exc})"
    return facts, problems


def _operations(built: dict) -> str:
    if "error" in built:
        return "does not load"
    controllers = [name for name in ("gloo", "mpi") if built.get(name)]
    operations = [name for name in ("nccl", "ddl", "ccl", "mpi", "gloo") if built.get(name)]
    gpus = [name for name in ("cuda", "rocm") if built.get(name)]
    return (
        f"controllers {'+'.join(controllers) or 'none'}; "
        f"tensor operations {'+'.join(operations).upper() or 'none'}; "
        f"GPU {'+'.join(gpus).upper() or 'no (CPU build)'}"
    )


def register(subparsers) -> None:
    parser = subparsers.add_parser("doctor", help="check what this environment can run")
    parser.add_argument("--json", action="store_true", help="print the facts as JSON")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    facts, problems = diagnose()
    if args.json:
        print(json.dumps({**facts, "problems": problems}, indent=2))
        return 1 if problems else 0
    versions = facts["versions"]
    print(f"host      {facts['host']['hostname']}: {facts['cores']} cores, "
          f"{facts['host']['memory_gb']} GiB, {facts['host']['cpu']}")
    print(f"GPUs      {', '.join(facts['host']['gpus']) or 'none'}")
    for name in ("python", "torch", "tensorflow", "tf_keras", "horovod", "mpi"):
        print(f"{name:<9} {versions.get(name) or 'MISSING'}")
    for framework, built in facts["horovod_build"].items():
        print(f"horovod.{framework:<10} {_operations(built)}")
    for dataset, state in facts["datasets_offline"].items():
        print(f"data      {dataset}: {state}")
    print(f"profiler  {facts['mpi_profiler']}")
    if problems:
        print("\nPROBLEMS:")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print("\nOK: PyTorch and TensorFlow with Horovod over Gloo and MPI are ready.")
    return 0
