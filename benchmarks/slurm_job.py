"""Record a real Slurm job on the emulated cluster for lesson 03's replay, and time it (root).

Brings up ``workshop cluster up --slurm``, writes the job script with ``workshop jobscript
--system slurm`` (2 nodes x 1 rank, MNIST's offline subset), submits it with ``sbatch --wait``
through the quiet-machine recording path (:func:`workshop.launch.quiet.recorded`: the ranks
run inside the emulated nodes and are counted as the run's own), copies the job script and its
``.out`` file next to the run directory, and brings the cluster down. Prints, over
``--repeats`` rounds: seconds to bring the Slurm cluster up, from ``sbatch`` to the finished
run directory, and to bring it down (min / median / max)::

    sudo .venv/bin/python benchmarks/slurm_job.py --out data/cluster/slurm-job --repeats 5

Only the first round's job is kept in ``--out``; the others are timed and removed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORKSHOP = [sys.executable, "-m", "workshop.cli"]
NAME = "slurm-2x1"


def workshop(*args: str, cwd=None) -> subprocess.CompletedProcess:
    result = subprocess.run([*WORKSHOP, *args], capture_output=True, text=True, cwd=cwd)
    if result.returncode:
        raise RuntimeError(f"workshop {' '.join(args)}: {result.stdout}{result.stderr}")
    return result


def one_round(out: Path | None) -> dict:
    from workshop.cluster import emulate
    from workshop.launch import quiet

    started = time.perf_counter()
    workshop("cluster", "up", "--nodes", "2", "--link", "1gbit", "--slurm")
    up_s = time.perf_counter() - started
    try:
        state = json.loads(emulate.state_path().read_text())
        work = Path(state["slurm"]["work"])
        script = work / f"{NAME}.sh"
        workshop(
            "jobscript", "--system", "slurm", "--nodes", "2", "--gpus-per-node", "0",
            "--ranks-per-node", "1", "--python", sys.executable, "--data", "subset",
            "--epochs", "2", "--steps-per-epoch", "20", "--out", str(work / "runs"),
            "--name", NAME, "-o", str(script), "--force",
        )  # fmt: skip
        timing = {}

        def submit() -> Path:
            begun = time.perf_counter()
            result = workshop("cluster", "run", "--", "sbatch", "--wait", script.name, cwd=work)
            timing["sbatch_to_run_dir_s"] = time.perf_counter() - begun
            timing["job"] = result.stdout.split()[-1]
            return work / "runs" / NAME

        run_dir = quiet.recorded(submit, attempts=3)
        if out is not None:
            if out.exists():
                raise FileExistsError(f"{out}: exists; remove it to record again")
            shutil.copytree(run_dir, out / NAME)
            shutil.copy2(script, out / script.name)
            (job_out,) = work.glob(f"*-{timing['job']}.out")
            shutil.copy2(job_out, out / job_out.name)
    finally:
        begun = time.perf_counter()
        workshop("cluster", "down")
        down_s = time.perf_counter() - begun
    return {"up_s": up_s, "sbatch_to_run_dir_s": timing.get("sbatch_to_run_dir_s"),
            "down_s": down_s}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where the first job is kept")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rounds = [one_round(args.out if i == 0 else None) for i in range(args.repeats)]
    summary = {}
    for key in ("up_s", "sbatch_to_run_dir_s", "down_s"):
        values = [r[key] for r in rounds]
        summary[key] = {"min": min(values), "median": statistics.median(values),
                        "max": max(values)}  # fmt: skip
        print(f"{key}: min {min(values):.1f} / median {statistics.median(values):.1f} / "
              f"max {max(values):.1f} s over {len(values)} rounds")  # fmt: skip
    if args.out:
        (args.out / "timing.json").write_text(json.dumps({"rounds": rounds, "summary": summary},
                                                         indent=2) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
