"""A claim is a test (issue 59), lesson 10: every quantitative sentence and caption of the
lesson held (built from data, a source line, or a test here), PyTorch 2.14's source lines it
cites read from the installed package, its sentences about the recordings checked against
them, and its stated time derived from its words and exercises as the other lessons' are."""

from __future__ import annotations

import difflib
import json
import math
import re
import statistics
from pathlib import Path

import pytest
import torch
from test_lesson_claims import NOTEBOOKS, REPO, caption, flat
from test_lesson_claims_inventory import CAPTION_CLAIM, CITES, CLAIM

import workshop as wk
from workshop.lessons.l08_tuning.findings import sweep_runs
from workshop.lessons.l10_ddp import findings as said
from workshop.lessons.l10_ddp.exercises import RECORDINGS

LESSON = next(NOTEBOOKS.glob("10-*.ipynb"))
TORCH = Path(torch.__file__).parent
REDUCER = TORCH / "include" / "torch" / "csrc" / "distributed" / "c10d" / "reducer.hpp"
DDP = TORCH / "nn" / "parallel" / "distributed.py"

# How a quantitative sentence of lesson 10 that cites nothing is held (the kinds of
# tests/test_lesson_claims_inventory.py's HELD; "test:<name>" a test of this file).
HELD = {
    ("a10c0029", "On a GPU cluster with NCCL the balance m"): "model",
}


def _cells() -> list[dict]:
    return json.loads(LESSON.read_text())["cells"]


