"""Notebook 01's helpers: the estimates (pure) and the real-process demos (Gloo on 127.0.0.1)."""

from __future__ import annotations

import doctest
import itertools
import math
import os

import numpy as np
import pandas as pd
import pytest

from workshop.analysis import parallelism as est
from workshop.launch import parallelism as demo

# --------------------------------------------------------------------------------------------
# Layer tables against published counts and against the torch models


@pytest.mark.parametrize("model", ["resnet50", "vgg19", "gpt2-small", "gpt2-xl"])
def test_parameter_counts_match_the_literature(model):
    assert est.layer_table(model)["params"].sum() == est.LITERATURE[model]["params"]


@pytest.mark.parametrize("model", ["resnet50", "vgg19"])
def test_cnn_macs_match_torchvision(model):
    gmacs = est.layer_table(model)["macs"].sum() / 1e9
    assert gmacs == pytest.approx(est.LITERATURE[model]["gmacs"], abs=0.005)


def _torch_outputs(model, x):
    """(module, output numel, input shape) of every leaf module in a forward pass."""
    seen = []
    hooks = [
        m.register_forward_hook(lambda m, i, o: seen.append((m, o.numel(), tuple(i[0].shape))))
        for m in model.modules()
        if not list(m.children())
    ]
    model(x)
    for h in hooks:
        h.remove()
    return seen


def _mnist_net():
    from workshop.train.torch_train import build_model

    return build_model("mnist")


def _materials_net():
    from workshop.train.materials import torch_model

    return torch_model()


@pytest.mark.parametrize(
    "model, build, shape",
    [("mnist-cnn", _mnist_net, (1, 1, 28, 28)), ("materials-cnn", _materials_net, (1, 2, 128))],
)
def test_workshop_models_match_their_torch_definition(model, build, shape):
    torch = pytest.importorskip("torch")
    net = build()
    table = est.layer_table(model)
    assert table["params"].sum() == sum(p.numel() for p in net.parameters())
    outputs = _torch_outputs(net, torch.zeros(shape))
    stored = [n for m, n, _ in outputs if not isinstance(m, torch.nn.Flatten)]
    assert table["activation_bytes"].tolist() == [4 * n for n in stored]
    macs = 0
    for m, n, _ in outputs:
        if isinstance(m, torch.nn.Conv1d | torch.nn.Conv2d):
            macs += n * m.in_channels * math.prod(m.kernel_size)
        elif isinstance(m, torch.nn.Linear):
            macs += n * m.in_features
    assert table["macs"].sum() == macs


def test_mlp_table_matches_the_demo_model():
    torch = pytest.importorskip("torch")
    cfg = demo.DemoConfig()
    blocks = demo._build_blocks(cfg)
    n = sum(p.numel() for b in blocks for p in b.parameters())
    assert est.mlp_layer_table(cfg.widths)["params"].sum() == n
    assert isinstance(blocks[0][0], torch.nn.Linear)
    with pytest.raises(ValueError, match="positive widths"):
        est.mlp_layer_table([5])


def test_transformer_activations_follow_korthikanti():
    # with 2-byte values the per-layer formula is s b h (34 + 5 a s / h) (Korthikanti 2022)
    s, h, a = 1024, 768, 12
    block = est.layer_table("gpt2-small").query("kind == 'transformer_block'").iloc[0]
    fp32 = s * h * (16 * 4 + 2) + a * s * s * (2 * 4 + 1)
    assert block["activation_bytes"] == fp32
    fp16 = s * h * (16 * 2 + 2) + a * s * s * (2 * 2 + 1)
    assert fp16 == s * h * (34 + 5 * a * s / h)


def test_unknown_model_is_named():
    with pytest.raises(KeyError, match="alexnet"):
        est.layer_table("alexnet")


# --------------------------------------------------------------------------------------------
# Memory, balance and the parallelism helper


@pytest.mark.parametrize("optimizer, values", [("sgd", 2), ("sgd_momentum", 3), ("adam", 4)])
def test_model_state_bytes_per_optimizer(optimizer, values):
    e = est.model_estimates(optimizer=optimizer).set_index("model")
    assert (e["state_bytes"] == e["params"] * 4 * values).all()
    assert (e["activation_bytes"] == e["activation_bytes_per_sample"] * e["batch_per_gpu"]).all()
    assert (e["total_bytes"] == e["state_bytes"] + e["activation_bytes"]).all()
    assert (e["train_flops_per_sample"] == 3 * e["fwd_flops_per_sample"]).all()


