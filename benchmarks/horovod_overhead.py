"""Horovod's cost at one worker, and what a second worker buys, measured in one run.

The seed thesis (seed 003) reports about 17% Horovod overhead at one GPU. This script trains the
workshop's MNIST CNN (offline subset, batch 32 per worker, SGD) for a fixed number of steps
three ways, interleaved (the order rotates each repeat) and repeated so that the machine's
background noise hits all alike:

  plain    plain PyTorch, one process, all cores;
  hvd-np1  the same loop under horovodrun -np 1 with hvd.DistributedOptimizer;
  hvd-np2  horovodrun -np 2 (cores split between the ranks).

It prints steady-state samples/s (after warm-up steps) for each, min / median / max over the
repeats, and the ratios plain / hvd-np1 (the one-worker overhead) and hvd-np2 / hvd-np1 (the
two-worker speedup), of the medians and per repeat (a repeat runs the three kinds back to back,
so they share the machine's load of the moment). With ``--out DIR`` it writes DIR/result.json:
every repeat, the spreads, the per-repeat ratios and the provenance (command, UTC times, load
average, git commit, versions, host).

    flock /tmp/workshop-cpu.lock python benchmarks/horovod_overhead.py \
        [--steps 150] [--repeats 3] [--controller gloo] [--out data/benchmarks/horovod-overhead]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _recording import run_record, spread, started_now

from workshop.launch.horovodrun import ROOT_ENV, horovodrun_command

WARMUP_STEPS = 20


def worker(mode: str, steps: int, batch_size: int) -> None:
    """Train ``steps`` steps and print one JSON line (rank 0) with steady samples/s."""
    import torch

    from workshop.train.common import shard_indices
    from workshop.train.data import load
    from workshop.train.torch_train import build_model

    if mode == "horovod":
        import horovod.torch as hvd

        hvd.init()
        rank, size = hvd.rank(), hvd.size()
    else:
        rank, size = 0, 1
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // size))
    torch.manual_seed(0)
    dataset = load("mnist", "subset")
    x, y = torch.from_numpy(dataset.x_train), torch.from_numpy(dataset.y_train)
    indices = shard_indices(len(y), rank, size, epoch=0, seed=0)
    model = build_model("mnist")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if mode == "horovod":
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    loss_fn = torch.nn.CrossEntropyLoss()
    per_shard = len(indices) // batch_size
    start = None
    for step in range(steps + WARMUP_STEPS):
        if step == WARMUP_STEPS:
            start = time.perf_counter()
        batch = step % per_shard
        idx = torch.from_numpy(indices[batch * batch_size : (batch + 1) * batch_size])
        optimizer.zero_grad()
        loss_fn(model(x[idx]), y[idx]).backward()
        optimizer.step()
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(json.dumps({"samples_per_s": steps * batch_size * size / elapsed}), flush=True)


def measure(kind: str, steps: int, batch_size: int, controller: str) -> float:
    program = [
        sys.executable,
        __file__,
        "--worker",
        "plain" if kind == "plain" else "horovod",
        "--steps",
        str(steps),
        "--batch-size",
        str(batch_size),
    ]
    env = os.environ | ROOT_ENV
    if kind != "plain":
        program = horovodrun_command(int(kind[-1]), program, controller=controller)
    result = subprocess.run(program, capture_output=True, text=True, env=env, check=False)
    for line in result.stdout.splitlines():
        if '"samples_per_s"' in line:
            return json.loads(line[line.index("{") :])["samples_per_s"]
    raise RuntimeError(f"{kind} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")


def write_result(
    out: Path, args: argparse.Namespace, samples: dict, runs: list, started: str, load
) -> None:
    """result.json: every repeat, min / median / max, the per-repeat ratios, provenance."""
    from workshop.launch.record import provenance

    plain, np1, np2 = samples["plain"], samples["hvd-np1"], samples["hvd-np2"]
    result = {
        **run_record(started, load),
        "settings": {
            "repeats": args.repeats,
            "steps": args.steps,
            "warmup_steps": WARMUP_STEPS,
            "batch_per_worker": args.batch_size,
            "controller": args.controller,
            "order": "plain, hvd-np1, hvd-np2, rotated by one each repeat",
        },
        "runs": runs,
        "samples_per_s": {kind: spread(values) for kind, values in samples.items()},
        "plain_over_np1_per_repeat": [p / h for p, h in zip(plain, np1, strict=True)],
        "np2_over_np1_per_repeat": [t / h for t, h in zip(np2, np1, strict=True)],
        **provenance(),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out / 'result.json'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=("plain", "horovod"))
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--controller", choices=("gloo", "mpi"), default="gloo")
    parser.add_argument("--out", type=Path, default=None, help="folder for result.json")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.steps, args.batch_size)
        return 0
    started, load = started_now()
    kinds = ("plain", "hvd-np1", "hvd-np2")
    samples = {kind: [] for kind in kinds}
    runs = []
    for repeat in range(args.repeats):
        # The order rotates from repeat to repeat: no kind always runs first (cold caches).
        shift = repeat % len(kinds)
        for position, kind in enumerate(kinds[shift:] + kinds[:shift], start=1):
            load_now = os.getloadavg()[0]
            samples[kind].append(measure(kind, args.steps, args.batch_size, args.controller))
            runs.append(
                {
                    "round": repeat + 1,
                    "position": position,
                    "kind": kind,
                    "samples_per_s": samples[kind][-1],
                    "loadavg_1min": round(load_now, 2),
                }
            )
            print(
                f"repeat {repeat + 1}/{args.repeats} {kind:8s} {samples[kind][-1]:8.1f} samples/s",
                flush=True,
            )
    median = {kind: statistics.median(values) for kind, values in samples.items()}
    print(
        f"\nmedian samples/s ({args.steps} steps after {WARMUP_STEPS} warm-up, batch "
        f"{args.batch_size}/worker, {os.cpu_count()} cores, controller {args.controller}):"
    )
    for kind in kinds:
        low, high = min(samples[kind]), max(samples[kind])
        print(f"  {kind:8s} {median[kind]:8.1f}  (min {low:.1f}, max {high:.1f})")
    overhead = median["plain"] / median["hvd-np1"] - 1
    print(
        f"Horovod np=1 overhead vs plain PyTorch: {overhead:+.1%} "
        f"(ratio plain/hvd-np1 = {median['plain'] / median['hvd-np1']:.3f}; seed 003: ~17% "
        "at one GPU)"
    )
    print(f"Horovod np=2 vs np=1 throughput: {median['hvd-np2'] / median['hvd-np1']:.3f}x")
    if args.out:
        write_result(args.out, args, samples, runs, started, load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
