"""Lesson 02's helpers (workshop.lessons) and scripts: the marked changes, the skeletons, the
learner's copy, the recordings, and (live) the solutions trained under horovodrun / torchrun."""

from __future__ import annotations

import ast
import difflib
import json
import math
import sys

import pytest

from workshop import lessons
from workshop.lessons.l02_first_program import edits as lesson_edits
from workshop.lessons.l02_first_program import keras_probe, recording
from workshop.lessons.l02_first_program import scripts as lesson_scripts
from workshop.paths import data_path
from workshop.train.common import lr_at

SOLUTIONS = [
    "hvd_torch_solution.py",
    "hvd_tf_loop_solution.py",
    "hvd_keras_fit_solution.py",
    "ddp_torch.py",
]
SKELETONS = {
    "hvd_torch_skeleton.py": "hvd_torch_solution.py",
    "hvd_tf_loop_skeleton.py": "hvd_tf_loop_solution.py",
}


@pytest.mark.parametrize("name", SOLUTIONS)
def test_every_change_of_a_solution_is_marked(name):
    # changes() raises on any edit without a marker; each of the 9 changes appears in the two
    # loop solutions (Keras and DDP fold some of them into callbacks / the DDP constructor).
    found = lessons.changes(name)
    if name in ("hvd_torch_solution.py", "hvd_tf_loop_solution.py"):
        assert list(found) == list(lessons.CHANGES)
    assert {"init", "shard", "optimizer", "rank0"} <= set(found), list(found)
    for change in found.values():
        assert change.hunks and all(h.horovod for h in change.hunks), change.tag


def test_change_shows_serial_and_horovod_side_by_side():
    init = lessons.change("init")
    text = str(init)
    assert "+ import horovod.torch as hvd  # [hvd:init]" in text
    assert "+     hvd.init()  # [hvd:init]" in text
    html = init._repr_html_()
    assert "serial_torch.py (serial)" in html and "hvd_torch_solution.py (Horovod)" in html
    assert "hvd.init()" in html
    # The serial line that the device change replaced goes with that change, not with init.
    device = str(lessons.change("device"))
    assert "&quot;cuda&quot;" in lessons.change("device")._repr_html_()  # escaped, not injected
    assert '-     device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in device
    with pytest.raises(KeyError, match="has no change 'nope'"):
        lessons.change("nope")


def test_unmarked_change_is_an_error_naming_file_and_line(tmp_path):
    serial = tmp_path / "serial.py"
    serial.write_text('"""doc"""\nx = 1\ny = 2\n')
    edited = tmp_path / "hvd.py"
    edited.write_text('"""other doc"""\nx = 1\nz = 3\ny = 2\n')
    with pytest.raises(ValueError, match=r"hvd.py:3: changed line without a # \[hvd:<change>\]"):
        lessons.changes(edited, serial=serial)
    edited.write_text('"""other doc"""\nx = 1\nz = 3  # [hvd:bogus]\ny = 2\n')
    with pytest.raises(ValueError, match=r"hvd.py:3: unknown change \[hvd:bogus\]"):
        lessons.changes(edited, serial=serial)
    edited.write_text('"""other doc"""\nx = 1\nz = 3  # [hvd:init]\ny = 2\n')
    assert str(lessons.changes(edited, serial=serial)["init"]).endswith("+ z = 3  # [hvd:init]")


@pytest.mark.parametrize("skeleton", SKELETONS)
def test_skeleton_is_the_serial_script_plus_todo_comments(skeleton):
    solution = SKELETONS[skeleton]
    serial = lessons.SERIAL_OF[skeleton]
    old = lesson_edits._body(lessons.script_path(serial))[0]
    new = lesson_edits._body(lessons.script_path(skeleton))[0]
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        assert op in ("equal", "insert"), (op, old[i1:i2], new[j1:j2])
        added = new[j1:j2] if op == "insert" else []
        assert all(not line.strip() or line.strip().startswith("#") for line in added), added
    # A TODO for every change the solution makes, and no other.
    assert set(lessons.todos(lessons.script_path(skeleton)).change) == set(
        lessons.changes(solution)
    )


