"""Timeline analyses on real recordings (data/timelines), checked against what the run
directory says about the run (controller, steps, fusion threshold) and against sums that must
hold; backend edge cases the CPU machine cannot record use small constructed span tables."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from workshop.analysis import timeline as A
from workshop.io.timeline import Timeline, TimelineWarning, read_timeline
from workshop.paths import data_path

pytestmark = pytest.mark.filterwarnings("ignore::workshop.io.timeline.TimelineWarning")

SAMPLES = [
    "tl-torch-gloo-np2",
    "tl-torch-gloo-np2-cycles",
    "tl-torch-mpi-np2",
    "tl-tf-gloo-np2",
    "tl-tf-mpi-np2-cycles",
    "tl-torch-gloo-np2-fusion0",
    "tl-torch-gloo-np2-cycle5ms",
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


def test_report_states_the_numbers() -> None:
    tl, _ = load("tl-torch-gloo-np2-cycles")
    text = A.timeline_report(tl)
    share = A.negotiation_share(tl.spans).set_index("op").loc["all", "negotiation_share"]
    assert f"Negotiation takes {100 * share:.1f} %" in text
    assert "Library: Gloo." in text
    assert "60 training steps found" in text
    assert "rank 0:" in text and "rank 1:" in text


def constructed_spans(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    """Constructed (not recorded): minimal spans tables for libraries this CPU-only machine
    cannot record (NCCL, hierarchical allreduce, alltoall)."""
    recs = []
    for i, (op, kind, name) in enumerate(rows):
        recs.append(
            {"tensor": "t", "op": op, "kind": kind, "name": name, "start_us": i,
             "end_us": i + 1, "dur_us": 1, "seq": i}
        )  # fmt: skip
    return pd.DataFrame(recs)


def test_backend_rules_on_constructed_spans() -> None:
    gloo_alltoall = constructed_spans(
        [("ALLREDUCE", "op", "ALLREDUCE"), ("ALLREDUCE", "activity", "GLOO_ALLREDUCE"),
         ("ALLTOALL", "op", "ALLTOALL"), ("ALLTOALL", "activity", "MPI_ALLTOALL")]
    )  # fmt: skip
    det = A.detect_backend(gloo_alltoall).set_index("op")
    assert det.loc["ALLTOALL", "library"] == "Gloo"
    assert "Gloo's alltoall" in det.loc["ALLTOALL", "note"]
    only_alltoall = constructed_spans(
        [("ALLTOALL", "op", "ALLTOALL"), ("ALLTOALL", "activity", "MPI_ALLTOALL")]
    )
    assert A.detect_backend(only_alltoall)["library"].item() == "MPI or Gloo"
    hierarchical = constructed_spans(
        [("ALLREDUCE", "op", "ALLREDUCE")]
        + [("ALLREDUCE", "activity", n) for n in ("NCCL_REDUCE", "MEMCPY_IN_HOST_BUFFER",
           "MPI_ALLREDUCE", "MEMCPY_OUT_HOST_BUFFER", "NCCL_BCAST")]
    )  # fmt: skip
    assert A.backend(hierarchical) == "NCCL+MPI (hierarchical)"
    nccl = constructed_spans(
        [("ALLREDUCE", "op", "ALLREDUCE"), ("ALLREDUCE", "activity", "QUEUE"),
         ("ALLREDUCE", "activity", "NCCL_ALLREDUCE")]
    )  # fmt: skip
    assert A.backend(nccl) == "NCCL"
    assert A.backend(constructed_spans([("ALLREDUCE", "op", "ALLREDUCE")])) == "unknown"


def test_inputs_are_checked_at_the_door() -> None:
    tl, _ = load("tl-torch-gloo-np2")
    with pytest.raises(ValueError, match="spans DataFrame lacks column"):
        A.breakdown(tl.ticks)
    with pytest.raises(ValueError, match="ticks DataFrame lacks column"):
        A.stragglers(tl.spans)
    with pytest.raises(TypeError, match="must be a DataFrame"):
        A.negotiation_share([1, 2])
    with pytest.raises(ValueError, match="by must be"):
        A.breakdown(tl.spans, by="rank")
    with pytest.raises(ValueError, match="bin_us must be positive"):
        A.evolution(tl.spans, bin_us=0)
