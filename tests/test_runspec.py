"""One declaration per run option (workshop.runspec.RUN_SPEC): every consumer is derived from
it, no module keeps a list of its own, and adding an option is one row."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

import workshop
from workshop import runspec
from workshop.runspec import OPTIONS, RUN_SPEC

PACKAGE = Path(workshop.__file__).parent
RUNSPEC = Path(runspec.__file__)
REPO = PACKAGE.parent
NAMES = frozenset(OPTIONS)


def _literal_lists(tree: ast.AST):
    """(line, option names) of every list, tuple, set or dict literal of strings (dict: its
    keys) that names three or more run options."""
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [key for key in node.keys if key is not None]
        else:
            continue
        names = {
            item.value
            for item in items
            if isinstance(item, ast.Constant) and isinstance(item.value, str)
        }
        if len(names & NAMES) >= 3:
            yield node.lineno, sorted(names & NAMES)


# Lists of option names that are no declaration of the options but a choice of a few to show
# or copy: a new option need not appear in them. Each is named by file and names.
SELECTIONS = {
    # not run options: a check report's fields, and a recording's keys, that share names with
    # the run options (script: workshop run --script since issue 49)
    ("workshop/check/report.py", ("framework", "np", "script")): 1,
    ("workshop/lessons/l02_first_program/recording.py", ("launcher", "np", "script")): 1,
    # `workshop runs` / doctor: the columns a learner sees first in the list of runs
    ("workshop/readers/runs.py", ("controller", "dataset", "framework", "np")): 2,
    # a sweep's compute baseline times one network and per-worker batch: these may not vary
    ("workshop/launch/sweep.py", ("batch_size", "dataset", "framework")): 1,
    # the epochs table: the run's columns the learning-curve analyses group epochs by
    ("workshop/readers/sweep.py", ("batch_size", "lr_scaling", "np")): 1,
    # summary.json: what rank 0 measured and ran with (np is hvd.size(), device the one used)
    (
        "workshop/train/common.py",
        ("data", "device", "epochs", "framework", "np", "steps_per_epoch", "threads_per_rank"),
    ): 1,
}


def test_no_module_keeps_its_own_list_of_run_options():
    # A list of option names anywhere but the spec is a second declaration that drifts (as
    # scaling's GROUP_KEYS did: it lacked compression, cache_capacity, backward_passes_per_step
    # and data, so scaling_groups mixed runs doing different work).
    found, selections = [], {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == RUNSPEC:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        name = path.relative_to(REPO).as_posix()
        for line, names in _literal_lists(tree):
            key = (name, tuple(names))
            if key in SELECTIONS:
                selections[key] = selections.get(key, 0) + 1
            else:
                found.append(f"{name}:{line}: {names}")
    assert found == [], "lists of run options outside workshop/runspec.py:\n" + "\n".join(found)
    assert selections == SELECTIONS  # an allowed selection that went away leaves this table


def test_the_scanner_finds_the_lists_that_used_to_be_there():
    old = 'GROUP_KEYS = ("framework", "dataset", "controller", "batch_size")\n'
    old += '_SAME_WORK = ("batch_size", "dataset", "fusion_threshold_mb", "cycle_time_ms")\n'
    old += 'COMPUTED = {"np": "a", "controller": "b", "oversubscribe": "c"}\n'
    old += 'COLUMNS = ["np", "samples_per_s", "speedup"]\n'  # one option: a table's columns
    assert [line for line, _ in _literal_lists(ast.parse(old))] == [1, 2, 3]


def test_run_config_is_the_spec():
    fields = dataclasses.fields(workshop.launch.run.RunConfig)
    assert [f.name for f in fields] == [o.field for o in RUN_SPEC]
    assert [f.default for f in fields] == [o.default for o in RUN_SPEC]
    with pytest.raises(ValueError, match="compression='int8' is not one of none, fp16"):
        workshop.launch.run.RunConfig(compression="int8").validate()
    with pytest.raises(ValueError, match=r"lr must be > 0, got 0"):
        workshop.launch.run.RunConfig(lr=0).validate()


def test_consumers_use_the_spec_objects():
    from workshop.analysis import commodel, scaling
    from workshop.commands.jobscript import COMPUTED, RESOLVED
    from workshop.launch import jobscript, options, sweep
    from workshop.readers import logs
    from workshop.train import common, data, device

    assert scaling.GROUP_KEYS is runspec.GROUP_KEYS
    assert set(runspec.WORK_KEYS) <= set(commodel._PIPELINE_COLUMNS)
    assert sweep.GRID_LABELS is runspec.GRID_LABELS
    assert options.CLI_OPTIONS is runspec.CLI_OPTIONS
    assert data.DATASETS is runspec.DATASETS and data.DATA_MODES is runspec.DATA_MODES
    assert device.DEVICES is runspec.DEVICES
    assert logs.AUTOTUNE_COLUMNS["tensor_fusion_threshold"] == "fusion_threshold_mb"
    assert jobscript.NEGATABLE == {"timeline"}
    assert set(COMPUTED) == {"np", "controller", "oversubscribe"}
    assert set(RESOLVED) == {"device", "threads_per_rank"}
    program = common.build_parser("t").parse_args(["--run-dir", "r"])
    for option in RUN_SPEC:
        if option.program_flag and option.field != "data":
            dest = option.program_flag.removeprefix("--").replace("-", "_")
            assert getattr(program, dest) == option.default, option.field


def test_groups_hold_every_option_that_changes_the_work_of_a_step():
    work = {o.field for o in RUN_SPEC if o.work and o.table}
    assert {"compression", "backward_passes_per_step", "batch_size", "dataset"} <= work
    assert work <= set(runspec.GROUP_KEYS)
    assert not {"np", "seed", "oversubscribe"} & set(runspec.GROUP_KEYS)


# A new option, declared as one row and nothing else; the child checks that every consumer
# knows it.
TOY_ROW = (
    'RunOption("toy_knob", int, None, "a toy knob", grid=True, label="toy", '
    'horovod=(HorovodSetting("--toy-knob", "HOROVOD_TOY_KNOB", _number, _number),), '
    'program_flag="--toy-knob", work=True),'
)
CHILD = r"""
import json, sys, types
from pathlib import Path

