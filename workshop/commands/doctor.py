"""``workshop doctor``: what this environment can run, and how to fix what it cannot."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from pathlib import Path

from workshop.launch.environment import FIX_SETUP, diagnose_environment


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


def torch_build() -> str:
    """Which torch build is installed (CPU, CUDA or ROCm), read from ``torch/version.py``
    without importing torch (PyPI's Linux torch is the CUDA build; its version has no +cuXXX)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return "not installed"
    text = (Path(spec.origin).parent / "version.py").read_text()
    found = {
        name: re.search(rf"^{name}\b[^=]*=\s*'([^']+)'", text, re.M) for name in ("cuda", "hip")
    }
    if found["cuda"]:
        tag = "cu" + found["cuda"][1].replace(".", "")
        return f"CUDA {found['cuda'][1]} build (+{tag}); runs on the CPU without a GPU"
    if found["hip"]:
        return f"ROCm build (HIP {found['hip'][1]}); runs on the CPU without a GPU"
    return "CPU build (+cpu)"


def torchvision_state() -> tuple[str | None, str | None]:
    """(version, problem) of torchvision: Horovod's PyTorch examples and most PyTorch MNIST
    tutorials import it. It must be the build of torch's kind (CPU or CUDA): a CUDA torchvision
    beside a CPU torch fails at import ("operator torchvision::nms does not exist")."""
    import importlib.metadata
    import subprocess
    import sys

    try:
        version = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        return None, f"torchvision is not installed: {FIX_SETUP}"
    # In a child: a torchvision that does not match torch can leave torch half-initialised.
    found = subprocess.run(
        [sys.executable, "-c", "import torchvision"], capture_output=True, text=True
    )
    if found.returncode != 0:
        last = (found.stderr.strip().splitlines() or ["(no message)"])[-1]
        return version, (
            f"torchvision {version} does not import beside torch ({last}): torch and "
            f"torchvision must be the same build (both CPU or both CUDA): {FIX_SETUP}"
        )
    return version, None


def register(subparsers) -> None:
    parser = subparsers.add_parser("doctor", help="check what this environment can run")
    parser.add_argument("--json", action="store_true", help="print the facts as JSON")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    facts, problems = diagnose_environment()
    facts["torch_build"] = torch_build()
    facts["versions"]["torchvision"], problem = torchvision_state()
    if problem:
        problems.append(problem)
    if facts["runs"]["problem"]:
        problems.append(facts["runs"]["problem"])
    if args.json:
        print(json.dumps({**facts, "problems": problems}, indent=2))
        return 1 if problems else 0
    versions = facts["versions"]
    print(
        f"host      {facts['host']['hostname']}: {facts['cores']} cores, "
        f"{facts['host']['memory_gb']} GiB, {facts['host']['cpu']}"
    )
    print(f"GPUs      {', '.join(facts['host']['gpus']) or 'none'}")
    for name in ("python", "torch", "torchvision", "tensorflow", "tf_keras", "horovod", "mpi"):
        print(f"{name:<9} {versions.get(name) or 'MISSING'}")
        if name == "torch" and versions.get(name):
            print(f"{'':<9} {facts['torch_build']}")
    for framework, built in facts["horovod_build"].items():
        print(f"horovod.{framework:<10} {_operations(built)}")
    for dataset, state in facts["datasets_offline"].items():
        print(f"data      {dataset}: {state}")
    print(f"profiler  {facts['mpi_profiler']}")
    runs = facts["runs"]
    counts = ", ".join(f"{n} {status}" for status, n in runs["by_status"].items()) or "none yet"
    print(f"runs      {runs['folder']}: {counts}")
    print(f"          new runs go here ({runs['rule']})")
    for stale in runs["stale"]:
        print(f"          stale: {stale['path']}: {stale['reason']}")
    if problems:
        print("\nPROBLEMS:")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print("\nOK: PyTorch and TensorFlow with Horovod over Gloo and MPI are ready.")
    return 0
