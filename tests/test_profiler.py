"""The workshop's PMPI profiler: build (idempotent, keyed), launch environment, and real MPI runs
of its test program whose call counts are known exactly."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from workshop.cli import main
from workshop.launch import profiler
from workshop.readers.mpitrace import read_mpitrace

# Open MPI is part of the setup: missing tools fail the test (conftest.mpi_tools), no skip.
needs_mpi = pytest.mark.usefixtures("mpi_tools")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A private cache dir, so the tests build their own library."""
    folder = tmp_path_factory.mktemp("cache")
    old = os.environ.get("WORKSHOP_CACHE")
    os.environ["WORKSHOP_CACHE"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("WORKSHOP_CACHE", None)
    else:
        os.environ["WORKSHOP_CACHE"] = old


@pytest.fixture(scope="module")
def lib(cache):
    return profiler.build()


def mpirun(np_: int, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """Run the exercise program under mpirun with the profiler's environment."""
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe"]
    for key in sorted(env):
        cmd += ["-x", f"{key}={env[key]}"]
    cmd += [str(profiler.exercise_path()), *args]
    run_env = dict(os.environ)
    if os.geteuid() == 0:
        run_env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    proc = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@needs_mpi
def test_build_is_idempotent_and_keyed(cache, lib, capsys):
    assert lib.parent == cache / "lib" and re.fullmatch(r"libmpiprof-[0-9a-f]{12}\.so", lib.name)
    mtime = lib.stat().st_mtime_ns
    assert profiler.build() == lib and lib.stat().st_mtime_ns == mtime  # not rebuilt
    assert main(["profiler", "build", "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["profiler", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(lib)
    assert lib.stat().st_mtime_ns == mtime
    # the exported symbols are the MPI names (that is what interposes)
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True)
    for name in ("MPI_Allreduce", "MPI_Iallreduce", "MPI_Finalize", "MPI_Alltoallv"):
        assert re.search(rf"\bT {name}$", nm.stdout, re.M), name


@needs_mpi
def test_a_changed_source_gets_another_library(cache, lib, tmp_path, monkeypatch):
    changed = tmp_path / "mpiprof.c"
    changed.write_text(profiler.SOURCE.read_text() + "\n/* changed */\n")
    monkeypatch.setattr(profiler, "SOURCE", changed)
    other = profiler.build()
    assert other != lib and other.exists() and lib.exists()


@needs_mpi
def test_compile_errors_are_reported(cache, tmp_path, monkeypatch):
    broken = tmp_path / "mpiprof.c"
    broken.write_text("this is not C\n")
    monkeypatch.setattr(profiler, "SOURCE", broken)
    with pytest.raises(profiler.ProfilerBuildError, match="compiling .*mpiprof.c failed"):
        profiler.build()
    assert not list((cache / "lib").glob("*.tmp"))  # no half-written file left


def test_missing_mpicc_is_explained(monkeypatch):
    monkeypatch.setenv("MPICC", "/nonexistent/mpicc")
    with pytest.raises(profiler.ProfilerBuildError, match="mpicc not found"):
        profiler.build()


def test_job_id_from_batch_systems():
    assert profiler.job_id({"COBALT_JOBID": "4242"}) == "4242"
    assert profiler.job_id({"PBS_JOBID": "123.polaris-pbs-01"}) == "123.polaris-pbs-01"
    assert profiler.job_id({"SLURM_JOB_ID": "77", "PBS_JOBID": "5"}) == "5"
    assert profiler.job_id({"PBS_JOBID": "a/b c"}) == "a_b_c"
    assert profiler.job_id({}) == str(os.getpid())


@needs_mpi
def test_launch_env(lib, tmp_path, monkeypatch):
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("SAVE_ALL_TASKS", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "991")
    env = profiler.launch_env(tmp_path)
    assert env == {
        "LD_PRELOAD": str(lib),
        "WORKSHOP_MPI_PROFILE_DIR": str(tmp_path.resolve()),
        "WORKSHOP_MPI_PROFILE_JOBID": "991",
    }
    monkeypatch.setenv("LD_PRELOAD", "/other/lib.so")
    monkeypatch.setenv("SAVE_ALL_TASKS", "yes")
    env = profiler.launch_env(tmp_path)
    assert env["LD_PRELOAD"] == f"{lib}:/other/lib.so" and env["SAVE_ALL_TASKS"] == "yes"


@pytest.mark.live  # mpirun starts MPI ranks
@needs_mpi
def test_exact_counts_of_a_real_run(lib, tmp_path, monkeypatch, cpu_lock):
    monkeypatch.delenv("SAVE_ALL_TASKS", raising=False)
    run_dir = tmp_path / "run"
    env = profiler.launch_env(run_dir) | {"WORKSHOP_MPI_PROFILE_JOBID": "t1"}
    out = mpirun(2, env, "exercise", "300").stdout
    threads = int(re.search(r"threads=(\d)", out)[1])
    prof = read_mpitrace(run_dir)
    assert prof.jobid == "t1" and prof.ranks == [0, 1] and prof.layout == "current"
    assert prof.files["complete"].all() and prof.warnings == []
    small = 300 * threads  # the second thread's allreduces are counted too (thread-safe)
    for rank in (0, 1):
        r = prof.routines[prof.routines["rank"] == rank].set_index("routine")
        expected_calls = {
            "MPI_Comm_rank": 1,
            "MPI_Comm_size": 1,
            "MPI_Allreduce": small + 3,
            "MPI_Iallreduce": 2,
            "MPI_Wait": 2,
            "MPI_Bcast": 2,
            "MPI_Barrier": 3,
            "MPI_Reduce": 1,
            "MPI_Gather": 1,
            "MPI_Gatherv": 1,
            "MPI_Allgather": 1,
            "MPI_Allgatherv": 1,
            "MPI_Alltoall": 1,
            "MPI_Alltoallv": 1,
            "MPI_Sendrecv": 1,
            "MPI_Isend": 1,
            "MPI_Irecv": 1,
            "MPI_Waitall": 1,
            "MPI_Send": 1,
            "MPI_Recv": 1,
        }
        assert r["calls"].to_dict() == expected_calls
        avg = r["avg_bytes"]
        assert avg["MPI_Bcast"] == 502.0 and avg["MPI_Reduce"] == 80.0
        assert avg["MPI_Gatherv"] == rank + 1.0 and avg["MPI_Allgatherv"] == 16.0
        assert avg["MPI_Alltoall"] == 4.0 * 2 and avg["MPI_Alltoallv"] == 8.0 * 2
        assert avg["MPI_Send"] == avg["MPI_Recv"] == 256.0 and avg["MPI_Sendrecv"] == 64.0
        assert avg["MPI_Barrier"] == 0.0 and avg["MPI_Iallreduce"] == 4.0
        sizes = prof.message_sizes[
            (prof.message_sizes["rank"] == rank)
            & (prof.message_sizes["routine"] == "MPI_Allreduce")
        ]
        assert sizes[["calls", "avg_bytes"]].values.tolist() == [[small, 8.0], [3, 4194304.0]]
        assert "MPI_Barrier" not in set(prof.message_sizes["routine"])  # no bytes, no table
    assert len(prof.tasks) == 2 and prof.tasks["host"].notna().all()
    files = prof.files.set_index("rank")
    assert (files["elapsed_s"] > 0).all() and (files["comm_s"] > 0).all()
    routine_time = prof.routines.groupby("rank")["time_s"].sum()
    for rank in (0, 1):  # the total is the sum of the routines (3-decimal rounding each)
        assert abs(routine_time[rank] - files.loc[rank, "comm_s"]) < 0.001 * 21


@pytest.mark.live  # mpirun starts MPI ranks
@needs_mpi
def test_only_rank0_and_extremes_write_unless_save_all(lib, tmp_path, monkeypatch, cpu_lock):
    monkeypatch.delenv("SAVE_ALL_TASKS", raising=False)
    default_dir, all_dir = tmp_path / "default", tmp_path / "all"
    mpirun(
        4, profiler.launch_env(default_dir) | {"WORKSHOP_MPI_PROFILE_JOBID": "d"}, "exercise", "50"
    )
    prof = read_mpitrace(default_dir)
    extremes = set(prof.extremes["taskid"])
    assert len(prof.extremes) == 3 and len(prof.tasks) == 4
    assert set(prof.ranks) == {0} | extremes
    # the extremes agree with the all-task table of rank 0's file
    by_comm = prof.tasks.sort_values(["comm_s", "taskid"])
    assert prof.extremes.set_index("role").loc["minimum", "comm_s"] == pytest.approx(
        by_comm["comm_s"].iloc[0], abs=0.006
    )
    env = profiler.launch_env(all_dir) | {
        "WORKSHOP_MPI_PROFILE_JOBID": "a",
        "SAVE_ALL_TASKS": "yes",
    }
    mpirun(4, env, "exercise", "50")
    assert read_mpitrace(all_dir).ranks == [0, 1, 2, 3]
    non_zero = (all_dir / "mpi_profile.a.1").read_text()
    assert "Summary for all tasks" not in non_zero  # only rank 0's file has the summary


@pytest.mark.live  # mpirun starts MPI ranks
@needs_mpi
def test_default_job_id_is_rank0_pid_and_directory_is_cwd(lib, tmp_path, cpu_lock):
    # without launch_env's variables: the library names files by rank 0's pid, in the cwd
    cmd = [
        "mpirun",
        "-np",
        "2",
        "--oversubscribe",
        "-x",
        f"LD_PRELOAD={lib}",
        str(profiler.exercise_path()),
        "exercise",
        "5",
    ]
    unset = ("WORKSHOP_MPI", "PBS_", "SLURM_", "COBALT_", "SAVE_ALL")
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(unset)}
    if os.geteuid() == 0:
        run_env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in Path(tmp_path).iterdir())
    assert len(names) == 2 and all(re.fullmatch(r"mpi_profile\.\d+\.[01]", n) for n in names)
    assert len({n.split(".")[1] for n in names}) == 1  # one job id for both ranks
