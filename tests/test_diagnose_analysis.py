"""The evidence numbers of ``workshop diagnose`` (workshop.analysis.diagnose.measures: what
lesson 09's learner reads beside the costs) on small frames whose answers can be worked out by
hand, and the step-time files' reader. The costs and verdicts: tests/test_diagnose_verdicts.py."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from workshop.analysis import diagnose as d
from workshop.readers.runs import read_step_times


def steps_frame(compute_ms: dict[int, list[float]], wait_ms=1.0, data_ms=0.1) -> pd.DataFrame:
    """rank -> compute per step (ms); steps numbered from 0; step = data + compute + wait."""
    rows = []
    for rank, values in compute_ms.items():
        for step, c in enumerate(values):
            total = (data_ms + c + wait_ms) / 1e3
            rows.append((rank, step, data_ms / 1e3, c / 1e3, wait_ms / 1e3, total))
    return pd.DataFrame(rows, columns=list(d.STEP_COLUMNS))


def test_compute_ratio_names_the_slow_rank_and_leaves_out_the_first_step():
    # step 0 (start-up) is 100 ms on rank 0 and left out; after it rank 0 takes 10, 12, 11,
    # 10 ms and rank 1 20, 22, 24, 20 ms. Lower quartiles (linear between the sorted values
    # at positions 0.75 of 0..3): rank 0 10 ms, rank 1 20 ms: 20 / 10 = 2.0, rank 1
    steps = steps_frame({0: [100, 10, 12, 11, 10], 1: [5, 20, 22, 24, 20]})
    assert d.compute_ratio(steps) == (2.0, 1)
    table = d.compute_by_rank(steps).set_index("rank")
    assert table.loc[1, "slowest_share"] == 1.0 and table.loc[0, "slowest_share"] == 0.0
    assert table.loc[0, "steps"] == 4 and table.loc[0, "compute_ms"] == pytest.approx(10.5)


def test_a_few_slow_steps_do_not_make_a_straggler():
    # rank 1 is slowed in 2 of its 8 steps (other work passing by on its core): its median
    # rises, its lower quartile does not. Rank 0: 10 ms in every step; rank 1: 10 ms in six
    # steps, 30 ms in two: lower quartile 10 ms, ratio 1.0
    steps = steps_frame({0: [10] * 9, 1: [10, 10, 30, 10, 10, 30, 10, 10, 10]})
    assert d.compute_ratio(steps)[0] == pytest.approx(1.0)
    # slowed in every step by 50 %: ratio 1.5
    steps = steps_frame({0: [10] * 9, 1: [15] * 9})
    assert d.compute_ratio(steps) == (1.5, 1)
    assert math.isnan(d.compute_ratio(steps_frame({0: [1, 2, 3]}))[0])


def test_comm_share_takes_the_rank_that_waits_least():
    # rank 0 waits 8 ms of a 0.1 + 2 + 8 = 10.1 ms step; rank 1 (the slow one) 0.5 of 10.1
    fast = steps_frame({0: [2, 2, 2]}, wait_ms=8.0)
    slow = steps_frame({1: [9.5, 9.5, 9.5]}, wait_ms=0.5)
    share = d.comm_share(pd.concat([fast, slow]))
    assert share == pytest.approx(0.5 / 10.1)
    # data: 0.1 of 10.1 ms on both ranks
    assert d.data_share(pd.concat([fast, slow])) == pytest.approx(0.1 / 10.1)


def ticks_frame(rows):
    """(negotiation, rank, ts_us) -> Timeline.ticks columns, lateness behind the first."""
    tk = pd.DataFrame(rows, columns=["negotiation", "rank", "ts_us"])
    tk["tensor"], tk["pid"] = "grad", 0
    tk["lateness_us"] = tk["ts_us"] - tk.groupby("negotiation")["ts_us"].transform("min")
    return tk


def test_tick_lateness_counts_a_same_cycle_tick_as_on_time():
    # cycles start every 1000 us; in 3 negotiations rank 1's tick follows rank 0's by 300 us in
    # the same cycle (the coordinator records its own requests first: not late); in the 4th it
    # is 2 cycles behind. Raw ticks call rank 1 "last" 4 times; in cycles it is late once.
    cycles = pd.DataFrame({"start_us": [i * 1000 for i in range(20)]})
    tk = ticks_frame(
        [(0, 0, 100), (0, 1, 400), (1, 0, 3100), (1, 1, 3400), (2, 0, 6100), (2, 1, 6400),
         (3, 0, 9100), (3, 1, 11200)]
    )  # fmt: skip
    table = d.tick_lateness(tk, cycles).set_index("rank")
    assert table.loc[1, "late_share"] == 0.25 and table.loc[1, "late_cycles"] == 0.5
    assert table.loc[0, "late_cycles"] == 0.0
    # without cycle marks: lateness < one cycle time counts 0, 2100 us is 2 cycles
    assert d.tick_lateness(tk, None, cycle_us=1000).set_index("rank").loc[1, "late_cycles"] == 0.5


REFERENCE = pd.DataFrame(
    [
        {"measure": "compute_ratio", "min": 1.0, "median": 1.05, "max": 1.1, "runs": 5},
        {"measure": "lr_ratio", "min": 1.0, "median": 1.0, "max": 1.0, "runs": 5},
        {"measure": "negotiate_share", "min": 0.01, "median": 0.05, "max": 0.1, "runs": 5},
    ]
)


def evidence_of(**values) -> pd.DataFrame:
    rows = [
        {"measure": m, "problem": d.MEASURES[m].problem, "value": v, "rank": math.nan}
        for m, v in values.items()
    ]
    return pd.DataFrame(rows)


def run_record(**config) -> dict:
    base = {"lr": 0.01, "batch_size": 32, "np": 2, "base_batch_size": None}
    return {"status": "ok", "config": base | config}


def test_read_step_times_keeps_a_cut_last_line_and_rejects_a_bad_one(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    header = "step,data_s,compute_s,wait_s,step_s\n"
    (logs / "rank.0.steps.csv").write_text(header + "0,0.1,0.2,0.3,0.6\n1,0.1,0.2,0.3,0.6\n2,0.")
    (logs / "rank.1.steps.csv").write_text(header + "0,0.1,0.4,0.1,0.6\n")
    steps = read_step_times(tmp_path)
    assert list(steps.columns) == [*d.STEP_COLUMNS, "cpu_wait_s"]
    assert steps["cpu_wait_s"].isna().all()  # files written before it was recorded
    assert steps.groupby("rank").size().to_dict() == {0: 2, 1: 1}
    assert steps.loc[steps["rank"] == 1, "compute_s"].item() == 0.4
    (logs / "rank.1.steps.csv").write_text(header + "0,0.1,x,0.1,0.6\n1,0.1,0.4,0.1,0.6\n")
    with pytest.raises(ValueError, match=r"rank\.1\.steps\.csv:2: not a number"):
        read_step_times(tmp_path)
    # the CPU wait may be empty (the system did not tell); another empty column is an error
    (logs / "rank.1.steps.csv").write_text(
        header.replace("\n", ",cpu_wait_s\n") + "0,0.1,0.4,0.1,0.6,\n1,0.1,0.4,0.1,0.6,0.02\n"
    )
    waits = read_step_times(tmp_path).query("rank == 1")["cpu_wait_s"].tolist()
    assert math.isnan(waits[0]) and waits[1] == 0.02
    (logs / "rank.1.steps.csv").write_text(header + "0,0.1,,0.1,0.6\n1,0.1,0.4,0.1,0.6\n")
    with pytest.raises(ValueError, match=r"rank\.1\.steps\.csv:2: not a number"):
        read_step_times(tmp_path)
    (logs / "rank.1.steps.csv").write_text("step,compute_s\n")
    with pytest.raises(ValueError, match="missing column"):
        read_step_times(tmp_path)
    assert read_step_times(tmp_path / "logs").empty  # a folder without step files


def waits_frame(work_ms: dict[int, float], cpu_wait_ms: dict[int, float], steps=6):
    """rank -> compute per step (ms) and run-queue wait per step (ms), steps 0..steps-1."""
    rows = [
        (rank, step, 0.0, work_ms[rank] / 1e3, 0.001, 0.03, cpu_wait_ms[rank] / 1e3)
        for rank in work_ms
        for step in range(steps)
    ]
    return pd.DataFrame(rows, columns=[*d.STEP_COLUMNS, "cpu_wait_s"])


def test_the_cpu_wait_gap_names_the_rank_that_shares_its_core():
    # rank 1 slowed 1.5x by other work on its core: 15 ms of compute, 5 of them waiting for a
    # CPU (a third); rank 0 waits 0.2 ms of 10: gap 5/15 - 0.2/10 = 0.3133
    value, rank = d.cpu_wait_gap(waits_frame({0: 10, 1: 15}, {0: 0.2, 1: 5}))
    assert (round(value, 4), rank) == (0.3133, 1)
    # near miss: a busy room slows every rank alike (both wait a third): no gap, though each
    # rank's own share is as large as the straggler's
    value, _ = d.cpu_wait_gap(waits_frame({0: 15, 1: 15}, {0: 5, 1: 5}))
    assert value == pytest.approx(0.0)
    # near miss: a rank that waits for the others (blocked in the allreduce, wait_s) is not
    # ready to run: its run-queue wait stays small however long it waits
    assert d.cpu_wait_by_rank(waits_frame({0: 10, 1: 10}, {0: 0.1, 1: 0.1}))[
        "cpu_wait_share"
    ].tolist() == pytest.approx([0.01, 0.01])
    # steps recorded before the wait was (no column, or all NaN): no number, not a guess
    old = waits_frame({0: 10, 1: 15}, {0: 0, 1: 0}).drop(columns="cpu_wait_s")
    assert math.isnan(d.cpu_wait_gap(old)[0])