def test_model_estimates_inputs_are_checked():
    with pytest.raises(ValueError, match="optimizer"):
        est.model_estimates(optimizer="lamb")
    with pytest.raises(ValueError, match="batch_per_gpu"):
        est.model_estimates(batch_per_gpu=0)
    with pytest.raises(ValueError, match="'broken'.*activation_bytes"):
        est.model_estimates(extra={"broken": pd.DataFrame({"params": [1], "macs": [1]})})


def test_model_estimates_extra_models_and_batch():
    e = est.model_estimates(extra={"mlp": est.mlp_layer_table([4, 3, 2])}, batch_per_gpu=5)
    row = e.set_index("model").loc["mlp"]
    assert row["params"] == 23 and row["batch_per_gpu"] == 5
    assert len(e) == len(est.MODELS) + 1


def _row(state, per_sample, batch=10, model="m"):
    return {
        "model": model,
        "state_bytes": state,
        "activation_bytes_per_sample": per_sample,
        "batch_per_gpu": batch,
    }


def test_choose_parallelism_data_parallel_when_everything_fits():
    d = est.choose_parallelism(_row(100, 10), 1000, reserve_fraction=0.0)
    assert d["strategy"] == "data parallel"
    assert d["need_bytes"] == 200 and d["max_batch_per_gpu"] == 90
    assert d["min_gpus_model_parallel"] == 1
    assert "fit" in d["reason"]


def test_choose_parallelism_smaller_batch_when_only_the_state_fits():
    d = est.choose_parallelism(_row(500, 100, batch=8), 1000, reserve_fraction=0.0)
    assert d["strategy"] == "data parallel (smaller batch)"
    assert d["max_batch_per_gpu"] == 5
    assert "at most 5 per GPU" in d["reason"]


def test_choose_parallelism_model_parallel_when_the_state_does_not_fit():
    d = est.choose_parallelism(_row(2500, 100, batch=5), 1000, reserve_fraction=0.0)
    assert d["strategy"] == "model parallel"
    assert d["min_gpus_model_parallel"] == 3  # (2500 + 500) / 1000
    assert "alone" in d["reason"] and ">= 3 GPUs" in d["reason"]
    # the state fits, one sample's activations do not
    d = est.choose_parallelism(_row(900, 200, batch=1), 1000, reserve_fraction=0.0)
    assert d["strategy"] == "model parallel" and "one sample" in d["reason"]


def test_choose_parallelism_reserve_and_errors():
    d = est.choose_parallelism(_row(100, 10), 1000, reserve_fraction=0.5)
    assert d["usable_bytes"] == 500 and d["max_batch_per_gpu"] == 40
    with pytest.raises(ValueError, match="state_bytes"):
        est.choose_parallelism({"model": "x"}, 1000)
    with pytest.raises(ValueError, match="reserve_fraction"):
        est.choose_parallelism(_row(1, 1), 1000, reserve_fraction=1.0)
    with pytest.raises(ValueError, match="gpu_memory_bytes"):
        est.choose_parallelism(_row(1, 1), 0)


def test_seed003_rule_on_an_11gb_gpu():
    """Small CNNs: data parallel; GPT-2 XL (1.5B parameters, Adam): model parallel."""
    fit = est.parallelism_table(est.model_estimates(), est.gpu_memory_bytes("GTX 1080 Ti"))
    strategy = fit.set_index("model")["strategy"]
    assert strategy["mnist-cnn"] == strategy["materials-cnn"] == "data parallel"
    assert strategy["resnet50"] == "data parallel"
    assert strategy["gpt2-xl"] == "model parallel"
    with pytest.raises(KeyError, match="H100"):
        est.gpu_memory_bytes("H100")


def test_data_parallel_balance():
    e = est.model_estimates()
    b = est.data_parallel_balance(e, n_workers=4, sustained_flops=1e12, bandwidth=1e9, alpha_s=0)
    row = b.set_index("model").loc["resnet50"]
    assert row["allreduce_bytes_per_worker"] == pytest.approx(1.5 * row["grad_bytes"])
    assert row["allreduce_s"] == pytest.approx(row["allreduce_bytes_per_worker"] / 1e9)
    assert row["compute_s"] == pytest.approx(row["train_flops_per_sample"] * 32 / 1e12)
    ratio = b.set_index("model")["compute_to_comm"]
    assert ratio["resnet50"] > 1 > ratio["mnist-cnn"] > ratio["materials-cnn"]
    with pytest.raises(ValueError, match="n_workers"):
        est.data_parallel_balance(e, n_workers=1)


