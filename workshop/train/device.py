"""Which device a training rank computes on, and pinning one GPU per local rank.

The decision is pure logic (:func:`select_device`), so it is tested without a GPU. The training
programs call it once per rank, right after ``hvd.init()`` and before anything touches the GPU,
then pin the choice with :func:`pin_torch` or :func:`pin_tensorflow`, and record the returned
description (``"cpu"`` or ``"cuda:0 (NVIDIA H100 80GB HBM3)"``) in run.json.

Rules (the same on every rank of a node, so all ranks agree on CPU vs GPU; Horovod refuses a
collective whose tensors live on the CPU in one rank and on a GPU in another):

- ``requested="cpu"``: the CPU, always.
- ``requested="cuda"``: GPU ``local_rank`` of the visible GPUs. It is an error
  (:class:`DeviceError`) when no GPU is visible, when Horovod was built without GPU operations,
  or when a node runs more ranks than it has visible GPUs: two ranks on one GPU make NCCL fail
  ("Duplicate GPU detected") and would distort every timing the workshop measures.
- ``requested="auto"``: as ``"cuda"`` when that would succeed, otherwise the CPU, with the
  reason in :attr:`DeviceChoice.note` (the training program prints it).

When the launcher has already narrowed ``CUDA_VISIBLE_DEVICES`` to one GPU per rank (some sites'
affinity scripts do), every rank sees one GPU: pass ``per_rank_visibility=True`` (or set
``WORKSHOP_GPU_PER_RANK=1`` for :func:`select_device_from_env`) and each rank uses its one GPU.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workshop.runspec import DEVICES

#: Environment variables that carry a process's rank on its node, by launcher, in lookup order.
LOCAL_RANK_VARS = (
    "HOROVOD_LOCAL_RANK",  # horovodrun (gloo and mpi)
    "OMPI_COMM_WORLD_LOCAL_RANK",  # Open MPI mpirun (ThetaGPU)
    "PMI_LOCAL_RANK",  # Cray MPICH / PALS mpiexec (Polaris)
    "MPI_LOCALRANKID",  # MPICH hydra
    "SLURM_LOCALID",  # srun
)
#: Environment variables that carry the number of processes on this node, same order.
LOCAL_SIZE_VARS = (
    "HOROVOD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMI_LOCAL_SIZE",
    "MPI_LOCALNRANKS",
    "SLURM_NTASKS_PER_NODE",
)


class DeviceError(RuntimeError):
    """The requested device cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class DeviceChoice:
    """Where one rank computes.

    Attributes:
        kind: ``"cpu"`` or ``"cuda"``.
        index: GPU index among the GPUs this process sees (``None`` for the CPU).
        local_rank: the rank on its node the choice was made for.
        requested: the mode asked for (auto/cpu/cuda).
        note: why ``auto`` fell back to the CPU, or ``None``.
    """

    kind: str
    index: int | None
    local_rank: int
    requested: str
    note: str | None = None

    @property
    def is_cuda(self) -> bool:
        """True when this rank computes on a GPU."""
        return self.kind == "cuda"

    @property
    def torch_device(self) -> str:
        """The device string PyTorch takes: ``"cpu"`` or ``"cuda:<index>"``."""
        return f"cuda:{self.index}" if self.is_cuda else "cpu"

    def describe(self, gpu_name: str | None = None) -> str:
        """The description recorded in run.json.

        Args:
            gpu_name: the GPU's marketing name, e.g. ``"NVIDIA H100 80GB HBM3"``.

        Returns:
            ``"cpu"``, ``"cuda:0"`` or ``"cuda:0 (NVIDIA H100 80GB HBM3)"``.
        """
        if not self.is_cuda:
            return "cpu"
        return f"{self.torch_device} ({gpu_name})" if gpu_name else self.torch_device


