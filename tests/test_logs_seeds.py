"""Readers for the seeds' text formats (seed 000 epoch logs, seed 004 tables) and Horovod's
autotune log."""

from __future__ import annotations

import pytest

from workshop.paths import data_path
from workshop.readers import logs

SEED000 = ["000-pytorch_cifar10.out.1", "000-pytorch_cifar10.out.2", "000-pytorch_cifar10.out.4"]


def test_seed000_logs_read_with_np_from_file_names():
    epochs = logs.read_epoch_logs([data_path("seeds", name) for name in SEED000])
    assert sorted(epochs["np"].unique()) == [1, 2, 4]
    assert epochs.groupby("np").size().tolist() == [10, 10, 10]
    first = epochs[epochs["epoch"] == 1].set_index("np")["train_time_s"]
    assert first[1] == pytest.approx(3.9464917182922363)
    assert first[2] == pytest.approx(23.069223165512085)
    assert first[4] == pytest.approx(22.359201908111572)
    last4 = epochs[(epochs["np"] == 4) & (epochs["epoch"] == 10)].iloc[0]
    assert last4["test_time_s"] == pytest.approx(0.15375328063964844)
    assert last4["epoch_time_s"] == pytest.approx(0.49743175506591797 + 0.15375328063964844)
    assert epochs["run"].nunique() == 3


def test_seed000_whole_document_splits_runs_by_gpu_markers(tmp_path):
    text = (
        "* 1 GPU\n\n```\nEpoch 1:  training 3.0(s) - testing 0.2(s)\n"
        "Epoch 2:  training 1.0(s) - testing 0.2(s)\n```\n"
        "* 4 GPU\n```\ngrep '(s)' x.out.4\nEpoch 1:  training 20.0(s) - testing 0.1(s)\n"
        "Epoch 2:  training 0.5(s) - testing 0.1(s)\n"
    )
    path = tmp_path / "readme.md"
    path.write_text(text)
    epochs = logs.read_epoch_log(path)
    assert epochs.groupby("run")["np"].first().tolist() == [1, 4]
    assert epochs["line"].tolist() == [4, 5, 10, 11]


def test_epoch_log_errors_name_file_and_line(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    with pytest.raises(ValueError, match="empty.log: no line like"):
        logs.read_epoch_log(empty)
    bad = tmp_path / "bad.out.2"
    bad.write_text("Epoch 1:  training 1.0(s) - testing 0.1(s)\nEpoch 2:  training oops(s)\n")
    with pytest.raises(ValueError, match=r"bad.out.2:2: malformed epoch line"):
        logs.read_epoch_log(bad)
    unknown = tmp_path / "run.log"
    unknown.write_text("Epoch 1:  training 1.0(s)\n")
    with pytest.raises(ValueError, match="cannot tell the worker count"):
        logs.read_epoch_logs([unknown])
    assert logs.read_epoch_logs({8: unknown})["np"].tolist() == [8]


def test_seed004_tables():
    wall = logs.read_table(data_path("seeds", "004-resnet_v2_101-walltime.tsv"))
    assert wall.columns.tolist() == [
        "np",
        "init_time_s",
        "train_time_s",
        "total_time_s",
        "speedup_reported",
    ]
    assert wall["np"].tolist() == [1, 2, 4, 8, 16, 32]
    assert wall.set_index("np").loc[32, "speedup_reported"] == pytest.approx(11.64)
    thr = logs.read_table(data_path("seeds", "004-resnet_v2_101-throughput.tsv"))
    assert thr.set_index("np").loc[32, "speedup_reported"] == pytest.approx(30.09)
    assert thr.set_index("np").loc[1, "examples_per_s"] == 202
    merged = logs.merge_tables([wall, thr])
    assert {"speedup_reported_train", "speedup_reported_throughput"} <= set(merged)
    assert len(merged) == 6


def test_tables_found_inside_a_report_and_single_space_headers(tmp_path):
    path = tmp_path / "report.md"
    path.write_text(
        "Some prose 1 2 3.\n\nGPUs Init time(s) Train time(s) Total time(s) Speedup (train)\n"
        "1 68 163 231 1.00\n2 142 93 235 1.72\n\nmore prose\n"
        "GPUs  Examples/s  Speedup\n1  202  1.00\n2  191  1.89\n"
    )
    tables = logs.read_tables(path)
    assert [t.attrs["line"] for t in tables] == [3, 8]
    assert tables[0].attrs["titles"][1] == "Init time(s)"
    assert tables[0].columns[-1] == "speedup_reported"
    assert tables[1]["examples_per_s"].tolist() == [202, 191]
    with pytest.raises(ValueError, match="expected one table"):
        logs.read_table(path)


def test_table_row_with_wrong_value_count_names_the_line(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("GPUs\tExamples/s\tSpeedup\n1\t202\t1.00\n2\t191\n")
    with pytest.raises(ValueError, match=r"t.tsv:3: table row has 2 values"):
        logs.read_table(path)


# Layout written by Horovod 0.28's ParameterManager (header, one line per sample, then the
# best setting again); note the ", " after torus_allreduce, as in its source.
AUTOTUNE_SAMPLE = (
    "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,"
    "cycle_time_ms,tensor_fusion_threshold,score\n"
    "0,0,0, 1,5,64,120.5\n"
    "0,0,0, 1,2.5,16,180.25\n"
    "0,0,0, 1,10,128,90\n"
    "0,0,0, 1,2.5,16,180.25\n"
)


def test_autotune_log(tmp_path):
    path = tmp_path / "autotune.csv"
    path.write_text(AUTOTUNE_SAMPLE)
    tune = logs.read_autotune_log(path)
    assert tune["sample"].tolist() == [0, 1, 2, 3]
    assert tune["fusion_threshold_mb"].tolist() == [64, 16, 128, 16]
    assert tune["cycle_time_ms"].tolist() == [5, 2.5, 10, 2.5]
    assert tune["best_so_far"].tolist() == [120.5, 180.25, 180.25, 180.25]
    assert tune["final_best"].tolist() == [False, False, False, True]
    assert tune["cache_enabled"].all()
    assert not tune["hierarchical_allreduce"].any()


def test_autotune_log_errors(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("")
    with pytest.raises(ValueError, match="empty autotune log"):
        logs.read_autotune_log(path)
    path.write_text("cycle_time_ms,tensor_fusion_threshold\n1,2\n")
    with pytest.raises(ValueError, match=r"a.csv:1: autotune header has no 'score'"):
        logs.read_autotune_log(path)
    path.write_text("cycle_time_ms,score\n1,2\n3\n")
    with pytest.raises(ValueError, match=r"a.csv:3: 1 fields"):
        logs.read_autotune_log(path)