# --------------------------------------------------------------------------------------------
# Ring allreduce vs parameter server


def test_ring_and_parameter_server_formulas():
    c = est.exchange_costs([1, 2, 8], 1e6, alpha_s=0.0, bandwidth=1e9)
    assert c["ring_s"].tolist() == pytest.approx([0.0, 1e-3, 1.75e-3])
    assert c["ps_s"].tolist() == pytest.approx([2e-3, 4e-3, 16e-3])
    assert np.isnan(c["ps_over_ring"].iloc[0])
    # bandwidth terms only: PS / ring = N^2 / (N - 1)
    assert c["ps_over_ring"].iloc[2] == pytest.approx(64 / 7)
    assert (c["ring_bytes_per_worker"] < 2e6).all()
    assert c["ps_bytes_server_link"].tolist() == [1e6, 2e6, 8e6]


def test_sharded_parameter_servers_and_several_sizes():
    one = est.parameter_server_s(8, 1e6, 0.0, 1e9, servers=1)
    eight = est.parameter_server_s(8, 1e6, 0.0, 1e9, servers=8)
    assert one == pytest.approx(8 * eight) and eight == pytest.approx(2e-3)
    c = est.exchange_costs([2, 4], [8, 1e6])
    assert c["bytes"].tolist() == [8, 8, 1e6, 1e6]
    with pytest.raises(ValueError, match="servers"):
        est.parameter_server_s(2, 1, 0, 1, servers=0)
    with pytest.raises(ValueError, match=">= 1"):
        est.exchange_costs([0, 2], 1e6)


@pytest.mark.parametrize("n", [3, 8, 64])
def test_crossover_is_where_ring_and_server_cost_the_same(n):
    alpha, bw = 5e-6, 12.5e9
    m = est.crossover_bytes(n, alpha_s=alpha, bandwidth=bw)
    assert est.ring_allreduce_time_s(n, m, alpha, bw) == pytest.approx(
        est.parameter_server_s(n, m, alpha, bw)
    )
    assert est.ring_allreduce_time_s(n, m / 10, alpha, bw) > est.parameter_server_s(
        n, m / 10, alpha, bw
    )
    assert est.ring_allreduce_time_s(n, m * 10, alpha, bw) < est.parameter_server_s(
        n, m * 10, alpha, bw
    )


def test_two_workers_never_favour_the_server():
    assert est.crossover_bytes(2) == 0.0
    c = est.exchange_costs([2], [1, 1e3, 1e9])
    assert (c["ring_s"] <= c["ps_s"]).all()


def test_pipeline_bubble():
    assert est.pipeline_bubble_fraction(2, 1) == 0.5
    assert est.pipeline_bubble_fraction(4, 5) == pytest.approx(3 / 8)
    assert est.pipeline_bubble_fraction(1, 3) == 0
    with pytest.raises(ValueError):
        est.pipeline_bubble_fraction(2, 0)


# --------------------------------------------------------------------------------------------
# Summaries of demo events (synthetic events with known answers)


def _events(rows):
    return pd.DataFrame(rows, columns=est.EVENT_COLUMNS)


def test_stage_utilisation_on_known_events():
    # step 0 is warm-up, over at 0.0 s; step 1 spans 0.0 .. 1.0 s
    ev = _events(
        [
            (0, 0, -1, "forward", "compute", -5.0, 5.0),
            (0, 1, -1, "forward", "compute", 0.0, 0.25),
            (0, 1, -1, "recv_gradient", "communication", 0.25, 0.5),
            (0, 1, -1, "backward", "compute", 0.75, 0.25),
            (1, 1, -1, "recv_activation", "communication", 0.0, 0.25),
            (1, 1, -1, "forward", "compute", 0.25, 0.2),
            (1, 1, -1, "backward", "compute", 0.45, 0.3),
        ]
    )
    u = est.stage_utilisation(ev).set_index("rank")
    assert u.loc[0, "wall_s"] == pytest.approx(1.0)
    assert u.loc[0, "idle_fraction"] == pytest.approx(0.5)
    assert u.loc[1, "compute_s"] == pytest.approx(0.5)
    assert u.loc[1, "other_s"] == pytest.approx(0.25)
    # rank 1 entered step 1 while rank 0 was still warming up: clipped to the common window
    early = pd.concat([ev, _events([(1, 2, -1, "recv_activation", "communication", -1, 1.5)])])
    u = est.stage_utilisation(early).set_index("rank")
    assert u.loc[1, "wall_s"] == pytest.approx(1.0)
    assert u.loc[1, "communication_s"] == pytest.approx(0.25 + 0.5)
    st = est.step_times(ev)
    assert st["step"].tolist() == [1]
    assert st.loc[0, "step_s"] == pytest.approx(1.0)
    assert st.loc[0, "compute_s"] == pytest.approx(0.5)
    assert st.loc[0, "communication_s"] == pytest.approx(0.375)


