"""One-time activities (INIT_NCCL, INIT_FUSION_BUFFER, ALLOCATE_SHARED_BUFFER) in the timeline
report: named in seconds and tied to the step they fall in (issue 19, correction 2).

The recordings (CPU, Gloo/MPI) have INIT_FUSION_BUFFER; INIT_NCCL needs NCCL on GPUs, which this
machine cannot record, so its test adds constructed INIT_NCCL spans to a recorded table."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pandas as pd
import pytest

from workshop.analysis import timeline as A
from workshop.findings import timeline as F
from workshop.paths import data_path
from workshop.readers.timeline import TimelineWarning, read_timeline

pytestmark = pytest.mark.filterwarnings("ignore::workshop.readers.timeline.TimelineWarning")


def recorded(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TimelineWarning)
        return read_timeline(data_path("timelines", name))


def raw_activity(name: str, activity: str) -> tuple[int, int, int]:
    """(spans, first B, last E) of ``activity`` straight from the JSON records: every B of it,
    and the E that closes it on the same pid (the next E there)."""
    records = json.loads(data_path("timelines", name, "timeline.json").read_text())
    begins, ends, open_pids = [], [], set()
    for record in records:
        if record.get("ph") == "B" and record.get("name") == activity:
            begins.append(record["ts"])
            open_pids.add(record["pid"])
        elif record.get("ph") == "E" and record.get("pid") in open_pids:
            ends.append(record["ts"])
            open_pids.discard(record["pid"])
    return len(begins), min(begins), max(ends)


@pytest.mark.parametrize("name", ["tl-torch-gloo-np2", "tl-torch-mpi-np2", "tl-tf-gloo-np2"])
def test_the_fusion_buffer_is_allocated_once_in_the_first_step(name: str) -> None:
    tl = recorded(name)
    found = A.one_time_activities(tl.spans)
    spans, first_begin, last_end = raw_activity(name, "INIT_FUSION_BUFFER")
    # one allocation, written once per tensor of the first fused response (ActivityStartAll)
    assert found["activity"].tolist() == ["INIT_FUSION_BUFFER"]
    row = found.iloc[0]
    assert row["tensors"] == spans >= 2
    assert row["dur_us"] == last_end - first_begin
    # the reader's times start at the file's first record; the raw ones are absolute
    steps = A.step_starts(tl.spans)
    assert row["step"] == 0 and steps["start_us"].iloc[0] <= row["start_us"]
    assert row["start_us"] < steps["start_us"].iloc[1]
    assert row["step_dur_us"] == steps["dur_us"].iloc[0]
    assert row["share_of_step"] == pytest.approx(row["dur_us"] / steps["dur_us"].iloc[0])


def test_the_report_names_them_in_seconds_and_ties_them_to_a_step() -> None:
    tl = recorded("tl-torch-gloo-np2")
    row = A.one_time_activities(tl.spans).iloc[0]
    text = "\n".join(F.timeline_findings(tl))
    assert "One-time activities" in text
    assert f"INIT_FUSION_BUFFER: {row['dur_us'] / 1e6:.4f} s" in text
    assert f"in step 0, which took {row['step_dur_us'] / 1e6:.4f} s" in text
    assert "operations.cc:302" in text
    assert "No INIT_NCCL" in text


def test_a_run_without_fusion_has_no_such_paragraph() -> None:
    # fusion threshold 0: no response fuses tensors, so no fusion buffer is ever allocated
    tl = recorded("tl-torch-gloo-np2-fusion0")
    assert A.one_time_activities(tl.spans).empty
    assert "One-time activities" not in "\n".join(F.timeline_findings(tl))


def with_activity(spans: pd.DataFrame, name: str, start_us: int, dur_us: int, tensors: list):
    """Constructed: ``spans`` plus one ``name`` activity over ``tensors`` (one span each, as
    ActivityStartAll writes them, 1 us apart)."""
    rows = [
        {
            "tensor": tensor,
            "op": "ALLREDUCE",
            "kind": "activity",
            "name": name,
            "start_us": start_us + i,
            "end_us": start_us + i + dur_us,
            "dur_us": dur_us,
            "seq": int(spans["seq"].max()) + 1 + i,
        }
        for i, tensor in enumerate(tensors)
    ]
    return pd.concat([spans, pd.DataFrame(rows)], ignore_index=True)


def test_init_nccl_in_the_first_step_and_a_repeat_after_a_threshold_change() -> None:
    tl = recorded("tl-torch-gloo-np2")
    steps = A.step_starts(tl.spans)
    grads = A.gradient_tensors(tl.spans)
    first, third = int(steps["start_us"].iloc[0]), int(steps["start_us"].iloc[2])
    # 4.3 s of NCCL set-up in the first step (the size seen in an 8-GPU ThetaGPU timeline),
    # and a second fusion buffer in step 2, as when autotune changes the threshold
    spans = with_activity(tl.spans, "INIT_NCCL", first + 10, 4_300_000, grads)
    spans = with_activity(spans, "INIT_FUSION_BUFFER", third + 5, 200, grads[:2])
    found = A.one_time_activities(spans)
    nccl = found[found["activity"] == "INIT_NCCL"]
    assert len(nccl) == 1 and nccl["tensors"].item() == len(grads)
    assert nccl["dur_us"].item() == 4_300_000 + len(grads) - 1  # first start to last end
    assert nccl["step"].item() == 0
    buffers = found[found["activity"] == "INIT_FUSION_BUFFER"]
    assert buffers["step"].tolist() == [0, 2]
    text = "\n".join(F._one_time_lines(dataclasses.replace(tl, spans=spans)))
    assert "INIT_NCCL: 4.3000 s" in text and "nccl_operations.cc:102" in text
    assert "No INIT_NCCL" not in text


def test_an_activity_before_the_first_step_is_start_up() -> None:
    tl = recorded("tl-torch-gloo-np2")
    start = int(tl.spans["start_us"].min())
    spans = with_activity(tl.spans, "ALLOCATE_SHARED_BUFFER", start, 50, ["broadcast.0.bias"])
    row = A.one_time_activities(spans).iloc[0]
    assert row["activity"] == "ALLOCATE_SHARED_BUFFER" and row["step"] == -1
    assert pd.isna(row["step_dur_us"]) and pd.isna(row["share_of_step"])