def select_device(
    local_rank: int,
    gpu_count: int,
    requested: str,
    *,
    local_size: int | None = None,
    horovod_gpu: bool = True,
    per_rank_visibility: bool = False,
) -> DeviceChoice:
    """Choose the device of one rank (pure: no imports of torch/TF, no environment reads).

    Args:
        local_rank: this process's rank on its node (0-based).
        gpu_count: GPUs this process can see (after ``CUDA_VISIBLE_DEVICES``).
        requested: ``"auto"``, ``"cpu"`` or ``"cuda"``.
        local_size: processes on this node; ``None`` if unknown (then only this rank's own
            index is checked, which cannot keep ``auto`` consistent across ranks: pass it).
        horovod_gpu: whether the installed Horovod can reduce GPU tensors
            (see :func:`horovod_gpu_support`). The workshop's own CPU build cannot.
        per_rank_visibility: the launcher gave each rank its own ``CUDA_VISIBLE_DEVICES``, so
            the GPUs seen here belong to this rank alone.

    Returns:
        The :class:`DeviceChoice`.

    Raises:
        ValueError: an unknown mode or a negative count.
        DeviceError: ``requested="cuda"`` cannot be honoured (the message says why).
    """
    if requested not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {requested!r}")
    if local_rank < 0:
        raise ValueError(f"local_rank must be >= 0, got {local_rank}")
    if gpu_count < 0:
        raise ValueError(f"gpu_count must be >= 0, got {gpu_count}")
    if local_size is not None and not 0 <= local_rank < local_size:
        raise ValueError(f"local_rank {local_rank} is outside 0..{local_size - 1} (local_size)")
    if requested == "cpu":
        return DeviceChoice("cpu", None, local_rank, requested)

    problem = _gpu_problem(local_rank, gpu_count, local_size, horovod_gpu, per_rank_visibility)
    if problem is None:
        index = local_rank % gpu_count if per_rank_visibility else local_rank
        return DeviceChoice("cuda", index, local_rank, requested)
    if requested == "cuda":
        raise DeviceError(f"--device cuda: {problem}")
    return DeviceChoice("cpu", None, local_rank, requested, note=f"using the CPU: {problem}")


def _gpu_problem(
    local_rank: int,
    gpu_count: int,
    local_size: int | None,
    horovod_gpu: bool,
    per_rank_visibility: bool,
) -> str | None:
    """Why this rank cannot have a GPU of its own, or ``None`` if it can."""
    if gpu_count == 0:
        return (
            "no GPU is visible to this process (check CUDA_VISIBLE_DEVICES, and that torch / "
            "TensorFlow are CUDA builds)"
        )
    if not horovod_gpu:
        return (
            "the installed Horovod was built without GPU operations (no CUDA/NCCL), so it "
            "cannot reduce GPU tensors; use a Horovod built with HOROVOD_GPU_OPERATIONS=NCCL"
        )
    if per_rank_visibility:
        return None
    ranks = local_size if local_size is not None else local_rank + 1
    if ranks > gpu_count:
        return (
            f"{ranks} ranks on this node but only {gpu_count} visible GPU(s); one GPU per rank "
            "is needed (start fewer ranks per node, or use --device cpu)"
        )
    return None


def _first_int(env: Mapping[str, str], names: tuple[str, ...]) -> int | None:
    """The first of ``names`` set in ``env``, as an int (``None`` if none is set)."""
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                message = f"environment variable {name}={value!r} is not an integer"
                raise ValueError(message) from None
    return None


def local_rank_from_env(env: Mapping[str, str] | None = None) -> tuple[int, int | None]:
    """This process's rank on its node and the node's process count, from the launcher's env.

    Args:
        env: the environment (default ``os.environ``).

    Returns:
        ``(local_rank, local_size)``; ``(0, None)`` when started without a launcher.
    """
    env = os.environ if env is None else env
    return _first_int(env, LOCAL_RANK_VARS) or 0, _first_int(env, LOCAL_SIZE_VARS)


