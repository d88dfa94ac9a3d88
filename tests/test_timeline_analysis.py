"""Timeline analyses on real recordings (data/timelines), checked against what the run
directory says about the run (controller, steps, fusion threshold) and against sums that must
hold; backend edge cases the CPU machine cannot record use small constructed span tables."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workshop.analysis import timeline as A
from workshop.findings import timeline as F
from workshop.paths import data_path
from workshop.readers.timeline import Timeline, TimelineWarning, read_timeline

pytestmark = pytest.mark.filterwarnings("ignore::workshop.readers.timeline.TimelineWarning")

SAMPLES = [
    "tl-torch-gloo-np2",
    "tl-torch-gloo-np2-cycles",
    "tl-torch-mpi-np2",
    "tl-tf-gloo-np2",
    "tl-tf-mpi-np2-cycles",
    "tl-torch-gloo-np2-fusion0",
    "tl-torch-gloo-np2-cycle5ms",
    "tl-torch-gloo-np2-nocache",
]
_cache: dict[str, tuple[Timeline, dict]] = {}


def load(name: str) -> tuple[Timeline, dict]:
    if name not in _cache:
        run_dir = data_path("timelines", name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TimelineWarning)
            tl = read_timeline(run_dir)
        _cache[name] = (tl, json.loads((run_dir / "run.json").read_text()))
    return _cache[name]


@pytest.mark.parametrize("name", SAMPLES)
def test_backend_matches_the_controller_of_the_run(name: str) -> None:
    tl, run = load(name)
    expected = {"gloo": "Gloo", "mpi": "MPI"}[run["config"]["controller"]]
    assert A.backend(tl.spans) == expected
    det = A.detect_backend(tl.spans)
    assert set(det["library"]) == {expected}
    assert (
        det.loc[det["op"] == "ALLREDUCE", "evidence"]
        .iloc[0]
        .count(f"{expected.upper()}_ALLREDUCE")
        == 1
    )


@pytest.mark.parametrize("name", SAMPLES)
def test_steps_found_equal_the_steps_the_run_made(name: str) -> None:
    tl, run = load(name)
    cfg = run["config"]
    steps = A.step_starts(tl.spans)
    assert len(steps) == cfg["epochs"] * cfg["steps_per_epoch"]
    assert (steps["dur_us"] > 0).all()
    ev = A.early_vs_steady(tl.spans, first_steps=5)
    # torch broadcasts before the first step; TF after it (inside step 0)
    startup = ["startup"] if run["config"]["framework"] == "torch" else []
    assert list(ev["phase"]) == startup + ["first", "steady"]
    assert ev["steps"].sum() == len(steps)
    assert ev.loc[ev["phase"] == "first", "steps"].item() == 5


@pytest.mark.parametrize("name", SAMPLES)
def test_breakdown_adds_up(name: str) -> None:
    tl, _ = load(name)
    sp = tl.spans
    kind = sp["kind"].astype(str)
    for by in ("op", "tensor", "all"):
        bd = A.breakdown(sp, by=by)
        assert bd.loc[bd["kind"] == "negotiate", "total_us"].sum() == (
            sp.loc[kind == "negotiate", "dur_us"].sum()
        )
        # activities plus the rest of the op time give the op time
        assert bd.loc[bd["kind"] != "negotiate", "total_us"].sum() == (
            sp.loc[kind == "op", "dur_us"].sum()
        )
        shares = bd.groupby(by)["share"].sum()
        assert np.allclose(shares[shares > 0], 1.0)
    share = A.negotiation_share(sp).set_index("op")
    assert share.loc["all", "negotiate_us"] == sp.loc[kind == "negotiate", "dur_us"].sum()
    assert share.loc["all", "ops"] == (kind == "op").sum()
    assert 0 < share.loc["all", "negotiation_share"] < 1


@pytest.mark.parametrize("name", SAMPLES)
def test_fusion_groups_are_sets_of_distinct_tensors(name: str) -> None:
    tl, run = load(name)
    groups = A.fusion_groups(tl.spans)
    ops = tl.spans[tl.spans["kind"] == "op"]
    assert groups["tensors"].sum() == len(ops)
    members = groups["names"].str.split(";")
    assert (members.map(len) == groups["tensors"]).all()
    assert (members.map(lambda m: len(set(m)) == len(m))).all()  # a tensor once per response
    # the bytes of all allreduce responses = ops per tensor x that tensor's size
    ar = groups[(groups["op"] == "ALLREDUCE") & groups["bytes"].notna()]
    opar = ops[(ops["op"] == "ALLREDUCE") & ops["dtype"].notna()]
    size = opar["dtype"].astype(str).map({"float32": 4, "int32": 4, "int64": 8, "float64": 8})
    elems = (
        opar["shape"]
        .astype(str)
        .map(lambda s: int(np.prod([int(x) for x in s.strip("[]").split(",") if x.strip()])))
    )
    assert ar["bytes"].sum() == (size * elems).sum()
    if run["config"]["fusion_threshold_mb"] == 0:
        assert (groups["tensors"] == 1).all()  # HOROVOD_FUSION_THRESHOLD=0 disables fusion
    else:
        assert groups["tensors"].max() > 1


def test_fusion_threshold_zero_compared_with_default() -> None:
    default, _ = load("tl-torch-gloo-np2")
    zero, _ = load("tl-torch-gloo-np2-fusion0")
    cmp = A.compare_timelines(default, zero, labels=("default", "fusion0"))
    assert cmp.loc["tensors_per_group", "fusion0"] == 1.0
    assert cmp.loc["tensors_per_group", "default"] > 1.5
    assert cmp.loc["fusion_groups", "change"] > 0
    assert cmp.loc["steps", "default"] == cmp.loc["steps", "fusion0"] == 60
    assert cmp.loc["ops", "change"] == 0  # the same tensors, grouped differently
    # without fusion there is no fusion buffer to copy into
    assert cmp.loc["MEMCPY_IN_FUSION_BUFFER_ms", "fusion0"] == 0
    assert cmp.loc["MEMCPY_IN_FUSION_BUFFER_ms", "default"] > 0


def test_cycle_time_5ms_compared_with_default_1ms() -> None:
    """A longer cycle lets more gradients become ready per cycle: fewer, larger responses."""
    one, run1 = load("tl-torch-gloo-np2")
    five, run5 = load("tl-torch-gloo-np2-cycle5ms")
    assert run1["config"]["cycle_time_ms"] is None and run5["config"]["cycle_time_ms"] == 5
    cmp = A.compare_timelines(one, five, labels=("1ms", "5ms"))
    assert cmp.loc["fusion_groups", "change"] < 0
    assert cmp.loc["tensors_per_group", "ratio"] > 1
    assert cmp.loc["bytes_per_group", "ratio"] > 1
    assert cmp.loc["ops", "change"] == 0


def test_gloo_and_mpi_controllers_compared() -> None:
    gloo, _ = load("tl-torch-gloo-np2")
    mpi, _ = load("tl-torch-mpi-np2")
    cmp = A.compare_timelines(gloo, mpi, labels=("gloo", "mpi"))
    assert cmp.loc["backend", "gloo"] == "Gloo" and cmp.loc["backend", "mpi"] == "MPI"
    assert pd.isna(cmp.loc["backend", "change"])
    assert cmp.loc["GLOO_ALLREDUCE_ms", "mpi"] == 0 and cmp.loc["MPI_ALLREDUCE_ms", "gloo"] == 0
    assert cmp.loc["MPI_ALLREDUCE_ms", "mpi"] > 0


@pytest.mark.parametrize("name", SAMPLES)
def test_stragglers_and_lateness(name: str) -> None:
    tl, run = load(name)
    strag = A.stragglers(tl.ticks)
    assert set(strag["rank"]) == set(range(run["config"]["np"]))
    ranks_seen = tl.ticks.groupby(["pid", "negotiation"])["rank"].nunique()
    # every negotiation that two ranks reached has a last rank (ties count for both)
    assert strag["times_last"].sum() >= (ranks_seen >= 2).sum() > 0
    assert strag["mean_lateness_us"].is_monotonic_decreasing
    assert strag["max_lateness_us"].max() == tl.ticks["lateness_us"].max()
    m = A.lateness_matrix(tl.ticks, agg="max")
    assert list(m.index) == sorted(tl.ticks["rank"].unique())
    assert m.shape[1] == tl.ticks["tensor"].nunique()
    assert np.nanmax(m.to_numpy()) == tl.ticks["lateness_us"].max()


@pytest.mark.parametrize("name", ["tl-torch-gloo-np2-cycles", "tl-tf-mpi-np2-cycles"])
def test_evolution_splits_time_exactly(name: str) -> None:
    tl, _ = load(name)
    sp = tl.spans
    kind = sp["kind"].astype(str)
    for kwargs in ({"bins": 7}, {"bin_us": 250_000}, {"edges": tl.cycles["start_us"]}):
        ev = A.evolution(sp, **kwargs)
        covered = sp[sp["start_us"] >= ev["start_us"].iloc[0]]
        ck = covered["kind"].astype(str)
        assert ev["negotiate_us"].sum() == pytest.approx(
            covered.loc[ck == "negotiate", "dur_us"].sum()
        )
        assert ev["processing_us"].sum() == pytest.approx(covered.loc[ck == "op", "dur_us"].sum())
        assert ev["ops_started"].sum() == (ck == "op").sum()
        assert ev["negotiation_share"].dropna().between(0, 1).all()
    assert len(A.evolution(sp, edges=tl.cycles["start_us"])) == len(tl.cycles)
    assert (kind == "op").sum() > 0


@pytest.mark.parametrize("name", SAMPLES)
def test_summary_keys_and_values(name: str) -> None:
    tl, run = load(name)
    s = A.timeline_summary(tl)
    required = {"tensors", "ranks", "ops", "activities_us", "negotiation_us", "backend"}
    required |= {"span_us", "truncated", "events"}
    assert required <= set(s)
    json.dumps(s)  # plain JSON types only
    assert s["ranks"] == run["config"]["np"]
    assert s["ops"]["ALLREDUCE"] == (tl.spans["name"] == "ALLREDUCE").sum()
    assert s["events"] == tl.metadata["events"]
    assert s["truncated"] is False
    assert s["span_us"] == tl.metadata["last_ts_us"] - tl.metadata["first_ts_us"]
    assert (
        sum(s["negotiation_us"].values())
        == tl.spans.loc[tl.spans["kind"] == "negotiate", "dur_us"].sum()
    )
    assert s["cycles"] == len(tl.cycles)
    assert (s["cycles"] > 0) == bool(run["config"]["mark_cycles"])


@pytest.mark.parametrize("name", ["tl-torch-gloo-np2", "tl-torch-gloo-np2-nocache"])
def test_ticks_only_on_cache_misses_unless_the_cache_is_off(name: str) -> None:
    """Horovod 0.28.1 writes readiness ticks only on the uncached path (controller.cc:1129)."""
    tl, run = load(name)
    cache_off = run["env"].get("HOROVOD_CACHE_CAPACITY") == "0"
    negotiations = (tl.spans["kind"] == "negotiate").sum()
    ticked = tl.ticks.groupby(["pid", "negotiation"]).ngroups
    if cache_off:
        assert ticked == negotiations  # every negotiation is a cache miss
    else:
        assert ticked == tl.spans["tensor"].nunique()  # the first one of each tensor only
        assert (tl.ticks["negotiation"] == 0).all()
    # one tick per rank and negotiation: 2 ranks
    assert len(tl.ticks) == 2 * ticked


@pytest.mark.parametrize("name", ["tl-torch-gloo-np2", "tl-torch-gloo-np2-nocache"])
def test_a_ticked_negotiation_is_waiting_for_the_last_rank(name: str) -> None:
    """On the uncached path the span opens just before the first rank's tick and closes just
    after the last rank's (controller.cc:1115-1138), so the wait lies inside the span."""
    tl, _ = load(name)
    waits = A.negotiation_waits(tl.spans, tl.ticks)
    assert len(waits) == tl.ticks.groupby(["pid", "negotiation"]).ngroups
    assert (waits["wait_us"] <= waits["dur_us"]).all()
    assert (waits["first_rank"] != waits["last_rank"]).all()
    # the rest of the span is the bookkeeping between writing B, the ticks and E
    assert (waits["dur_us"] - waits["wait_us"]).max() < 1000
    assert waits["wait_us"].sum() / waits["dur_us"].sum() > 0.99
    assert waits["start_us"].is_monotonic_increasing


