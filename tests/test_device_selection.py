"""Device selection logic (workshop/train/device.py), tested without a GPU."""

from __future__ import annotations

import types

import pytest

from workshop.train import device
from workshop.train.device import DeviceChoice, DeviceError, select_device


@pytest.mark.parametrize("local_rank", range(4))
def test_auto_pins_one_gpu_per_local_rank(local_rank: int) -> None:
    choice = select_device(local_rank, 4, "auto", local_size=4)
    assert choice.kind == "cuda"
    assert choice.index == local_rank
    assert choice.torch_device == f"cuda:{local_rank}"
    assert choice.note is None


def test_eight_ranks_on_thetagpu_node_get_eight_distinct_gpus() -> None:
    indices = {select_device(r, 8, "cuda", local_size=8).index for r in range(8)}
    assert indices == set(range(8))


def test_cpu_request_ignores_gpus() -> None:
    choice = select_device(1, 4, "cpu", local_size=4)
    assert (choice.kind, choice.index, choice.describe()) == ("cpu", None, "cpu")


def test_auto_without_gpu_uses_cpu_with_reason() -> None:
    choice = select_device(0, 0, "auto", local_size=2)
    assert choice.kind == "cpu"
    assert "no GPU is visible" in choice.note


def test_cuda_without_gpu_is_an_error() -> None:
    with pytest.raises(DeviceError, match="no GPU is visible"):
        select_device(0, 0, "cuda", local_size=1)


def test_more_ranks_than_gpus_is_an_error_for_cuda() -> None:
    with pytest.raises(DeviceError, match="4 ranks on this node but only 2 visible GPU"):
        select_device(0, 2, "cuda", local_size=4)


def test_more_ranks_than_gpus_falls_back_to_cpu_on_every_rank_for_auto() -> None:
    # All ranks must agree (Horovod cannot mix CPU and GPU tensors in one collective), so even
    # ranks 0 and 1, which would have a GPU each, use the CPU.
    choices = [select_device(r, 2, "auto", local_size=4) for r in range(4)]
    assert {c.kind for c in choices} == {"cpu"}
    assert all("only 2 visible GPU" in c.note for c in choices)


def test_unknown_local_size_still_catches_a_rank_without_its_own_gpu() -> None:
    assert select_device(1, 2, "cuda").index == 1
    with pytest.raises(DeviceError, match="3 ranks on this node"):
        select_device(2, 2, "cuda")


def test_horovod_without_gpu_operations() -> None:
    with pytest.raises(DeviceError, match="built without GPU operations"):
        select_device(0, 1, "cuda", local_size=1, horovod_gpu=False)
    choice = select_device(0, 1, "auto", local_size=1, horovod_gpu=False)
    assert choice.kind == "cpu" and "HOROVOD_GPU_OPERATIONS=NCCL" in choice.note


def test_per_rank_visibility_uses_the_one_gpu_each_rank_sees() -> None:
    # An affinity script gave each of 4 ranks its own CUDA_VISIBLE_DEVICES: each sees one GPU.
    choices = [
        select_device(r, 1, "cuda", local_size=4, per_rank_visibility=True) for r in range(4)
    ]
    assert [c.index for c in choices] == [0, 0, 0, 0]
    assert all(c.kind == "cuda" for c in choices)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 1, "gpu"), "device must be one of auto, cpu, cuda"),
        ((-1, 1, "auto"), "local_rank must be >= 0"),
        ((0, -2, "auto"), "gpu_count must be >= 0"),
    ],
)
def test_bad_arguments(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        select_device(*args)


def test_local_rank_outside_local_size() -> None:
    with pytest.raises(ValueError, match="outside 0..1"):
        select_device(2, 4, "auto", local_size=2)


def test_describe_includes_gpu_name() -> None:
    choice = DeviceChoice("cuda", 0, 0, "auto")
    assert choice.describe("NVIDIA H100 80GB HBM3") == "cuda:0 (NVIDIA H100 80GB HBM3)"
    assert choice.describe() == "cuda:0"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}, (3, 8)),
        ({"PMI_LOCAL_RANK": "2", "PMI_LOCAL_SIZE": "4"}, (2, 4)),
        ({"SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "4"}, (1, 4)),
        ({"HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2"}, (1, 2)),
        ({}, (0, None)),
    ],
)
def test_local_rank_from_env(env: dict, expected: tuple) -> None:
    assert device.local_rank_from_env(env) == expected


