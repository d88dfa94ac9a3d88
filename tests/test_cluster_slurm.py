"""Slurm on the emulated cluster (issue 40): ``workshop cluster up --slurm`` starts munged,
slurmctld and a slurmd per node; the job scripts ``workshop jobscript --system slurm`` writes
are submitted with a real ``sbatch --wait`` and their run directories read like a laptop's.

Root only (network namespaces, daemons); skipped with the reason otherwise. Runs in the same
xdist group as test_cluster_live.py (one emulated cluster at a time on this machine)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from processes import processes_with

from workshop.cluster import emulate

pytestmark = pytest.mark.live

WORKSHOP = [sys.executable, "-m", "workshop.cli"]


def workshop(*args: str, cwd=None, timeout=240) -> subprocess.CompletedProcess:
    return subprocess.run([*WORKSHOP, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)  # fmt: skip


def up_slurm(mpi_default: str):
    if os.geteuid() != 0:
        pytest.skip("Slurm on the emulated cluster needs root (namespaces, daemons)")
    missing = [t for t in ("slurmctld", "slurmd", "sbatch", "munged") if not shutil.which(t)]
    if missing:
        pytest.skip(f"Slurm not installed ({', '.join(missing)}): setup.sh --slurm as root")
    if emulate.state_path().exists():
        pytest.skip(f"a cluster is up already ({emulate.state_path()}): workshop cluster down")
    result = workshop("cluster", "up", "--nodes", "2", "--link", "1gbit", "--slurm",
                      "--mpi-default", mpi_default)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(emulate.state_path().read_text())


@pytest.fixture(scope="module")
def slurm(cpu_lock_module, horovod_ready):
    state = up_slurm("pmix")
    try:
        yield state
    finally:
        down = workshop("cluster", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert processes_with(state["state_dir"]) == []  # munged, slurmctld and both slurmd are gone


def submit(state, script: Path) -> tuple[subprocess.CompletedProcess, str]:
    """``sbatch --wait SCRIPT`` from the shared work folder; the job's .out file."""
    work = Path(state["slurm"]["work"])
    result = workshop("cluster", "run", "--", "sbatch", "--wait", script.name, cwd=work,
                      timeout=300)  # fmt: skip
    job = result.stdout.split()[-1] if "Submitted batch job" in result.stdout else "?"
    outs = list(work.glob(f"*-{job}.out"))
    return result, outs[0].read_text() if outs else ""


def test_status_shows_the_slurm_nodes(slurm):
    result = workshop("cluster", "status")
    assert result.returncode == 0, result.stderr
    assert "nodea workshop* idle" in result.stdout and "nodeb workshop* idle" in result.stdout


@pytest.mark.parametrize(("nodes", "per_node"), [(2, 1), (1, 2)])
def test_a_generated_job_script_runs_under_sbatch(slurm, nodes, per_node):
    work = Path(slurm["slurm"]["work"])
    name = f"job-{nodes}x{per_node}"
    script = work / f"{name}.sh"
    made = workshop(
        "jobscript", "--system", "slurm", "--nodes", str(nodes), "--gpus-per-node", "0",
        "--ranks-per-node", str(per_node), "--python", sys.executable, "--data", "subset",
        "--epochs", "1", "--steps-per-epoch", "5", "--no-timeline",
        "--out", str(work / "runs"), "--name", name, "-o", str(script), "--force",
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    result, out = submit(slurm, script)
    assert result.returncode == 0, result.stdout + result.stderr + out
    assert f"run {name}: ok" in out, out
    run_dir = work / "runs" / name
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "ok" and run["config"]["np"] == nodes * per_node
    assert run["env"].get("SLURM_JOB_ID") == result.stdout.split()[-1]
    hosts = [(run_dir / "logs" / f"rank.{r}.host").read_text().strip() for r in range(2)]
    assert hosts == (["nodea", "nodeb"] if nodes == 2 else ["nodea", "nodea"])
    diagnose = workshop("diagnose", str(run_dir))
    assert diagnose.returncode in (0, 1) and "Traceback" not in diagnose.stderr, diagnose.stderr
    assert run_dir.name in diagnose.stdout or "healthy" in diagnose.stdout.lower()


def test_srun_without_pmi_is_explained(slurm):
    # a site whose MpiDefault is none, and a launcher that does not ask for PMIx: each rank
    # starts alone and Open MPI stops; workshop run must say why and what to change
    work = Path(slurm["slurm"]["work"])
    script = work / "no-pmi.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n"
        "#SBATCH --output=no-pmi-%j.out\n"
        f"{sys.executable} -m workshop.cli run --launcher 'srun --mpi=none --nodes=2 "
        "--ntasks=2 --ntasks-per-node=1' --np 2 --controller mpi --device cpu --data subset "
        f"--epochs 1 --steps-per-epoch 5 --no-timeline --out {work / 'runs'} --name no-pmi\n"
    )
    result, out = submit(slurm, script)
    assert result.returncode != 0, out  # the job failed, and sbatch --wait says so
    assert "srun --mpi=pmix" in out and "PMI" in out, out


def test_a_job_is_watched_with_squeue_until_it_ends(slurm):
    from workshop.cluster.slurm import run_job

    script = Path(slurm["slurm"]["work"]) / "hello.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n"
        "#SBATCH --output=hello-%j.out\nsrun --mpi=none hostname\nsleep 3\n"
    )
    lines = []
    job, out = run_job(script, slurm, report=lines.append, poll_s=0.5)
    assert lines[0].endswith(f"Submitted batch job {job}")
    assert any(" RUNNING " in line for line in lines[1:]), lines  # squeue saw it run
    assert sorted(out.read_text().split()) == ["nodea", "nodeb"]  # one task on each node


def test_lesson_03s_live_job_keeps_script_output_and_run(slurm, tmp_path):
    from workshop.lessons import slurm_job_live

    lines = []
    out = slurm_job_live(tmp_path / "job", name="lesson-03", report=lines.append)
    assert sorted(p.name for p in out.iterdir() if p.suffix != ".out") == [
        "lesson-03", "lesson-03.sh"]  # fmt: skip
    (job_out,) = out.glob("*.out")
    assert "run lesson-03: ok" in job_out.read_text()
    assert json.loads((out / "lesson-03" / "run.json").read_text())["status"] == "ok"
    assert any(line.startswith("$ squeue") for line in lines), lines
    assert emulate.state_path().exists()  # the module's cluster was up: it stays up
    with pytest.raises(FileExistsError, match="nothing is overwritten"):
        slurm_job_live(out, name="lesson-03")
