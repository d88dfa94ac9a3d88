"""`workshop mpi report|summary|compare|plot` on the shipped profiles."""

from __future__ import annotations

import json
import shutil

import pytest

from workshop.cli import main
from workshop.paths import data_path

CPU = str(data_path("mpi", "seed001-thetagpu-cpu"))
GPU = str(data_path("mpi", "seed001-thetagpu-gpu"))
EXERCISE = str(data_path("mpi", "mpiprof-exercise-np4"))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_summary_json_fields(capsys):
    code, out, _ = run(capsys, "mpi", "summary", CPU, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["jobs"] == ["thetagpu-cpu"] and data["job"] == "thetagpu-cpu"
    assert data["ntasks"] == 16 and data["ranks"] == [0]
    assert data["routines"]["0"]["MPI_Allreduce"] == {
        "calls": 8161,
        "avg_bytes": 138800.2,
        "time_s": 10.575,
    }
    assert data["comm_s"] == {"0": 10.602} and data["elapsed_s"] == {"0": 15.548}
    assert data["small_allreduce_calls"] == 7428
    assert data["small_allreduce_time_s"] == pytest.approx(5.696)
    assert data["load_imbalance"]["max_task"] == 3


def test_summary_json_of_several_ranks(capsys):
    code, out, _ = run(capsys, "mpi", "summary", EXERCISE, "--json")
    data = json.loads(out)
    assert code == 0 and data["ranks"] == [0, 2, 3] and sorted(data["routines"]) == ["0", "2", "3"]
    assert set(data["comm_s"]) == {"0", "2", "3"} and data["small_allreduce_calls"] == 4000


def test_summary_text(capsys):
    code, out, _ = run(capsys, "mpi", "summary", GPU)
    assert code == 0
    assert "rank 0: comm 5.519 s of 17.725 s elapsed (31.1%)" in out
    assert "11658 calls" in out


def test_report_words_and_numbers(capsys):
    code, out, _ = run(capsys, "mpi", "report", CPU)
    assert code == 0
    assert "MPI_Allreduce dominates rank 0's MPI time: 10.575 s (99.8%)" in out
    assert "7428 of 8161 MPI_Allreduce calls (91.0%) move <= 16 bytes" in out
    assert "maximum 12.177 s (task 3)" in out
    assert "Routine table of rank 0:" in out


def test_several_jobs_need_job(tmp_path, capsys):
    for folder in (CPU, GPU):
        for f in data_path(folder).glob("mpi_profile.*"):
            shutil.copy(f, tmp_path / f.name)
    code, _, err = run(capsys, "mpi", "report", str(tmp_path))
    assert code == 1 and "choose one with --job" in err and "thetagpu-cpu, thetagpu-gpu" in err
    code, out, _ = run(capsys, "mpi", "summary", str(tmp_path), "--job", "thetagpu-gpu", "--json")
    data = json.loads(out)
    assert code == 0 and data["jobs"] == ["thetagpu-cpu", "thetagpu-gpu"] and data["ntasks"] == 8


def test_errors_name_the_file(tmp_path, capsys):
    bad = tmp_path / "mpi_profile.1.0"
    bad.write_text("Data for MPI rank 0 of 2:\nthis is not mpitrace\n")
    code, out, err = run(capsys, "mpi", "report", str(bad))
    assert code == 1 and out == ""
    assert f"{bad}: line 2: unrecognised line" in err
    code, _, err = run(capsys, "mpi", "summary", str(tmp_path / "none"), "--json")
    assert code == 1 and "no such file or directory" in err


def test_truncated_file_is_reported_with_its_warning(tmp_path, capsys):
    text = (data_path("mpi", "seed001-thetagpu-cpu") / "mpi_profile.thetagpu-cpu.0").read_text()
    path = tmp_path / "mpi_profile.5.0"
    path.write_text(text[: text.index("Message size distributions:") + 28])
    code, out, _ = run(capsys, "mpi", "report", str(path))
    assert code == 0 and "Warning: mpi_profile.5.0: file stops early" in out
    code, out, _ = run(capsys, "mpi", "summary", str(path), "--json")
    data = json.loads(out)
    assert data["complete"] is False and data["warnings"]


def test_compare(capsys):
    code, out, _ = run(capsys, "mpi", "compare", CPU, GPU, "--labels", "cpu", "gpu", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["summary"]["cpu"]["large_allreduce_calls"] == 733
    assert data["summary"]["gpu"]["large_allreduce_calls"] == 0
    assert data["routines"]["MPI_Allreduce"]["calls_gpu"] == 11658
    code, out, _ = run(capsys, "mpi", "compare", CPU, GPU)
    assert code == 0 and "small_allreduce_call_share" in out


def test_plot_writes_an_image(tmp_path, capsys):
    out_png = tmp_path / "fig.png"
    code, out, _ = run(capsys, "mpi", "plot", EXERCISE, "-o", str(out_png))
    assert code == 0 and out_png.stat().st_size > 10_000
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_of_a_run_directory_puts_mpi_time_against_training(capsys):
    code, out, _ = run(capsys, "mpi", "report", str(data_path("mpi", "torch-mnist-mpi-ops-np2")))
    assert code == 0
    assert "it is not the share of training time lost" in out
    assert "The run trained 60 steps in 0.363 s" in out
    code, out, _ = run(capsys, "mpi", "report", CPU)  # the seed's file alone: no metrics
    assert "The run trained" not in out
