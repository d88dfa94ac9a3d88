"""The synthetic materials workload (seed 003's small 1-D CNN regression)."""

from __future__ import annotations

import numpy as np
import pytest

from workshop.train import materials


def test_shapes_dtypes_labels_and_info():
    x, y, xt, yt, info = materials.load_materials(200, 50, seed=3, length=64)
    assert x.shape == (200, 2, 64) and xt.shape == (50, 2, 64)
    assert y.shape == (200, 2) and yt.shape == (50, 2)
    assert x.dtype == y.dtype == np.float32
    assert 0 <= y.min() and y.max() <= 1
    assert info["synthetic"] is True and info["source"].startswith("synthetic:")
    assert info["train_samples"] == 200 and info["test_samples"] == 50
    assert "SYNTHETIC" in info["note"]
    # channel 0 is the strain ramp: rises from ~0 to its maximum
    assert (x[:, 0, -1] > x[:, 0, 0]).all()


def test_deterministic_and_test_set_independent_of_train_size():
    a = materials.load_materials(100, 30, seed=7)
    b = materials.load_materials(100, 30, seed=7)
    c = materials.load_materials(500, 30, seed=7)
    d = materials.load_materials(100, 30, seed=8)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert np.array_equal(a[2], c[2]) and np.array_equal(a[3], c[3])
    assert not np.array_equal(a[0], d[0])
    with pytest.raises(ValueError, match="n_train and n_test"):
        materials.load_materials(0, 10, seed=0)


def test_constitutive_model():
    strain = np.linspace(0, 0.02, 2001)[None, :]
    stress = materials.stress_mpa(strain, np.array([200.0]), np.array([400.0]))[0]
    eps_y = 400.0 / 200e3
    elastic = strain[0] < eps_y
    assert np.allclose(stress[elastic], 200e3 * strain[0][elastic])  # sigma = E eps
    at_yield = np.interp(eps_y, strain[0], stress)
    assert at_yield == pytest.approx(400.0, rel=1e-3)  # continuous at yield
    assert stress[-1] == pytest.approx(400.0 * (0.02 / eps_y) ** materials.N_HARDEN)
    assert (np.diff(stress) >= 0).all()


def test_targets_decode_to_sampled_parameters():
    _, y, _, _, _ = materials.load_materials(2000, 10, seed=1)
    e = materials.E_RANGE_GPA[0] + y[:, 0] * (materials.E_RANGE_GPA[1] - materials.E_RANGE_GPA[0])
    assert e.min() >= 50 and e.max() <= 250
    assert abs(y.mean(axis=0) - 0.5).max() < 0.05  # uniform sampling


def test_score_is_r2():
    rng = np.random.default_rng(0)
    y = rng.uniform(size=(100, 2))
    assert materials.materials_score(y, y) == 1.0
    assert materials.materials_score(y, np.tile(y.mean(0), (100, 1))) == pytest.approx(0.0)
    assert materials.materials_score(y, y + 10) < 0
    with pytest.raises(ValueError, match="shapes differ"):
        materials.materials_score(y, y[:, :1])


def test_torch_model_is_small_and_fits_the_data():
    torch = pytest.importorskip("torch")
    model = materials.torch_model()
    params = sum(p.numel() for p in model.parameters())
    assert 1_000 < params < 10_000
    x, _, _, _, _ = materials.load_materials(4, 2, seed=0)
    assert model(torch.from_numpy(x)).shape == (4, 2)


def test_keras_model_has_the_same_parameter_count():
    pytest.importorskip("tensorflow")
    import os

    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    model = materials.keras_model()
    torch_params = sum(p.numel() for p in materials.torch_model().parameters())
    assert model.count_params() == torch_params
    assert tuple(model.output_shape) == (None, 2)
