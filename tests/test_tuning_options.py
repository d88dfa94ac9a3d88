"""The tuning options of a run (--compression, --cache-capacity, --backward-passes-per-step,
and the other Horovod knobs): one declaration in workshop.runspec, the horovodrun flags
and HOROVOD_* variables they become, run.json, and two live runs that use them."""

from __future__ import annotations

import json
import sys

import pytest

from workshop.cli import build_parser, main
from workshop.launch.options import config_from_args
from workshop.launch.run import RunConfig, launch_command
from workshop.runspec import (
    CLI_OPTIONS,
    GRID_FIELDS,
    HOROVOD_SETTINGS,
    horovod_variables,
    horovodrun_flags,
)


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_every_option_is_a_run_config_field_and_every_knob_an_option():
    fields = set(RunConfig.__dataclass_fields__)
    names = [option.field for option in CLI_OPTIONS]
    assert len(names) == len(set(names)) and set(names) <= fields
    # launcher is set by `workshop run --launcher` (clusters), script, its arguments and its
    # profiler by `workshop run --script FILE [--profile-steps N] -- ARGS`: not run options of
    # the table
    assert fields - set(names) == {"launcher", "script", "script_args", "profile_steps"}
    assert {setting.field for setting in HOROVOD_SETTINGS} <= set(names)
    assert {"compression", "cache_capacity", "backward_passes_per_step"} <= set(GRID_FIELDS)


def test_tuning_options_reach_horovodrun_and_the_training_program(tmp_path):
    args = build_parser().parse_args(
        [
            "run",
            "--compression",
            "fp16",
            "--cache-capacity",
            "0",
            "--backward-passes-per-step",
            "4",
            "--cycle-time-ms",
            "5",
        ]
    )
    config = config_from_args(args)
    assert (config.compression, config.cache_capacity, config.backward_passes_per_step) == (
        "fp16",
        0,
        4,
    )
    argv, env = launch_command(config, tmp_path, "subset")
    assert _value(argv, "--cache-capacity") == "0"
    assert _value(argv, "--cycle-time-ms") == "5"
    program = argv[argv.index("-m") :]
    assert _value(program, "--compression") == "fp16"
    assert _value(program, "--backward-passes-per-step") == "4"
    # horovodrun sets the variables for the ranks itself: not set twice
    assert not any(key.startswith("HOROVOD_") for key in env)


def test_defaults_leave_horovod_alone(tmp_path):
    config = config_from_args(build_parser().parse_args(["run", "--no-timeline"]))
    assert (config.compression, config.cache_capacity, config.backward_passes_per_step) == (
        "none",
        None,
        1,
    )
    argv, _ = launch_command(config, tmp_path, "subset")
    assert argv[:6] == ["horovodrun", "-np", "2", "-H", "localhost:2", "--gloo"]
    assert argv[6] == sys.executable  # no Horovod flag at all
    for flag in ("--compression", "--backward-passes-per-step", "--cache-capacity"):
        assert flag not in argv


def test_cluster_launcher_gets_the_variables(tmp_path):
    config = RunConfig(
        np=4, cache_capacity=0, cycle_time_ms=2.5, compression="fp16", launcher="mpirun -n 4"
    )
    argv, env = launch_command(config, tmp_path, "full")
    assert env["HOROVOD_CACHE_CAPACITY"] == "0" and env["HOROVOD_CYCLE_TIME"] == "2.5"
    exported = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"]
    assert {"HOROVOD_CACHE_CAPACITY", "HOROVOD_CYCLE_TIME"} <= set(exported)
    assert _value(argv, "--compression") == "fp16"


def test_variables_are_what_horovodrun_itself_sets(tmp_path, monkeypatch):
    """Our table against Horovod 0.28.1's own translation of its flags
    (horovod/runner/common/util/config_parser.py)."""
    from horovod.runner import launch as horovodrun
    from horovod.runner.common.util import config_parser

    config = RunConfig(
        timeline=True,
        mark_cycles=True,
        fusion_threshold_mb=4,
        cycle_time_ms=5,
        cache_capacity=0,
        autotune=True,
    )
    flags = horovodrun_flags(config, tmp_path)
    monkeypatch.setattr(sys, "argv", ["horovodrun", "-np", "2", *flags, "python", "x.py"])
    env: dict[str, str] = {}
    config_parser.set_env_from_args(env, horovodrun.parse_args())
    assert env == horovod_variables(config, tmp_path)
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(4 * 1024 * 1024)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (RunConfig(compression="int8"), "compression='int8' is not one of none, fp16"),
        (RunConfig(cache_capacity=-1), "cache_capacity must be >= 0"),
        (RunConfig(backward_passes_per_step=0), "backward_passes_per_step must be >= 1"),
        (
            RunConfig(framework="tensorflow", backward_passes_per_step=2),
            "needs --framework torch: Horovod 0.28.1's DistributedGradientTape",
        ),
        (RunConfig(fusion_threshold_mb=0.5), "horovodrun's --fusion-threshold-mb takes whole MB"),
    ],
)
def test_bad_tuning_options_are_named(config, message):
    with pytest.raises(ValueError, match=message):
        config.validate()


