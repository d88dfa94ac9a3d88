"""Analyses on our profiler's recorded sample and on profiles cut short."""

from __future__ import annotations

import json
import math

import pytest

from workshop.analysis import mpi as analysis
from workshop.analysis import mpi_compare
from workshop.findings import mpi as findings
from workshop.paths import data_path
from workshop.readers.mpitrace import combine_files, parse_mpitrace, read_mpitrace

EXERCISE = data_path("mpi", "mpiprof-exercise-np4")
CPU_TEXT = data_path("mpi", "seed001-thetagpu-cpu", "mpi_profile.thetagpu-cpu.0").read_text()


def _profile(text: str):
    return combine_files([parse_mpitrace(text, source="t", jobid="t")], "t")


def test_comm_fraction_uses_file_totals_and_task_table():
    prof = read_mpitrace(EXERCISE)
    frac = analysis.comm_fraction(prof)
    assert frac["rank"].tolist() == [0, 1, 2, 3]
    assert frac["has_file"].tolist() == [True, False, True, True]
    assert frac["source"].tolist() == ["file", "tasks", "file", "file"]
    files = prof.files.set_index("rank")
    row0 = frac.set_index("rank").loc[0]
    assert row0["comm_s"] == files.loc[0, "comm_s"]
    assert row0["comm_fraction"] == pytest.approx(
        files.loc[0, "comm_s"] / files.loc[0, "elapsed_s"]
    )
    assert ((frac["comm_fraction"] > 0) & (frac["comm_fraction"] < 1)).all()


def test_rank_choice_and_unknown_rank():
    prof = read_mpitrace(EXERCISE)
    assert analysis.dominant_routine(prof, rank=3)["rank"] == 3
    with pytest.raises(ValueError, match="no profile file for rank 1 .*0, 2, 3"):
        analysis.routine_table(prof, rank=1)


def test_signature_on_our_exercise_program():
    prof = read_mpitrace(EXERCISE)
    for rank in prof.ranks:
        sig = analysis.negotiation_signature(prof, rank)
        assert (sig["small_calls"], sig["large_calls"]) == (4000, 3)
        assert sig["large_bytes"] == 3 * 4 * 2**20
    # a higher bound moves nothing here (no bins between 8 B and 4 MiB)
    assert analysis.negotiation_signature(prof, small_bytes=1e6)["small_calls"] == 4000


def test_signature_without_size_distribution_falls_back_to_the_routine_table():
    cut = CPU_TEXT[: CPU_TEXT.index("Message size distributions:")]
    sig = analysis.negotiation_signature(_profile(cut))
    assert sig["source"] == "routine table"
    assert math.isnan(sig["small_calls"])  # average 138800 B: cannot split
    gpu_like = cut.replace("8161       138800.2", "8161            8.0")
    sig = analysis.negotiation_signature(_profile(gpu_like))
    assert (sig["small_calls"], sig["large_calls"]) == (8161, 0)


def test_header_only_profile_is_explained_without_numbers():
    prof = _profile("Data for MPI rank 0 of 4:\n")
    lines = findings.mpi_findings(prof)
    assert lines[0].startswith("Job t: 4 MPI tasks")
    assert prof.warnings
    assert "Warning: t: file stops early; missing the routine table" in "\n".join(lines)
    summary = analysis.profile_summary(prof)
    json.dumps(summary, allow_nan=False)  # no NaN leaks into JSON
    assert summary["small_allreduce_calls"] == 0 and summary["complete"] is False


def test_threads_adding_up_is_explained():
    text = CPU_TEXT.replace(
        "total communication time = 10.602", "total communication time = 20.602"
    )
    lines = findings.mpi_findings(_profile(text))
    assert any("several threads were inside MPI" in line for line in lines)


def test_compare_needs_distinct_labels():
    prof = read_mpitrace(EXERCISE)
    with pytest.raises(ValueError, match="labels must differ"):
        mpi_compare.compare_profiles(prof, prof, ("x", "x"))
    same = mpi_compare.compare_profiles(prof, prof, ("x", "y"))
    assert (same["calls_x"] == same["calls_y"]).all()
    nonzero = same[same["time_s_x"] > 0]
    assert (nonzero["time_ratio"] == 1.0).all()