def test_write_skeleton_never_overwrites_the_learners_edits(tmp_path, capsys):
    first = lessons.write_skeleton("hvd_torch_skeleton.py", tmp_path)
    assert first == tmp_path / "hvd_torch_skeleton.py"
    assert first.read_text() == lessons.script_path("hvd_torch_skeleton.py").read_text()
    assert lessons.write_skeleton("hvd_torch_skeleton.py", tmp_path) == first  # unchanged
    first.write_text("# my work\n")
    second = lessons.write_skeleton("hvd_torch_skeleton.py", tmp_path)
    assert second == tmp_path / "hvd_torch_skeleton-2.py"
    assert first.read_text() == "# my work\n"
    assert "has your edits, so it was left alone" in capsys.readouterr().out
    second.write_text("# more work\n")
    assert lessons.write_skeleton("hvd_torch_skeleton.py", tmp_path).name == (
        "hvd_torch_skeleton-3.py"
    )
    assert second.read_text() == "# more work\n"


def test_unknown_script_names_the_ones_there_are():
    with pytest.raises(FileNotFoundError, match="serial_torch.py"):
        lessons.script_path("nope.py")


def _script_function(script: str, name: str):
    """A top-level function of a lesson script, without running the script (no Horovod)."""
    tree = ast.parse(lessons.script_path(script).read_text())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace: dict = {}
    exec(compile(ast.Module([node], []), script, "exec"), namespace)
    return namespace[name]


@pytest.mark.parametrize(
    "script", ["hvd_torch_solution.py", "hvd_tf_loop_solution.py", "ddp_torch.py"]
)
def test_solution_warmup_is_the_workshops_rule(script):
    # The learner's scripts may not import workshop, so they carry their own lr_at: it must
    # agree with the one rule the analyses use (steps_per_epoch 20, one warmup epoch).
    script_lr_at = _script_function(script, "lr_at")
    for step in (0, 1, 10, 19, 20, 35):
        expected = lr_at(step, 20, 0.01, 0.04, 1.0)
        assert math.isclose(script_lr_at(step, 20, 0.01, 0.04), expected), step


def test_shard_sizes_are_the_samplers():
    # 4000 = 3 x 1333 + 1: DistributedSampler pads to 4002 (1334 each, 2 handed out twice);
    # slicing every 3rd sample (tf.data's shard) gives 1334, 1333, 1333.
    table = lessons.shard_sizes(4000, 3)
    assert list(table.torch_samples) == [1334, 1334, 1334]
    assert list(table.tf_samples) == [1334, 1333, 1333]
    assert table.attrs["torch_duplicates"] == 2
    assert list(lessons.shard_sizes(4000, 2).torch_samples) == [2000, 2000]


def test_epochs_parses_the_scripts_lines():
    output = (
        "[0]<stdout>:epoch 1: train loss 2.2944 | test loss 2.2744 accuracy 0.1150 | "
        "20 steps in 0.17 s, 7499 samples/s, lr 0.0195\n"
        "[0]<stdout>:epoch 2: train loss 2.1819 | test loss 1.9585 accuracy 0.4110 | "
        "20 steps in 0.24 s, 5249 samples/s, lr 0.02\n"
    )
    table = lessons.epochs(output)
    assert list(table.epoch) == [1, 2] and list(table.steps) == [20, 20]
    assert table.train_loss.tolist() == [2.2944, 2.1819] and table.lr.tolist() == [0.0195, 0.02]
    with pytest.raises(ValueError, match="no 'epoch N: train loss"):
        lessons.epochs("Traceback ...")


def test_keras_probe_judges_by_effect_not_only_by_errors():
    same = {"error": None, "weights_sha1": "a", "final_loss": 1.0, "lrs": [0.05, 0.1]}
    other = dict(same, weights_sha1="b", final_loss=1.5)
    assert keras_probe.judge("DistributedOptimizer", [same, same])["works"] is True
    assert keras_probe.judge("DistributedOptimizer", [same, other])["works"] is False
    assert keras_probe.judge("MetricAverageCallback", [same, other])["works"] is False
    flat = dict(same, lrs=[0.05, 0.05])
    assert keras_probe.judge("LearningRateWarmupCallback", [flat, flat])["works"] is False
    broken = dict(same, error="AttributeError: module 'keras.backend' has no attribute 'x'")
    verdict = keras_probe.judge("MetricAverageCallback", [broken, same])
    assert verdict["works"] is False and "keras.backend" in verdict["error"]
    assert verdict["evidence"] == "raised on 1 of 2 ranks"


