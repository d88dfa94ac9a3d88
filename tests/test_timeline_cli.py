"""`workshop timeline report|summary|repair` on real recordings (data/timelines)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from workshop.cli import main
from workshop.paths import data_path

RUN = "tl-torch-gloo-np2-cycles"
REQUIRED = {"tensors", "ranks", "ops", "activities_us", "negotiation_us", "backend"}
REQUIRED |= {"span_us", "truncated", "events"}


def timeline_file(name: str = RUN) -> Path:
    return data_path("timelines", name, "timeline.json")


def test_summary_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", "summary", str(timeline_file()), "--json"]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out)  # exactly one JSON object
    assert REQUIRED <= set(summary)
    assert summary["backend"] == "Gloo"
    assert summary["ranks"] == 2 and summary["truncated"] is False
    assert summary["ops"]["ALLREDUCE"] > 0
    assert all(k.startswith("NEGOTIATE_") for k in summary["negotiation_us"])
    assert "GLOO_ALLREDUCE" in summary["activities_us"]
    assert summary["tensors"] == len(summary["tensor_names"])


def test_summary_of_a_run_directory_in_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", "summary", str(data_path("timelines", "tl-torch-mpi-np2"))]) == 0
    out = capsys.readouterr().out
    assert "backend: MPI" in out and "truncated: False" in out


def test_report_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", "report", str(timeline_file())]) == 0
    out = capsys.readouterr().out
    assert "Negotiation takes" in out and "Library: Gloo." in out
    assert "Stragglers" in out and "training steps found" in out


def test_truncated_file_reports_the_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = timeline_file("tl-torch-gloo-np2").read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) // 3])
    assert main(["timeline", "summary", str(cut), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["truncated"] is True
    assert "cut at byte" in captured.err


def test_repair_writes_closed_balanced_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = timeline_file("tl-torch-gloo-np2").read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) // 2 + 17])
    out = tmp_path / "repaired.json"
    assert main(["timeline", "repair", str(cut), "-o", str(out)]) == 0
    events = json.loads(out.read_text())
    balance: dict[int, int] = defaultdict(int)
    for e in events:
        if e["ph"] in ("B", "E"):
            balance[e["pid"]] += 1 if e["ph"] == "B" else -1
            assert balance[e["pid"]] >= 0
    assert set(balance.values()) == {0}
    assert "wrote" in capsys.readouterr().out
    # nothing is overwritten
    before = out.read_bytes()
    assert main(["timeline", "repair", str(cut), "-o", str(out)]) == 2
    assert out.read_bytes() == before
    assert "nothing was overwritten" in capsys.readouterr().err


def test_repair_window(tmp_path: Path) -> None:
    out = tmp_path / "window.json"
    args = ["timeline", "repair", str(timeline_file()), "-o", str(out)]
    assert main(args + ["--start-us", "11000000", "--end-us", "11100000"]) == 0
    ts = [e["ts"] for e in json.loads(out.read_text()) if "ts" in e]
    assert ts and 11_000_000 <= min(ts) and max(ts) <= 11_100_000
    assert main(args[:-1] + [str(tmp_path / "w2.json"), "--start-us", "5", "--end-us", "1"]) == 2


def test_errors_exit_2_and_name_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["timeline", "report", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2, 3]")
    assert main(["timeline", "summary", str(bad), "--json"]) == 2
    assert "bad.json: byte 1:" in capsys.readouterr().err
