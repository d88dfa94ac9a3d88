"""Overhead of the workshop's MPI profiler (workshop/launch/mpiprof), measured in one run.

Two measurements, each profiled against unprofiled, interleaved (ABBA order per repeat, so that
drift of the machine's load hits both alike) and repeated; the ratio is profiled / unprofiled
of the medians (target: <= 1.05).

  horovod  the same short Horovod run (`workshop run`: PyTorch MNIST CNN, --controller mpi,
           np 2, 1 epoch of --steps steps) with and without --mpi-profile; compares the
           training time (summary.json train_time_s) and the wall time of the launch.
  micro    a tight loop of MPI_Allreduce (8 bytes: Horovod's negotiation size, --iters calls;
           and 64 KiB, --iters / 40 calls) in mpiprof's test program under mpirun -np 2;
           compares the loop time, i.e. the cost the profiler adds to each call. This is the
           worst case (nothing but the cheapest MPI call); with both modes, the script also
           estimates the Horovod overhead as (added ns per call) x (MPI calls of rank 0) /
           (rank 0's MPI_Init-to-Finalize time), which is not drowned in run-to-run noise.

    python benchmarks/mpi_profiler_overhead.py [--mode both|horovod|micro] [--repeats 5]
        [--steps 200] [--iters 200000]

It holds /tmp/workshop-cpu.lock (the machine-wide lock for heavy jobs) for the whole time, so
that no other run disturbs the timings (--no-lock to skip).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from _recording import flock_held

LOCK = Path(os.environ.get("WORKSHOP_CPU_LOCK", "/tmp/workshop-cpu.lock"))


@contextlib.contextmanager
def machine_lock(enabled: bool) -> Iterator[None]:
    """Hold the machine-wide lock (waits for other heavy jobs to finish)."""
    if enabled:
        print(f"waiting for {LOCK} ...", flush=True)
    with flock_held(LOCK if enabled else None):
        yield


def interleaved(
    repeats: int, measure: Callable[[bool], dict[str, float]], label: str
) -> dict[bool, list[dict[str, float]]]:
    """ABBA: repeat r runs (off, on) when r is even, (on, off) when odd."""
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for r in range(repeats):
        for profiled in (False, True) if r % 2 == 0 else (True, False):
            values = measure(profiled)
            results[profiled].append(values)
            shown = ", ".join(f"{k}={v:.4f}" for k, v in values.items())
            tag = "profiled  " if profiled else "unprofiled"
            print(f"  {label} repeat {r + 1}/{repeats} {tag}: {shown}", flush=True)
    return results


def report(results: dict[bool, list[dict[str, float]]], key: str, what: str) -> float:
    """Print medians and their ratio for one measured quantity; return the ratio."""
    off = statistics.median(v[key] for v in results[False])
    on = statistics.median(v[key] for v in results[True])
    ratio = on / off
    spread = [v[key] for v in results[False]]
    noise = (max(spread) - min(spread)) / off if off else float("nan")
    verdict = "within" if ratio <= 1.05 else "ABOVE"
    print(
        f"{what}: unprofiled {off:.4f}, profiled {on:.4f} (medians) -> ratio {ratio:.3f} "
        f"({verdict} the 5% target; unprofiled run-to-run spread {100 * noise:.1f}%)"
    )
    return ratio


def horovod_run(steps: int, out_dir: Path) -> Callable[[bool], dict[str, float]]:
    """A measure function: one `workshop run` with or without --mpi-profile."""
    from workshop.launch.run import RunConfig, run_one

    counter = iter(range(10_000))

    def measure(profiled: bool) -> dict[str, float]:
        config = RunConfig(
            framework="torch",
            dataset="mnist",
            np=2,
            controller="mpi",
            epochs=1,
            steps_per_epoch=steps,
            timeline=False,
            mpi_profile=profiled,
            data="subset",
        )
        run_dir = run_one(config, out_dir=out_dir, name=f"run{next(counter)}", quiet=True)
        summary = json.loads((run_dir / "summary.json").read_text())
        run = json.loads((run_dir / "run.json").read_text())
        values = {
            "train_time_s": float(summary["train_time_s"]),
            "wall_s": float(run["duration_s"]),
        }
        if profiled:
            from workshop.readers.mpitrace import read_mpitrace

            prof = read_mpitrace(run_dir)  # raises if the run wrote no profile
            rank0 = prof.routines[prof.routines["rank"] == 0]
            values["mpi_calls_rank0"] = float(rank0["calls"].sum())
            values["mpi_elapsed_s_rank0"] = float(prof.files.set_index("rank").loc[0, "elapsed_s"])
        return values

    return measure


def micro_run(iters: int, nbytes: int, out_dir: Path) -> Callable[[bool], dict[str, float]]:
    """A measure function: mpiprof_exercise's allreduce loop, with or without the library."""
    from workshop.launch import profiler

    exe = profiler.exercise_path()
    env = dict(os.environ)
    if os.geteuid() == 0:
        env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

    def measure(profiled: bool) -> dict[str, float]:
        cmd = ["mpirun", "-np", "2"]
        if profiled:
            for key, value in profiler.launch_env(out_dir).items():
                cmd += ["-x", f"{key}={value}"]
        cmd += [str(exe), "bench", str(iters), str(nbytes)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        match = re.search(r"seconds=([\d.]+)", proc.stdout)
        if proc.returncode != 0 or match is None:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
        seconds = float(match[1])
        return {"loop_s": seconds, "us_per_call": 1e6 * seconds / iters}

    return measure


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["both", "horovod", "micro"], default="both")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200, help="training steps per run")
    parser.add_argument("--iters", type=int, default=200000, help="8-byte allreduces per loop")
    parser.add_argument("--no-lock", action="store_true", help="do not take the machine lock")
    args = parser.parse_args()

    from workshop.launch import profiler

    print(f"profiler library: {profiler.build(progress=print)}")
    ratios: dict[str, float] = {}
    added_ns: dict[int, float] = {}
    start = time.perf_counter()
    with machine_lock(not args.no_lock), tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        if args.mode in ("both", "micro"):
            for nbytes, iters in ((8, args.iters), (65536, max(args.iters // 40, 1))):
                print(f"micro: {iters} x MPI_Allreduce of {nbytes} bytes, np 2")
                res = interleaved(args.repeats, micro_run(iters, nbytes, tmp_dir), "micro")
                ratios[f"micro_{nbytes}B"] = report(res, "loop_s", f"allreduce {nbytes} B loop")
                off = statistics.median(v["us_per_call"] for v in res[False])
                on = statistics.median(v["us_per_call"] for v in res[True])
                added_ns[nbytes] = 1000 * (on - off)
                print(f"  per call: {off:.3f} us -> {on:.3f} us (+{added_ns[nbytes]:.0f} ns)")
        if args.mode in ("both", "horovod"):
            try:
                import horovod.torch  # noqa: F401
            except ImportError:
                print("horovod: not installed; skipping the Horovod comparison", file=sys.stderr)
            else:
                print(
                    f"horovod: workshop run torch mnist --controller mpi -np 2, {args.steps} steps"
                )
                res = interleaved(args.repeats, horovod_run(args.steps, tmp_dir), "horovod")
                ratios["horovod_train"] = report(res, "train_time_s", "Horovod training time")
                ratios["horovod_wall"] = report(res, "wall_s", "Horovod launch wall time")
                calls = statistics.median(v["mpi_calls_rank0"] for v in res[True])
                elapsed = statistics.median(v["mpi_elapsed_s_rank0"] for v in res[True])
                if 8 in added_ns:
                    cost = max(added_ns[8], 0.0) * 1e-9 * calls / elapsed
                    ratios["horovod_estimated"] = 1 + cost
                    print(
                        f"estimated from the micro benchmark: {calls:.0f} MPI calls on rank 0 in "
                        f"{elapsed:.2f} s x {added_ns[8]:.0f} ns each = {100 * cost:.4f}% overhead"
                    )
    print(f"done in {time.perf_counter() - start:.0f} s")
    print(
        "ratios (profiled / unprofiled): "
        + json.dumps({k: round(v, 4) for k, v in ratios.items()})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