def test_keras_probe_runs_the_pieces_in_one_launch_and_names_the_silent_ones(monkeypatch):
    record = {"error": None, "weights_sha1": "a", "final_loss": 1.0, "lrs": [], "seconds": 0.4}
    record["seeded_sha1"] = "s"
    launches = []

    def one_launch(script, np, args, timeout_s):
        launches.append(list(args))
        line = {"piece": "DistributedOptimizer", "ranks": [record, record]}
        return lesson_scripts.Launch(["horovodrun"], 0, keras_probe.MARKER + json.dumps(line), 9)

    monkeypatch.setattr(lesson_scripts, "horovodrun", one_launch)
    verdicts = keras_probe.probe(("DistributedOptimizer",))
    assert launches == [["--piece", "DistributedOptimizer"]]
    assert verdicts[0]["works"] and verdicts[0]["seconds"] == 0.4  # the piece's, not the launch's
    with pytest.raises(RuntimeError, match="no KERAS_PROBE line for MetricAverageCallback "
                       r"\(reported: DistributedOptimizer; exit code 0\)"):  # fmt: skip
        keras_probe.probe(("DistributedOptimizer", "MetricAverageCallback"))
    assert launches[-1] == [
        "--piece", "DistributedOptimizer", "--piece", "MetricAverageCallback"
    ]  # fmt: skip


@pytest.mark.parametrize("name", list(recording.RUNS))
def test_recorded_runs_have_provenance_and_epochs(name):
    found = recording.recorded(name)
    for key in ("command", "np", "args", "recorded_at", "versions", "host", "loadavg_1_5_15"):
        assert key in found, key
    assert found["returncode"] == 0 and found["versions"]["torch"]
    if name != "hvd_keras_fit_solution":  # Keras prints its own progress lines
        table = lessons.epochs(found["output"])
        assert len(table) == int(found["args"][1]) - (2 if name == "hvd_torch_resume" else 0)
        assert len(table) == 1 or table.train_loss.iloc[-1] < table.train_loss.iloc[0], table
    if found["np"] == 2:
        assert found["versions"]["horovod"] == "0.28.1"


def test_recorded_resume_goes_on_from_the_checkpoint():
    saved = lessons.epochs(recording.recorded("hvd_torch_checkpoint")["output"])
    resumed = lessons.epochs(recording.recorded("hvd_torch_resume")["output"])
    whole = lessons.epochs(recording.recorded("hvd_torch_solution")["output"])
    assert list(saved.epoch) == [1, 2] and list(resumed.epoch) == [3]
    # Same seed, same sampler order per epoch, same restored parameters, momentum and LR step:
    # the resumed epoch 3 is the uninterrupted run's epoch 3 (a lost optimizer state, e.g.
    # loading it before hvd.DistributedOptimizer wraps a new one, changes the loss).
    assert saved.train_loss.tolist() == whole.train_loss.tolist()[:2]
    assert resumed.train_loss.iloc[0] == whole.train_loss.iloc[2]


def test_recorded_checks_skeleton_fails_solution_passes():
    solution = lessons.check_or_replay("check_solution", live=False)
    skeleton = lessons.check_or_replay("check_skeleton", live=False)
    assert [c.ok for c in solution.checks.values()] == [True] * 6, solution.text()
    assert solution.exit_code == 0
    assert not any(c.ok is True for c in skeleton.checks.values()), skeleton.text()
    assert skeleton.checks["sharded"].ok is False and skeleton.exit_code == 1


def test_recorded_keras_probe():
    # Horovod 0.28.1 as released (recorded before the build's fix 7): two callbacks fail.
    pieces = lessons.keras_pieces(live=False, build="upstream").set_index("piece")
    assert list(pieces.index) == list(keras_probe.PIECES) + list(keras_probe.REPLACEMENTS)
    horovod = pieces[pieces.source == "horovod"]
    assert set(horovod.index[~horovod.works]) == {
        "MetricAverageCallback",
        "LearningRateWarmupCallback",
    }
    assert "keras.backend" in pieces.loc["MetricAverageCallback", "error"]
    assert pieces.loc[list(keras_probe.REPLACEMENTS), "works"].all()  # the lesson's own


def test_recorded_keras_probe_of_the_workshops_build():
    # The build patches horovod/tensorflow/keras to take tf-keras' backend: all four work.
    found = recording.recorded("keras_pieces")
    assert found["horovod_keras_backend"] == "tf-keras"
    pieces = lessons.keras_pieces(live=False).set_index("piece")
    assert list(pieces.index) == list(keras_probe.PIECES) + list(keras_probe.REPLACEMENTS)
    assert pieces.works.all() and pieces.error.isna().all()
    with pytest.raises(ValueError, match="'workshop' or 'upstream'"):
        lessons.keras_pieces(live=False, build="mine")


