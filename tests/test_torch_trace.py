"""torch.profiler traces read like a timeline (issue 58, item 2): the reader, the analysis, the
findings, the plot and ``workshop trace`` on small hand-made traces whose answers can be worked
out by hand (each expected value derived in a comment). The live twin, on traces that real
torchrun ranks record: tests/test_torch_trace_live.py."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

from workshop.analysis.torch_trace import (
    covered_us,
    intersect_us,
    merge,
    slowest_rank,
    step_breakdown,
    trace_lanes,
    trace_summary,
    waited_for,
)
from workshop.cli import main
from workshop.findings.torch_trace import torch_trace_findings
from workshop.paths import data_path
from workshop.readers.torch_trace import (
    TorchTraceError,
    parse_torch_trace,
    read_torch_trace,
    read_torch_traces,
)

matplotlib.use("Agg")

MAIN, GLOO_A, GLOO_B = 11, 21, 22  # the training thread and Gloo's two worker threads
MS = 1000.0  # the hand-made steps are laid out in milliseconds: 1 unit = 1000 us


def _x(name, start, end, tid=MAIN, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid,
            "ts": start * MS, "dur": (end - start) * MS, "args": args}  # fmt: skip


def _step(n, t0, grad_end=70):
    """One DDP step of 100 ms from ``t0``; the last gradient's hook runs 62..``grad_end``.

    Training thread: forward 5..20; backward 30..50 and the two AccumulateGrad hooks
    50..60 and 62..grad_end, each handing a bucket over (c10d::allreduce_ 52..54 and
    66..68); copy_bucket_to_grad 90..92; optimizer 92..98. Gloo: bucket A (100 floats,
    400 B) on one worker 55..75, bucket B (50 floats, 200 B) on the other 68..88.
    """
    grad = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
    dims = {"Input type": ["float"]}
    return [
        _x(f"ProfilerStep#{n}", t0, t0 + 100, cat="user_annotation"),
        _x("aten::mm", t0 + 5, t0 + 20),
        _x("autograd::engine::evaluate_function: AddmmBackward0", t0 + 30, t0 + 50),
        _x(grad, t0 + 50, t0 + 60),
        _x("c10d::allreduce_", t0 + 52, t0 + 54),
        _x(grad, t0 + 62, t0 + grad_end),
        _x("c10d::allreduce_", t0 + 66, t0 + 68),
        _x("torch.distributed.ddp.reducer::copy_bucket_to_grad", t0 + 90, t0 + 92),
        _x("Optimizer.step#SGD.step", t0 + 92, t0 + 98, cat="user_annotation"),
        _x("gloo:all_reduce", t0 + 55, t0 + 75, GLOO_A, "user_annotation",
           **dims, **{"Input Dims": [[100]]}),
        _x("gloo:all_reduce", t0 + 68, t0 + 88, GLOO_B, "user_annotation",
           **dims, **{"Input Dims": [[50]]}),
    ]  # fmt: skip


def _trace(rank, grad_ends=(70, 70, 70), world_size=2):
    events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": GLOO_A,
               "args": {"name": "thread 21 (pt_gloo_runloop)"}}]  # fmt: skip
    for i, grad_end in enumerate(grad_ends):
        events += _step(i + 2, 100 * i, grad_end)
    return {
        "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": world_size},
        "baseTimeNanoseconds": 0,
        "traceEvents": events,
    }


# Rank 0's hooks end at 70 in every step: its last allreduce ends 88 - 70 = 18 ms after its
# backward. Rank 1's end at 80, 65, 84: 8, 23 and 4 ms after. Rank 1 is last in steps 2 and 4
# (it waits least), by 18 - 8 = 10 and 18 - 4 = 14 ms; rank 0 in step 3, by 23 - 18 = 5 ms.
RANK0, RANK1 = _trace(0), _trace(1, (80, 65, 84))


def _write(folder, name, data):
    path = folder / name
    path.write_text(json.dumps(data))
    return path


# -- intervals ---------------------------------------------------------------------------------
def test_interval_arithmetic():
    assert merge([(5, 6), (0, 2), (1, 3)]) == [(0, 3), (5, 6)]
    assert covered_us([(0, 2), (1, 3), (5, 6)]) == 4  # [0, 3] and [5, 6]
    assert covered_us([]) == 0
    # [0, 3] ∩ [2, 6] = [2, 3]; [5, 6] ∩ [2, 6] = [5, 6]: 1 + 1
    assert intersect_us([(0, 3), (5, 6)], [(2, 6)]) == 2
    assert intersect_us([(0, 1)], [(1, 2)]) == 0  # touching is not overlapping


# -- reader ------------------------------------------------------------------------------------
def test_the_reader_finds_steps_backward_and_collectives():
    trace = parse_torch_trace(RANK0)
    assert (trace.rank, trace.world_size, trace.backend) == (0, 2, "gloo")
    assert trace.steps["step"].tolist() == [2, 3, 4]
    assert trace.steps["dur_us"].tolist() == [100 * MS] * 3
    # backward: AddmmBackward0 30..50 to the last hook's end 70, in step 2 (t0 = 0)
    first = trace.backward.iloc[0]
    assert (first.step, first.start_us, first.end_us, first.events) == (2, 30 * MS, 70 * MS, 3)
    work = trace.comms[trace.comms["kind"] == "work"]
    calls = trace.comms[trace.comms["kind"] == "call"]
    assert len(work) == len(calls) == 6  # 2 buckets x 3 steps, once as work and once as a call
    assert set(trace.comms["collective"]) == {"all_reduce"}
    assert work["bytes"].iloc[:2].tolist() == [400, 200]  # 100 and 50 floats of 4 bytes
    assert work["step"].tolist() == [2, 2, 3, 3, 4, 4]
    assert not (trace.ops["name"] == "gloo:all_reduce").any()  # work is not a CPU op
    assert trace.ops.loc[trace.ops["thread"] == MAIN, "thread_name"].eq("").all()


def test_the_reader_reads_nccl_names_and_sizes():
    # names from torch's source (no GPU here): record_param_comms carries the size, the
    # NCCL kernel is the work; an event outside every step gets no step
    events = _step(1, 0) + [
        _x("record_param_comms", 52, 53, **{"In msg nelems": 256, "dtype": "Float",
                                            "Collective name": "allreduce"}),
        _x("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 56, 80, 7, "kernel"),
        _x("nccl:all_reduce", 150, 151, cat="user_annotation"),
    ]  # fmt: skip
    trace = parse_torch_trace({"traceEvents": events})
    comms = trace.comms.set_index("name")
    assert comms.at["record_param_comms", "kind"] == "call"
    assert comms.at["record_param_comms", "bytes"] == 1024  # 256 float32
    assert comms.at["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kind"] == "work"
    assert comms.at["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "collective"] == "all_reduce"
    assert comms.at["nccl:all_reduce", "step"] is pd.NA
    assert set(comms["collective"]) == {"all_reduce"}  # gloo:, c10d::, nccl:, kernel, record
    # with the kernel in the trace, the CPU's nccl:* annotation only launched it; without the
    # kernel (a CPU-only profile of a NCCL run) it is the work: the near miss
    assert comms.at["nccl:all_reduce", "kind"] == "call"
    cpu_only = parse_torch_trace({"traceEvents": events[:-2] + events[-1:]}).comms
    assert cpu_only.set_index("name").at["nccl:all_reduce", "kind"] == "work"
    assert trace.rank is None and trace.backend is None  # no distributedInfo
    assert "ncclDevKernel_AllReduce_Sum_f32_RING_LL" not in set(trace.ops["name"])


def test_bad_input_names_the_file_and_what_is_wrong(tmp_path):
    not_json = tmp_path / "a.json"
    not_json.write_text("{'traceEvents': [")
    with pytest.raises(TorchTraceError, match=r"a\.json: not JSON \(line 1, column 2"):
        read_torch_trace(not_json)
    with pytest.raises(TorchTraceError, match=r"b\.json: no 'traceEvents' list"):
        read_torch_trace(_write(tmp_path, "b.json", {"events": []}))
    no_steps = {"traceEvents": [_x("aten::mm", 0, 1)]}
    with pytest.raises(TorchTraceError, match=r"c\.json: no ProfilerStep#N event.*schedule"):
        read_torch_trace(_write(tmp_path, "c.json", no_steps))
    with pytest.raises(FileNotFoundError, match="no such trace file"):
        read_torch_trace(tmp_path / "missing.json")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty: no \*\.json"):
        read_torch_traces([empty])
    (empty / "notes.json").write_text("{}")
    with pytest.raises(TorchTraceError, match=r"empty: no torch.profiler trace here"):
        read_torch_traces([empty])
    # near miss: the same trace with a step reads
    assert read_torch_trace(_write(tmp_path, "d.json", RANK0)).steps.shape[0] == 3


def test_one_trace_per_rank_from_a_folder_gzip_included(tmp_path):
    _write(tmp_path, "r1.json", RANK1)
    with gzip.open(tmp_path / "r0.pt.trace.json.gz", "wt") as handle:
        json.dump(RANK0, handle)
    (tmp_path / "notes.txt").write_text("not a trace")
    traces = read_torch_traces([tmp_path])
    assert [t.rank for t in traces] == [0, 1]  # ordered by rank, not by file name
    _write(tmp_path, "again.json", RANK1)
    with pytest.raises(TorchTraceError, match=r"r1\.json: rank 1 again \(also in .*again\.json\)"):
        read_torch_traces([tmp_path])


# -- analysis ----------------------------------------------------------------------------------
def test_step_breakdown_by_hand():
    row = step_breakdown(parse_torch_trace(RANK0)).iloc[0]
    assert (row["rank"], row["step"], row["step_us"]) == (0, 2, 100 * MS)
    # training thread: [5,20] + [30,60] + [62,70] + [90,98] = 15 + 30 + 8 + 8 = 61 ms in ops,
    # of which the two c10d::allreduce_ calls take 2 + 2: compute 57, idle 100 - 61 = 39
    assert row["compute_us"] == 57 * MS and row["idle_us"] == 39 * MS
    assert row["backward_us"] == 40 * MS  # 30..70
    assert row["comm_us"] == 40 * MS  # 20 + 20: the sum of the two buckets' durations
    assert row["comm_busy_us"] == 33 * MS  # 55..88: they run at once from 68 to 75
    assert row["overlap_us"] == 15 * MS  # 55..88 within 30..70: 55..70
    assert row["exposed_comm_us"] == 18 * MS  # 33 - 15
    assert row["after_backward_us"] == 18 * MS  # 88 - 70
    assert (row["buckets"], row["bucket_bytes"]) == (2, 600)  # 400 + 200 B


def test_python_frames_are_not_compute():
    # with_stack=True adds Python frames; one spanning the whole step (a training loop's
    # function) would make compute 100 ms: the row stays that of test_step_breakdown_by_hand
    events = [*RANK0["traceEvents"], _x("train.py(12): step", 0, 100, cat="python_function")]
    row = step_breakdown(parse_torch_trace({"traceEvents": events})).iloc[0]
    assert (row["compute_us"], row["idle_us"]) == (57 * MS, 39 * MS)


def test_a_step_without_backward_or_buckets():
    # an evaluation step: forward 5..20 only; nothing to overlap, no allreduce to wait for
    events = [_x("ProfilerStep#7", 0, 50, cat="user_annotation"), _x("aten::mm", 5, 20)]
    traces = parse_torch_trace({"traceEvents": events})
    row = step_breakdown(traces).iloc[0]
    assert (row["compute_us"], row["idle_us"], row["backward_us"]) == (15 * MS, 35 * MS, 0)
    assert (row["buckets"], row["bucket_bytes"], row["comm_us"]) == (0, 0, 0)
    assert row["after_backward_us"] is pd.NA
    text = "\n".join(torch_trace_findings(trace_summary(traces)))
    assert "0 bucket allreduce(s) per step" in text and "no communication" in text
    assert "no allreduce to end after the backward pass" in text


def test_a_late_gradient_hides_more_communication():
    # near miss of the row above: the last hook ends at 80, not 70: the backward spans 30..80,
    # overlap 55..80 = 25 ms, exposed 33 - 25 = 8, after 88 - 80 = 8
    row = step_breakdown(parse_torch_trace(RANK1)).iloc[0]
    assert (row["overlap_us"], row["exposed_comm_us"], row["after_backward_us"]) == (
        25 * MS, 8 * MS, 8 * MS)  # fmt: skip
    assert row["comm_us"] == 40 * MS  # the same buckets


def test_which_rank_the_others_wait_for():
    traces = [parse_torch_trace(RANK0), parse_torch_trace(RANK1)]
    waits = waited_for(step_breakdown(traces))
    assert waits["last_rank"].tolist() == [1, 0, 1]
    assert waits["lag_us"].tolist() == [10 * MS, 5 * MS, 14 * MS]  # see RANK0, RANK1
    assert slowest_rank(waits) == {
        "rank": 1,
        "steps_last": 2,
        "steps": 3,
        "by_chance": 1.5,  # 3 steps / 2 ranks
        "median_lag_us": 12 * MS,
    }  # median(10, 14)
    # one rank: nobody to wait for
    assert waited_for(step_breakdown(traces[:1])).empty
    assert slowest_rank(waited_for(step_breakdown(traces[:1]))) is None


def test_summary_and_findings():
    summary = trace_summary([parse_torch_trace(RANK0), parse_torch_trace(RANK1)])
    assert summary["ranks"] == [0, 1] and summary["steps"] == [2, 3, 4]
    r0 = summary["per_rank"][0]
    assert r0["buckets_per_step"] == [2] and r0["bytes_per_step"] == 600
    assert r0["overlap_fraction"] == round(15 / 33, 3)  # the same 15 of 33 ms in every step
    assert summary["waited_for"]["rank"] == 1
    text = "\n".join(torch_trace_findings(summary))
    assert (
        "The others wait for rank 1: its backward pass ends last in 2 of 3 steps (by chance "
        "alone, with no rank slower, each would be last in 1.5), by 12.0 ms" in text
    )
    assert (
        "2 bucket allreduce(s) per step, 600 B; 33.0 ms with at least one running (40.0 ms" in text
    )
    assert "the last ends 18.0 ms after the backward pass" in text  # rank 0: 88 - 70
    # near miss: the last hook ends at 88, with the last allreduce: no wait to report
    even = torch_trace_findings(trace_summary(parse_torch_trace(_trace(0, (88, 88, 88)))))
    assert "the last ends as the backward pass ends" in "\n".join(even)
    lone = torch_trace_findings(trace_summary([parse_torch_trace(RANK0)]))
    assert not any("wait for rank" in line for line in lone)
    assert any("Only 1 of the 2 ranks' traces" in line for line in lone)


# -- plot and command --------------------------------------------------------------------------
def test_the_lane_plot_draws_each_interval_in_its_lane():
    from workshop.plot.torch_trace import plot_torch_trace

    table = trace_lanes([parse_torch_trace(RANK0), parse_torch_trace(RANK1)])
    # per rank and step: compute [5,20] [30,52] [54,60] [62,66] [68,70] [90,98] (the c10d
    # calls cut out), 1 backward span, 2 allreduces
    counts = table.groupby(["rank", "lane"]).size()
    assert counts[(0, "compute")] == 6 * 3 and counts[(0, "communication")] == 2 * 3
    assert counts[(0, "step")] == 3
    ax = plot_torch_trace(table)
    assert len(ax.patches) == (table["lane"] != "step").sum()  # a bar per interval
    assert len(ax.collections) == 2  # per rank, the 3 steps' start lines
    assert len(ax.collections[0].get_segments()) == 3
    assert [t.get_text() for t in ax.get_yticklabels()] == ["rank 0", "rank 1"]
    with pytest.raises(ValueError, match=r"plot_torch_trace: the lanes DataFrame has no"):
        plot_torch_trace(table.drop(columns="lane"))


def test_workshop_trace_summary_and_report(tmp_path, capsys):
    _write(tmp_path, "rank0.json", RANK0)
    _write(tmp_path, "rank1.json", RANK1)
    assert main(["trace", "summary", str(tmp_path), "--json"]) == 0
    numbers = json.loads(capsys.readouterr().out)
    assert numbers["waited_for"]["rank"] == 1 and numbers["per_rank"]["0"]["steps"] == 3
    assert (
        main(["trace", "report", str(tmp_path / "rank0.json"), str(tmp_path / "rank1.json")]) == 0
    )
    assert "The others wait for rank 1" in capsys.readouterr().out
    assert main(["trace", "summary", str(tmp_path), "--steps"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 6  # header + 2 ranks x 3 steps
    # in a folder, JSON that is no trace is passed over; named, or not JSON, it is an error
    (tmp_path / "recording.json").write_text("[]")
    assert main(["trace", "summary", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"] == [0, 1]
    assert main(["trace", "report", str(tmp_path / "recording.json")]) == 2
    assert "recording.json: no 'traceEvents' list" in capsys.readouterr().err
    (tmp_path / "cut.json").write_text('{"traceEvents": [')
    assert main(["trace", "report", str(tmp_path)]) == 2
    assert "cut.json: not JSON" in capsys.readouterr().err


# -- the summary against a real trace's own events (used by tests/test_torch_trace_live.py) ---
def raw_steps(path) -> dict[int, dict]:
    """Per ProfilerStep#N, straight from the JSON (no workshop code): the durations and bytes
    (Input Dims x 4 for float) of the gloo:all_reduce events that start in its span."""
    events = json.loads(Path(path).read_text())["traceEvents"]
    steps = {
        int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"], [])
        for e in events
        if e.get("name", "").startswith("ProfilerStep#")
    }
    for e in events:
        if e.get("name") == "gloo:all_reduce":
            for lo, hi, found in steps.values():
                if lo <= e["ts"] < hi:
                    assert e["args"]["Input type"] == ["float"]
                    found.append((e["dur"], 4 * math.prod(e["args"]["Input Dims"][0])))
    return {n: {"durs": [d for d, _ in f], "bytes": [b for _, b in f]} for n, (_, _, f) in
            steps.items()}  # fmt: skip


def summary_matches_events(traces, steps: int, param_bytes: int) -> None:
    """Per rank and step of real DDP traces: the comm time is the sum of the step's
    gloo:all_reduce durations, the bucket count their number (>= 2), their bytes the model's
    gradients; overlap <= busy <= comm; compute + idle <= the step."""
    table = step_breakdown(traces)
    assert len(table) == len(traces) * steps
    for trace in traces:
        raw = raw_steps(trace.path)
        for row in table[table["rank"] == trace.rank].itertuples():
            events = raw[row.step]
            assert row.comm_us == pytest.approx(sum(events["durs"]), abs=0.01)
            assert row.buckets == len(events["durs"]) >= 2  # bucket_cap_mb=0.25: two buckets
            assert row.bucket_bytes == sum(events["bytes"]) == param_bytes
            assert 0 <= row.overlap_us <= row.comm_busy_us <= row.comm_us + 0.01
            assert row.compute_us + row.idle_us <= row.step_us + 0.01


# -- the recordings in data/ddp-traces/ --------------------------------------------------------
RECORDED = ("ddp-mlp-gloo-np2", "ddp-mlp-gloo-np2-slow-rank1")
# tests/check_scripts/ddp_profiled.py's MLP: 256*512 + 512, 512*256 + 256, 256*10 + 10 float32
MLP_BYTES = 4 * (256 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10)  # 1,061,928 B


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_trace_summary_adds_up_to_its_own_events(name):
    folder = data_path("ddp-traces", name)
    record = json.loads((folder / "recording.json").read_text())
    assert record["recording"]["quiet"] and record["recording"]["foreign_cores"] <= 0.05
    assert record["command"].endswith(f"data/ddp-traces/{name}" + (
        " --slow-rank 1 --slow-ms 40" if name.endswith("slow-rank1") else ""))  # fmt: skip
    traces = read_torch_traces([folder])  # recording.json is passed over
    assert [t.rank for t in traces] == [0, 1]
    summary_matches_events(traces, 3, MLP_BYTES)


def test_the_recorded_slow_rank_is_the_one_the_others_wait_for():
    # rank 1 sleeps 40 ms before each backward pass: rank 0 waits about that long for it,
    # more than half of it in every step; in the healthy recording no rank waits half as long
    slow = read_torch_traces([data_path("ddp-traces", RECORDED[1])])
    waits = waited_for(step_breakdown(slow))
    assert waits["last_rank"].tolist() == [1, 1, 1]
    assert (waits["lag_us"] > 20 * MS).all()
    healthy = read_torch_traces([data_path("ddp-traces", RECORDED[0])])
    assert (waited_for(step_breakdown(healthy))["lag_us"] < 20 * MS).all()
