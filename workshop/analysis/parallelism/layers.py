"""Layer tables of the networks the lessons compare (parameters, MACs, activation bytes per
layer), computed from the architectures and checked against published counts (:data:`LITERATURE`).

The model and its conventions: see :mod:`workshop.analysis.parallelism`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

__all__ = [
    "GPUS",
    "LITERATURE",
    "MASK_BYTES",
    "MODELS",
    "OPTIMIZER_STATES",
    "TRAIN_FLOPS_PER_FORWARD",
    "VALUE_BYTES",
    "layer_table",
    "mlp_layer_table",
    "transformer_layer_table",
]


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