def claims() -> list[tuple[str, str, str]]:
    """Every quantitative markdown sentence and caption of lesson 10: (cell id, its first 40
    characters, how it is held: exercise, source, or HELD's; "" when it is not)."""
    found = []
    for c in _cells():
        text = c.get("metadata", {}).get("caption", "")
        if text and CAPTION_CLAIM.search(text):
            found.append((c["id"], "caption", HELD.get((c["id"], "caption"), "")))
        if c["cell_type"] != "markdown":
            continue
        text = re.sub(r"```.*?```", "", "".join(c["source"]), flags=re.S)
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z*(`\-])", flat(text)):
            if not CLAIM.search(sentence):
                continue
            key = (c["id"], sentence[:40])
            how = (
                HELD.get(key)
                or ("exercise" if "exercise" in c.get("metadata", {}).get("tags", []) else "")
                or ("source" if CITES.search(text) else "")
            )
            found.append((*key, how))
    return found


def test_every_quantitative_sentence_of_lesson_10_is_held():
    found = claims()
    unheld = [f"{cell} {start!r}" for cell, start, how in found if not how]
    assert not unheld, "sentences neither built, cited nor tested:\n" + "\n".join(unheld)
    here = Path(__file__).read_text()
    for (cell, start), how in HELD.items():
        assert (cell, start, how) in found, f"HELD lists a sentence lesson 10 lost: {start!r}"
        if how.startswith("test:"):
            assert f"def {how[5:]}(" in here, how


def test_an_unheld_sentence_fails_the_scan(tmp_path, monkeypatch):
    # the near miss: the same scan on a sentence with a number and no source
    cells = [{"id": "x", "cell_type": "markdown", "source": "DDP is 3 ms faster here.",
              "metadata": {}}]  # fmt: skip
    monkeypatch.setattr(f"{__name__}._cells", lambda: cells)
    assert claims() == [("x", "DDP is 3 ms faster here.", "")]


# --- PyTorch 2.14's source lines the lesson cites (docs/sources.md) --------------------------


def _lines(path: Path, first: int, last: int) -> str:
    return "\n".join(path.read_text().splitlines()[first - 1 : last])


def test_the_installed_torch_is_the_one_the_lesson_cites():
    assert torch.__version__.startswith("2.14"), torch.__version__


def test_the_bucket_sizes_the_lesson_cites():
    assert "_DEFAULT_BUCKET_CAP_MB = 25" in _lines(DDP, 31, 31)
    assert "kDefaultFirstBucketBytes = 1024 * 1024" in _lines(REDUCER, 30, 30)
    assert "kDefaultBucketBytesCap = 25 * 1024 * 1024" in _lines(REDUCER, 31, 31)
    first = _lines(DDP, 108, 110)
    assert "_DEFAULT_FIRST_BUCKET_BYTES if is_using_default else bucket_bytes_cap" in first


def test_the_order_the_lesson_cites():
    warning = flat(_lines(DDP, 632, 638))
    assert "reverse order of the registered parameters" in warning
    assert "exact same model and thus the exact same parameter registration order" in warning
    assert "according to when tensors received grads" in _lines(REDUCER, 126, 127)
    rebuild = _lines(REDUCER, 147, 151)
    assert "only rebuild" in rebuild and "after the first iteration" in rebuild
    assert "size_t next_bucket_;" in _lines(REDUCER, 232, 232)


def test_the_reducer_lines_the_lesson_cites():
    assert "ensure_prior_reduction_finished" in _lines(REDUCER, 298, 300)
    library = (TORCH / "lib" / "libtorch_cpu.so").read_bytes()
    message = b"Expected to have finished reduction in the prior iteration before starting"
    assert message in library
    text = flat("".join("".join(c["source"]) for c in _cells() if c["id"] == "a10c0013"))
    assert message.decode() in text


# --- the recordings, as the lesson states them ----------------------------------------------


@pytest.fixture(scope="module")
def runs() -> dict:
    # the DDP straggler's recording is tests/test_diagnose_ddp_cases.py's to hold
    return {name: wk.open_run(path) for name, path in RECORDINGS.items() if name != "straggler"}


def test_both_frameworks_reduce_the_same_bytes_and_ddp_in_one_bucket(runs):
    # "the same gradients": Horovod's timeline and DDP's trace, bytes per step
    horovod = said.horovod_fusion(runs["fusion"])
    ddp = said.summary(runs["ddp"])["per_rank"]
    assert {r["bytes_per_step"] for r in ddp.values()} == {horovod.bytes_per_step[128.0]}
    # one bucket with the default cap, in every round; cap 0: one per gradient tensor, as
    # Horovod with fusion off has one allreduce per tensor
    table = said.bucket_rounds(runs["buckets"])
    assert set(table.default_buckets) == {1}
    assert set(table.cap0_buckets) == {horovod.tensors_per_step[0.0]} == {8}
    assert horovod.ops_per_step[0.0] == horovod.tensors_per_step[0.0]
    # the near miss: Horovod's default does not fuse a step into one response
    assert horovod.ops_per_step[128.0] > 1


def test_the_captions_hold(runs):
    # "several of them inside the backward pass": with cap 0, allreduce time overlaps the
    # backward pass in every profiled step of every rank; with one bucket it is a sliver
    cap0 = wk.analysis.step_breakdown(said.traces(runs["ddp_cap0"]))
    assert caption("10", "a10c0022").count("several of them inside the backward pass")
    assert (cap0.overlap_us > 0).all() and cap0.buckets.min() >= 2
    assert said.overlap_fraction(runs["ddp_cap0"]) > 2 * said.overlap_fraction(runs["ddp"])
    # "no row for the forward or backward pass": a timeline holds Horovod's activities only
    spans = wk.open_run(f"{RECORDINGS['fusion']}/p00-fus128").timeline.spans
    assert not spans.name.str.contains("backward|forward", case=False).any()


def test_the_mistake_is_one_change_of_lesson_02s_script():
    # "lesson 02's ddp_torch.py with one classic mistake": no DistributedSampler for training
    programs = REPO / "workshop" / "lessons"
    fixed = (programs / "l02_first_program" / "programs" / "ddp_torch.py").read_text()
    mistake = (programs / "l10_ddp" / "programs" / "ddp_torch_mistake.py").read_text()
    assert "sampler=train_sampler" in fixed and "train_sampler" not in mistake
    # a copy a learner edits, kept in step with the program it copies: below the docstrings
    # every line but the training set's sharding is ddp_torch.py's (the near miss, a change
    # to lesson 02's program that the copy lacks, fails here)
    body = lambda text: text[text.index('"""', 3) :].splitlines()  # noqa: E731
    changed = [
        line[1:].strip()
        for line in difflib.unified_diff(body(fixed), body(mistake), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed and all(
        "sampler" in line or "train_loader" in line or "[ddp:shard]" in line for line in changed
    ), changed


def test_the_recorded_checks_judge_the_mistake_and_its_fix(runs):
    assert said.failed_practices(runs["check"]) == ["sharded"]
    assert said.failed_practices(runs["check"], "fixed") == []


def test_the_rank_whose_graph_differs_errors_and_its_partner_waits(runs):
    # the section's claim in data: rank 1 (the one that skips a layer) stops with DDP's error,
    # the parameters it skipped got no gradient, rank 0 never finished a step
    text = said.rank_branch(runs["check"])
    assert "Rank **1** stopped with `RuntimeError: Expected to have finished reduction" in text
    assert "`middle.bias, middle.weight`" in text and "on **rank 0**" in text
    # the near miss: the same program with find_unused_parameters=True runs to its end
    source = (REPO / "workshop/lessons/l10_ddp/programs/ddp_rank_branch.py").read_text()
    assert "find_unused_parameters=args.find_unused" in source


# --- the stated time ----------------------------------------------------------------------------


def _words(path: Path) -> int:
    cells = json.loads(path.read_text())["cells"]
    return sum(len("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")


def test_the_stated_time_is_its_exercises_and_its_reading():
    # Each lesson's time is its reading and cells plus its exercises' minutes. Lessons 01-09
    # read at a median of about 54 words of markdown per minute (their stated time, optional
    # parts included, less their exercises' minutes); lesson 10 is held to the same rate,
    # rounded to 5 minutes.
    from tools.book.tracks import exercise_minutes, lesson_table

    minutes = exercise_minutes()
    table = {lesson.number: lesson for lesson in lesson_table()}
    rates = [
        _words(NOTEBOOKS / lesson.name)
        / (lesson.minutes + lesson.optional - sum(minutes.get(n, [])))
        for n, lesson in table.items()
        if "01" <= n <= "09"
    ]
    rate = statistics.median(rates)
    derived = sum(minutes["10"]) + _words(LESSON) / rate
    stated = table["10"].minutes + table["10"].optional
    assert stated == 5 * math.floor(derived / 5 + 0.5), (stated, derived, rate)
    assert stated != 5 * math.floor(sum(minutes["10"]) / 5 + 0.5)  # not the exercises alone


def test_turning_fusing_off_cost_time_in_both_frameworks(runs):
    # the Summary: "Turning fusing off (one allreduce per gradient) cost time here in both
    # frameworks": DDP's step longer in every round, Horovod's throughput lower beyond the
    # spread of its repeats (lesson 08's ranges do not overlap)
    summary = flat("".join("".join(c["source"]) for c in _cells() if c["id"] == "a10c0038"))
    assert "cost time here in both frameworks" in summary
    assert (said.bucket_rounds(runs["buckets"]).ratio > 1).all()
    effect = wk.analysis.knob_effect(
        sweep_runs(runs["fusion"]),
        "fusion_threshold_mb", "samples_per_s", 128,
    ).set_index("fusion_threshold_mb")  # fmt: skip
    assert effect.ratio[0.0] < 1 and not effect.overlaps[0.0]
