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

from workshop.analysis.parallelism.choice import (
    choose_parallelism,
    data_parallel_balance,
    gpu_memory_bytes,
    model_estimates,
    parallelism_table,
    parameter_server_s,
)
from workshop.analysis.parallelism.demos import (
    EVENT_COLUMNS,
    compare_runs,
    max_param_diff,
    stage_utilisation,
    step_times,
)
from workshop.analysis.parallelism.exchange import (
    crossover_bytes,
    exchange_costs,
    pipeline_bubble_fraction,
    ring_allreduce_schedule,
)
from workshop.analysis.parallelism.layers import (
    GPUS,
    LITERATURE,
    MASK_BYTES,
    MODELS,
    OPTIMIZER_STATES,
    TRAIN_FLOPS_PER_FORWARD,
    VALUE_BYTES,
    layer_table,
    mlp_layer_table,
    transformer_layer_table,
)
from workshop.rules import ring_allreduce_time_s  # the ring model beside the rest

__all__ = [
    "ring_allreduce_time_s",
    "EVENT_COLUMNS",
    "GPUS",
    "LITERATURE",
    "MASK_BYTES",
    "MODELS",
    "OPTIMIZER_STATES",
    "TRAIN_FLOPS_PER_FORWARD",
    "VALUE_BYTES",
    "choose_parallelism",
    "compare_runs",
    "crossover_bytes",
    "data_parallel_balance",
    "exchange_costs",
    "gpu_memory_bytes",
    "layer_table",
    "max_param_diff",
    "mlp_layer_table",
    "model_estimates",
    "parallelism_table",
    "parameter_server_s",
    "pipeline_bubble_fraction",
    "ring_allreduce_schedule",
    "stage_utilisation",
    "step_times",
    "transformer_layer_table",
]
