"""Which of Horovod's Keras pieces work with tf-keras and this TensorFlow, found by real runs.

Horovod 0.28.1's ``horovod.tensorflow.keras`` imports ``from keras import backend`` for
TensorFlow >= 2.6; with TensorFlow >= 2.16 that is Keras 3's backend even when tf-keras
(Keras 2) trains the model. Each piece is tried on a tiny dense model of its own, on 2 Horovod
processes, and judged by what it must achieve, not only by whether it raises:

- ``DistributedOptimizer``: same initial weights (set explicitly: with tf-keras,
  ``tf.random.set_seed`` alone gives the ranks different ones), different data per rank; it
  works if the weights are still identical on both ranks after training (averaged gradients).
- ``BroadcastGlobalVariablesCallback``: different initial weights per rank (with the
  distributed optimizer); it works if they end identical.
- ``MetricAverageCallback``: different data per rank; it works if the logged loss is the same
  on both ranks.
- ``LearningRateWarmupCallback``: it works if the learning rate rises during the warmup.

Each probe also records whether ``tf.random.set_seed(0)`` on every rank gave the ranks equal
initial weights (``seeded_weights_equal``). Lesson 02's replacements for the two that fail
(``AverageMetrics``, ``LearningRateWarmup`` of ``hvd_keras_fit_solution.py``) are probed the
same way.

The pieces run one after the other in one ``horovodrun -np 2`` launch of this module
(``--piece NAME`` as many times as there are pieces), each after ``clear_session()`` with a new
model and optimizer: one TensorFlow start-up per rank instead of one per piece (the six took
35 s in six launches). A piece that raises is recorded and the next one runs; a piece that
leaves a rank waiting for the other stops the whole launch at the timeout, and the error shows
the launch's last output (with the records of the pieces that had reported).

    python -m workshop.lessons.l02_first_program.keras_probe   # prints the verdicts as JSON

The workshop's Horovod build patches that import (``scripts/build_horovod.sh``, fix 7), so all
four work with it; ``data/lessons/first-program/keras_pieces_upstream.json`` is the probe of a
build without the patch (0.28.1 as released), ``keras_pieces.json`` of the patched one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

PIECES = (
    "DistributedOptimizer",
    "BroadcastGlobalVariablesCallback",
    "MetricAverageCallback",
    "LearningRateWarmupCallback",
)
#: Lesson 02's own callbacks (hvd_keras_fit_solution.py) for the two that fail, probed alike.
REPLACEMENTS = {
    "AverageMetrics": "MetricAverageCallback",
    "LearningRateWarmup": "LearningRateWarmupCallback",
}
MARKER = "KERAS_PROBE "


def horovod_keras_backend() -> str:
    """Which Keras backend this Horovod's ``horovod/tensorflow/keras`` takes, read from its
    source (nothing is imported): ``"tf-keras"`` when the module was patched as
    ``scripts/build_horovod.sh`` does (fix 7: ``K = keras.backend`` of ``tensorflow.keras``),
    ``"keras"`` for 0.28.1 as released (``from keras import backend as K``: Keras 3's with
    TensorFlow >= 2.16), ``"unknown"`` when Horovod or the file is missing."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("horovod")
    if spec is None or not spec.submodule_search_locations:
        return "unknown"
    source = Path(spec.submodule_search_locations[0]) / "tensorflow" / "keras" / "__init__.py"
    if not source.exists():
        return "unknown"
    text = source.read_text()
    if "from keras import backend as K" in text:
        return "keras"
    return "tf-keras" if "K = keras.backend" in text else "unknown"


