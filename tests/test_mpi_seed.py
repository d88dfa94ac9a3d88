"""Seed 001's findings come out of the reader and the analyses, from the shipped profiles.

Seed 001 ("MPI profiling for Data Parallel Training") says: on CPU, the MPI communication is
mostly MPI_Allreduce, and 8-byte allreduces (Horovod's negotiation) dominate it; on GPU, MPI
carries little, since the gradients go through NCCL.
"""

from __future__ import annotations

import pytest

from workshop.analysis import mpi as analysis
from workshop.analysis import mpi_compare
from workshop.findings import mpi as findings
from workshop.paths import data_path
from workshop.readers.mpitrace import read_mpitrace


@pytest.fixture(scope="module")
def cpu():
    return read_mpitrace(data_path("mpi", "seed001-thetagpu-cpu"))


@pytest.fixture(scope="module")
def gpu():
    return read_mpitrace(data_path("mpi", "seed001-thetagpu-gpu"))


def test_cpu_mpi_allreduce_dominates(cpu):
    dom = analysis.dominant_routine(cpu)
    assert dom["routine"] == "MPI_Allreduce"
    assert dom["time_share"] == pytest.approx(10.575 / 10.601, abs=1e-4)  # 99.8 %
    table = analysis.routine_table(cpu)
    assert table["routine"].iloc[0] == "MPI_Allreduce"
    assert table.set_index("routine")["call_share"]["MPI_Allreduce"] > 0.9


def test_cpu_most_allreduces_are_8_bytes(cpu):
    sig = analysis.negotiation_signature(cpu)
    assert sig["source"] == "message sizes"
    assert (sig["small_calls"], sig["large_calls"], sig["allreduce_calls"]) == (7428, 733, 8161)
    assert sig["small_call_share"] == pytest.approx(0.9102, abs=1e-4)
    assert sig["small_time_s"] == pytest.approx(5.696)
    assert sig["small_time_share"] == pytest.approx(5.696 / 10.575)
    bins = analysis.message_size_bins(cpu, routine="MPI_Allreduce")
    top = bins.loc[bins["calls"].idxmax()]
    assert (top["log2_bin"], top["bin_label"], top["calls"]) == (3, "<=8 B", 7428)
    # the gradients do go through MPI on CPU: over a gigabyte in the large allreduces
    assert sig["large_bytes"] > 1e9


def test_gpu_mpi_carries_no_gradients(gpu):
    sig = analysis.negotiation_signature(gpu)
    assert sig["allreduce_calls"] == sig["small_calls"] == 11658
    assert sig["large_calls"] == 0 and sig["large_bytes"] == 0
    assert sig["small_bytes"] == 11658 * 8  # 93 kB of MPI allreduce in the whole run
    total_bytes = analysis.routine_table(gpu)["bytes"].sum()
    assert total_bytes < 200_000
    text = "\n".join(findings.mpi_findings(gpu))
    assert "No MPI_Allreduce moves more than that" in text


def test_cpu_against_gpu(cpu, gpu):
    both = mpi_compare.compare_summary(cpu, gpu, ("cpu", "gpu"))
    assert both.loc["comm_fraction", "cpu"] == pytest.approx(10.602 / 15.548)
    assert both.loc["comm_fraction", "gpu"] == pytest.approx(5.519 / 17.725)
    assert both.loc["comm_fraction", "cpu"] > 2 * both.loc["comm_fraction", "gpu"]
    assert both.loc["large_allreduce_calls", "cpu"] == 733
    assert both.loc["large_allreduce_calls", "gpu"] == 0
    routines = mpi_compare.compare_profiles(cpu, gpu, ("cpu", "gpu"))
    assert routines.index[0] == "MPI_Allreduce"
    assert routines.loc["MPI_Allreduce", "avg_bytes_gpu"] == 8.0
    assert routines.loc["MPI_Barrier", "calls_cpu"] == 0  # only the GPU run has a barrier


def test_load_imbalance(cpu, gpu):
    c = analysis.load_imbalance(cpu)
    assert (c["min_task"], c["median_task"], c["max_task"]) == (0, 5, 3)
    assert c["max_over_min"] == pytest.approx(12.177 / 10.602)
    g = analysis.load_imbalance(gpu)
    assert (g["min_task"], g["max_task"]) == (2, 7)
    assert g["max_over_min"] == pytest.approx(8.355 / 3.601)
    assert g["ntasks_in_table"] == 8 and g["max_elapsed_s"] == 17.84