def test_gradient_tensors_leave_the_metrics_out() -> None:
    torch, _ = load("tl-torch-gloo-np2")
    grads = A.gradient_tensors(torch.spans)
    assert grads == [
        "allreduce.9.bias",
        "allreduce.9.weight",
        "allreduce.7.bias",
        "allreduce.7.weight",
        "allreduce.3.weight",
        "allreduce.3.bias",
        "allreduce.0.weight",
        "allreduce.0.bias",
    ]
    tf, _ = load("tl-tf-mpi-np2-cycles")
    grads = A.gradient_tensors(tf.spans)
    assert len(grads) == 8 and all("DistributedGradientTape" in g for g in grads)


@pytest.mark.parametrize("name", SAMPLES)
def test_allreduce_overlap_is_consistent(name: str) -> None:
    tl, run = load(name)
    cycles = tl.cycles if len(tl.cycles) else None
    ov = A.allreduce_overlap(tl.spans, cycles=cycles)
    grads = A.gradient_tensors(tl.spans)
    steps = run["config"]["epochs"] * run["config"]["steps_per_epoch"]
    # every step allreduces every gradient once; at most the last step is cut by shutdown
    assert ov.groupby("step").size().eq(len(grads)).all()
    assert steps - 1 <= ov["step"].nunique() <= steps
    assert (ov.groupby("step")["ready_us"].min() == 0).all()
    assert (ov["ready_us"] <= ov["all_ready_us"]).all()
    # Horovod performs a response only after its negotiation ended on every rank
    assert (ov["op_start_us"] >= ov["all_ready_us"]).all()
    assert (ov["overlap_us"] <= ov["op_end_us"] - ov["op_start_us"]).all()
    assert (ov["backward_end_us"] == ov.groupby("step")["ready_us"].transform("max")).all()
    # the tensors of one fused response belong to one step
    assert (ov.groupby("group")["step"].nunique() == 1).all()
    by_step = A.overlap_by_step(ov)
    assert (by_step["ops"] <= by_step["gradients"]).all()
    assert by_step["overlap_share"].dropna().between(0, 1).all()
    if run["config"]["fusion_threshold_mb"] == 0:
        assert (by_step["ops"] == by_step["gradients"]).all()  # no fusion: one op each
    if cycles is not None:
        # an op two cycles before the last gradient was first seen ended before it was seen
        inside = ov[ov["in_backward_all"]]
        assert (inside["op_end_us"] < inside["backward_end_us"]).all()
        assert (ov["in_backward_some"] | ~ov["in_backward_all"]).all()
        if run["config"]["framework"] == "torch":
            # torch hands each gradient over from its hook, spread over the backward pass:
            # some ops provably ran while every rank was still in backward
            assert len(inside) > 0
        else:
            # TF's tape hands its gradients over together (quiet recording: a step's last
            # gradient within a median 6.5 us of its first, inside one ~1 ms cycle), so no op
            # can be two cycles before the last one: none is provably inside backward on
            # every rank (the noisy recording's 40 ms spread gave 61 such ops)
            spread = ov.groupby("step")["backward_end_us"].first()
            assert spread.median() < 1_000 and len(inside) == 0