def test_compare_runs_speedup_and_errors():
    single = _events([(0, s, -1, "fb", "compute", s * 1.0, 1.0) for s in range(3)])
    double = _events([(r, s, -1, "fb", "compute", s * 0.5, 0.5) for s in range(3) for r in (0, 1)])
    t = est.compare_runs({"one": single, "two": double})
    assert t["speedup"].tolist() == pytest.approx([1.0, 2.0])
    assert t["processes"].tolist() == [1, 2]
    parts = t["compute_s"] + t["communication_s"] + t["other_s"]
    assert parts.to_numpy() == pytest.approx(t["step_s"].to_numpy())
    with pytest.raises(ValueError, match="warm-up"):
        est.step_times(single, warmup_steps=5)
    with pytest.raises(ValueError, match="category"):
        est.stage_utilisation(single.drop(columns="category"))
    with pytest.raises(ValueError, match="no runs"):
        est.compare_runs({})


def test_max_param_diff():
    a = {"w": np.array([1.0, 2.0], dtype=np.float32)}
    assert est.max_param_diff(a, {"w": np.array([1.0, 2.5])}) == 0.5
    with pytest.raises(ValueError, match="only one set.*'v'"):
        est.max_param_diff(a, {"w": a["w"], "v": a["w"]})
    with pytest.raises(ValueError, match="shapes"):
        est.max_param_diff(a, {"w": np.zeros(3)})


@pytest.mark.parametrize(
    "modules",
    [(est.layers, est.choice, est.exchange, est.demos), (demo,)],
    ids=["analysis", "launch"],
)
def test_docstring_examples(modules):
    results = [doctest.testmod(module) for module in modules]
    assert sum(r.attempted for r in results) > 0 and sum(r.failed for r in results) == 0


# --------------------------------------------------------------------------------------------
# Pure parts of the launcher


def test_split_layers_is_optimal():
    rng = np.random.default_rng(0)
    for _ in range(20):
        costs = rng.integers(1, 20, size=rng.integers(2, 7)).tolist()
        for stages in range(1, len(costs) + 1):
            got = demo.split_layers(costs, stages)
            assert got[0][0] == 0 and got[-1][1] == len(costs)
            assert all(a[1] == b[0] and a[0] < a[1] for a, b in itertools.pairwise(got))
            best = min(
                max(sum(costs[a:b]) for a, b in zip((0, *cuts), (*cuts, len(costs)), strict=True))
                for cuts in itertools.combinations(range(1, len(costs)), stages - 1)
            )
            assert max(sum(costs[a:b]) for a, b in got) == best
    with pytest.raises(ValueError, match="3 layers into 4"):
        demo.split_layers([1, 2, 3], 4)


def test_demo_config_checks():
    with pytest.raises(ValueError, match="not divisible by 3"):
        demo.DemoConfig(global_batch=64).check(3)
    with pytest.raises(ValueError, match="widths"):
        demo.DemoConfig(widths=(4,)).check(1)
    demo.DemoConfig().check(2)


# --------------------------------------------------------------------------------------------
# Real processes (Gloo workers: live)

SMALL = demo.DemoConfig(widths=(32, 64, 64, 32, 10), global_batch=32, steps=4, lr=0.3)


@pytest.fixture(scope="module")
def workers(cpu_lock_module):
    """Two real processes in one Gloo group, shared by the tests below (start-up ~ seconds)."""
    with demo.Workers(2, timeout_s=60) as w:
        yield w


@pytest.fixture(scope="module")
def single(workers):
    return workers.single_process(SMALL)


@pytest.mark.live
def test_workers_started(workers):
    assert workers.info["rank"].tolist() == [0, 1]
    assert workers.info["pid"].nunique() == 2 and os.getpid() not in workers.info["pid"].tolist()


