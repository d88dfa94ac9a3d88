"""The small-model workload: a 1-D CNN regressing two material parameters from stress-strain
curves. **The data are synthetic**, generated here from a documented constitutive model.

Seed 003 (a thesis on Horovod scaling) trains a small CNN (2 conv + 2 dense layers) on one
million measured strain/stress curve pairs to predict two material parameters, normalised to
[0, 1], with MSE loss. That data set is not public, so this module generates curves with known
parameters instead. The point for the workshop is the *regime*: a tiny model (a few thousand
parameters, so little compute per gradient byte) on many samples, where every step's gradient
synchronisation is a large share of the step, and where a larger batch changes that.

Constitutive model (linear elasticity with power-law (Hollomon) hardening after yield), for a
monotonic uniaxial tension test::

    sigma(eps) = E * eps                               for eps <= eps_y = sigma_y / E
    sigma(eps) = sigma_y * (eps / eps_y) ** N_HARDEN   for eps >  eps_y

with the two labelled parameters

* ``E``: Young's modulus, uniform in [50, 250] GPa,
* ``sigma_y``: yield stress, uniform in [100, 600] MPa,

and a fixed hardening exponent ``N_HARDEN = 0.15``. Each sample is a strain ramp from 0 to a
random maximum strain (uniform in [0.5 %, 3 %]) at ``length`` points, with Gaussian noise on
the measured stress (1 % of the sample's peak stress) and on the strain (0.5 % of its maximum).

Normalisation (fixed constants, so train and test agree): strain / 0.03, stress / 1000 MPa;
targets mapped linearly from their sampling ranges to [0, 1].

Score (the ``accuracy`` column of a materials run): :func:`materials_score`, the coefficient of
determination R^2 averaged over the two targets (1 = perfect, 0 = no better than predicting
the mean, negative = worse).
"""

from __future__ import annotations

import numpy as np

E_RANGE_GPA = (50.0, 250.0)
SIGMA_Y_RANGE_MPA = (100.0, 600.0)
MAX_STRAIN_RANGE = (0.005, 0.03)
N_HARDEN = 0.15
STRESS_NOISE = 0.01  # of the sample's peak stress
STRAIN_NOISE = 0.005  # of the sample's maximum strain
STRAIN_SCALE = 0.03
STRESS_SCALE_MPA = 1000.0
MODEL_NAME = "linear-elastic / power-law hardening (Hollomon, n=0.15)"


def stress_mpa(strain: np.ndarray, e_gpa: np.ndarray, sigma_y_mpa: np.ndarray) -> np.ndarray:
    """Stress of the constitutive model (see the module docstring), noise-free.

    Args:
        strain: strains, shape (n, length) (dimensionless).
        e_gpa: Young's modulus per sample, shape (n,), GPa.
        sigma_y_mpa: yield stress per sample, shape (n,), MPa.

    Returns:
        Stress in MPa, shape (n, length).
    """
    e_mpa = 1e3 * np.asarray(e_gpa, dtype=float)[:, None]
    sigma_y = np.asarray(sigma_y_mpa, dtype=float)[:, None]
    eps_y = sigma_y / e_mpa
    eps = np.maximum(strain, 0.0)
    plastic = sigma_y * np.power(np.maximum(eps, eps_y) / eps_y, N_HARDEN)
    return np.where(eps <= eps_y, e_mpa * eps, plastic)


