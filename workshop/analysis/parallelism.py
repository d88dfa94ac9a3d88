"""Data vs model parallelism on paper: memory, compute per communication, which one fits, and
what the gradient exchange costs (ring allreduce vs parameter server).

Seed 003 states the rule this module puts numbers on: *data parallelism* whenever the whole
model (parameters, gradients, optimizer state and the activations of a batch) fits on one GPU;
*model parallelism* only when it does not. What is communicated differs: data parallelism
exchanges parameter gradients once per step, model parallelism exchanges neuron outputs
(activations) and their gradients at every layer boundary, for every sample.

The exchange costs are latency-bandwidth *models* of one algorithm each. What Horovod runs is
the choice of the library under it: Horovod 0.28.1 sets no algorithm for Gloo, which then runs
a ring (``horovod/common/ops/gloo_operations.cc:67-86``, Gloo ``allreduce.cc:136-137``);
``MPI_Allreduce`` and ``ncclAllReduce`` pick their own (recursive doubling, ring, Rabenseifner
...; ring or tree) by message size and group size.

Everything here is pure (numbers in, DataFrames / dicts out); no torch, no matplotlib.

Layer tables are computed from the architectures, and the totals are checked against published
counts (:data:`LITERATURE`, with sources) by the tests, so the calculators can be trusted for
models that have no published count (the workshop's own networks).

Conventions:

* ``macs``: multiply-accumulates of the forward pass for one sample (conv and linear layers,
  attention products; element-wise layers are not counted). FLOPs = 2 x MACs; one training step
  costs about 3 x the forward FLOPs (backward = gradients w.r.t. inputs and w.r.t. weights).
* ``activation_bytes``: what the forward pass keeps for the backward pass, **rough**: every
  layer output counted once at 4 bytes per value (fp32); frameworks save less (in-place ReLU,
  recomputation) and allocate more (workspaces, fragmentation), so treat it as +-2x.
  Transformers use the per-layer formula of Korthikanti et al. 2022 (Reducing Activation
  Recomputation in Large Transformer Models, sec. 4.1) with 4-byte values and 1-byte dropout
  masks: ``s h (16 v + 2) + a s^2 (2 v + 1)`` bytes per layer and sequence (v = 4).
* Memory sizes are bytes; GPU memory presets are GiB (2**30 bytes) as sold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from workshop.frames import require_columns
from workshop.rules import ring_allreduce_time_s
from workshop.units import format_bytes

VALUE_BYTES = 4  # fp32 parameters, gradients, optimizer state and activations
MASK_BYTES = 1  # dropout masks (bool)
TRAIN_FLOPS_PER_FORWARD = 3.0  # forward + backward (inputs) + backward (weights)

OPTIMIZER_STATES = {"sgd": 0, "sgd_momentum": 1, "adam": 2}
"""Values of optimizer state kept per parameter (momentum: 1; Adam: first and second moment)."""

LITERATURE = {
    "resnet50": {
        "params": 25_557_032,
        "gmacs": 4.09,
        "source": "torchvision ResNet50_Weights.IMAGENET1K_V1 model card (25,557,032 params, "
        "4.09 GFLOPS counted as multiply-adds, 224x224 input); He et al. 2016",
    },
    "vgg19": {
        "params": 143_667_240,
        "gmacs": 19.63,
        "source": "torchvision VGG19_Weights.IMAGENET1K_V1 model card (143,667,240 params, "
        "19.63 GFLOPS counted as multiply-adds, 224x224 input); Simonyan & Zisserman 2015",
    },
    "gpt2-small": {
        "params": 124_439_808,
        "source": "Hugging Face `gpt2` checkpoint, num_parameters() (Radford et al. 2019 "
        "quote 117M); tied input/output embedding",
    },
    "gpt2-xl": {
        "params": 1_557_611_200,
        "source": "Hugging Face `gpt2-xl` checkpoint, num_parameters() (Radford et al. 2019: "
        "1.5B)",
    },
    "materials-cnn-seed003": {
        "params": 153_000,
        "bytes": 0.61e6,
        "source": "seed 003: 'small network, only 153tsd parameters, 0.61MB size'",
    },
}
"""Published counts the layer calculators are checked against (tests) and the notebook cites."""

GPUS = {
    "GTX 1080 Ti": {"memory_gib": 11, "fp32_tflops": 11.3},
    "Tesla K80 (one GPU)": {"memory_gib": 12, "fp32_tflops": 4.37},
    "V100 16GB": {"memory_gib": 16, "fp32_tflops": 15.7},
    "A100 40GB": {"memory_gib": 40, "fp32_tflops": 19.5},
}
"""GPU memory and peak FP32 throughput from the vendors' datasheets (K80: half of the two-GPU
board's boost figure). Seed 003 names K80 and 1080 Ti GPUs and 'smallest GPU memory on hpdlf is
11GB'. Peak throughput is an upper bound; training reaches a fraction of it."""