@pytest.mark.live
def test_data_parallel_matches_one_process_with_the_global_batch(workers, single):
    dp = workers.data_parallel(SMALL)
    moved = est.max_param_diff(single["initial"], single["params"])
    assert moved > 1e-3  # training did move the parameters: the comparison means something
    assert est.max_param_diff(single["params"], dp["params"]) < 1e-5
    assert dp["rank_max_diff"] == 0.0
    assert dp["loss"]["loss"].to_numpy() == pytest.approx(single["loss"]["loss"], rel=1e-5)
    ev = dp["events"]
    assert set(ev["phase"]) == {"forward_backward", "allreduce", "optimizer"}
    assert ev.groupby("rank")["step"].nunique().tolist() == [SMALL.steps] * 2
    assert (est.step_times(ev)["step_s"] > 0).all()
    # the other work while it ran, for the lesson's sentence on the speedup (the workers' own
    # CPU time is not in it: tests/test_quiet_recording.py checks the accounting)
    assert dp["foreign_cores"] >= 0.0 and workers.last_foreign_cores == dp["foreign_cores"]


@pytest.mark.live
@pytest.mark.parametrize("microbatches", [1, 4])
def test_model_parallel_matches_one_process(workers, single, microbatches):
    mp = workers.model_parallel(SMALL, microbatches=microbatches)
    assert est.max_param_diff(single["params"], mp["params"]) < 1e-5
    assert mp["stages"]["first_layer"].tolist()[0] == 0
    assert mp["stages"]["last_layer"].tolist()[-1] == len(SMALL.widths) - 1
    assert mp["loss"]["loss"].to_numpy() == pytest.approx(single["loss"]["loss"], rel=1e-5)
    ev = mp["events"]
    phases = ev.groupby("rank")["phase"].apply(set)
    assert "recv_gradient" in phases[0] and "recv_activation" in phases[1]
    assert (
        ev.query("phase == 'forward'").groupby("rank").size().tolist()
        == [SMALL.steps * microbatches] * 2
    )
    u = est.stage_utilisation(ev)
    assert ((u["idle_fraction"] > 0) & (u["idle_fraction"] < 1)).all()
    assert (u["communication_s"] > 0).all()


@pytest.mark.live
def test_bad_requests_are_refused_before_anything_runs(workers):
    with pytest.raises(ValueError, match="micro-batches"):
        workers.model_parallel(SMALL, microbatches=5)
    with pytest.raises(ValueError, match="not divisible by 2"):
        workers.data_parallel(demo.DemoConfig(global_batch=33))


@pytest.mark.live
def test_a_failing_rank_reports_its_traceback(workers):
    with pytest.raises(RuntimeError, match="(?s)rank 0:.*KeyError"):
        workers._run("no_such_job", SMALL)
    # the workers survive a failed job
    assert workers.data_parallel(SMALL)["processes"] == 2


@pytest.mark.live
def test_three_stage_pipeline_and_close(cpu_lock_module):
    """A middle stage receives activations and sends gradients both ways."""
    with demo.Workers(3, timeout_s=60) as w:
        ref = w.single_process(SMALL)
        mp = w.model_parallel(SMALL, microbatches=2)
        procs = list(w._procs)
    assert est.max_param_diff(ref["params"], mp["params"]) < 1e-5
    assert mp["stages"]["rank"].tolist() == [0, 1, 2]
    assert all(p.poll() is not None for p in procs)  # stopped on leaving the block
    with pytest.raises(RuntimeError, match="closed"):
        w.single_process(SMALL)


@pytest.mark.parametrize("n", [2, 3, 8])
def test_ring_allreduce_schedule_sums_every_chunk_everywhere(n):
    # Play the schedule on numbers: worker w starts with chunk c = 10 w + c; after the
    # reduce-scatter adds and the allgather copies, every worker holds every chunk's sum over
    # the workers, in 2 (N-1) steps of one chunk per worker.
    schedule = est.ring_allreduce_schedule(n)
    held = [[10 * w + c for c in range(n)] for w in range(n)]
    for _step, rows in schedule.groupby("step"):
        sent = [
            (r.to_worker, r.chunk, held[r.worker][r.chunk], r.phase) for r in rows.itertuples()
        ]
        for to, chunk, value, phase in sent:
            held[to][chunk] = held[to][chunk] + value if phase == "reduce-scatter" else value
    want = [sum(10 * w + c for w in range(n)) for c in range(n)]
    assert all(row == want for row in held)
    assert schedule.step.nunique() == 2 * (n - 1)
    assert (schedule.groupby("step").worker.nunique() == n).all()