def test_local_rank_from_env_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="PMI_LOCAL_RANK='x'"):
        device.local_rank_from_env({"PMI_LOCAL_RANK": "x"})


def test_select_device_from_env() -> None:
    env = {"PMI_LOCAL_RANK": "3", "PMI_LOCAL_SIZE": "4"}
    assert device.select_device_from_env("auto", 4, env=env).index == 3
    # hvd.local_rank() passed explicitly wins over the environment
    assert device.select_device_from_env("auto", 4, env=env, local_rank=1).index == 1
    pinned = dict(env, WORKSHOP_GPU_PER_RANK="1")
    assert device.select_device_from_env("cuda", 1, env=pinned).index == 0
    with pytest.raises(DeviceError):
        device.select_device_from_env("cuda", 1, env=env)


def test_horovod_gpu_support_probes_the_module() -> None:
    def module(cuda: bool, nccl: bool) -> types.SimpleNamespace:
        return types.SimpleNamespace(cuda_built=lambda: cuda, nccl_built=lambda: nccl)

    assert device.horovod_gpu_support(module(True, True))
    assert device.horovod_gpu_support(module(False, True))
    assert not device.horovod_gpu_support(module(False, False))
    assert not device.horovod_gpu_support(types.SimpleNamespace())


def test_pin_torch_on_cpu_touches_nothing() -> None:
    assert device.pin_torch(select_device(0, 0, "auto", local_size=1)) == "cpu"


def test_pin_torch_sets_the_current_cuda_device(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    calls = []
    monkeypatch.setattr(torch.cuda, "set_device", calls.append)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"Fake GPU {i}")
    description = device.pin_torch(select_device(2, 4, "cuda", local_size=4))
    assert calls == [2]
    assert description == "cuda:2 (Fake GPU 2)"


def test_torch_gpu_count_on_this_machine() -> None:
    torch = pytest.importorskip("torch")
    expected = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert device.torch_gpu_count() == expected


class _FakeTFConfig:
    """Stands in for tf.config: records what pin_tensorflow asks for."""

    def __init__(self, gpus: list[str], initialised: bool = False) -> None:
        self.gpus = gpus
        self.initialised = initialised
        self.visible: object = "unset"
        self.growth: list[tuple[str, bool]] = []
        self.experimental = types.SimpleNamespace(
            set_memory_growth=lambda gpu, on: self.growth.append((gpu, on)),
            get_device_details=lambda gpu: {"device_name": f"Fake {gpu}"},
        )

    def list_physical_devices(self, kind: str) -> list[str]:
        return list(self.gpus)

    def set_visible_devices(self, devices: object, kind: str) -> None:
        if self.initialised:
            raise RuntimeError("Visible devices cannot be modified after being initialized")
        self.visible = devices


def _fake_tensorflow(monkeypatch: pytest.MonkeyPatch, config: _FakeTFConfig) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(config=config))


def test_pin_tensorflow_shows_only_the_chosen_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _FakeTFConfig(["GPU:0", "GPU:1", "GPU:2", "GPU:3"])
    _fake_tensorflow(monkeypatch, config)
    description = device.pin_tensorflow(select_device(1, 4, "cuda", local_size=4))
    assert config.visible == "GPU:1"
    assert config.growth == [("GPU:1", True)]
    assert description == "cuda:1 (Fake GPU:1)"


def test_pin_tensorflow_on_cpu_hides_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _FakeTFConfig(["GPU:0"])
    _fake_tensorflow(monkeypatch, config)
    assert device.pin_tensorflow(select_device(0, 1, "cpu", local_size=1)) == "cpu"
    assert config.visible == []


def test_pin_tensorflow_too_late_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_tensorflow(monkeypatch, _FakeTFConfig(["GPU:0"], initialised=True))
    with pytest.raises(DeviceError, match="initialised before the device was pinned"):
        device.pin_tensorflow(select_device(0, 1, "cuda", local_size=1))