def rank_main(pieces: list[str]) -> None:
    """One rank of the probes: each piece trains briefly on a model of its own, then rank 0
    prints every rank's record of it."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import horovod.tensorflow.keras as hvd
    import tensorflow as tf

    hvd.init()
    for piece in pieces:
        tf.keras.backend.clear_session()  # no layer, name or optimizer left by the last piece
        _probe_piece(piece, hvd.rank())


def _probe_piece(piece: str, rank: int) -> None:
    import horovod.tensorflow as hvd_tf
    import horovod.tensorflow.keras as hvd
    import numpy as np
    import tensorflow as tf

    started = time.perf_counter()
    rng = np.random.default_rng(100 + rank)
    x = rng.random((128, 8), dtype=np.float32)
    y = rng.integers(0, 4, 128)
    tf.random.set_seed(0)
    model = tf.keras.Sequential([tf.keras.layers.Input((8,)), tf.keras.layers.Dense(4)])
    seeded = b"".join(np.asarray(w).tobytes() for w in model.get_weights())
    # Initial weights set explicitly: tf.random.set_seed alone does not give the ranks equal
    # weights with tf-keras (recorded as seeded_sha1). Different per rank only where the
    # broadcast is under test.
    start = np.random.default_rng(rank if piece == "BroadcastGlobalVariablesCallback" else 0)
    model.set_weights(
        [start.standard_normal(w.shape).astype(np.float32) for w in model.get_weights()]
    )
    optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=0.05, momentum=0.9)
    if piece in ("DistributedOptimizer", "BroadcastGlobalVariablesCallback"):
        optimizer = hvd.DistributedOptimizer(optimizer)
    lrs: list[float] = []
    callbacks = [
        tf.keras.callbacks.LambdaCallback(
            on_batch_end=lambda batch, logs: lrs.append(
                float(tf.keras.backend.get_value(model.optimizer.learning_rate))
            )
        )
    ]
    if piece == "BroadcastGlobalVariablesCallback":
        callbacks.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))
    elif piece == "MetricAverageCallback":
        callbacks.insert(0, hvd.callbacks.MetricAverageCallback())
    elif piece == "LearningRateWarmupCallback":
        callbacks.insert(
            0,
            hvd.callbacks.LearningRateWarmupCallback(
                initial_lr=0.1, warmup_epochs=2, steps_per_epoch=4
            ),
        )
    elif piece in REPLACEMENTS:
        lesson = _lesson_keras_script()
        callbacks.insert(
            0,
            lesson.AverageMetrics()
            if piece == "AverageMetrics"
            else lesson.LearningRateWarmup(0.05, 0.1, warmup_steps=8),
        )
    model.compile(
        optimizer=optimizer, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    record = {
        "rank": rank,
        "error": None,
        "final_loss": None,
        "seeded_sha1": hashlib.sha1(seeded).hexdigest(),
    }
    try:
        history = model.fit(
            x, y, batch_size=32, epochs=2, steps_per_epoch=4, callbacks=callbacks, verbose=0
        )
        record["final_loss"] = float(history.history["loss"][-1])
    except Exception as exc:  # the point of the probe: record what fails, and how
        record["error"] = f"{type(exc).__name__}: {exc}"
    weights = b"".join(np.asarray(w).tobytes() for w in model.get_weights())
    record["weights_sha1"] = hashlib.sha1(weights).hexdigest()
    record["lrs"] = lrs
    record["seconds"] = time.perf_counter() - started
    gathered = hvd_tf.allgather_object(record)
    if rank == 0:
        print(MARKER + json.dumps({"piece": piece, "ranks": gathered}), flush=True)


def _lesson_keras_script():
    """hvd_keras_fit_solution.py as a module (its main() does not run on import)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent / "programs" / "hvd_keras_fit_solution.py"
    spec = importlib.util.spec_from_file_location("hvd_keras_fit_solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def judge(piece: str, ranks: list[dict]) -> dict:
    """Whether ``piece`` did its job, from every rank's record.

    Returns:
        ``{"piece", "works", "evidence", "error"}``.
    """
    errors = sorted({r["error"] for r in ranks if r["error"]})
    if errors:
        return {
            "piece": piece,
            "works": False,
            "error": errors[0],
            "evidence": f"raised on {sum(bool(r['error']) for r in ranks)} of {len(ranks)} ranks",
        }
    same_weights = len({r["weights_sha1"] for r in ranks}) == 1
    losses = [r["final_loss"] for r in ranks]
    if piece in ("DistributedOptimizer", "BroadcastGlobalVariablesCallback"):
        start = "different" if piece == "BroadcastGlobalVariablesCallback" else "identical"
        works = same_weights
        evidence = (
            f"{start} initial weights, different data per rank: final weights "
            f"{'identical' if same_weights else 'different'} on {len(ranks)} ranks"
        )
    elif piece in ("MetricAverageCallback", "AverageMetrics"):
        works = len(set(losses)) == 1
        evidence = "final logged loss per rank: " + ", ".join(f"{x:.6g}" for x in losses)
    else:
        seen = ranks[0]["lrs"]
        works = len(seen) > 1 and seen[-1] > seen[0]
        evidence = f"learning rate from {seen[0]:g} to {seen[-1]:g}" if seen else "no lr seen"
    return {"piece": piece, "works": works, "evidence": evidence, "error": None}


def source(piece: str) -> str:
    """``horovod`` for Horovod's pieces, ``lesson 02 (for X)`` for the lesson's callbacks."""
    return f"lesson 02 (for {REPLACEMENTS[piece]})" if piece in REPLACEMENTS else "horovod"


def probe(
    pieces: tuple[str, ...] = PIECES + tuple(REPLACEMENTS), timeout_s: float = 180
) -> list[dict]:
    """Run the pieces' probes in one ``horovodrun -np 2`` launch and judge each.

    ``command`` is that launch's (the same for every piece); ``seconds`` is the piece's own time
    on rank 0, from building its model to its records. (The recordings in
    ``data/lessons/first-program/`` were made with one launch per piece: their ``command``
    names one piece and their ``seconds`` are that whole launch's.)

    Raises:
        LaunchError: the launch failed or ran past ``timeout_s``
            (:func:`workshop.lessons.l02_first_program.scripts.horovodrun`).
        RuntimeError: the launch ended well but a piece did not report, naming it, with the
            output.
    """
    from workshop.lessons.l02_first_program import scripts

    args = [arg for piece in pieces for arg in ("--piece", piece)]
    run = scripts.horovodrun(__file__, np=2, args=args, timeout_s=timeout_s)
    results = {}
    for line in run.output.splitlines():
        if MARKER in line:
            result = json.loads(line[line.index(MARKER) + len(MARKER) :])
            results[result["piece"]] = result["ranks"]
    missing = [piece for piece in pieces if piece not in results]
    if missing:
        raise RuntimeError(
            f"Keras probe: no {MARKER.strip()} line for {', '.join(missing)} (reported: "
            f"{', '.join(results) or 'none'}; exit code {run.returncode}) in:\n{run.output}"
        )
    return [
        judge(piece, results[piece])
        | {
            "source": source(piece),
            "command": run.command,
            "seconds": round(results[piece][0]["seconds"], 1),
            "seeded_weights_equal": len({r["seeded_sha1"] for r in results[piece]}) == 1,
        }
        for piece in pieces
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--piece",
        action="append",
        choices=PIECES + tuple(REPLACEMENTS),
        help="(internal) one rank of the probes of these pieces, in this order",
    )
    args = parser.parse_args(argv)
    if args.piece:
        rank_main(args.piece)
        return 0
    print(json.dumps(probe(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
