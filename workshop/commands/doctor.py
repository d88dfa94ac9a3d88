"""``workshop doctor``: what this environment can run, and how to fix what it cannot."""

from __future__ import annotations

import argparse
import json

from workshop.launch.environment import diagnose


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
