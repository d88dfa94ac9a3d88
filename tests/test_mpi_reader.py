"""The mpitrace reader on both layouts, directories, globs, several jobs, and bad input."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from workshop.analysis import mpi as mpi_analysis
from workshop.paths import data_path
from workshop.readers.mpitrace import (
    MpiTraceError,
    MpiTraceWarning,
    find_profile_files,
    parse_mpitrace,
    parse_mpitrace_bytes,
    read_mpitrace,
    read_mpitrace_file,
    read_mpitrace_jobs,
)

CPU = data_path("mpi", "seed001-thetagpu-cpu")
GPU = data_path("mpi", "seed001-thetagpu-gpu")
EXERCISE = data_path("mpi", "mpiprof-exercise-np4")
CPU_FILE = CPU / "mpi_profile.thetagpu-cpu.0"


def test_seed_cpu_alcf_layout_values():
    prof = read_mpitrace(CPU)
    assert prof.jobid == "thetagpu-cpu"
    assert prof.ntasks == 16 and prof.ranks == [0] and prof.layout == "alcf"
    routines = prof.routines.set_index("routine")
    assert list(routines.index) == [
        "MPI_Comm_rank",
        "MPI_Comm_size",
        "MPI_Bcast",
        "MPI_Allreduce",
        "MPI_Gather",
        "MPI_Gatherv",
        "MPI_Allgather",
    ]
    assert routines.loc["MPI_Allreduce", "calls"] == 8161
    assert routines.loc["MPI_Allreduce", "avg_bytes"] == pytest.approx(138800.2)
    assert routines.loc["MPI_Allreduce", "time_s"] == pytest.approx(10.575)
    f = prof.files.iloc[0]
    assert f["roles"] == "minimum" and bool(f["complete"])
    assert (f["comm_s"], f["elapsed_s"], f["user_s"], f["system_s"], f["mem_mb"]) == (
        pytest.approx(10.602),
        pytest.approx(15.548),
        pytest.approx(131.483),
        pytest.approx(6.319),
        pytest.approx(1655.0),
    )
    sizes = prof.message_sizes
    allreduce = sizes[sizes["routine"] == "MPI_Allreduce"]
    assert len(allreduce) == 9 and allreduce["calls"].sum() == 8161
    assert allreduce.iloc[0][["calls", "avg_bytes", "time_s"]].tolist() == [7428, 8.0, 5.696]
    assert set(sizes["routine"]) == {"MPI_Bcast", "MPI_Allreduce", "MPI_Gather", "MPI_Allgather"}
    assert len(prof.tasks) == 16 and prof.tasks["taskid"].tolist() == list(range(16))
    assert prof.tasks["cpu"].isna().all()  # the alcf layout has no cpu column
    t3 = prof.tasks.set_index("taskid").loc[3]
    assert t3["host"] == "thetagpu24" and t3["comm_s"] == 12.18 and t3["mem_mb"] == 1873.82
    assert t3["switches"] == 170879
    ext = prof.extremes.set_index("role")
    assert ext.loc["minimum", "taskid"] == 0 and ext.loc["median", "taskid"] == 5
    assert ext.loc["maximum", "taskid"] == 3 and ext.loc["maximum", "comm_s"] == 12.177
    assert prof.summary["largest_mem_rank"] == 3
    assert prof.summary["largest_elapsed_rank"] == 7
    assert prof.warnings == []


def test_seed_gpu_has_no_role_line_but_a_summary():
    prof = read_mpitrace(GPU)
    assert prof.ntasks == 8 and prof.files.iloc[0]["roles"] == ""
    assert prof.extremes.set_index("role")["taskid"].to_dict() == {
        "minimum": 2,
        "median": 6,
        "maximum": 7,
    }
    assert prof.routines.set_index("routine").loc["MPI_Barrier", "time_s"] == 0.077
    assert len(prof.tasks) == 8 and prof.files.iloc[0]["mem_mb"] == pytest.approx(4230.734)


def test_current_layout_from_our_profiler():
    prof = read_mpitrace(EXERCISE)
    assert prof.layout == "current" and prof.ntasks == 4
    # only rank 0 and the minimum/median/maximum ranks wrote a file
    extremes = set(prof.extremes["taskid"])
    assert set(prof.ranks) == {0} | extremes
    roles = prof.files.set_index("rank")["roles"]
    for row in prof.extremes.itertuples():
        assert row.role in roles[row.taskid].split(",")
    assert len(prof.tasks) == 4 and prof.tasks["cpu"].notna().all()
    assert prof.tasks["switches"].dtype.name == "Int64"
    # our exercise program's known pattern: 2 x 2000 eight-byte allreduces + 3 of 4 MiB
    for rank in prof.ranks:
        rows = prof.message_sizes[
            (prof.message_sizes["rank"] == rank)
            & (prof.message_sizes["routine"] == "MPI_Allreduce")
        ]
        assert rows[["calls", "avg_bytes"]].values.tolist() == [[4000, 8.0], [3, 4194304.0]]
    assert prof.files["complete"].all() and prof.warnings == []


def test_directory_glob_and_file_read_the_same():
    by_dir = read_mpitrace(CPU)
    by_file = read_mpitrace(CPU_FILE)
    by_glob = read_mpitrace(str(CPU / "mpi_profile.*"))
    pd.testing.assert_frame_equal(by_dir.routines, by_file.routines)
    pd.testing.assert_frame_equal(by_dir.tasks, by_glob.tasks)


def test_several_jobs_group_or_need_a_choice(tmp_path):
    for folder in (CPU, GPU, EXERCISE):
        for f in folder.glob("mpi_profile.*"):
            shutil.copy(f, tmp_path / f.name)
    jobs = read_mpitrace_jobs(tmp_path)
    assert list(jobs) == ["exercise2", "thetagpu-cpu", "thetagpu-gpu"]
    assert jobs["thetagpu-gpu"].ntasks == 8 and jobs["exercise2"].ranks == [0, 2, 3]
    with pytest.raises(MpiTraceError, match="3 jobs .*exercise2, thetagpu-cpu, thetagpu-gpu"):
        read_mpitrace(tmp_path)
    assert read_mpitrace(tmp_path, job="thetagpu-cpu").ntasks == 16
    with pytest.raises(MpiTraceError, match="no files of job 'nope'"):
        read_mpitrace(tmp_path, job="nope")


def test_job_ids_with_dots_keep_the_rank_last(tmp_path):
    target = tmp_path / "mpi_profile.1234.pbs-server.0"
    shutil.copy(CPU_FILE, target)
    prof = read_mpitrace(tmp_path)
    assert prof.jobid == "1234.pbs-server" and prof.ranks == [0]


def test_missing_paths_are_named():
    with pytest.raises(FileNotFoundError, match="no such file or directory: /nonexistent"):
        find_profile_files("/nonexistent")
    with pytest.raises(FileNotFoundError, match="no files match"):
        find_profile_files("/nonexistent/mpi_profile.*")


def test_empty_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(FileNotFoundError, match=f"no mpi_profile.*files in directory {tmp_path}"):
        read_mpitrace(tmp_path)


def test_truncated_after_message_size_title_keeps_what_it_holds(tmp_path):
    text = CPU_FILE.read_text()
    cut = text[: text.index("Message size distributions:") + len("Message size distributions:\n")]
    path = tmp_path / "mpi_profile.7.0"
    path.write_text(cut)
    with pytest.warns(MpiTraceWarning, match="stops early.*end of the message size"):
        prof = read_mpitrace(path)
    assert prof.routines.set_index("routine").loc["MPI_Allreduce", "calls"] == 8161
    assert prof.files.iloc[0]["elapsed_s"] == 15.548
    assert not prof.files.iloc[0]["complete"]
    assert prof.message_sizes.empty and prof.tasks.empty
    assert any("all-task summary" in w for w in prof.warnings)


def test_cut_mid_line_drops_the_partial_line(tmp_path):
    text = CPU_FILE.read_text()
    cut = text[: text.index("total elapsed time") + len("total elapsed time       = 15.5")]
    prof = parse_mpitrace(cut, source="x")
    assert "elapsed_s" not in prof.totals  # "15.5" would be a wrong value: not taken
    assert prof.totals["comm_s"] == 10.602
    assert not prof.complete
    assert any("cut short" in w for w in prof.warnings)


def test_task_table_with_missing_rows(tmp_path):
    text = CPU_FILE.read_text()
    cut = text[: text.index("     9     thetagpu24")]
    prof = parse_mpitrace(cut, source="x")
    assert len(prof.tasks) == 9 and not prof.complete
    assert any("9 of 16 rows" in w for w in prof.warnings)


def test_a_task_table_without_its_elapsed_column_reads_as_unknown_with_a_warning(tmp_path):
    # found by tests/test_mpi_properties.py: one byte of "elapsed(s)" turned into a space
    path = tmp_path / "mpi_profile.1.0"
    path.write_text(CPU_FILE.read_text().replace(" elapsed(s) ", "  lapsed(s) ", 1))
    with pytest.warns(MpiTraceWarning, match=r"line \d+: the task table has no elapsed\(s\)"):
        prof = read_mpitrace(path)
    assert prof.tasks["elapsed_s"].dtype == "float64" and prof.tasks["elapsed_s"].isna().all()
    assert prof.tasks["comm_s"].notna().all() and "lapsed_s" in prof.tasks
    summary = mpi_analysis.profile_summary(prof)  # raised TypeError (float of pandas.NA)
    assert summary["load_imbalance"]["max_elapsed_s"] is None  # JSON's null for NaN
    assert summary["load_imbalance"]["mean_comm_s"] > 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hello world\n", "line 1: not an mpitrace profile"),
        ("", "line 1: empty file"),
        ("Data for MPI rank 0 of 2", "ends inside the first line"),
        ("Data for MPI rank 5 of 2:\n", "line 1: rank 5 of 2 is impossible"),
    ],
)
def test_not_a_profile(text, message):
    with pytest.raises(MpiTraceError, match=message):
        parse_mpitrace(text, source="f.txt")


def test_garbage_inside_a_table_names_file_and_line(tmp_path):
    lines = CPU_FILE.read_text().splitlines(keepends=True)
    lines[8] = "MPI_Allreduce   lots of calls\n"  # the 9th line, in the routine table
    path = tmp_path / "mpi_profile.1.0"
    path.write_text("".join(lines))
    with pytest.raises(MpiTraceError, match=rf"{path}: line 9: not a row of the routine table"):
        read_mpitrace_file(path)


def test_stray_text_is_an_error_not_ignored():
    text = CPU_FILE.read_text().replace(
        "total elapsed time", "some random words here\ntotal elapsed time"
    )
    with pytest.raises(MpiTraceError, match="line 16: unrecognised line"):
        parse_mpitrace(text, source="f")


def test_control_characters_and_bad_utf8_are_errors():
    data = CPU_FILE.read_bytes()
    with pytest.raises(MpiTraceError, match=r"line 3 \(byte 99\): not UTF-8"):
        parse_mpitrace_bytes(data[:99] + b"\xff" + data[100:], source="f")
    with pytest.raises(MpiTraceError, match="line 2: control character"):
        parse_mpitrace_bytes(data.replace(b"Times and", b"Times\x00and", 1), source="f")


def test_unknown_sections_are_skipped_with_a_warning():
    text = CPU_FILE.read_text().replace(
        "Communication summary for all tasks:",
        "Call-site summary:\n  something 12 34\n  other 5\n\nCommunication summary for all tasks:",
    )
    prof = parse_mpitrace(text, source="f")
    assert any("does not know: 'Call-site summary:'" in w for w in prof.warnings)
    assert len(prof.tasks) == 16 and prof.summary["median_task"] == 5


def test_two_files_for_one_rank_and_disagreeing_task_counts(tmp_path):
    shutil.copy(CPU_FILE, tmp_path / "mpi_profile.9.0")
    shutil.copy(CPU_FILE, tmp_path / "mpi_profile.9.00")
    with pytest.raises(MpiTraceError, match="rank 0 has more than one file"):
        read_mpitrace(tmp_path)
    other = tmp_path / "b"
    other.mkdir()
    shutil.copy(CPU_FILE, other / "mpi_profile.9.0")
    gpu_text = (GPU / "mpi_profile.thetagpu-gpu.0").read_text()
    (other / "mpi_profile.9.1").write_text(gpu_text.replace("rank 0 of 8", "rank 1 of 8"))
    with pytest.raises(MpiTraceError, match="disagree on the number of tasks"):
        read_mpitrace(other)


def test_file_name_rank_mismatch_warns(tmp_path):
    path = tmp_path / "mpi_profile.3.2"
    shutil.copy(CPU_FILE, path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_mpitrace_file(path)
    assert any("file name says rank 2" in str(w.message) for w in caught)


def test_units_of_memory_are_converted():
    text = CPU_FILE.read_text().replace("1655.000 MBytes.", "2048.000 KBytes.")
    assert parse_mpitrace(text, source="f").totals["mem_mb"] == 2.0
    bad = CPU_FILE.read_text().replace("1655.000 MBytes.", "1655.000 parsecs.")
    with pytest.raises(MpiTraceError, match="unknown memory unit 'parsecs'"):
        parse_mpitrace(bad, source="f")


def test_reading_does_not_change_the_files():
    before = {p: p.read_bytes() for p in Path(CPU).iterdir()}
    read_mpitrace(CPU)
    assert before == {p: p.read_bytes() for p in Path(CPU).iterdir()}


def test_docstring_examples_run():
    import doctest

    import workshop.readers.mpitrace as module

    result = doctest.testmod(module)
    assert result.attempted >= 4 and result.failed == 0
