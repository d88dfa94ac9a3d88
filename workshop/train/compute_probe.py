"""The raw compute of a training step, with no Horovod: what N independent processes reach.

A scaling sweep asks how much faster np ranks train than one. On a small machine part of the
answer is the machine itself: two processes on two cores share memory bandwidth and caches, so
even two *independent* copies of the step may not run 2x one. This probe measures that ceiling
the same way the ranks train (the same network and batch, one compute thread per process, left
to the scheduler as the ranks are), so a lesson can show Horovod's speedup beside it::

    python -m workshop.train.compute_probe --dataset cifar10 --batch-size 64 --procs 2

Each process runs forward, loss, backward and an SGD update on random tensors of the dataset's
shape (the content does not change the arithmetic) and counts the steps that end inside a
common timing window, which opens a second after every process has said it is ready
(imported, built, one step done), so the windows overlap exactly. It prints one JSON line
(:func:`measure`'s result).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

#: Seconds of warm-up steps between the last process's "ready" and the common window.
WARM_UP_S = 1.0
SHAPES = {"mnist": (1, 28, 28), "cifar10": (3, 32, 32)}


def _one(dataset: str, batch_size: int, core: int, window_s: float) -> None:
    import torch

    from workshop.train.torch_train import build_model

    # One compute thread, not bound to a core: as the ranks of `workshop run` compute (bound to
    # one core each, a single process ran ~10 % slower here than unbound, 2026-11-27).
    torch.set_num_threads(1)
    torch.manual_seed(core)
    model = build_model(dataset)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    inputs = torch.randn(batch_size, *SHAPES[dataset])
    targets = torch.randint(0, 10, (batch_size,))

    def step() -> None:
        optimizer.zero_grad()
        loss_fn(model(inputs), targets).backward()
        optimizer.step()

    step()
    print("ready", flush=True)  # the parent answers with the window's start once all are ready
    start_at = float(sys.stdin.readline())
    while time.time() < start_at:  # warm up until the common window opens
        step()
    steps, end_at = 0, start_at + window_s
    while time.time() < end_at:
        step()
        if time.time() <= end_at:  # only steps that ended inside the window count
            steps += 1
    parameters = sum(p.numel() for p in model.parameters())
    rate = steps * batch_size / window_s
    print(json.dumps({"core": core, "samples_per_s": rate, "parameters": parameters}), flush=True)


def measure(dataset: str, batch_size: int, procs: int, window_s: float = 10.0) -> dict:
    """Start ``procs`` probe processes at once, one compute thread each, and collect their rates.

    Returns:
        ``procs``, ``dataset``, ``batch_size``, ``window_s``, ``samples_per_s`` (list, one
        per process), ``total_samples_per_s``, ``parameters`` (of the network) and
        ``gradient_bytes`` (float32 gradients: the bytes one step allreduces).

    Raises:
        RuntimeError: a probe process failed (with its output).
    """
    if dataset not in SHAPES:
        raise ValueError(f"compute probe: dataset {dataset!r} is not one of {sorted(SHAPES)}")
    argv = [sys.executable, "-m", "workshop.train.compute_probe", "--child", "--dataset",
            dataset, "--batch-size", str(batch_size), "--window-s", str(window_s)]  # fmt: skip
    children = [
        subprocess.Popen(
            [*argv, "--core", str(core)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=os.environ | {"OMP_NUM_THREADS": "1"},
        )
        for core in range(procs)
    ]
    rates, parameters = [], 0
    try:
        for child in children:
            said = child.stdout.readline()
            if said.strip() != "ready":
                rest = child.communicate()[0]
                raise RuntimeError(f"compute probe did not start:\n{said}{rest}")
        start_at = time.time() + WARM_UP_S
        for child in children:
            child.stdin.write(f"{start_at!r}\n")
            child.stdin.flush()
        for child in children:
            output, _ = child.communicate()
            if child.returncode:
                raise RuntimeError(f"compute probe exited with {child.returncode}:\n{output}")
            result = json.loads(output.strip().splitlines()[-1])
            rates.append(result["samples_per_s"])
            parameters = result["parameters"]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return {
        "procs": procs,
        "dataset": dataset,
        "batch_size": batch_size,
        "window_s": window_s,
        "samples_per_s": [round(r, 1) for r in rates],
        "total_samples_per_s": round(sum(rates), 1),
        "parameters": parameters,
        "gradient_bytes": 4 * parameters,  # float32: what one step allreduces
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(SHAPES), default="mnist")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--window-s", type=float, default=10.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--core", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _one(args.dataset, args.batch_size, args.core, args.window_s)
        return 0
    print(json.dumps(measure(args.dataset, args.batch_size, args.procs, args.window_s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