def test_compare_overlap_uses_cycle_marks_where_there_are_some() -> None:
    table = A.compare_overlap(
        {"marks": load("tl-torch-gloo-np2-cycles")[0], "plain": load("tl-torch-gloo-np2")[0]}
    )
    assert list(table.index) == ["marks", "plain"]
    assert (table["steps"] == 59).all()  # 60 steps, the first (cache misses) left out
    assert 0 < table.loc["marks", "in_backward_all_share"] < 1
    assert np.isnan(table.loc["plain", "in_backward_all_share"])
    with pytest.raises(ValueError, match="cycles is empty"):
        A.allreduce_overlap(
            load("tl-torch-gloo-np2")[0].spans, cycles=load("tl-torch-gloo-np2")[0].cycles
        )


def test_report_states_the_numbers() -> None:
    tl, _ = load("tl-torch-gloo-np2-cycles")
    text = "\n".join(F.timeline_findings(tl))
    share = A.negotiation_share(tl.spans).set_index("op").loc["all", "negotiation_share"]
    assert f"Negotiation takes {100 * share:.1f} %" in text
    assert "Library: Gloo." in text
    assert "60 training steps found" in text
    assert "rank 0:" in text and "rank 1:" in text
    # the straggler table of a cached run describes start-up, and says so
    assert "only 34 of 512 negotiations have ticks" in text and "at start-up" in text
    assert "tensor time sums the spans of all tensors" in text
    assert "Allreduces against the backward pass" in text and "cycle-exact" in text
    nocache = "\n".join(F.timeline_findings(load("tl-torch-gloo-np2-nocache")[0]))
    assert "every negotiation has ticks" in nocache


