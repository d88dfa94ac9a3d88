"""The rules the training programs follow and the analyses model, in one place.

``workshop.train`` (what runs) and ``workshop.analysis`` (what explains it) both import these,
so a lesson can never describe a rule that differs from the one that ran. The module imports
nothing beyond the standard library, so a training rank, a notebook and a test all load it
cheaply.

* Learning-rate scaling for a larger global batch, and gradual warmup (:func:`scaled_lr`,
  :func:`lr_at`, :data:`LR_SCALINGS`).
* The ring-allreduce time of the alpha-beta communication model
  (:func:`ring_allreduce_time_s`).
* What a rank writes of each training step (``logs/rank.N.steps.csv``:
  :data:`STEP_FILE_COLUMNS`), and how long its training thread waited for a CPU
  (:func:`run_queue_wait_s`).
* Horovod 0.28.1's defaults and per-cycle traffic that the glossary and the lessons state
  (:data:`FUSION_THRESHOLD_DEFAULT_BYTES`, :data:`CYCLE_TIME_DEFAULT_MS`,
  :data:`NEGOTIATION_ALLREDUCES_PER_CYCLE`, :data:`CACHED_RESPONSES_PER_WORD`,
  :func:`glossary_facts`).
"""

from __future__ import annotations

import math
import os

LR_SCALINGS = ("none", "linear", "sqrt")

# Horovod 0.28.1, read in its source (horovod/common/): the defaults a lesson may quote.
HOROVOD_VERSION = "0.28.1"
#: ``HOROVOD_FUSION_THRESHOLD``: 128 MiB by default since Horovod 0.21 (64 MiB before).
FUSION_THRESHOLD_DEFAULT_BYTES = 128 * 1024 * 1024
#: ``HOROVOD_CYCLE_TIME``: a background cycle starts at most every 1 ms by default
#: (operations.cc:527, ``SetCycleTimeMs(1)``); 5 ms before 0.21 (CHANGELOG, v0.21.0, PR #2468).
CYCLE_TIME_DEFAULT_MS = 1.0
#: The cycle time's default before Horovod 0.21 (the same change made the fusion threshold
#: 128 MiB): material written for older releases says 5 ms.
CYCLE_TIME_DEFAULT_BEFORE_0_21_MS = 5.0
#: ``HOROVOD_CACHE_CAPACITY``: the response cache holds 1024 responses by default.
CACHE_CAPACITY_DEFAULT = 1024
#: With the response cache on, each background cycle starts with ONE MPI allreduce of the
#: cache's bit vector (CacheCoordinator::sync: a bitwise AND over the ranks); a second one (an
#: OR) only when a cached entry became invalid; tensors not cached yet then go to rank 0 by
#: MPI_Gather/Gatherv and the responses come back by MPI_Bcast (mpi_controller.cc).
NEGOTIATION_ALLREDUCES_PER_CYCLE = 1
#: The bit vector's reserved status bits: ``#define NUM_STATUS_BITS 3`` (response_cache.h:29;
#: shut down, uncached in queue, invalid in queue).
CACHE_STATUS_BITS = 3
#: The bit vector: 64-bit words for the 3 status bits plus one bit per cached response
#: (CacheCoordinator::sync, response_cache.cc:382-383), so one word of 8 bytes while at most
#: 64 - 3 = 61 responses are cached; twice as many words with the timeline on (a second half
#: marks the timeline's negotiations, response_cache.cc:388-390).
NEGOTIATION_ALLREDUCE_BYTES = 8
#: The cached responses one 8-byte word holds beside the status bits: 61.
CACHED_RESPONSES_PER_WORD = 8 * NEGOTIATION_ALLREDUCE_BYTES - CACHE_STATUS_BITS


def negotiation_bitvector_bytes(cached: int, *, timeline: bool = False) -> int:
    """Bytes of the bit vector each cycle's negotiation allreduces with ``cached`` responses in
    the cache: whole 64-bit words for the status bits and one bit per response, twice as many
    words with the timeline on (Horovod 0.28.1, response_cache.cc:382-390).

    >>> negotiation_bitvector_bytes(61), negotiation_bitvector_bytes(62)
    (8, 16)
    >>> negotiation_bitvector_bytes(161), negotiation_bitvector_bytes(161, timeline=True)
    (24, 48)
    """
    words = math.ceil((cached + CACHE_STATUS_BITS) / 64)
    return 8 * words * (2 if timeline else 1)


