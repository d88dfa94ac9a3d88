"""``workshop scaling report``: text and JSON on the seed data and on a sweep folder."""

from __future__ import annotations

import json

import pytest

from workshop.cli import main
from workshop.launch import sweep
from workshop.paths import data_path


def _json(capsys, *paths):
    assert main(["scaling", "report", *map(str, paths), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_seed004_tables_json(capsys, seed004_tables):
    report = _json(capsys, *seed004_tables)
    assert report["kind"] == "table"
    assert report["np"] == [1, 2, 4, 8, 16, 32]
    assert report["speedup"]["train"]["32"] == pytest.approx(11.64, abs=0.005)
    assert report["speedup"]["throughput"]["32"] == pytest.approx(30.09, abs=0.015)
    assert report["speedup"]["wall"]["32"] == pytest.approx(1.848, abs=0.001)
    assert report["efficiency"]["throughput"]["32"] == pytest.approx(0.94, abs=0.001)
    reported = report["groups"][0]["speedup_reported"]
    assert reported["speedup_reported_throughput"]["32"] == 30.09
    assert report["first_epoch_overhead_s"] == {}
    assert report["groups"][0]["amdahl"]["metric"] == "throughput"


def test_seed000_logs_json_and_text(capsys, seed000_logs):
    paths = seed000_logs
    report = _json(capsys, *paths)
    overhead = report["first_epoch_overhead_s"]
    assert set(overhead) == {"1", "2", "4"}
    assert overhead["2"] == pytest.approx(22.17, abs=0.01)
    assert overhead["4"] > 20 and overhead["1"] < 2.5
    assert report["speedup"]["train"]["4"] < 1 < report["speedup"]["throughput"]["4"]
    assert main(["scaling", "report", *map(str, paths)]) == 0
    text = capsys.readouterr().out
    assert "first epoch vs steady state" in text
    assert "The first epoch costs 22.36 s at np=4" in text


def test_single_log_has_overhead_but_no_speedup(capsys):
    path = data_path("seeds", "000-pytorch_cifar10.out.4")
    report = _json(capsys, path)
    assert report["np"] == [4]  # one run: no speedup, but the overhead is there
    assert report["first_epoch_overhead_s"]["4"] == pytest.approx(21.86, abs=0.01)


def test_sweep_folder_report(tmp_path, capsys, sweep_base, fake_launcher):
    sweep.run_sweep(
        tmp_path,
        sweep_base,
        {"np": [1, 2], "batch_size": [16, 32, 64]},
        launcher=fake_launcher(),
        progress=False,
    )
    report = _json(capsys, tmp_path)
    assert report["kind"] == "runs"
    assert len(report["groups"]) == 3  # one np-1-vs-2 group per batch size
    group = report["groups"][0]
    # stand-in timings: step = 1 ms * batch + 2 ms * (np - 1), 10 steps; first epoch +1 s
    bs = group["key"]["batch_size"]
    step1, step2 = 0.001 * bs, 0.001 * bs + 0.002
    assert group["speedup"]["throughput"]["2"] == pytest.approx(2 * step1 / step2)
    assert group["first_epoch_overhead_s"]["2"] == pytest.approx(1.0)
    assert report["batch_size_plateau"]["smallest_batch_size"] == 16
    assert main(["scaling", "report", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "time per epoch vs batch size" in text
    assert "synchronisation cost" in text


def test_report_errors_name_the_input(tmp_path, capsys):
    assert main(["scaling", "report", str(tmp_path / "nope")]) == 2
    assert "nope: no such file or directory" in capsys.readouterr().err
    bad = tmp_path / "bad.log"
    bad.write_text("hello\n")
    assert main(["scaling", "report", str(bad)]) == 2
    assert "bad.log: no line like" in capsys.readouterr().err
