"""`workshop scaling report DIR` on a folder of text logs reads the same as the files listed."""

from __future__ import annotations

import json
import shutil

import pytest

from workshop.cli import main
from workshop.paths import data_path


def _report(capsys, *paths) -> dict:
    assert main(["scaling", "report", *map(str, paths), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    report.pop("source", None)  # the only thing that may differ: what was asked for
    return report


def test_a_folder_of_epoch_logs_reads_like_its_files(tmp_path, capsys, seed000_logs):
    for path in seed000_logs:
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "README.md").write_text("# Seed 000's logs\n\nCopied from the seed.\n")
    (tmp_path / ".hidden").write_text("Epoch 1:  training 1.0(s) - testing 1.0(s)\n")
    by_file = _report(capsys, *seed000_logs)
    by_folder = _report(capsys, tmp_path)
    assert by_folder == by_file
    assert by_folder["kind"] == "epoch-log" and by_folder["np"] == [1, 2, 4]
    # seed 000: first epoch 23.07 s vs steady state ~0.9 s at np = 2 (as the file-list test)
    assert by_folder["first_epoch_overhead_s"]["2"] == pytest.approx(22.17, abs=0.01)


def test_a_folder_of_tables_reads_like_its_files(tmp_path, capsys, seed004_tables):
    for path in seed004_tables:
        shutil.copy(path, tmp_path / path.name)
    assert _report(capsys, tmp_path) == _report(capsys, *seed004_tables)


def test_a_folder_mixing_logs_and_tables_or_holding_neither_is_named(tmp_path, capsys):
    assert main(["scaling", "report", str(data_path("seeds"))]) == 2
    err = capsys.readouterr().err
    assert str(data_path("seeds")) in err
    assert "000-pytorch_cifar10.out.1" in err and "004-resnet_v2_101-walltime.tsv" in err
    (tmp_path / "notes.txt").write_text("nothing to analyse here\n")
    assert main(["scaling", "report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "no run directories, epoch logs or result tables" in err