def select_device_from_env(
    requested: str,
    gpu_count: int,
    *,
    horovod_gpu: bool = True,
    local_rank: int | None = None,
    local_size: int | None = None,
    env: Mapping[str, str] | None = None,
) -> DeviceChoice:
    """:func:`select_device` with the local rank/size taken from the launcher's environment.

    Pass ``local_rank``/``local_size`` from ``hvd.local_rank()``/``hvd.local_size()`` when
    Horovod is initialised; they win over the environment.

    Args:
        requested: ``"auto"``, ``"cpu"`` or ``"cuda"``.
        gpu_count: GPUs this process can see.
        horovod_gpu: whether Horovod can reduce GPU tensors.
        local_rank: overrides the environment.
        local_size: overrides the environment.
        env: the environment (default ``os.environ``); ``WORKSHOP_GPU_PER_RANK=1`` means the
            launcher narrowed ``CUDA_VISIBLE_DEVICES`` to this rank's GPU.

    Returns:
        The :class:`DeviceChoice`.
    """
    env = os.environ if env is None else env
    env_rank, env_size = local_rank_from_env(env)
    return select_device(
        env_rank if local_rank is None else local_rank,
        gpu_count,
        requested,
        local_size=env_size if local_size is None else local_size,
        horovod_gpu=horovod_gpu,
        per_rank_visibility=env.get("WORKSHOP_GPU_PER_RANK") == "1",
    )


def horovod_gpu_support(hvd: Any) -> bool:
    """Whether a Horovod framework module (``horovod.torch`` / ``horovod.tensorflow``) was built
    with CUDA, i.e. can reduce GPU tensors (with NCCL, or CUDA-aware MPI).

    Args:
        hvd: the imported Horovod framework module.

    Returns:
        True if ``hvd.cuda_built()`` or ``hvd.nccl_built()`` says so.
    """
    for probe in ("cuda_built", "nccl_built"):
        check = getattr(hvd, probe, None)
        if check is not None and check():
            return True
    return False


def torch_gpu_count() -> int:
    """GPUs PyTorch can see (0 for a CPU-only torch build); does not create a CUDA context."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def tensorflow_gpu_count() -> int:
    """GPUs TensorFlow can see; listing physical devices does not initialise its runtime."""
    import tensorflow as tf

    return len(tf.config.list_physical_devices("GPU"))


def pin_torch(choice: DeviceChoice) -> str:
    """Make ``choice`` PyTorch's current device. Call before anything allocates on a GPU.

    Args:
        choice: from :func:`select_device`.

    Returns:
        The description for run.json, e.g. ``"cuda:1 (NVIDIA A100-SXM4-40GB)"`` or ``"cpu"``.
    """
    if not choice.is_cuda:
        return choice.describe()
    import torch

    torch.cuda.set_device(choice.index)
    return choice.describe(torch.cuda.get_device_name(choice.index))


def pin_tensorflow(choice: DeviceChoice) -> str:
    """Make TensorFlow see only ``choice``'s GPU (or none, for the CPU), with memory growth on.

    Must run before TensorFlow initialises its runtime (before any op or model is built):
    visible devices cannot change afterwards.

    Args:
        choice: from :func:`select_device`.

    Returns:
        The description for run.json, e.g. ``"cuda:1 (NVIDIA A100-SXM4-40GB)"`` or ``"cpu"``.

    Raises:
        DeviceError: TensorFlow's runtime was already initialised, or the GPU index is missing.
    """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    try:
        if not choice.is_cuda:
            if gpus:
                tf.config.set_visible_devices([], "GPU")
            return choice.describe()
        if choice.index >= len(gpus):
            raise DeviceError(
                f"GPU index {choice.index} chosen but TensorFlow sees only {len(gpus)} GPU(s)"
            )
        gpu = gpus[choice.index]
        tf.config.set_visible_devices(gpu, "GPU")
        tf.config.experimental.set_memory_growth(gpu, True)
    except RuntimeError as exc:
        raise DeviceError(
            f"TensorFlow was initialised before the device was pinned ({exc}); call "
            "pin_tensorflow() right after hvd.init(), before building any model or tensor"
        ) from exc
    details = tf.config.experimental.get_device_details(gpu)
    return choice.describe(details.get("device_name"))