# --------------------------------------------------------------------------------------------
# Layer tables


class _Net:
    """Walks an architecture layer by layer, tracking the output shape and recording rows.

    Every layer method returns the walker, so layers chain: ``net.conv(...).relu(...)``.
    """

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape
        self.rows: list[dict] = []

    def _add(self, layer: str, kind: str, params: int, macs: int, shape: tuple[int, ...]) -> _Net:
        self.shape = shape
        self.rows.append(
            {
                "layer": layer,
                "kind": kind,
                "params": int(params),
                "macs": int(macs),
                "activation_bytes": int(math.prod(shape) * VALUE_BYTES),
            }
        )
        return self

    def conv(
        self, layer: str, out: int, k: int, stride: int = 1, pad: int = 0, bias: bool = True
    ) -> _Net:
        cin, *spatial = self.shape
        out_spatial = tuple((s + 2 * pad - k) // stride + 1 for s in spatial)
        kernel = k ** len(spatial)
        params = out * cin * kernel + (out if bias else 0)
        macs = math.prod(out_spatial) * out * cin * kernel
        return self._add(layer, f"conv{len(spatial)}d", params, macs, (out, *out_spatial))

    def batchnorm(self, layer: str) -> _Net:
        return self._add(layer, "batchnorm", 2 * self.shape[0], 0, self.shape)

    def relu(self, layer: str) -> _Net:
        return self._add(layer, "relu", 0, 0, self.shape)

    def add(self, layer: str) -> _Net:
        return self._add(layer, "add", 0, 0, self.shape)

    def maxpool(self, layer: str, k: int, stride: int | None = None, pad: int = 0) -> _Net:
        stride = stride or k
        c, *spatial = self.shape
        out_spatial = tuple((s + 2 * pad - k) // stride + 1 for s in spatial)
        return self._add(layer, "maxpool", 0, 0, (c, *out_spatial))

    def global_avgpool(self, layer: str) -> _Net:
        return self._add(layer, "avgpool", 0, 0, (self.shape[0],))

    def flatten(self) -> _Net:
        self.shape = (math.prod(self.shape),)  # a view: nothing new is stored
        return self

    def linear(self, layer: str, out: int, bias: bool = True) -> _Net:
        (fin,) = self.shape
        return self._add(layer, "linear", fin * out + (out if bias else 0), fin * out, (out,))


def mlp_layer_table(widths: Iterable[int]) -> pd.DataFrame:
    """Layer table of a multi-layer perceptron Linear(w0, w1), ReLU, ..., Linear(w_{n-1}, w_n).

    Args:
        widths: feature sizes, input first (e.g. the demo's ``(256, 512, 512, 512, 256, 10)``).

    Returns:
        DataFrame as :func:`layer_table`.

    >>> int(mlp_layer_table([4, 3, 2])["params"].sum())  # 4*3+3 + 3*2+2
    23
    """
    widths = [int(w) for w in widths]
    if len(widths) < 2 or min(widths) < 1:
        raise ValueError(f"mlp_layer_table: need >= 2 positive widths, got {widths}")
    net = _Net((widths[0],))
    for i, out in enumerate(widths[1:]):
        net.linear(f"{i}.linear", out)
        if i < len(widths) - 2:
            net.relu(f"{i}.relu")
    return pd.DataFrame(net.rows)


def _mnist_cnn() -> list[dict]:
    """The workshop's MNIST network (workshop/train/torch_train.py: build_model('mnist'))."""
    net = _Net((1, 28, 28))
    net.conv("conv1", 16, 5).relu("relu1").maxpool("pool1", 2)
    net.conv("conv2", 32, 5).relu("relu2").maxpool("pool2", 2)
    net.flatten()
    net.linear("fc1", 128).relu("relu3").linear("fc2", 10)
    return net.rows


def _materials_cnn(length: int = 128) -> list[dict]:
    """The workshop's 1-D CNN for the materials workload (workshop/train/materials.py)."""
    net = _Net((2, length))
    net.conv("conv1", 8, 5).relu("relu1").maxpool("pool1", 2)
    net.conv("conv2", 16, 5).relu("relu2").maxpool("pool2", 2)
    net.flatten()
    net.linear("fc1", 8).relu("relu3").linear("fc2", 2)
    return net.rows


def _vgg19() -> list[dict]:
    """VGG-19 (configuration E) on a 224x224 image, as in torchvision (no batch norm)."""
    net = _Net((3, 224, 224))
    for stage, (width, convs) in enumerate([(64, 2), (128, 2), (256, 4), (512, 4), (512, 4)]):
        for i in range(convs):
            net.conv(f"conv{stage + 1}_{i + 1}", width, 3, pad=1)
            net.relu(f"relu{stage + 1}_{i + 1}")
        net.maxpool(f"pool{stage + 1}", 2)
    net.flatten()
    net.linear("fc6", 4096).relu("relu6")
    net.linear("fc7", 4096).relu("relu7")
    net.linear("fc8", 1000)
    return net.rows


def _resnet50() -> list[dict]:
    """ResNet-50 (torchvision v1.5: stride in the 3x3 conv) on a 224x224 image."""
    net = _Net((3, 224, 224))
    net.conv("conv1", 64, 7, stride=2, pad=3, bias=False)
    net.batchnorm("bn1").relu("relu1").maxpool("maxpool", 3, 2, 1)
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for b in range(blocks):
            name = f"layer{stage + 1}.{b}"
            stride = 2 if stage > 0 and b == 0 else 1
            block_input = net.shape
            net.conv(f"{name}.conv1", width, 1, bias=False)
            net.batchnorm(f"{name}.bn1").relu(f"{name}.relu1")
            net.conv(f"{name}.conv2", width, 3, stride=stride, pad=1, bias=False)
            net.batchnorm(f"{name}.bn2").relu(f"{name}.relu2")
            net.conv(f"{name}.conv3", 4 * width, 1, bias=False)
            net.batchnorm(f"{name}.bn3")
            if b == 0:  # projection shortcut from the block input
                main = net.shape
                net.shape = block_input
                net.conv(f"{name}.downsample", 4 * width, 1, stride=stride, bias=False)
                net.batchnorm(f"{name}.downsample_bn")
                assert net.shape == main, (net.shape, main)
            net.add(f"{name}.add").relu(f"{name}.relu3")
    net.global_avgpool("avgpool")
    net.linear("fc", 1000)
    return net.rows


def transformer_layer_table(
    n_layer: int, d_model: int, n_head: int, n_ctx: int, vocab: int
) -> pd.DataFrame:
    """Layer table of a GPT-2-style decoder; one sample = one sequence of ``n_ctx`` tokens.

    Per block: attention (QKV and output projections, 4 d^2 + 4 d params) and MLP (8 d^2 + 5 d),
    two layer norms (4 d): 12 d^2 + 13 d. Embeddings: token (vocab x d, tied with the output
    layer) and position (n_ctx x d). MACs per sequence: projections and MLP s * 12 d^2,
    attention scores and weighted sum 2 s^2 d (full s x s, not halved for the causal mask),
    output layer s d vocab. Activations: the Korthikanti et al. formula (module docstring)
    plus embedding output, final layer norm and the logits (s x vocab), at 4 bytes per value.

    Returns:
        DataFrame as :func:`layer_table`.
    """
    s, d, a, v = n_ctx, d_model, n_head, VALUE_BYTES
    rows = [
        {
            "layer": "embedding",
            "kind": "embedding",
            "params": vocab * d + n_ctx * d,
            "macs": 0,
            "activation_bytes": s * d * (v + MASK_BYTES),
        }
    ]
    for i in range(n_layer):
        rows.append(
            {
                "layer": f"block{i}",
                "kind": "transformer_block",
                "params": 12 * d * d + 13 * d,
                "macs": s * 12 * d * d + 2 * s * s * d,
                "activation_bytes": s * d * (16 * v + 2 * MASK_BYTES)
                + a * s * s * (2 * v + MASK_BYTES),
            }
        )
    rows.append(
        {
            "layer": "ln_f",
            "kind": "layernorm",
            "params": 2 * d,
            "macs": 0,
            "activation_bytes": s * d * v,
        }
    )
    rows.append(
        {
            "layer": "lm_head",
            "kind": "linear (tied)",
            "params": 0,
            "macs": s * d * vocab,
            "activation_bytes": s * vocab * v,
        }
    )
    return pd.DataFrame(rows)


MODELS: dict[str, dict] = {
    "mnist-cnn": {
        "rows": _mnist_cnn,
        "sample": "28x28 image",
        "batch_per_gpu": 64,
        "source": "workshop/train/torch_train.py (build_model('mnist'))",
    },
    "materials-cnn": {
        "rows": _materials_cnn,
        "sample": "2 curves x 128 points",
        "batch_per_gpu": 75,
        "source": "workshop/train/materials.py (seed 003's shape, batch 75 = its baseline)",
    },
    "resnet50": {
        "rows": _resnet50,
        "sample": "224x224 image",
        "batch_per_gpu": 32,
        "source": LITERATURE["resnet50"]["source"],
    },
    "vgg19": {
        "rows": _vgg19,
        "sample": "224x224 image",
        "batch_per_gpu": 32,
        "source": LITERATURE["vgg19"]["source"],
    },
    "gpt2-small": {
        "rows": lambda: transformer_layer_table(12, 768, 12, 1024, 50257).to_dict("records"),
        "sample": "1024-token sequence",
        "batch_per_gpu": 8,
        "source": LITERATURE["gpt2-small"]["source"],
    },
    "gpt2-xl": {
        "rows": lambda: transformer_layer_table(48, 1600, 25, 1024, 50257).to_dict("records"),
        "sample": "1024-token sequence",
        "batch_per_gpu": 1,
        "source": LITERATURE["gpt2-xl"]["source"],
    },
}
"""Models with a layer table: builder, what one sample is, a typical per-GPU batch, source."""


def layer_table(model: str) -> pd.DataFrame:
    """Per-layer parameters, forward MACs and activation memory for one sample.

    Args:
        model: a key of :data:`MODELS` (``mnist-cnn``, ``materials-cnn``, ``resnet50``,
            ``vgg19``, ``gpt2-small``, ``gpt2-xl``).

    Returns:
        DataFrame, one row per layer: ``layer`` (name), ``kind``, ``params`` (count),
        ``macs`` (forward multiply-accumulates per sample), ``activation_bytes`` (kept for
        the backward pass, per sample, see the module docstring).

    >>> int(layer_table("mnist-cnn")["params"].sum())
    80202
    """
    if model not in MODELS:
        raise KeyError(f"layer_table: unknown model {model!r}; known: {sorted(MODELS)}")
    return pd.DataFrame(MODELS[model]["rows"]())


# --------------------------------------------------------------------------------------------
# Memory and compute per communication


_check_columns = require_columns


def model_estimates(
    tables: dict[str, pd.DataFrame] | None = None,
    *,
    extra: dict[str, pd.DataFrame] | None = None,
    optimizer: str = "adam",
    batch_per_gpu: int | None = None,
) -> pd.DataFrame:
    """Memory and compute of training each model, one row per model.

    Args:
        tables: model name -> layer table (columns as :func:`layer_table`); default: all of
            :data:`MODELS`.
        extra: more models appended to ``tables``, e.g. ``{"demo-mlp": mlp_layer_table(w)}``;
            models not in :data:`MODELS` get ``batch_per_gpu`` = 32 unless it is given.
        optimizer: ``sgd``, ``sgd_momentum`` or ``adam`` (state values per parameter).
        batch_per_gpu: samples per GPU for all models; default: each model's typical batch.

    Returns:
        DataFrame with ``model``, ``sample`` (what one sample is), ``params``,
        ``param_bytes``, ``grad_bytes``, ``optimizer_bytes`` (fp32),
        ``state_bytes`` (their sum), ``activation_bytes_per_sample``, ``batch_per_gpu``,
        ``activation_bytes`` (per GPU batch), ``total_bytes`` (state + activations),
        ``fwd_flops_per_sample`` (2 x MACs), ``train_flops_per_sample`` (3 x forward).
    """
    if optimizer not in OPTIMIZER_STATES:
        raise ValueError(f"model_estimates: optimizer must be one of {list(OPTIMIZER_STATES)}")
    if batch_per_gpu is not None and batch_per_gpu < 1:
        raise ValueError(f"model_estimates: batch_per_gpu must be >= 1, got {batch_per_gpu}")
    tables = tables if tables is not None else {name: layer_table(name) for name in MODELS}
    tables = {**tables, **(extra or {})}
    rows = []
    for name, table in tables.items():
        _check_columns(table, ["params", "macs", "activation_bytes"], f"model {name!r}")
        params = int(table["params"].sum())
        info = MODELS.get(name, {})
        batch = batch_per_gpu or info.get("batch_per_gpu", 32)
        act = int(table["activation_bytes"].sum())
        state = params * VALUE_BYTES * (2 + OPTIMIZER_STATES[optimizer])
        fwd = 2.0 * float(table["macs"].sum())
        rows.append(
            {
                "model": name,
                "sample": info.get("sample", "sample"),
                "params": params,
                "param_bytes": params * VALUE_BYTES,
                "grad_bytes": params * VALUE_BYTES,
                "optimizer_bytes": params * VALUE_BYTES * OPTIMIZER_STATES[optimizer],
                "state_bytes": state,
                "activation_bytes_per_sample": act,
                "batch_per_gpu": int(batch),
                "activation_bytes": act * batch,
                "total_bytes": state + act * batch,
                "fwd_flops_per_sample": fwd,
                "train_flops_per_sample": TRAIN_FLOPS_PER_FORWARD * fwd,
            }
        )
    return pd.DataFrame(rows)


def _scalar(x: np.ndarray) -> np.ndarray | float:
    """A 0-d result as a Python float, arrays unchanged."""
    return float(x) if np.ndim(x) == 0 else x


def parameter_server_s(
    n: int | np.ndarray, nbytes: float, alpha_s: float, bandwidth: float, servers: int = 1
):
    """Parameter-server exchange time: workers push gradients, then pull parameters.

    With one server its link carries N x bytes in each direction, so the exchange takes
    ``2 (alpha + N bytes / B)``; sharding the parameters over S servers divides the server-side
    traffic by S, but a worker still sends and receives ``bytes``:
    ``2 (alpha + max(N / S, 1) * bytes / B)``. (TensorFlow's parameter servers, which Horovod
    was written to replace: seed 003.)

    >>> round(parameter_server_s(4, 4e6, 10e-6, 1e9) * 1e3, 3)  # 2 x (10 us + 16 ms)
    32.02
    """
    if servers < 1:
        raise ValueError(f"parameter_server_s: servers must be >= 1, got {servers}")
    n = np.asarray(n, dtype=float)
    return _scalar(2 * (alpha_s + np.maximum(n / servers, 1.0) * np.asarray(nbytes) / bandwidth))


def data_parallel_balance(
    estimates: pd.DataFrame,
    *,
    n_workers: int = 8,
    sustained_flops: float = 10e12,
    bandwidth: float = 12.5e9,
    alpha_s: float = 5e-6,
) -> pd.DataFrame:
    """Compute vs gradient communication of one data-parallel step, per model.

    Args:
        estimates: output of :func:`model_estimates`.
        n_workers: data-parallel workers (GPUs).
        sustained_flops: FLOP/s a GPU really delivers on this training (not the peak).
        bandwidth: link bandwidth, bytes/s (12.5e9 = 100 Gb/s InfiniBand EDR, nominal).
        alpha_s: per-message latency, s.

    Returns:
        ``estimates`` with added columns ``n_workers``, ``train_flops_per_step`` (per worker,
        ``batch_per_gpu`` samples), ``allreduce_bytes_per_worker`` (ring traffic sent by one
        worker: 2 (N-1)/N x grad_bytes), ``flops_per_comm_byte`` (hardware-independent),
        ``compute_s``, ``allreduce_s`` (ring model, one fused allreduce of all gradients),
        ``compute_to_comm`` (compute_s / allreduce_s; < 1 means communication-bound unless
        it is overlapped with the backward pass).
    """
    _check_columns(estimates, ["train_flops_per_sample", "batch_per_gpu", "grad_bytes"], "balance")
    if n_workers < 2:
        raise ValueError(f"data_parallel_balance: n_workers must be >= 2, got {n_workers}")
    out = estimates.copy()
    out["n_workers"] = n_workers
    out["train_flops_per_step"] = out["train_flops_per_sample"] * out["batch_per_gpu"]
    out["allreduce_bytes_per_worker"] = 2 * (n_workers - 1) / n_workers * out["grad_bytes"]
    out["flops_per_comm_byte"] = out["train_flops_per_step"] / out["allreduce_bytes_per_worker"]
    out["compute_s"] = out["train_flops_per_step"] / sustained_flops
    out["allreduce_s"] = ring_allreduce_time_s(n_workers, out["grad_bytes"], alpha_s, bandwidth)
    out["compute_to_comm"] = out["compute_s"] / out["allreduce_s"]
    return out


def choose_parallelism(
    estimate: pd.Series | dict,
    gpu_memory_bytes: float,
    *,
    batch_per_gpu: int | None = None,
    reserve_fraction: float = 0.1,
) -> dict:
    """Which parallelism fits one model on a GPU of the given memory, and why.

    The rule of seed 003: data parallelism whenever the model fits (easier, and the work per
    synchronisation grows with the batch); model parallelism only when it does not.

    Args:
        estimate: one row of :func:`model_estimates` (needs ``model``, ``state_bytes``,
            ``activation_bytes_per_sample``, ``batch_per_gpu``).
        gpu_memory_bytes: memory of one GPU.
        batch_per_gpu: samples per GPU; default: the row's ``batch_per_gpu``.
        reserve_fraction: share of GPU memory kept for the framework, workspaces and
            fragmentation (not usable for the model).

    Returns:
        dict with ``model``, ``strategy`` (``data parallel``, ``data parallel (smaller
        batch)`` or ``model parallel``), ``reason`` (one sentence with the numbers),
        ``usable_bytes``, ``state_bytes``, ``activation_bytes`` (batch), ``need_bytes``,
        ``max_batch_per_gpu`` (samples that fit next to the model state; 0 if none),
        ``min_gpus_model_parallel`` (GPUs the model must at least be split over, assuming an
        even split of state and activations; 1 if it fits).
    """
    _check_choice_inputs(estimate, gpu_memory_bytes, reserve_fraction)
    batch = int(batch_per_gpu or estimate["batch_per_gpu"])
    usable = gpu_memory_bytes * (1 - reserve_fraction)
    state = float(estimate["state_bytes"])
    per_sample = float(estimate["activation_bytes_per_sample"])
    act = per_sample * batch
    need = state + act
    max_batch = max(0, int((usable - state) // per_sample)) if per_sample > 0 else batch
    if state + per_sample > usable:
        gpus = math.ceil(need / usable)
        strategy = "model parallel"
        reason = _model_parallel_reason(state, per_sample, usable, gpus)
    elif need > usable:
        gpus = 1
        strategy = "data parallel (smaller batch)"
        reason = (
            f"the model state ({format_bytes(state)}) fits, but {batch} samples need "
            f"{format_bytes(act)} of activations; at most {max_batch} per GPU fit in "
            f"{format_bytes(usable)}: data parallel with that batch (more GPUs or gradient "
            f"accumulation keep the global batch)"
        )
    else:
        gpus = 1
        strategy = "data parallel"
        reason = (
            f"state {format_bytes(state)} + activations of {batch} samples {format_bytes(act)} = "
            f"{format_bytes(need)} fit in {format_bytes(usable)} ({need / usable:.0%}): every GPU "
            f"holds the whole model"
        )
    return {
        "model": estimate["model"],
        "strategy": strategy,
        "reason": reason,
        "usable_bytes": usable,
        "state_bytes": state,
        "activation_bytes": act,
        "need_bytes": need,
        "max_batch_per_gpu": max_batch,
        "min_gpus_model_parallel": gpus,
    }


def _check_choice_inputs(
    estimate: pd.Series | dict, gpu_memory_bytes: float, reserve_fraction: float
) -> None:
    """Raise the ``ValueError`` of :func:`choose_parallelism` for a bad argument."""
    for key in ("model", "state_bytes", "activation_bytes_per_sample", "batch_per_gpu"):
        if key not in estimate:
            raise ValueError(f"choose_parallelism: the estimate has no {key!r}")
    if not 0 <= reserve_fraction < 1:
        raise ValueError(
            f"choose_parallelism: reserve_fraction must be in [0, 1), got {reserve_fraction}"
        )
    if gpu_memory_bytes <= 0:
        raise ValueError(
            f"choose_parallelism: gpu_memory_bytes must be > 0, got {gpu_memory_bytes}"
        )


def _model_parallel_reason(state: float, per_sample: float, usable: float, gpus: int) -> str:
    """Why the model must be split: what exceeds the usable memory, and over how many GPUs."""
    what = (
        f"parameters, gradients and optimizer state alone ({format_bytes(state)})"
        if state > usable
        else f"the state ({format_bytes(state)}) plus one sample's activations "
        f"({format_bytes(per_sample)})"
    )
    return (
        f"{what} exceed the usable {format_bytes(usable)} of one GPU: split the layers over "
        f">= {gpus} GPUs (pipeline), or shard the state / recompute activations"
    )


def parallelism_table(
    estimates: pd.DataFrame, gpu_memory_bytes: float, *, reserve_fraction: float = 0.1
) -> pd.DataFrame:
    """:func:`choose_parallelism` for every row of ``estimates`` (columns as its dict)."""
    return pd.DataFrame(
        [
            choose_parallelism(row, gpu_memory_bytes, reserve_fraction=reserve_fraction)
            for _, row in estimates.iterrows()
        ]
    )


def gpu_memory_bytes(name: str) -> float:
    """Memory of a GPU preset of :data:`GPUS`, in bytes."""
    if name not in GPUS:
        raise KeyError(f"gpu_memory_bytes: unknown GPU {name!r}; known: {sorted(GPUS)}")
    return GPUS[name]["memory_gib"] * 2.0**30


# --------------------------------------------------------------------------------------------
# Ring allreduce vs parameter server


def exchange_costs(
    n_workers: Iterable[int],
    nbytes: float | Iterable[float],
    *,
    alpha_s: float = 5e-6,
    bandwidth: float = 12.5e9,
    servers: int = 1,
) -> pd.DataFrame:
    """Time to exchange ``nbytes`` of gradients per step, ring allreduce vs parameter server.

    Args:
        n_workers: worker counts to evaluate (>= 1).
        nbytes: gradient bytes per worker (e.g. ``grad_bytes`` of :func:`model_estimates`);
            several sizes give one block of rows each.
        alpha_s: per-message latency, s.
        bandwidth: bytes/s of every link (worker and server links alike).
        servers: parameter servers the parameters are sharded over.

    Returns:
        DataFrame with ``n_workers``, ``bytes``, ``ring_s``, ``ps_s``, ``ps_over_ring``
        (NaN at N = 1, where the ring sends nothing), ``ring_bytes_per_worker`` (sent by each
        worker), ``ps_bytes_server_link`` (into, and again out of, the busiest server).
    """
    n = np.asarray(list(n_workers), dtype=int)
    if n.size == 0 or n.min() < 1:
        raise ValueError(f"exchange_costs: worker counts must be >= 1, got {n.tolist()}")
    if np.ndim(nbytes):
        return pd.concat(
            [
                exchange_costs(n, m, alpha_s=alpha_s, bandwidth=bandwidth, servers=servers)
                for m in nbytes
            ],
            ignore_index=True,
        )
    if nbytes <= 0 or bandwidth <= 0 or alpha_s < 0:
        raise ValueError("exchange_costs: need nbytes > 0, bandwidth > 0 and alpha_s >= 0")
    ring = ring_allreduce_time_s(n, nbytes, alpha_s, bandwidth)
    ps = parameter_server_s(n, nbytes, alpha_s, bandwidth, servers)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(n > 1, ps / np.where(ring > 0, ring, np.nan), np.nan)
    return pd.DataFrame(
        {
            "n_workers": n,
            "bytes": float(nbytes),
            "ring_s": ring,
            "ps_s": ps,
            "ps_over_ring": ratio,
            "ring_bytes_per_worker": 2 * (n - 1) / n * nbytes,
            "ps_bytes_server_link": n * nbytes / servers,
        }
    )


def crossover_bytes(n: int, *, alpha_s: float = 5e-6, bandwidth: float = 12.5e9) -> float:
    """Message size below which one parameter server beats the ring (latency wins).

    Solves ``2 (N-1) alpha + 2 (N-1)/N m / B = 2 alpha + 2 N m / B`` for m:
    ``m* = (N - 2) alpha B / (N - (N-1)/N)``. 0 for N <= 2 (the ring is never slower).

    >>> crossover_bytes(2)
    0.0
    """
    if n <= 2:
        return 0.0
    return (n - 2) * alpha_s * bandwidth / (n - (n - 1) / n)


def pipeline_bubble_fraction(stages: int, microbatches: int) -> float:
    """Idle share of each stage in a GPipe pipeline with equal stages: (S-1) / (M+S-1).

    Every stage waits S-1 stage-times while the pipeline fills and drains, and works M of them.

    >>> pipeline_bubble_fraction(2, 1), pipeline_bubble_fraction(2, 4)
    (0.5, 0.2)
    """
    if stages < 1 or microbatches < 1:
        raise ValueError("pipeline_bubble_fraction: stages and microbatches must be >= 1")
    return (stages - 1) / (microbatches + stages - 1)


# --------------------------------------------------------------------------------------------
# Results of the real-process demos (workshop.launch.parallelism)

EVENT_COLUMNS = ["rank", "step", "microbatch", "phase", "category", "start_s", "dur_s"]


def _window(events: pd.DataFrame, warmup_steps: int, where: str) -> pd.DataFrame:
    _check_columns(events, EVENT_COLUMNS, where)
    steady = events[events["step"] >= warmup_steps]
    if steady.empty:
        raise ValueError(f"{where}: no events after the {warmup_steps} warm-up step(s)")
    return steady


def stage_utilisation(events: pd.DataFrame, *, warmup_steps: int = 1) -> pd.DataFrame:
    """Busy vs waiting time of every process, in the steady state after the warm-up.

    The window is common to all ranks: from the moment the last rank finished its warm-up
    steps to the last event on any rank; events are clipped to it. So a rank that waits for
    a slower neighbour, or finishes early while the pipeline drains, is idle for that time.

    Args:
        events: the ``events`` of a demo result (columns :data:`EVENT_COLUMNS`; ``category``
            is ``compute`` or ``communication``).
        warmup_steps: first steps left out (connection setup, first-call allocations).

    Returns:
        DataFrame per ``rank``: ``wall_s`` (window), ``compute_s`` (forward, backward,
        optimizer), ``communication_s`` (posting or blocked in send / recv / allreduce),
        ``other_s`` (the rest: Python, scheduling), ``busy_fraction`` and ``idle_fraction``
        (1 - compute_s / wall_s).
    """
    _window(events, warmup_steps, "stage_utilisation")  # checks columns and steady steps
    ends = events["start_s"] + events["dur_s"]
    warm = events["step"] < warmup_steps
    t0 = ends[warm].groupby(events["rank"][warm]).max().max() if warm.any() else None
    t0 = events["start_s"].min() if t0 is None else t0
    t1 = ends.max()
    clipped = events.assign(
        dur_s=(np.minimum(ends, t1) - np.maximum(events["start_s"], t0)).clip(lower=0)
    )
    by = clipped.pivot_table(index="rank", columns="category", values="dur_s", aggfunc="sum")
    by = by.reindex(columns=["compute", "communication"], fill_value=0.0).fillna(0.0)
    out = pd.DataFrame({"rank": by.index})
    out["wall_s"] = t1 - t0
    out["compute_s"] = by["compute"].to_numpy()
    out["communication_s"] = by["communication"].to_numpy()
    out["other_s"] = out["wall_s"] - out["compute_s"] - out["communication_s"]
    out["busy_fraction"] = out["compute_s"] / out["wall_s"]
    out["idle_fraction"] = 1 - out["busy_fraction"]
    return out


def step_times(events: pd.DataFrame, *, warmup_steps: int = 1) -> pd.DataFrame:
    """Time of every training step after the warm-up.

    In a pipeline consecutive steps overlap, so these spans add up to more than the run.

    Returns:
        DataFrame per ``step``: ``step_s`` (first start to last end over all ranks),
        ``compute_s`` and ``communication_s`` (per rank, averaged over ranks).
    """
    ev = _window(events, warmup_steps, "step_times")
    ends = ev["start_s"] + ev["dur_s"]
    span = ends.groupby(ev["step"]).max() - ev.groupby("step")["start_s"].min()
    ranks = ev.groupby("step")["rank"].nunique()
    cat = ev.pivot_table(index="step", columns="category", values="dur_s", aggfunc="sum")
    out = pd.DataFrame({"step": span.index, "step_s": span.to_numpy()})
    for c in ("compute", "communication"):
        total = cat[c] if c in cat else pd.Series(0.0, index=cat.index)
        out[f"{c}_s"] = (total.fillna(0) / ranks).to_numpy()
    return out


def compare_runs(runs: dict[str, pd.DataFrame], *, warmup_steps: int = 1) -> pd.DataFrame:
    """Steady-state time per step of several demo runs side by side.

    Uses the window of :func:`stage_utilisation` (after every rank's warm-up), divided by the
    steps after the warm-up: in a pipeline consecutive steps overlap, so this is the time
    between step completions, not the span of one step.

    Args:
        runs: label -> events; the first one is the baseline (e.g. the single process).

    Returns:
        DataFrame per ``run``: ``processes``, ``step_s``, ``compute_s``, ``communication_s``
        and ``other_s`` (per step, averaged over ranks; they add up to ``step_s``),
        ``speedup`` (baseline step_s / step_s).
    """
    if not runs:
        raise ValueError("compare_runs: no runs given")
    rows = []
    for label, events in runs.items():
        util = stage_utilisation(events, warmup_steps=warmup_steps)
        steps = events.loc[events["step"] >= warmup_steps, "step"].nunique()
        rows.append(
            {
                "run": label,
                "processes": len(util),
                "step_s": util["wall_s"].iloc[0] / steps,
                "compute_s": util["compute_s"].mean() / steps,
                "communication_s": util["communication_s"].mean() / steps,
                "other_s": util["other_s"].mean() / steps,
            }
        )
    out = pd.DataFrame(rows)
    out["speedup"] = out["step_s"].iloc[0] / out["step_s"]
    return out


def max_param_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """Largest absolute difference between two sets of parameters with the same names.

    Raises:
        ValueError: naming the parameters present in only one set, or of different shapes.
    """
    only = sorted(set(a) ^ set(b))
    if only:
        raise ValueError(f"max_param_diff: parameters in only one set: {only}")
    worst = 0.0
    for name in a:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        if x.shape != y.shape:
            raise ValueError(f"max_param_diff: {name!r} has shapes {x.shape} and {y.shape}")
        worst = max(worst, float(np.max(np.abs(x.astype(np.float64) - y))) if x.size else 0.0)
    return worst
