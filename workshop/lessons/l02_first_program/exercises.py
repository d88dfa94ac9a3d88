"""Lesson 02 (notebooks/02-your-first-horovod-program.ipynb): its exercises and the findings it
states.

02.1 and 02.2 are about rules (``DistributedSampler``'s padding, the LR warmup), checked
against :func:`workshop.lessons.shard_sizes` and :func:`workshop.analysis.lr_schedule`; 02.3
and 02.4 against the lesson's recordings (data/lessons/first-program: ``workshop check`` of
the untouched skeleton, and the Keras probe of Horovod 0.28.1 as released). They take no data
from the notebook: in a LIVE lesson its worked solutions read the fresh runs, so a run that
disagreed with the recording fails them.
"""

from __future__ import annotations

import contextlib
import io

from workshop.analysis import lr_schedule
from workshop.lessons.entries import Exercise, Finding, Slip
from workshop.lessons.l02_first_program import findings as said

#: Exercise 02.1: training images, ranks, the rank asked about.
IMAGES, RANKS, RANK = 4000, 3, 2
#: Exercise 02.2: one-worker LR, ranks, batch per rank, warmup steps, the step (from 1).
LR, LR_RANKS, BATCH, WARMUP_STEPS, STEP = 0.01, 4, 32, 20, 16


def _quietly(call):
    """``call()`` without the replay's "replaying the recording ..." line."""
    with contextlib.redirect_stdout(io.StringIO()):
        return call()


def rank_samples() -> int:
    from workshop.lessons import shard_sizes

    return int(shard_sizes(IMAGES, RANKS).torch_samples[RANK])


def schedule():
    return lr_schedule(
        LR,
        LR_RANKS * BATCH,
        BATCH,
        "linear",
        warmup_epochs=1,
        epochs=2,
        steps_per_epoch=WARMUP_STEPS,
    )


def lr_at_step() -> float:
    """The LR of step ``STEP`` counted from 1 (the schedule's ``step`` counts from 0)."""
    return float(schedule().lr[STEP - 1])


def skeleton_ok() -> int:
    """Practices ``workshop check`` found OK in the untouched skeleton (the recording)."""
    from workshop.lessons import check_or_replay

    report = _quietly(lambda: check_or_replay("check_skeleton", False))
    return sum(c.ok is True for c in report.checks.values())


def _horovod_pieces():
    from workshop.lessons import keras_pieces

    pieces = _quietly(lambda: keras_pieces(False, build="upstream"))
    return pieces[pieces.source == "horovod"]


def failing_pieces() -> set[str]:
    """Horovod 0.28.1's Keras pieces that fail with tf-keras as released (the recording)."""
    pieces = _horovod_pieces()
    return set(pieces.piece[~pieces.works])


EXERCISES = (
    Exercise(
        "02.1",
        data=(),
        recorded={},
        expected=rank_samples,
        hints=(
            "Does DistributedSampler give every rank the same number of images, even when the "
            "images do not divide evenly among the ranks?",
            "With drop_last=False it pads the list of indices with repeats from the start until "
            "every rank gets as many as the others, then deals them out",
        ),
        slips=(Slip("no padding: the images divided and rounded down", lambda: IMAGES // RANKS),),
        solution="The sampler pads 4,000 to the next multiple of 3 and deals them out evenly.",
        minutes=4,
    ),
    Exercise(
        "02.2",
        data=(),
        recorded={},
        expected=lr_at_step,
        rel_tol=1e-6,
        hints=(
            "Which LR does the warmup start from, which does it end at, and how much of the "
            "warmup lies before the 16th step?",
            "The LR rises in a straight line over the warmup's steps, from the one-worker LR to "
            "the LR scaled by the number of ranks",
        ),
        slips=(
            Slip("steps counted from 0: the next step's LR", lambda: float(schedule().lr[STEP])),
            Slip("no warmup: the LR scaled at once", lambda: LR_RANKS * LR),
        ),
        solution="The 16th step has 15 of the warmup's 20 steps before it: 15/20 of the way "
        "from the one-worker LR to the scaled one.",
        minutes=5,
    ),
    Exercise(
        "02.3",
        data=(),
        recorded={},
        expected=skeleton_ok,
        hints=(
            "For each practice, what would the script have to do together with the other process?",
            "Go through init, broadcast, averaged, sharded, rank0_checkpoint and lr_scaled and "
            "ask which of them two independent serial trainings could satisfy",
        ),
        slips=(Slip("off by one", lambda: skeleton_ok() + 1),),
        solution="Nothing in the skeleton talks to the other process, so no practice holds: "
        "both ranks train on all the data, with their own gradients, LR and checkpoints.",
        minutes=4,
    ),
    Exercise(
        "02.4",
        data=(),
        recorded={},
        expected=failing_pieces,
        hints=(
            "Which of the four need Keras' backend functions (K.something) rather than "
            "Horovod's own operations?",
            "In horovod/_keras/callbacks.py, self.backend is the K that "
            "horovod/tensorflow/keras/callbacks.py imports: which callbacks call self.backend "
            "functions in the methods that run eagerly during fit?",
        ),
        slips=(
            Slip(
                "every callback fails",
                lambda: {p for p in _horovod_pieces().piece if p.endswith("Callback")},
            ),
            Slip("only one of them", lambda: set(sorted(failing_pieces())[:1])),
        ),
        solution="The two that call Keras 3's backend eagerly fail: metric averaging calls "
        "constant, the LR warmup get_value / set_value; the optimizer and the broadcast use "
        "Horovod's own operations.",
        minutes=12,
    ),
)


FINDINGS = (
    Finding("02.differ", ("spread",), said.replicas_differ),
    Finding("02.broadcast", ("spread",), said.after_broadcast),
    Finding("02.drift", ("spread",), said.drift),
    Finding("02.together", ("spread", "drifted"), said.together),
    Finding("02.lr", ("schedule_lr", "epochs"), said.lr_as_printed),
    Finding("02.resume", ("resumed", "whole"), said.resume),
    Finding("02.skeleton", ("report",), said.skeleton_report, after=("02.3",)),
    Finding("02.keras-here", ("here",), said.keras_here),
    Finding("02.seeded", ("pieces",), said.seeded),
    Finding("02.ddp-same", ("ddp", "hvd"), said.ddp_same),
    Finding("02.ddp-speed", ("bench",), said.ddp_speed),
    Finding("02.summary", ("serial", "hvd"), said.summary),
    Finding(
        "02.summary-answers",
        ("skeleton_ok", "solution_ok", "practices", "failing", "failing_here"),
        said.summary_answers,
        after=("02.3", "02.4"),
    ),
)
