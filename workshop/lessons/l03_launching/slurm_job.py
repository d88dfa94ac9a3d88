"""Lesson 03's live Slurm job: the emulated cluster with Slurm, a generated job script
submitted with sbatch and watched with squeue, its files kept for the notebook (root)."""

from __future__ import annotations

import sys
from pathlib import Path


def slurm_job_live(out: Path, *, name: str = "slurm-2x1", report=print) -> Path:
    """Lesson 03's live path (root): bring the emulated cluster up with Slurm (unless one is
    up), write the job script, submit it and watch ``squeue``, then copy the script, the job's
    ``.out`` file and its run directory to ``out`` and bring the cluster down if this call
    brought it up. Returns ``out``.

    Raises:
        SlurmError: Slurm is missing or the job failed (its ``.out`` file says why).
        FileExistsError: ``out`` exists (nothing is overwritten).
    """
    import json
    import shutil

    from workshop.cluster import emulate
    from workshop.cluster.slurm import SlurmError, run_job
    from workshop.cluster.spec import ClusterSpec

    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out}: exists; choose another folder (nothing is overwritten)")
    state = emulate.read_state()
    ours = state is None
    if ours:
        report("$ workshop cluster up --nodes 2 --slurm")
        state = emulate.up(ClusterSpec(nodes=2), slurm=True)
    elif not state.get("slurm"):
        raise SlurmError("a cluster without Slurm is up: `workshop cluster down` first")
    try:
        state = json.loads(emulate.state_path().read_text())
        work = Path(state["slurm"]["work"])
        script = write_job(work, name)
        # the job takes under a minute here; a hung one is cancelled well before CI's limit
        job, job_out = run_job(script, state, report=report, timeout_s=300)
        run_dir = work / "runs" / name
        if job_out is None or not (run_dir / "run.json").exists():
            raise SlurmError(f"job {job} left no run directory: {job_out or 'no .out file'}")
        out.mkdir(parents=True)
        shutil.copytree(run_dir, out / name)
        shutil.copy2(script, out / script.name)
        shutil.copy2(job_out, out / job_out.name)
    finally:
        if ours:
            report("$ workshop cluster down")
            emulate.down()
    return out


def write_job(
    work: Path, name: str, *, nodes: int = 2, ranks_per_node: int = 1, epochs: int = 2,
    steps_per_epoch: int = 20,
) -> Path:  # fmt: skip
    """Write the job script ``workshop jobscript --system slurm`` would, for a CPU MNIST run
    (the offline subset) into ``work/<name>.sh``; its run directory goes to ``work/runs``."""
    from workshop.launch.jobplan import JobSpec
    from workshop.launch.jobscript import render

    options = ["--data", "subset", "--epochs", str(epochs), "--steps-per-epoch",
               str(steps_per_epoch), "--name", name]  # fmt: skip
    spec = JobSpec(system="slurm", nodes=nodes, run_options=options, python=sys.executable,
                   gpus_per_node=0, ranks_per_node=ranks_per_node, out_dir=str(work / "runs"),
                   script_name=f"{name}.sh")  # fmt: skip
    script = work / f"{name}.sh"
    script.write_text(render(spec))
    return script