def _generate(n: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    e_gpa = rng.uniform(*E_RANGE_GPA, size=n)
    sigma_y = rng.uniform(*SIGMA_Y_RANGE_MPA, size=n)
    max_strain = rng.uniform(*MAX_STRAIN_RANGE, size=n)
    strain = max_strain[:, None] * np.linspace(0.0, 1.0, length)[None, :]
    stress = stress_mpa(strain, e_gpa, sigma_y)
    stress = stress + rng.normal(size=stress.shape) * STRESS_NOISE * stress.max(1, keepdims=True)
    strain = strain + rng.normal(size=strain.shape) * STRAIN_NOISE * max_strain[:, None]
    x = np.stack([strain / STRAIN_SCALE, stress / STRESS_SCALE_MPA], axis=1).astype(np.float32)
    y = np.stack(
        [
            (e_gpa - E_RANGE_GPA[0]) / (E_RANGE_GPA[1] - E_RANGE_GPA[0]),
            (sigma_y - SIGMA_Y_RANGE_MPA[0]) / (SIGMA_Y_RANGE_MPA[1] - SIGMA_Y_RANGE_MPA[0]),
        ],
        axis=1,
    ).astype(np.float32)
    return x, y


def load_materials(
    n_train: int, n_test: int, seed: int, length: int = 128
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
    """Generate the synthetic materials data set (deterministic for a seed).

    Train and test sets come from independent random streams of the same seed, so the test set
    does not change when ``n_train`` does.

    Args:
        n_train: number of training curves.
        n_test: number of test curves.
        seed: random seed.
        length: points per curve.

    Returns:
        ``x_train`` (n_train, 2, length) float32 (channel 0 normalised strain, channel 1
        normalised stress), ``y_train`` (n_train, 2) float32 (normalised E, sigma_y in [0, 1]),
        ``x_test``, ``y_test`` likewise, and an info dict: ``name``, ``source``, ``synthetic``
        (True), ``train_samples``, ``test_samples``, ``note``.

    Raises:
        ValueError: for a non-positive size or a length below 16.
    """
    if n_train < 1 or n_test < 1:
        raise ValueError(f"load_materials: n_train and n_test must be >= 1 ({n_train}, {n_test})")
    if length < 16:
        raise ValueError(f"load_materials: length must be >= 16 points (got {length})")
    x_train, y_train = _generate(n_train, length, np.random.default_rng([seed, 0]))
    x_test, y_test = _generate(n_test, length, np.random.default_rng([seed, 1]))
    info = {
        "name": "materials",
        "source": (
            f"synthetic: {MODEL_NAME} stress-strain curves, {length} points, "
            f"E in {E_RANGE_GPA} GPa, sigma_y in {SIGMA_Y_RANGE_MPA} MPa, 1% stress noise, "
            f"seed {seed}"
        ),
        "synthetic": True,
        "train_samples": n_train,
        "test_samples": n_test,
        "note": (
            "SYNTHETIC data standing in for seed 003's measured material-science curves; "
            "targets (E, sigma_y) normalised to [0, 1]; score = mean R^2 of the two targets"
        ),
    }
    return x_train, y_train, x_test, y_test, info


def materials_score(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """R^2 (coefficient of determination) averaged over the target columns.

    Args:
        y_true: (n, k) targets.
        y_pred: (n, k) predictions.

    Returns:
        mean over columns of 1 - SS_res / SS_tot; 1 is perfect, 0 is the mean predictor.

    Raises:
        ValueError: if the shapes differ or there are fewer than two samples.
    """
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    if t.shape != p.shape:
        raise ValueError(f"materials_score: shapes differ: {t.shape} vs {p.shape}")
    if t.ndim == 1:
        t, p = t[:, None], p[:, None]
    if len(t) < 2:
        raise ValueError("materials_score: need at least two samples")
    ss_res = ((t - p) ** 2).sum(axis=0)
    ss_tot = ((t - t.mean(axis=0)) ** 2).sum(axis=0)
    r2 = 1.0 - ss_res / np.where(ss_tot > 0, ss_tot, np.nan)
    return float(np.nanmean(r2))


def torch_model(length: int = 128):
    """The 1-D CNN in PyTorch: 2 conv + max-pool layers, 2 dense layers (seed 003's shape).

    Input (batch, 2, length), output (batch, 2). 4,482 parameters for length 128.
    """
    from torch import nn

    flat = 16 * (((length - 4) // 2 - 4) // 2)
    return nn.Sequential(
        nn.Conv1d(2, 8, 5),
        nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Conv1d(8, 16, 5),
        nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Flatten(),
        nn.Linear(flat, 8),
        nn.ReLU(),
        nn.Linear(8, 2),
    )


def keras_model(length: int = 128):
    """The same 1-D CNN in tf.keras; input (batch, length, 2) channels-last, output (batch, 2).

    TensorFlow is imported here, lazily; the caller sets legacy tf-keras mode beforehand.
    """
    import tensorflow as tf

    layers = tf.keras.layers
    return tf.keras.Sequential(
        [
            layers.Input((length, 2)),
            layers.Conv1D(8, 5, activation="relu"),
            layers.MaxPooling1D(2),
            layers.Conv1D(16, 5, activation="relu"),
            layers.MaxPooling1D(2),
            layers.Flatten(),
            layers.Dense(8, activation="relu"),
            layers.Dense(2),
        ]
    )