def test_sweep_grid_takes_several_values():
    from workshop.commands.sweep import grid_from_args

    args = build_parser().parse_args(
        [
            "sweep",
            "--np",
            "2",
            "--compression",
            "none",
            "fp16",
            "--cache-capacity",
            "1024",
            "0",
            "--backward-passes-per-step",
            "1",
            "2",
            "4",
            "--mpi-profile",
            "--controller",
            "mpi",
        ]
    )
    base, grid = grid_from_args(args)
    assert grid["compression"] == ["none", "fp16"]
    assert grid["cache_capacity"] == [1024, 0]
    assert grid["backward_passes_per_step"] == [1, 2, 4]
    # --controller is a grid option (one value here): the points get it, the base keeps its
    # default
    assert base.mpi_profile and grid["controller"] == ["mpi"] and not base.timeline
    from workshop.launch.sweep import expand_grid

    points = expand_grid(base, grid)
    assert len(points) == 2 * 2 * 3 and all(c.controller == "mpi" for _, c in points)
    for _, config in points:
        config.validate()  # --mpi-profile needs --controller mpi: each point has both
    defaults = build_parser().parse_args(["sweep"])
    assert grid_from_args(defaults)[1]["compression"] == ["none"]


def test_jobscript_passes_tuning_options_only_when_given():
    from workshop.commands.jobscript import spec_from_args

    common = [
        "jobscript",
        "--system",
        "slurm",
        "--gpus-per-node",
        "0",
        "--ranks-per-node",
        "2",
        "--python",
        "/p/python",
        "--out",
        "/p/runs",
    ]
    plain = spec_from_args(build_parser().parse_args(common)).run_options
    assert not {"--compression", "--cache-capacity", "--backward-passes-per-step"} & set(plain)
    tuned = spec_from_args(
        build_parser().parse_args(
            [
                *common,
                "--compression",
                "fp16",
                "--backward-passes-per-step",
                "2",
                "--cache-capacity",
                "0",
            ]
        )
    ).run_options
    assert _value(tuned, "--compression") == "fp16"
    assert _value(tuned, "--backward-passes-per-step") == "2"
    assert _value(tuned, "--cache-capacity") == "0"


def _live_run(tiny_run_argv, tmp_path, *options: str) -> dict:
    """One epoch of 4 steps, with the timeline, into tmp_path/r; its run.json."""
    argv = tiny_run_argv(
        tmp_path,
        "r",
        "--data",
        "subset",
        "--threads-per-rank",
        "1",
        "--quiet",
        *options,
        steps=4,
        timeline=True,
    )
    assert main(argv) == 0
    return json.loads((tmp_path / "r" / "run.json").read_text())


@pytest.mark.live
def test_fp16_compression_run_completes(tmp_path, cpu_lock, horovod_ready, tiny_run_argv):
    record = _live_run(tiny_run_argv, tmp_path, "--compression", "fp16", "--cache-capacity", "0")
    assert record["status"] == "ok"
    assert record["config"]["compression"] == "fp16" and record["config"]["cache_capacity"] == 0
    assert _value(record["launch_command"], "--cache-capacity") == "0"
    log = (tmp_path / "r" / "logs" / "rank.0.log").read_text()
    assert "compression=fp16" in log
    # the gradients went through the allreduce as float16 (the timeline records their dtype)
    from workshop.readers import read_timeline

    spans = read_timeline(tmp_path / "r" / "timeline.json").spans
    grads = spans[(spans["kind"] == "op") & spans["tensor"].astype(str).str.contains("weight")]
    assert len(grads) and set(grads["dtype"].dropna().astype(str)) == {"float16"}


@pytest.mark.live
def test_two_backward_passes_per_step_run_completes(
    tmp_path, cpu_lock, horovod_ready, tiny_run_argv
):
    record = _live_run(tiny_run_argv, tmp_path, "--backward-passes-per-step", "2")
    assert record["status"] == "ok" and record["config"]["backward_passes_per_step"] == 2
    metrics = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").open()]
    # 4 optimizer steps of 2 batches of 32 on each of 2 workers
    assert metrics[0]["steps"] == 4 and metrics[0]["samples"] == 4 * 2 * 32 * 2
    assert record["result"]["global_batch_size"] == 32 * 2 * 2