def glossary_facts() -> dict[str, str]:
    """The sentences docs/glossary.md states about Horovod's defaults, built from the
    constants above (tests/test_book_pages.py checks that the glossary says each)."""
    mib = FUSION_THRESHOLD_DEFAULT_BYTES // 2**20
    return {
        "fusion threshold": f"`HOROVOD_FUSION_THRESHOLD` ({mib} MiB by default since Horovod "
        "0.21)",
        "cycle time": f"({CYCLE_TIME_DEFAULT_MS:g} ms by default in Horovod {HOROVOD_VERSION}",
        "negotiation": f"one {NEGOTIATION_ALLREDUCE_BYTES}-byte MPI allreduce per cycle",
        "cached responses": f"(one 64-bit word for {CACHE_STATUS_BITS} status bits and at most "
        f"{CACHED_RESPONSES_PER_WORD} cached responses",
        "cycle time before 0.21": f"{CYCLE_TIME_DEFAULT_BEFORE_0_21_MS:g} ms before Horovod 0.21",
    }


def scaled_lr(lr: float, global_batch: int, base_batch: int, rule: str) -> float:
    """Learning rate for a global batch, from the LR that suits ``base_batch``.

    ``linear`` (Goyal et al. 2017): lr * k with k = global_batch / base_batch;
    ``sqrt`` (Krizhevsky 2014): lr * sqrt(k); ``none``: lr unchanged.

    Args:
        lr: the learning rate tuned for ``base_batch``.
        global_batch: per-worker batch x workers.
        base_batch: the batch ``lr`` was tuned for.
        rule: one of :data:`LR_SCALINGS`.

    Returns:
        The scaled learning rate.

    Raises:
        ValueError: for an unknown rule.

    >>> scaled_lr(0.01, 256, 32, "linear"), scaled_lr(0.01, 128, 32, "sqrt")  # k = 8; sqrt(4)
    (0.08, 0.02)
    """
    if rule not in LR_SCALINGS:
        choices = ", ".join(LR_SCALINGS)
        raise ValueError(f"unknown LR scaling rule {rule!r}; choose one of {choices}")
    k = global_batch / base_batch
    return {"none": lr, "linear": lr * k, "sqrt": lr * math.sqrt(k)}[rule]


def lr_at(
    step: int, steps_per_epoch: int, base_lr: float, target_lr: float, warmup_epochs: float
) -> float:
    """Gradual warmup (Goyal et al. 2017): from ``base_lr`` linearly to ``target_lr`` over
    ``warmup_epochs`` epochs, counted in steps; ``target_lr`` afterwards.

    Args:
        step: optimizer step, counted from 0 over the whole run.
        steps_per_epoch: optimizer steps per epoch.
        base_lr: learning rate at step 0.
        target_lr: learning rate after the warmup (usually :func:`scaled_lr`'s).
        warmup_epochs: warmup length in epochs (0: no warmup).

    Returns:
        The learning rate at ``step``.

    Halfway through a one-epoch warmup of 10 steps the rate is halfway, 0.01 + 0.07 / 2:

    >>> [round(lr_at(step, 10, 0.01, 0.08, 1.0), 6) for step in (0, 5, 10, 11)]
    [0.01, 0.045, 0.08, 0.08]
    """
    warmup_steps = warmup_epochs * steps_per_epoch
    if step >= warmup_steps:
        return target_lr
    return base_lr + (target_lr - base_lr) * step / warmup_steps


def ring_allreduce_time_s(n, nbytes, alpha_s: float, bandwidth_bytes_per_s: float):
    """Time of one ring allreduce of ``nbytes`` over ``n`` workers (0 for n = 1)::

        t(N, m) = 2 (N - 1) alpha + 2 (N - 1) / N * m / B

    A reduce-scatter and an allgather, each N-1 steps sending m/N bytes per worker and step:
    bandwidth-optimal (each worker sends < 2 m, whatever N) but not latency-optimal (2 (N-1)
    messages in sequence).

    Args:
        n: workers (a number, or a numpy array of them).
        nbytes: message size in bytes (a number, or a numpy array / pandas Series).
        alpha_s: per-message latency, seconds.
        bandwidth_bytes_per_s: link bandwidth B, bytes per second.

    Returns:
        Seconds, a float for numbers, elementwise for arrays.

    At N = 4: 6 alpha + 1.5 m / B = 60 us + 6 ms.

    >>> round(ring_allreduce_time_s(4, 4e6, 10e-6, 1e9) * 1e3, 3)
    6.06
    >>> ring_allreduce_time_s(1, 4e6, 10e-6, 1e9)
    0.0
    """
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * nbytes / bandwidth_bytes_per_s