@pytest.mark.live
def test_the_installed_horovod_takes_tf_keras_backend(horovod_ready):
    # What setup.sh builds here is the patched module (the test command would otherwise test
    # the lesson's claims about a build it does not have).
    assert keras_probe.horovod_keras_backend() == "tf-keras"


def test_recorded_benchmark_is_consistent():
    result = json.loads(data_path(*lessons.BENCHMARK).read_text())
    table = lessons.benchmark_table(result)
    assert list(table.index) == ["horovod", "ddp"] and (table.repeats >= 5).all()
    assert (table.min_samples_per_s <= table.median_samples_per_s).all()
    assert (table.median_samples_per_s <= table.max_samples_per_s).all()
    ratio = result["samples_per_s"]["ddp"]["median"] / result["samples_per_s"]["horovod"]["median"]
    assert math.isclose(result["ddp_over_horovod_median"], ratio)


# The three live tests below read lesson 02's live run (tests/conftest.py: lesson_02_live),
# which starts these same programs with the lesson's arguments: 3 epochs of 20 steps on 2 ranks.


@pytest.mark.live
def test_solution_trains_under_horovodrun_and_loss_falls(lesson_02_live):
    run = lesson_02_live.objects["hvd_run"]
    assert run.command[0].endswith("horovodrun") and "hvd_torch_solution.py" in run.command[-5]
    table = lessons.epochs(run.output)
    assert list(table.epoch) == [1, 2, 3]
    assert table.train_loss.diff().iloc[1:].lt(0).all(), run.output  # falls every epoch
    assert "rank 1/2: 2000 of 4000 training images per epoch" in run.output
    assert table.lr.iloc[1] == pytest.approx(0.02)  # 2 x 0.01 after one warmup epoch


@pytest.mark.live
def test_solution_passes_workshop_check_and_skeleton_does_not(lesson_02_live):
    # lessons.run_check("check_solution") and ("check_skeleton"), as the lesson runs them
    solution = lesson_02_live.objects["report"]
    assert solution.script.endswith("hvd_torch_solution.py")
    assert [c.ok for c in solution.checks.values()] == [True] * 6, solution.text()
    skeleton = lesson_02_live.objects["skeleton_report"]
    assert skeleton.script.endswith("hvd_torch_skeleton.py")
    assert skeleton.checks["init"].ok is False and skeleton.checks["sharded"].ok is False


@pytest.mark.live
def test_ddp_and_horovod_train_the_same_model(lesson_02_live):
    hvd_launch, ddp_launch = (lesson_02_live.objects[n] for n in ("hvd_run", "ddp_run"))
    assert (
        ddp_launch.command[0].endswith("torchrun")
        and hvd_launch.command[-4:] == (ddp_launch.command[-4:])
    )  # the same arguments
    hvd_run, ddp_run = lessons.epochs(hvd_launch.output), lessons.epochs(ddp_launch.output)
    assert len(ddp_run) == len(hvd_run) == 3
    assert (ddp_run.train_loss - hvd_run.train_loss).abs().max() < 1e-3, (hvd_run, ddp_run)


def test_the_lesson_launcher_finds_this_environments_horovodrun_first(
    tmp_path, monkeypatch, fake_program
):
    venv_bin, other_bin = tmp_path / "venv" / "bin", tmp_path / "elsewhere"
    venv_bin.mkdir(parents=True)
    other_bin.mkdir()
    ours = fake_program(venv_bin / "horovodrun")
    fake_program(other_bin / "horovodrun")
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.setenv("PATH", str(other_bin))
    assert lessons.horovodrun_path() == str(ours)
    ours.unlink()
    assert lessons.horovodrun_path() == str(other_bin / "horovodrun")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="Horovod is not installed here"):
        lessons.horovodrun_path()


def test_the_lesson_launcher_gives_tensorflow_the_keras_horovod_works_with():
    # Without TF_USE_LEGACY_KERAS=1, TF >= 2.16 builds Keras 3 models that Horovod cannot
    # broadcast ('Variable' object has no attribute 'ref'): lesson 02's Keras script fails.
    env = lesson_scripts._environment()
    assert env["TF_USE_LEGACY_KERAS"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"
