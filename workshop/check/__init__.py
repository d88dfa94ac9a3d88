"""``workshop check``: run a learner's Horovod or PyTorch DDP script and say which practice is
missing.

    from workshop import check
    report = check.check_script("train.py", np=2, args=("--steps", "20"))
    print(report)                 # one line per practice: OK / FAIL / WARN, name, evidence
    report.checks["averaged"].ok  # True, False, or None (a warning)

A DDP script (``torch.distributed``, ``DistributedDataParallel``) runs under torchrun with Gloo
(:mod:`workshop.launch.torchrun`), observed by the same runner through a hook layer of its own
(:mod:`workshop.check.hooks_ddp`), and judged by the same practices; DDP's own failures are
explained by :mod:`workshop.check.ddp_failures`. ``averaged`` compares the gradient each step
applied with the mean of the ranks' own gradients (:mod:`workshop.check.practices.mean`): a
Sum, a clip while Horovod still reduces, a gradient changed on one rank are named.

A Horovod script runs unchanged under ``horovodrun -np 2 --gloo`` on the CPU; a runner
(:mod:`workshop.check.runner`) observes it from outside through hooks on Horovod, the
optimizer, the model's forward pass and file saves, and :mod:`workshop.check.verdicts` turns
what each rank did into verdicts on six practices (:data:`CHECK_NAMES`): ``init``,
``broadcast``, ``averaged``, ``sharded``, ``rank0_checkpoint``, ``lr_scaled``. It judges by
what happened, never by the source text. ``sharded`` compares the ranks' samples epoch by
epoch (an epoch starts at each ``DistributedSampler.set_epoch`` call, or else where a rank's
samples start to repeat) and judges overlap against chance: the same samples at the same
positions on every rank (one seed, no shard) FAIL; overlap at the level independent shuffles of
the whole data set give (Horovod's own TF2 and Keras examples) is a WARN that gives the measured
and the chance overlap; a shuffling ``DistributedSampler`` that never gets ``set_epoch`` is a
WARN. ``lr_scaled`` compares the highest LR of the run (after any warmup) with a second, np=1
run of the same script stopped at its first optimizer step. A script that crashes (or is
stopped) after steps ran still gets verdicts from what was observed, each marked partial, beside
the crash (exit 2); :mod:`workshop.check.failures` explains common crashes in plain words (an
unguarded ``gpus[hvd.local_rank()]`` on a machine without GPUs, a download on an offline
machine), :mod:`workshop.readers.horovod_errors` Horovod's own errors a script causes (mismatched
root ranks, shapes, dtypes or ops; ``backward_passes_per_step``; a name submitted twice; no
``hvd.init()``), and :mod:`workshop.readers.tracebacks` shows the learner's line first with
library and checker frames folded. The verdicts live one practice per module in
:mod:`workshop.check.practices`; their fixes in :mod:`workshop.check.fixes`.

Supported: PyTorch (any ``torch.optim`` optimizer, ``hvd.DistributedOptimizer``, any
``nn.Module`` model); TensorFlow 2 with tf-keras (``TF_USE_LEGACY_KERAS=1``): custom loops with
``hvd.DistributedGradientTape`` and ``model.fit`` with ``horovod.tensorflow.keras``, inside
``tf.function`` or eagerly. Not supported: Keras 3, ``jit_compile=True`` (XLA cannot run the
observing ``tf.numpy_function``), TF1 sessions, MXNet. Limits: ``sharded`` compares the rows
of the model's first input, so random augmentation makes the same sample look different (a
script that does not shard but augments at random passes it); gradients are compared bit for
bit (Horovod's averaged gradients are bitwise equal on every rank: 40 steps of a small CNN,
Adam, PyTorch and TensorFlow, Gloo, np=2, were).
"""

from workshop.lazy import exports

# Every name is imported on first use: every rank of a check imports workshop.check.runner,
# which must load nothing the learner's script does not (the launcher brings workshop.launch
# and pandas: 0.25 CPU-s a rank).
__getattr__, __dir__, __all__ = exports(
    __name__,
    {
        "evidence": ["CHECK_NAMES", "Check"],
        "launch": ["CheckError", "check_script"],
        "report": ["Report"],
        "verdicts": ["judge"],
    },
)