#: Other work allowed beside a recorded run, in cores averaged over the run: the quiet-machine
#: rule of every timing in data/ (why 0.05: :mod:`workshop.launch.quiet`).
MAX_FOREIGN_CORES = 0.05


#: The columns of a rank's ``logs/rank.N.steps.csv``: the step (0-based over the run), then
#: seconds: taking the batch, its own compute, waiting for the allreduces, the whole step, and
#: ``cpu_wait_s``, how long the training thread was ready to run but waited for a CPU while it
#: computed (Linux's run-queue wait, :func:`run_queue_wait_s`; empty where the system does not
#: tell). The
#: training programs and ``workshop run --script`` write them; the readers and ``workshop
#: diagnose`` read them. Files written before 2026-11-27 lack ``cpu_wait_s``.
STEP_FILE_COLUMNS = ("step", "data_s", "compute_s", "wait_s", "step_s", "cpu_wait_s")
#: The columns every steps file has (the last one came later).
STEP_FILE_REQUIRED = STEP_FILE_COLUMNS[:5]
_SCHEDSTAT = "/proc/thread-self/schedstat"

#: run.json's key for the Horovod settings rank 0 ran with, and the file a rank writes them to
#: (``logs/rank.N.horovod_env.json``): the ``HOROVOD_*`` variables of its environment, which is
#: where horovodrun puts its flags (horovod/runner/common/util/config_parser.py) and where a
#: learner sets them by hand; ``workshop diagnose`` reads the settings from there.
HOROVOD_ENV_KEY = "horovod_env"
HOROVOD_ENV_FILE = "rank.{rank}.horovod_env.json"
#: Variables left out of that record: where the ranks meet, not how Horovod behaves.
_NOT_SETTINGS = ("SECRET", "KEY", "ADDR", "PORT", "HOSTNAME", "RENDEZVOUS", "CONTROLLER")


def write_horovod_env(logs: os.PathLike[str] | str, rank: int) -> None:
    """Write the ``HOROVOD_*`` settings of this process's environment to ``logs`` as
    :data:`HOROVOD_ENV_FILE` (standard library only: the training programs and the check
    runner call it on every rank)."""
    settings = {
        key: value
        for key, value in sorted(os.environ.items())
        if key.startswith("HOROVOD_") and not any(word in key for word in _NOT_SETTINGS)
    }
    from workshop.units import write_json_atomic

    write_json_atomic(os.path.join(logs, HOROVOD_ENV_FILE.format(rank=rank)), settings)


def run_queue_wait_s() -> float | None:
    """Seconds the calling thread has spent ready to run but waiting for a CPU since it started
    (the second field of Linux's ``/proc/thread-self/schedstat``, in ns), or None where the
    system does not tell. A rank that shares its core with other work waits here; one that
    waits for the other ranks (blocked in an allreduce) does not: it is not ready to run.
    """
    try:
        with open(_SCHEDSTAT) as handle:
            return int(handle.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


#: ``workshop run --script ... --profile-steps N``'s torch.profiler schedule: one step skipped
#: and one warm-up step before the N profiled ones (``torch.profiler.schedule(wait=1,
#: warmup=1, active=N)``: the first step builds DDP's buckets and pays one-time costs), in
#: workshop.check.profiled; the step after them also writes the trace.
PROFILE_SKIPPED_STEPS, PROFILE_WARMUP_STEPS = 1, 1


def first_unprofiled_step(profile_steps: int | None) -> int:
    """The first step (counted from 0) that neither the profiler nor its trace's writing
    slowed, in a run profiled for ``profile_steps`` steps (0 for a run without a profiler).

    >>> first_unprofiled_step(5), first_unprofiled_step(None)
    (8, 0)
    """
    if not profile_steps:
        return 0
    return PROFILE_SKIPPED_STEPS + PROFILE_WARMUP_STEPS + profile_steps + 1
