"""`workshop mpi summary DIR` over several jobs: one row per job (mpi_compare.jobs_table)."""

from __future__ import annotations

import json
import shutil

import pytest

from workshop.analysis import mpi as analysis
from workshop.analysis import mpi_compare
from workshop.cli import main
from workshop.paths import data_path
from workshop.readers.mpitrace import read_mpitrace, read_mpitrace_jobs


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_folder_of_job_folders_gives_one_row_per_job(capsys):
    code, out, _ = run(capsys, "mpi", "summary", str(data_path("mpi")), "--json")
    assert code == 0
    rows = {row["job"]: row for row in json.loads(out)["jobs"]}
    # every sub-folder of data/mpi with profiles, labelled folder/jobid (the folder without
    # profile files, unsupported-mixed-controller-ops, gives no row)
    # (the recorded runs' job ids are whatever their launch drew: read from their files)
    recorded = [
        f"{name}/{read_mpitrace(data_path('mpi', name)).jobid}"
        for name in ("tf-mnist-mpi-ops-np2", "torch-mnist-mpi-ops-cycle20ms-np2",
                     "torch-mnist-mpi-ops-np2")
    ]  # fmt: skip
    assert sorted(rows) == [
        "mpiprof-exercise-np4/exercise2",
        "seed001-thetagpu-cpu/thetagpu-cpu",
        "seed001-thetagpu-gpu/thetagpu-gpu",
        *recorded,
    ]
    exercise = rows["mpiprof-exercise-np4/exercise2"]
    # files for ranks 0, 2, 3: comm 0.311 + 0.307 + 0.315 = 0.933 s of elapsed
    # 0.572 + 0.562 + 0.555 = 1.689 s
    assert exercise["ntasks"] == 4 and exercise["ranks_with_files"] == 3
    assert exercise["mpi_time_share"] == pytest.approx(0.933 / 1.689)
    cpu = rows["seed001-thetagpu-cpu/thetagpu-cpu"]
    # rank 0's file: total communication 10.602 s of 15.548 s; 8161 MPI_Allreduce calls
    # taking 10.575 of its 10.602 s of MPI time
    assert cpu["ntasks"] == 16 and cpu["mpi_time_share"] == pytest.approx(10.602 / 15.548)
    assert cpu["allreduce_calls"] == 8161 and cpu["top_routine"] == "MPI_Allreduce"
    assert cpu["top_routine_share"] == pytest.approx(10.575 / 10.602, abs=1e-3)
    # the GPU job's allreduces are all negotiation words (NCCL moves the gradients)
    assert rows["seed001-thetagpu-gpu/thetagpu-gpu"]["small_allreduce_share"] == 1.0


def test_the_8_byte_share_counts_calls_of_at_most_8_bytes():
    jobs = read_mpitrace_jobs(data_path("mpi", "seed001-thetagpu-cpu"))
    table = mpi_compare.jobs_table(jobs)
    sig8 = analysis.negotiation_signature(jobs["thetagpu-cpu"], small_bytes=8)
    assert table["small_allreduce_share"].iloc[0] == sig8["small_call_share"]
    # a threshold below every message size counts none
    assert mpi_compare.jobs_table(jobs, small_bytes=0.5)["small_allreduce_share"].iloc[0] == 0


def test_several_jobs_in_one_folder_no_longer_refuse(tmp_path, capsys):
    for folder in ("seed001-thetagpu-cpu", "seed001-thetagpu-gpu"):
        for f in data_path("mpi", folder).glob("mpi_profile.*"):
            shutil.copy(f, tmp_path / f.name)
    code, out, err = run(capsys, "mpi", "summary", str(tmp_path))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith(f"2 jobs in {tmp_path}")
    assert "<=8B_share" in lines[1]
    cpu = next(line for line in lines if line.lstrip().startswith("thetagpu-cpu"))
    assert cpu.split()[1:4] == ["16", "1", "68.2%"]  # 10.602 / 15.548
    # --job still picks one job's full summary
    code, out, _ = run(capsys, "mpi", "summary", str(tmp_path), "--job", "thetagpu-gpu", "--json")
    assert code == 0 and json.loads(out)["ntasks"] == 8


def test_a_sweep_folder_labels_jobs_by_sub_folder(capsys):
    # the sweep's six runs share one job id: only the sub-folder tells them apart
    sweep = data_path("sweeps", "cycle-time-mnist")
    jobids = {read_mpitrace(folder).jobid for folder in sweep.glob("p0*")}
    assert len(jobids) == 1
    (jobid,) = jobids
    code, out, _ = run(capsys, "mpi", "summary", str(sweep))
    assert code == 0 and out.startswith("6 jobs in")
    assert f"p00-cyc1-seed42/{jobid}" in out and f"p05-cyc20-seed43/{jobid}" in out


def test_a_folder_without_profiles_says_so(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "mpi", "summary", str(tmp_path))
    assert code == 1 and "no mpi_profile.<jobid>.<rank> files" in err


def test_the_emulated_cluster_profiles_of_1_2_and_4_ranks(capsys):
    folder = data_path("cluster", "mpi-profiles")
    code, out, _ = run(capsys, "mpi", "summary", str(folder), "--json")
    rows = json.loads(out)["jobs"]
    assert code == 0 and [row["job"].split("/")[0] for row in rows] == ["np1", "np2", "np4"]
    assert [row["ntasks"] for row in rows] == [1, 2, 4]
    # like mpitrace, the profiler writes rank 0 and the ranks of min, median and max MPI time:
    # every rank up to 3, 3 files at 4 ranks
    assert [row["ranks_with_files"] for row in rows] == [1, 2, 3]
    for row in rows:
        run_json = json.loads((folder / row["job"].split("/")[0] / "run.json").read_text())
        assert run_json["config"]["np"] == row["ntasks"] and run_json["status"] == "ok"
