"""The ring-allreduce alpha-beta model: fit and prediction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workshop.analysis import commodel


def _ops(nps, sizes, alpha_s, bandwidth, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for n in nps:
        for m in sizes:
            t = commodel.ring_allreduce_time_s(n, m, alpha_s, bandwidth)
            rows.append({"np": n, "bytes": m, "dur_us": 1e6 * t * (1 + noise * rng.normal())})
    return pd.DataFrame(rows)


def test_ring_time_formula():
    assert commodel.ring_allreduce_time_s(1, 1e6, 1e-5, 1e9) == 0
    # 2(N-1) alpha + 2(N-1)/N m/B at N=4: 6 alpha + 1.5 m/B
    assert commodel.ring_allreduce_time_s(4, 4e6, 1e-5, 1e9) == pytest.approx(6e-5 + 6e-3)


def test_fit_recovers_alpha_and_bandwidth_at_one_n():
    ops = _ops([2], np.geomspace(64, 8e6, 20), 25e-6, 2e9)
    fit = commodel.fit_alpha_beta(ops)
    assert fit["alpha_us"] == pytest.approx(25, rel=1e-6)
    assert fit["bandwidth_bytes_per_s"] == pytest.approx(2e9, rel=1e-6)
    assert fit["beta_ns_per_byte"] == pytest.approx(0.5, rel=1e-6)
    assert fit["r2"] == pytest.approx(1.0)
    assert fit["nps"] == [2]


def test_fit_with_noise_and_several_n():
    ops = _ops([2, 4, 8], np.geomspace(1e3, 1e7, 15), 40e-6, 1e9, noise=0.05)
    ops = pd.concat([ops, pd.DataFrame({"np": [1], "bytes": [10], "dur_us": [99.0]})])
    fit = commodel.fit_alpha_beta(ops)
    assert fit["ops"] == 45  # the np=1 row is ignored
    assert fit["alpha_us"] == pytest.approx(40, rel=0.25)
    assert fit["bandwidth_bytes_per_s"] == pytest.approx(1e9, rel=0.1)


def test_fit_constrains_coefficients_and_rejects_degenerate_input():
    # durations falling with size (timer noise): beta would be negative, so it is clipped to
    # 0 and alpha refitted alone: the mean of t / (2 (N-1))
    flat = pd.DataFrame(
        {"np": [2] * 4, "bytes": [10, 100, 1000, 10000], "dur_us": [50.0, 50.0, 49.9, 49.0]}
    )
    fit = commodel.fit_alpha_beta(flat)
    assert fit["beta_ns_per_byte"] == 0
    assert fit["bandwidth_bytes_per_s"] == float("inf")
    assert fit["alpha_us"] == pytest.approx((50 + 50 + 49.9 + 49) / 4 / 2)
    same = pd.DataFrame({"np": [2] * 3, "bytes": [8] * 3, "dur_us": [10.0, 11.0, 12.0]})
    with pytest.raises(ValueError, match="not separable"):
        commodel.fit_alpha_beta(same)
    with pytest.raises(ValueError, match="need >= 3"):
        commodel.fit_alpha_beta(same.iloc[:2])
    with pytest.raises(ValueError, match="no column"):
        commodel.fit_alpha_beta(same.drop(columns="bytes"))


def test_predict_scaling_and_compare():
    fit = {"alpha_us": 50.0, "bandwidth_bytes_per_s": 1e9}
    pred = commodel.predict_scaling(
        fit,
        compute_time_s=0.01,
        bytes_per_step=4e6,
        allreduces_per_step=2,
        batch_size=32,
        nps=[1, 2, 4, 8],
    )
    p = pred.set_index("np")
    assert p.loc[1, "speedup"] == 1 and p.loc[1, "comm_time_s"] == 0
    expected_comm = 2 * commodel.ring_allreduce_time_s(2, 2e6, 50e-6, 1e9)
    assert p.loc[2, "comm_time_s"] == pytest.approx(expected_comm)
    assert p.loc[2, "speedup"] == pytest.approx(2 * 0.01 / (0.01 + expected_comm))
    assert p["efficiency"].is_monotonic_decreasing
    hidden = commodel.predict_scaling(
        fit,
        compute_time_s=0.01,
        bytes_per_step=4e6,
        allreduces_per_step=2,
        batch_size=32,
        nps=[2],
        overlap=1.0,
    )
    assert hidden["speedup"].iloc[0] == pytest.approx(2)
    measured = pd.DataFrame({"np": [1, 2], "speedup_throughput": [1.0, 1.5]})
    cmp = commodel.compare_prediction(pred, measured).set_index("np")
    assert cmp.loc[2, "error"] == pytest.approx(p.loc[2, "speedup"] / 1.5 - 1)
    assert np.isnan(cmp.loc[8, "speedup_measured"])
    with pytest.raises(ValueError, match="compute_time_s > 0"):
        commodel.predict_scaling(
            fit, compute_time_s=0, bytes_per_step=1, allreduces_per_step=1, batch_size=1
        )


def _spans():
    """Spans as workshop.readers.timeline reads them: two tensors fused in one GLOO_ALLREDUCE, then
    one alone; a broadcast that must be ignored."""
    rows = [
        # tensor, kind, name, start, end, dtype, shape
        ("g.w", "op", "ALLREDUCE", 0, 100, "float32", "[10, 128]"),
        ("g.b", "op", "ALLREDUCE", 0, 101, "float32", "[10]"),
        ("g.w", "activity", "GLOO_ALLREDUCE", 20, 90, None, None),
        ("g.b", "activity", "GLOO_ALLREDUCE", 21, 91, None, None),
        ("g.w", "op", "ALLREDUCE", 200, 260, "float32", "[10, 128]"),
        ("g.w", "activity", "GLOO_ALLREDUCE", 210, 250, None, None),
        ("bc", "op", "BROADCAST", 300, 400, None, None),
        ("bc", "activity", "GLOO_BCAST", 310, 390, None, None),
    ]
    return pd.DataFrame(
        rows, columns=["tensor", "kind", "name", "start_us", "end_us", "dtype", "shape"]
    )


def test_allreduce_ops_merge_fused_tensors():
    ops = commodel.allreduce_ops(_spans(), 2)
    assert ops["tensors"].tolist() == [2, 1]
    assert ops["bytes"].tolist() == [4 * 1290, 4 * 1280]
    assert ops["dur_us"].tolist() == [71, 40]
    assert set(ops["np"]) == {2} and set(ops["collective"]) == {"GLOO_ALLREDUCE"}
    with pytest.raises(ValueError, match="no column"):
        commodel.allreduce_ops(_spans().drop(columns="shape"), 2)


def test_quantile_fit_ignores_waiting_outliers():
    sizes = np.geomspace(100, 1e6, 8)
    clean = _ops([2], sizes, 30e-6, 1e9)
    waits = clean.assign(dur_us=clean["dur_us"] + 5000)  # a straggler's wait added
    ops = pd.concat([clean] * 9 + [waits], ignore_index=True)
    fit = commodel.fit_alpha_beta(ops, quantile=0.1)
    assert fit["alpha_us"] == pytest.approx(30, rel=1e-6)
    assert fit["ops"] == 8 and fit["quantile"] == 0.1
    assert commodel.fit_alpha_beta(ops)["alpha_us"] > 200


def test_predict_from_run_splits_step_into_compute_and_comm():
    fit = {"alpha_us": 100.0, "bandwidth_bytes_per_s": 1e8}
    # 10 steps, 2 allreduces of 50 kB each per step, measured at N=2
    ops = pd.DataFrame({"np": [2] * 20, "bytes": [50_000] * 20, "dur_us": [0] * 20})
    pred, inputs = commodel.predict_from_run(
        fit, ops, steps=10, step_time_s=0.02, batch_size=32, nps=[1, 2, 4]
    )
    comm = 2 * (2 * 100e-6 + 50_000 / 1e8)  # 2 ops x (2 alpha + m/B) at N=2
    assert inputs["comm_time_s"] == pytest.approx(comm)
    assert inputs["compute_time_s"] == pytest.approx(0.02 - comm)
    assert inputs["bytes_per_step"] == 100_000 and inputs["allreduces_per_step"] == 2
    p = pred.set_index("np")
    assert p.loc[2, "step_time_s"] == pytest.approx(0.02)  # reproduces the measured run
    assert p.loc[1, "speedup"] == 1 and p.loc[4, "speedup"] < 4
    with pytest.raises(ValueError, match="exceeds the measured step time"):
        commodel.predict_from_run(fit, ops, steps=10, step_time_s=0.001, batch_size=32)
    with pytest.raises(ValueError, match="one np"):
        commodel.predict_from_run(fit, ops.iloc[:0], steps=10, step_time_s=0.02, batch_size=32)


ALPHA_S, BANDWIDTH = 50e-6, 1e9
SIZES = (4_000, 40_000, 400_000, 4_000_000)  # bytes of the four allreduces in a timeline


def _model_spans():
    """A run's timeline in which four single-tensor allreduces (1,000 to 1,000,000 float32)
    take exactly the ring time at N=2, t = 2 alpha + m / B, one after the other."""
    rows, start = [], 0
    for i, nbytes in enumerate(SIZES):
        dur = round(1e6 * (2 * ALPHA_S + nbytes / BANDWIDTH))
        rows.append(
            (f"g{i}", "op", "ALLREDUCE", start, start + dur + 10, "float32", f"[{nbytes // 4}]")
        )
        rows.append(
            (f"g{i}", "activity", "GLOO_ALLREDUCE", start + 5, start + 5 + dur, None, None)
        )
        start += dur + 100
    return pd.DataFrame(
        rows, columns=["tensor", "kind", "name", "start_us", "end_us", "dtype", "shape"]
    )


def _model_runs():
    """One worker and two workers doing the same work (2 steps per epoch, 1 epoch, batch 32),
    and a tuned np=2 run listed first, which the model must not start from."""
    base = {"dataset": "mnist", "batch_size": 32, "steps": 2.0, "epochs_done": 1}
    # the other options that fix a step's work (workshop.runspec.WORK_KEYS), as read_sweep has
    base |= {"framework": "torch", "compression": "none", "backward_passes_per_step": 1}
    rows = [
        base
        | {
            "run": "a-tuned",
            "np": 2,
            "fusion_threshold_mb": 0.0,
            "cycle_time_ms": 1.0,
            "steady_epoch_time_s": 0.3,
            "samples_per_s": 500.0,
        },
        base
        | {
            "run": "b-np1",
            "np": 1,
            "fusion_threshold_mb": None,
            "cycle_time_ms": None,
            "steady_epoch_time_s": 0.08,
            "samples_per_s": 1000.0,
        },
        base
        | {
            "run": "c-np2",
            "np": 2,
            "fusion_threshold_mb": None,
            "cycle_time_ms": None,
            "steady_epoch_time_s": 0.1,
            "samples_per_s": 1600.0,
        },
    ]
    return pd.DataFrame(rows)


def test_comm_model_pipeline_fits_predicts_and_compares():
    runs = _model_runs()
    spans = {"a-tuned": _model_spans(), "c-np2": _model_spans()}
    model = commodel.comm_model_vs_measurement(runs, spans, nps=[1, 2, 4])
    assert model["timelines"] == 2 and len(model["ops"]) == 8
    assert set(model["ops"]["run"]) == {"a-tuned", "c-np2"}
    # every duration lies on the ring model (rounded to 1 us): the fit recovers alpha and B
    assert model["fit"]["alpha_us"] == pytest.approx(50, abs=0.01)
    assert model["fit"]["bandwidth_bytes_per_s"] == pytest.approx(1e9, rel=1e-4)
    assert model["run"] == "c-np2"  # Horovod's default knobs, not the tuned run listed first
    inputs = model["inputs"]
    # c-np2: 4 allreduces in 2 steps -> 2 per step; 4,444,000 bytes / 2 = 2,222,000 per step
    assert inputs["allreduces_per_step"] == 2 and inputs["bytes_per_step"] == 2_222_000
    # model comm per step: 2 x (2 alpha + 1,111,000 / B) = 200 us + 2.222 ms = 2.422 ms
    assert inputs["comm_time_s"] == pytest.approx(2.422e-3, rel=1e-4)
    # measured step 0.1 s / 2 = 50 ms -> compute 47.578 ms; one worker alone: 40 ms per step
    assert inputs["compute_time_s"] == pytest.approx(47.578e-3, rel=1e-4)
    assert inputs["np1_step_time_s"] == pytest.approx(0.04)
    assert inputs["unexplained_s"] == pytest.approx(7.578e-3, rel=1e-3)
    comparison = model["comparison"].set_index("np")
    # predicted S(2) = 2 x compute / (compute + comm) = 2 x 47.578 / 50; measured 1600 / 1000
    assert comparison.loc[2, "speedup_predicted"] == pytest.approx(2 * 47.578 / 50, rel=1e-4)
    assert comparison.loc[2, "speedup_measured"] == pytest.approx(1.6)
    assert np.isnan(comparison.loc[4, "speedup_measured"])
    assert model["measured"]["np"].tolist() == [1, 2]
    assert model["prediction"]["np"].tolist() == [1, 2, 4]


def test_comm_model_pipeline_without_measurement_or_timelines():
    runs = _model_runs()
    alone = runs[runs["run"] == "c-np2"]  # no one-worker run: nothing to compare with
    model = commodel.comm_model_vs_measurement(alone, {"c-np2": _model_spans()})
    assert model["measured"] is None and model["comparison"] is None
    assert "np1_step_time_s" not in model["inputs"] and len(model["prediction"]) == 6
    # timelines of one-worker runs, or of runs not in the table, do not count
    assert commodel.comm_model_vs_measurement(runs, {"b-np1": _model_spans()}) is None
    assert commodel.comm_model_vs_measurement(runs, {"zz": _model_spans()}) is None
    with pytest.raises(ValueError, match=r"no allreduce .* given for \['b-np1'\]"):
        commodel.comm_model_vs_measurement(runs, {"b-np1": _model_spans()}, strict=True)
    with pytest.raises(ValueError, match=r"no column\(s\) \['steps'\]"):
        commodel.comm_model_vs_measurement(runs.drop(columns="steps"), {})


def test_comm_model_pipeline_reports_or_raises_failures():
    runs = _model_runs()
    one_op = _model_spans().iloc[:2]  # a single allreduce: too few points for two unknowns
    failed = commodel.comm_model_vs_measurement(runs, {"c-np2": one_op})
    assert "need >= 3 allreduces" in failed["error"] and "fit" not in failed
    with pytest.raises(ValueError, match="need >= 3 allreduces"):
        commodel.comm_model_vs_measurement(runs, {"c-np2": one_op}, strict=True)
    # a measured step (1 ms / 2 steps) shorter than the modelled transfers: no prediction
    fast = runs.assign(steady_epoch_time_s=0.001)
    model = commodel.comm_model_vs_measurement(fast, {"c-np2": _model_spans()})
    assert "exceeds the measured step time" in model["prediction_error"]
    assert "fit" in model and "run" not in model
    with pytest.raises(ValueError, match="exceeds the measured step time"):
        commodel.comm_model_vs_measurement(fast, {"c-np2": _model_spans()}, strict=True)