def test_report_of_a_timeline_without_spans_is_a_list_of_lines(tmp_path: Path) -> None:
    """A timeline cut before its first span: the findings are lines, like any other (a string
    here made `workshop timeline report` print one character per line)."""
    source = data_path("timelines/tl-torch-gloo-np2/timeline.json")
    cut = tmp_path / "timeline.json"
    cut.write_bytes(source.read_bytes()[:300])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TimelineWarning)
        tl = read_timeline(cut)
    assert tl.spans.empty
    findings = F.timeline_findings(tl)
    assert isinstance(findings, list)
    assert findings[-1] == "No negotiation or processing spans: nothing to diagnose."


def constructed_spans(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    """Constructed (not recorded): minimal spans tables for libraries this CPU-only machine
    cannot record (NCCL, hierarchical allreduce, alltoall)."""
    recs = []
    for i, (op, kind, name) in enumerate(rows):
        recs.append(
            {
                "tensor": "t",
                "op": op,
                "kind": kind,
                "name": name,
                "start_us": i,
                "end_us": i + 1,
                "dur_us": 1,
                "seq": i,
            }
        )
    return pd.DataFrame(recs)


def test_backend_rules_on_constructed_spans() -> None:
    gloo_alltoall = constructed_spans(
        [
            ("ALLREDUCE", "op", "ALLREDUCE"),
            ("ALLREDUCE", "activity", "GLOO_ALLREDUCE"),
            ("ALLTOALL", "op", "ALLTOALL"),
            ("ALLTOALL", "activity", "MPI_ALLTOALL"),
        ]
    )
    det = A.detect_backend(gloo_alltoall).set_index("op")
    assert det.loc["ALLTOALL", "library"] == "Gloo"
    assert "Gloo's alltoall" in det.loc["ALLTOALL", "note"]
    only_alltoall = constructed_spans(
        [("ALLTOALL", "op", "ALLTOALL"), ("ALLTOALL", "activity", "MPI_ALLTOALL")]
    )
    assert A.detect_backend(only_alltoall)["library"].item() == "MPI or Gloo"
    hierarchical = constructed_spans(
        [("ALLREDUCE", "op", "ALLREDUCE")]
        + [
            ("ALLREDUCE", "activity", n)
            for n in (
                "NCCL_REDUCE",
                "MEMCPY_IN_HOST_BUFFER",
                "MPI_ALLREDUCE",
                "MEMCPY_OUT_HOST_BUFFER",
                "NCCL_BCAST",
            )
        ]
    )
    assert A.backend(hierarchical) == "NCCL+MPI (hierarchical)"
    nccl = constructed_spans(
        [
            ("ALLREDUCE", "op", "ALLREDUCE"),
            ("ALLREDUCE", "activity", "QUEUE"),
            ("ALLREDUCE", "activity", "NCCL_ALLREDUCE"),
        ]
    )
    assert A.backend(nccl) == "NCCL"
    assert A.backend(constructed_spans([("ALLREDUCE", "op", "ALLREDUCE")])) == "unknown"


def test_inputs_are_checked_at_the_door() -> None:
    tl, _ = load("tl-torch-gloo-np2")
    with pytest.raises(ValueError, match="spans DataFrame has no column"):
        A.breakdown(tl.ticks)
    with pytest.raises(ValueError, match="ticks DataFrame has no column"):
        A.stragglers(tl.spans)
    with pytest.raises(TypeError, match="must be a DataFrame"):
        A.negotiation_share([1, 2])
    with pytest.raises(ValueError, match="by must be"):
        A.breakdown(tl.spans, by="rank")
    with pytest.raises(ValueError, match="bin_us must be positive"):
        A.evolution(tl.spans, bin_us=0)


def test_negotiation_share_means_on_constructed_spans() -> None:
    # 3 allreduce negotiations of 100, 200 and 600 us and 2 ops of 50 and 150 us; one allgather
    # negotiation of 40 us and no allgather op.
    rows = [("negotiate", "ALLREDUCE", d) for d in (100, 200, 600)]
    rows += [("op", "ALLREDUCE", d) for d in (50, 150)] + [("negotiate", "ALLGATHER", 40)]
    spans = pd.DataFrame(
        {
            "kind": pd.Categorical([k for k, _, _ in rows]),
            "op": [o for _, o, _ in rows],
            "dur_us": [d for _, _, d in rows],
        }
    )
    for column in A.SPAN_COLUMNS:
        if column not in spans:
            spans[column] = 0
    share = A.negotiation_share(spans).set_index("op")
    assert share.loc["ALLREDUCE", "mean_negotiate_us"] == 300
    assert share.loc["ALLREDUCE", "mean_processing_us"] == 100
    assert share.loc["ALLREDUCE", "negotiation_share"] == pytest.approx(900 / 1100)
    assert share.loc["ALLGATHER", "mean_negotiate_us"] == 40
    assert np.isnan(share.loc["ALLGATHER", "mean_processing_us"])  # no op: no mean
    assert share.loc["all", "mean_negotiate_us"] == pytest.approx(940 / 4)