runspec_path, row, recorded = sys.argv[1], sys.argv[2], sys.argv[3]
source = Path(runspec_path).read_text()
end = "\n)\n\n#: Each option by name."
assert source.count(end) == 1, "the end of RUN_SPEC moved: update the test"
source = source.replace(end, "\n    " + row + end)
import workshop

module = types.ModuleType("workshop.runspec")
module.__file__ = runspec_path
sys.modules["workshop.runspec"] = module
exec(compile(source, runspec_path, "exec"), module.__dict__)
workshop.runspec = module

from workshop.analysis import commodel, scaling
from workshop.cli import build_parser
from workshop.commands.jobscript import run_flags
from workshop.commands.sweep import grid_from_args
from workshop.readers.sweep import read_sweep
from workshop.launch.options import config_from_args
from workshop.launch.run import launch_command, train_args
from workshop.launch.sweep import expand_grid
from workshop.train.common import build_parser as program_parser

config = config_from_args(build_parser().parse_args(["run", "--toy-knob", "3"]))
argv, env = launch_command(config, Path("/r"), "subset")
sweep_args = ["sweep", "-np", "2", "--toy-knob", "1", "2"]
base, grid = grid_from_args(build_parser().parse_args(sweep_args))
program = program_parser("t").parse_args(train_args(config, Path("/r"), "subset")[3:])
runs, _ = read_sweep(recorded)
print(json.dumps({
    "config": config.toy_knob,
    "horovodrun": argv[argv.index("--toy-knob") + 1] if "--toy-knob" in argv else None,
    "program": program.toy_knob,
    "sweep_names": [name for name, _ in expand_grid(base, grid)],
    "table": "toy_knob" in runs.columns,
    "group": "toy_knob" in scaling.GROUP_KEYS,
    "work": "toy_knob" in commodel._PIPELINE_COLUMNS,
    "jobscript": "toy_knob" in run_flags(),
}))
"""


def test_adding_an_option_is_one_row():
    recorded = REPO / "data" / "capstone" / "case-1"
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(RUNSPEC), TOY_ROW, str(recorded)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {
        "config": 3,
        "horovodrun": "3",
        "program": 3,
        "sweep_names": ["p00-toy1", "p01-toy2"],
        "table": True,
        "group": True,
        "work": True,
        "jobscript": True,
    }
