"""Does Horovod's cycle time change the step time? Real trainings, interleaved, with spreads.

Lessons 04 and 08 once drew opposite conclusions from single runs on a loaded machine (a 5 ms
cycle: slower steps; a 10 ms cycle: faster). This script settles it as far as this machine
can: it runs ``workshop run`` trainings (PyTorch, MNIST subset, 2 ranks of one thread each,
Gloo controller, no timeline) at each ``HOROVOD_CYCLE_TIME`` in rounds; every round runs each
cycle time once, in an order that rotates from round to round, so that the machine's
background load hits all settings alike. Per run it takes the step time of the steady epochs
(training seconds of epochs 2..E over their optimizer steps; epoch 1 pays one-off costs).

It prints and records min / median / max of the step time per cycle time, and the ratio of
each run's step time to the baseline's (1 ms, Horovod's default) **in the same round**, with
min / median / max over the rounds, and a verdict: an effect only when the per-round ratios
all lie on one side of 1.

    flock /tmp/workshop-cpu.lock python benchmarks/cycle_time.py \
        [--repeats 5] [--cycle-times 1 5 10] [--epochs 3] [--steps 40] \
        [--out data/benchmarks/cycle-time]

With ``--out`` the run directories go to ``OUT/runs/`` (run.json, metrics.jsonl, logs: the
provenance of every run) and the summary to ``OUT/result.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _recording import run_record, spread, started_now

from workshop.launch.record import provenance

BASELINE_MS = 1.0


def run_args(cycle_ms: float, options: argparse.Namespace, out: Path, name: str) -> list[str]:
    """The ``workshop run`` command of one training at ``cycle_ms``."""
    return [
        "workshop",
        "run",
        "--np",
        "2",
        "--controller",
        options.controller,
        "--cycle-time-ms",
        f"{cycle_ms:g}",
        "--epochs",
        str(options.epochs),
        "--steps-per-epoch",
        str(options.steps),
        "--lr-scaling",
        "none",
        "--threads-per-rank",
        "1",
        "--data",
        "subset",
        "--no-timeline",
        "--out",
        str(out),
        "--name",
        name,
        "--quiet",
    ]


def steady_step_ms(run_dir: Path) -> dict:
    """Step time and samples/s of epochs 2..E of one finished run (from its metrics.jsonl)."""
    epochs = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steady = [e for e in epochs if e["epoch"] >= 2]
    if not steady:
        raise ValueError(f"{run_dir / 'metrics.jsonl'}: no epoch after the first")
    train_s = sum(e["train_time_s"] for e in steady)
    steps = sum(e["steps"] for e in steady)
    return {
        "step_time_ms": 1e3 * train_s / steps,
        "samples_per_s": sum(e["samples"] for e in steady) / train_s,
        "steady_steps": steps,
        "epoch_train_s": [e["train_time_s"] for e in epochs],
    }


def verdict(ratios: dict[float, dict]) -> str:
    """One line per cycle time: slower / faster in every round, or within the noise.

    >>> verdict({5.0: {"min": 1.02, "median": 1.05, "max": 1.1, "values": [1.02, 1.05, 1.1]}})
    '5 ms: slower steps than 1 ms in every one of 3 rounds (x1.02 to x1.10, median x1.05)'
    >>> verdict({10.0: {"min": 0.9, "median": 1.01, "max": 1.2, "values": [0.9, 1.01, 1.2]}})
    '10 ms: x0.90 to x1.20 of 1 ms per round (median x1.01): within the noise'
    """
    lines = []
    for cycle, r in ratios.items():
        n = len(r["values"])
        span = f"x{r['min']:.2f} to x{r['max']:.2f}"
        if r["min"] > 1 or r["max"] < 1:
            side = "slower" if r["min"] > 1 else "faster"
            lines.append(
                f"{cycle:g} ms: {side} steps than {BASELINE_MS:g} ms in every one of {n} rounds "
                f"({span}, median x{r['median']:.2f})"
            )
        else:
            lines.append(
                f"{cycle:g} ms: {span} of {BASELINE_MS:g} ms per round (median "
                f"x{r['median']:.2f}): within the noise"
            )
    return "; ".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="rounds (each runs every cycle)")
    parser.add_argument("--cycle-times", type=float, nargs="+", default=[1.0, 5.0, 10.0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps per epoch")
    parser.add_argument("--controller", choices=("gloo", "mpi"), default="gloo")
    parser.add_argument("--out", type=Path, default=None, help="folder for result.json, runs/")
    options = parser.parse_args()
    if options.epochs < 2:
        parser.error("--epochs must be >= 2 (epoch 1 is not timed)")
    if BASELINE_MS not in options.cycle_times:
        parser.error(f"--cycle-times must include the baseline {BASELINE_MS:g} ms")
    if not shutil.which("workshop"):
        parser.error("the 'workshop' command is not on PATH: activate the virtual environment")
    cycles = list(dict.fromkeys(options.cycle_times))
    runs_dir = (
        options.out / "runs" if options.out else Path(tempfile.mkdtemp(prefix="cycle-time-"))
    )
    if runs_dir.exists() and any(runs_dir.iterdir()):
        parser.error(f"{runs_dir} is not empty: give a new --out folder")
    runs_dir.mkdir(parents=True, exist_ok=True)
    started, load_before = started_now()
    runs = []
    for round_ in range(1, options.repeats + 1):
        shift = (round_ - 1) % len(cycles)
        for position, cycle in enumerate(cycles[shift:] + cycles[:shift], start=1):
            name = f"r{round_:02d}-cyc{cycle:g}"
            command = run_args(cycle, options, runs_dir, name)
            load = os.getloadavg()[0]
            began = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            wall_s = time.perf_counter() - began
            if done.returncode:
                raise RuntimeError(
                    f"{' '.join(command)} exited with {done.returncode}:\n{done.stderr[-2000:]}"
                )
            measured = steady_step_ms(runs_dir / name)
            runs.append(
                {
                    "round": round_,
                    "position": position,
                    "cycle_time_ms": cycle,
                    "run": name,
                    "wall_s": round(wall_s, 3),
                    "loadavg_1min": round(load, 2),
                    **measured,
                }
            )
            print(
                f"round {round_}/{options.repeats} {cycle:4g} ms  "
                f"{measured['step_time_ms']:6.1f} ms/step  load {load:.1f}",
                flush=True,
            )
    step = {
        c: spread([r["step_time_ms"] for r in runs if r["cycle_time_ms"] == c]) for c in cycles
    }
    base = {r["round"]: r["step_time_ms"] for r in runs if r["cycle_time_ms"] == BASELINE_MS}
    ratios = {
        c: spread([r["step_time_ms"] / base[r["round"]] for r in runs if r["cycle_time_ms"] == c])
        for c in cycles
        if c != BASELINE_MS
    }
    line = verdict(ratios)
    print(f"\nstep time of epochs 2..{options.epochs}, {options.repeats} interleaved rounds:")
    for c in cycles:
        s = step[c]
        print(f"  {c:4g} ms  min {s['min']:6.1f}  median {s['median']:6.1f}  max {s['max']:6.1f}")
    print(line)
    if options.out:
        result = {
            **run_record(started, load_before),
            "settings": {
                "repeats": options.repeats,
                "cycle_times_ms": cycles,
                "baseline_ms": BASELINE_MS,
                "epochs": options.epochs,
                "steps_per_epoch": options.steps,
                "timed_epochs": f"2..{options.epochs}",
                "np": 2,
                "controller": options.controller,
                "batch_per_rank": 32,
                "threads_per_rank": 1,
                "run_command": run_args(BASELINE_MS, options, runs_dir, "NAME"),
            },
            "runs": runs,
            "step_time_ms": {f"{c:g}": s for c, s in step.items()},
            "ratio_to_baseline_same_round": {f"{c:g}": r for c, r in ratios.items()},
            "verdict": line,
            **provenance(),
        }
        path = options.out / "result.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
