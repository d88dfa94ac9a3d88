"""`workshop jobscript`: invalid jobs give clear errors, and the generated scripts are valid bash
that hand `workshop run` exactly the requested options (checked by running them with stand-in
launchers), and with a real mpirun on this machine (live)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from workshop.cli import build_parser, main
from workshop.commands.jobscript import COMPUTED, RESOLVED, run_flags
from workshop.commands.run import add_run_options
from workshop.launch.jobplan import JobScriptError, JobSpec, plan, walltime_seconds
from workshop.launch.systems import SYSTEMS


def _load_golden_module():
    """tests/test_jobscript_golden.py, loaded by path (works with every pytest import mode)."""
    path = Path(__file__).with_name("test_jobscript_golden.py")
    spec = importlib.util.spec_from_file_location("_jobscript_golden_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_GOLDEN = _load_golden_module()
CASES, generate = _GOLDEN.CASES, _GOLDEN.generate
PY = ["--python", "/opt/ws/bin/python", "--out", "/opt/ws/runs"]


def _error(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    assert main(["jobscript", *argv]) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--system", "polaris"], "--account is required on polaris"),
        (["--system", "thetagpu"], "--account is required on thetagpu"),
        (["--system", "polaris", "--account", "A", "--nodes", "0"], "--nodes must be >= 1"),
        (
            ["--system", "polaris", "--account", "A", "--gpus-per-node", "8"],
            "--gpus-per-node 8: a polaris node has 4 GPUs",
        ),
        (
            ["--system", "thetagpu", "--account", "A", "--gpus-per-node", "9"],
            "a thetagpu node has 8 GPUs",
        ),
        (
            ["--system", "polaris", "--account", "A", "--walltime", "30"],
            "--walltime '30' is not HH:MM:SS",
        ),
        (
            ["--system", "polaris", "--account", "A", "--walltime", "00:61:00"],
            "is not HH:MM:SS",
        ),
        (
            ["--system", "polaris", "--account", "A", "--walltime", "00:00:00"],
            "longer than 00:00:00",
        ),
        (
            ["--system", "polaris", "--account", "A", "--queue", "batch"],
            "--queue 'batch' is not a known polaris queue; known: debug, debug-scaling",
        ),
        (
            ["--system", "thetagpu", "--account", "A", "--queue", "debug"],
            "not a known thetagpu queue; known: full-node, single-gpu",
        ),
        (
            ["--system", "polaris", "--account", "A", "--queue", "debug", "--nodes", "3"],
            "queue debug takes at most 2 nodes",
        ),
        (
            ["--system", "polaris", "--account", "A", "--queue", "prod", "--nodes", "2"],
            "queue prod takes at least 10 nodes",
        ),
        (
            ["--system", "polaris", "--account", "A", "--walltime", "02:00:00"],
            "queue debug allows at most 01:00:00",
        ),
        (
            ["--system", "thetagpu", "--account", "A", "--queue", "single-gpu"],
            "queue single-gpu gives at most 1 GPU(s) per job; this job asks for 8",
        ),
        (
            ["--system", "polaris", "--account", "A", "--ranks-per-node", "8"],
            "each rank needs a GPU of its own",
        ),
        (
            ["--system", "polaris", "--account", "A", "--ranks-per-node", "64", "--device", "cpu"],
            "a polaris node has 32 cores",
        ),
        (
            [
                "--system",
                "polaris",
                "--account",
                "A",
                "--gpus-per-node",
                "0",
                "--device",
                "cuda",
                "--ranks-per-node",
                "1",
            ],
            "--device cuda with --gpus-per-node 0",
        ),
        (["--system", "slurm"], "--gpus-per-node is needed for a Slurm cluster"),
        (
            ["--system", "slurm", "--gpus-per-node", "0"],
            "--ranks-per-node must be >= 1",
        ),
        (["--system", "polaris", "--account", "A;rm"], "--account 'A;rm': letters, digits"),
        (["--system", "polaris", "--account", "A", "--np", "4"], "--np is set by the job script"),
        (
            ["--system", "polaris", "--account", "A", "--controller", "gloo"],
            "--controller is set by the job script",
        ),
        (
            ["--system", "polaris", "--account", "A", "--mark-cycles", "--no-timeline"],
            "run options: --mark-cycles marks cycles in the timeline",
        ),
        (
            ["--system", "slurm", "--gpus-per-node", "1", "--filesystems", "home"],
            "--filesystems is not used on slurm",
        ),
        (
            ["--system", "polaris", "--account", "A", "--filesystems", "home eagle"],
            "names separated by ':' on polaris",
        ),
        (["--system", "polaris", "--account", "A", "--python", "python3"], "absolute path"),
    ],
)
def test_invalid_jobs_give_clear_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    err = _error(argv, capsys)
    assert message in err
    assert err.startswith("workshop jobscript: ")


def test_allow_unknown_queue_skips_queue_checks_only(capsys: pytest.CaptureFixture) -> None:
    argv = ["--system", "polaris", "--account", "A", "--queue", "SDL-workshop", "--nodes", "20"]
    assert main(["jobscript", *argv, *PY, "--allow-unknown-queue"]) == 0
    assert "#PBS -q SDL-workshop" in capsys.readouterr().out
    # ... but not the hardware: a Polaris node still has 4 GPUs
    err = _error([*argv, "--allow-unknown-queue", "--gpus-per-node", "5"], capsys)
    assert "a polaris node has 4 GPUs" in err


def test_walltime_seconds() -> None:
    assert walltime_seconds("00:30:00") == 1800
    assert walltime_seconds("100:00:01") == 360001
    with pytest.raises(JobScriptError, match="HH:MM:SS"):
        walltime_seconds("1h")


def test_plan_defaults_follow_the_hardware() -> None:
    polaris = plan(JobSpec("polaris", 2, [], "/p", account="A"))
    assert (polaris.gpus_per_node, polaris.ranks_per_node, polaris.np) == (4, 4, 8)
    assert (polaris.threads_per_rank, polaris.device, polaris.queue) == (8, "cuda", "debug")
    theta = plan(JobSpec("thetagpu", 3, [], "/p", account="A"))
    assert (theta.np, theta.threads_per_rank, theta.queue) == (24, 16, "full-node")
    cpu = plan(JobSpec("thetagpu", 1, [], "/p", account="A", gpus_per_node=0, ranks_per_node=16))
    assert (cpu.device, cpu.np) == ("cpu", 16)


def test_single_gpu_queue_counts_gpus() -> None:
    spec = JobSpec("thetagpu", 1, [], "/p", account="A", queue="single-gpu", gpus_per_node=1)
    from workshop.launch.jobscript import render

    assert "#COBALT -n 1\n" in render(spec)


def test_every_queue_in_the_table_is_accepted() -> None:
    for system in SYSTEMS.values():
        for queue, limits in (system.queues or {}).items():
            spec = JobSpec(
                system.name,
                limits.min_nodes,
                [],
                "/p",
                account="A",
                queue=queue,
                gpus_per_node=1 if limits.max_gpus else None,
            )
            assert plan(spec).queue == queue


def test_run_flags_cover_every_workshop_run_option() -> None:
    parser = argparse.ArgumentParser()
    add_run_options(parser)
    dests = set(vars(parser.parse_args([])))
    assert set(run_flags()) | set(COMPUTED) | set(RESOLVED) == dests


def _script_run_command(script: str) -> list[str]:
    """The `workshop run` arguments of a script's launch line, variables substituted."""
    joined = script.replace("\\\n", " ")
    line = next(line for line in joined.splitlines() if "-m workshop.cli run" in line)
    for variable, value in (("LAUNCHER", "LAUNCHER"), ("NP", "99"), ("THREADS", "7")):
        line = line.replace(f'"${variable}"', value)
    words = shlex.split(line)
    return words[words.index("run") + 1 :]


@pytest.mark.parametrize("case", sorted(CASES))
def test_script_passes_the_requested_options_to_workshop_run(case: str) -> None:
    wanted = build_parser().parse_args(["jobscript", *CASES[case]])
    run_argv = _script_run_command(generate(case))
    got = build_parser().parse_args(["run", *run_argv])  # `workshop run` accepts every option
    assert (got.launcher, got.np, got.controller) == ("LAUNCHER", 99, "mpi")
    for dest in run_flags():
        assert getattr(got, dest) == getattr(wanted, dest), dest
    assert str(got.out) == wanted.out
    assert got.name == wanted.name


@pytest.mark.parametrize("case", sorted(CASES))
def test_script_is_valid_bash_with_directives_first(case: str) -> None:
    script = generate(case)
    check = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash -l"
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    prefix = {"thetagpu": "#COBALT", "polaris": "#PBS", "slurm": "#SBATCH"}[case.split("-")[0]]
    directive_lines = [i for i, line in enumerate(lines) if line.startswith(prefix)]
    assert directive_lines and max(directive_lines) < first_command
    assert directive_lines == list(range(1, len(directive_lines) + 1)), "directives at the top"
    assert all(len(line) < 100 for line in lines)


@pytest.mark.parametrize(
    ("case", "launcher"),
    [
        ("thetagpu-torch-mnist-2x8", "mpirun -hostfile {tmp}/nodefile -n 16 -npernode 8"),
        ("polaris-torch-cifar10-2x4", "mpiexec -n 8 -ppn 4 --depth 8 --cpu-bind depth"),
        (
            "slurm-tensorflow-mnist-2x4",
            "srun --mpi=pmix --nodes=2 --ntasks=8 --ntasks-per-node=4 --cpus-per-task=8",
        ),
    ],
)
def test_script_runs_and_hands_over_launcher_and_options(
    case: str, launcher: str, tmp_path: Path, fake_program
) -> None:
    """Run the generated script with a stand-in Python that records what it was given."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "calls.jsonl"
    python = stubs / "python"
    python.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps({{'argv': sys.argv[1:], "
        "'cwd': os.getcwd()}) + '\\n')\n"
    )
    python.chmod(0o755)
    for tool in ("module", "conda"):  # site tools used by --setup lines
        fake_program(stubs / tool, f'echo "{tool} $*" >> {tmp_path}/setup.log\n')
    # a Slurm whose srun offers PMIx (the script checks before it launches)
    fake_program(stubs / "srun", 'echo "MPI plugin types are..."; echo "        pmix"\n')
    args = CASES[case][:]
    args[args.index("--python") + 1] = str(python)
    script = render_case(args)
    (tmp_path / "job.sh").write_text(script)
    (tmp_path / "nodefile").write_text("node1\nnode2\n")
    workdir = tmp_path / "submitted-from"
    workdir.mkdir()
    env = {
        "PATH": f"{stubs}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "COBALT_NODEFILE": str(tmp_path / "nodefile"),
        "PBS_O_WORKDIR": str(workdir),
    }
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", str(tmp_path / "job.sh")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    argv = call["argv"]
    assert argv[:3] == ["-m", "workshop.cli", "run"]
    assert argv[argv.index("--launcher") + 1] == launcher.format(tmp=tmp_path)
    assert argv[argv.index("--np") + 1] == str(plan_np(case))
    if case.startswith("polaris"):
        assert call["cwd"] == str(workdir)  # cd "$PBS_O_WORKDIR"
        assert (tmp_path / "setup.log").read_text().splitlines() == [
            "module use /soft/modulefiles",
            "module load conda",
            "conda activate base",
        ]


@pytest.mark.parametrize(("cpus_on_node", "threads"), [("16", "4"), ("2", "1"), (None, "1")])
def test_slurm_threads_come_from_the_allocated_cpus(
    cpus_on_node: str | None, threads: str, tmp_path: Path, fake_program
) -> None:
    python = tmp_path / "python"
    fake_program(python, f'echo "$@" > {tmp_path}/argv\n')
    argv = [*CASES["slurm-torch-mnist-cpu-1x4"]]
    argv[argv.index("--python") + 1] = str(python)
    (tmp_path / "job.sh").write_text(render_case(argv))
    fake_program(tmp_path / "bin" / "srun", 'echo "        pmix"\n')  # srun offers PMIx
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"} | (
        {"SLURM_CPUS_ON_NODE": cpus_on_node} if cpus_on_node else {}
    )
    result = subprocess.run(
        ["bash", str(tmp_path / "job.sh")], env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    words = (tmp_path / "argv").read_text().split()
    assert words[words.index("--threads-per-rank") + 1] == threads


def render_case(argv: list[str]) -> str:
    from workshop.commands.jobscript import spec_from_args
    from workshop.launch.jobscript import render

    return render(spec_from_args(build_parser().parse_args(["jobscript", *argv])))


def plan_np(case: str) -> int:
    from workshop.commands.jobscript import spec_from_args

    return plan(spec_from_args(build_parser().parse_args(["jobscript", *CASES[case]]))).np


def test_output_file_is_written_executable_and_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "job.sh"
    argv = ["jobscript", "--system", "polaris", "--account", "A", *PY, "-o", str(out)]
    assert main(argv) == 0
    assert out.read_text().startswith("#!/bin/bash -l\n#PBS")
    assert os.access(out, os.X_OK)
    assert "qsub" in capsys.readouterr().out
    out.write_text("my edits")
    assert main(argv) == 2
    assert "exists; not overwriting" in capsys.readouterr().err
    assert out.read_text() == "my edits"
    assert main([*argv, "--force"]) == 0 and out.read_text().startswith("#!/bin/bash")


def cobalt_nodefile(ranks_on_node: int) -> str:
    """This machine as Cobalt writes ``COBALT_NODEFILE``: the node's host name, one line per node.
    Open MPI 5's mpirun (PRRTE) sees ``COBALT_JOBID`` and reads that file as a PBS nodefile, a
    line per slot: there the node is listed once per rank, or it has one slot."""
    from workshop.launch.profiler import mpi_version

    # "mpirun (Open MPI) 4.1.4" -> 4
    open_mpi_major = int(mpi_version().rsplit(" ", 1)[1].split(".")[0])
    lines = 1 if open_mpi_major < 5 else ranks_on_node
    return f"{socket.gethostname()}\n" * lines


@pytest.mark.live
@pytest.mark.usefixtures("horovod_ready", "mpi_tools")
def test_thetagpu_cpu_script_runs_for_real_with_mpirun(tmp_path: Path, cpu_lock) -> None:
    """The ThetaGPU script, made for 2 CPU ranks on 1 node, run here with the real Open MPI
    mpirun (ThetaGPU's launcher) and a local nodefile: it must produce a normal run directory."""
    from workshop.readers.runs import read_metrics, read_run

    runs = tmp_path / "runs"
    argv = [
        "--system",
        "thetagpu",
        "--nodes",
        "1",
        "--gpus-per-node",
        "0",
        "--ranks-per-node",
        "2",
        "--threads-per-rank",
        "1",
        "--account",
        "local",
        "--python",
        sys.executable,
        "--out",
        str(runs),
        "--epochs",
        "1",
        "--steps-per-epoch",
        "5",
        "--data",
        "subset",
        "--timeline",
    ]
    (tmp_path / "job.sh").write_text(render_case(argv))
    (tmp_path / "nodefile").write_text(cobalt_nodefile(ranks_on_node=2))
    env = os.environ | {"COBALT_NODEFILE": str(tmp_path / "nodefile"), "COBALT_JOBID": "4242"}
    result = subprocess.run(
        ["bash", str(tmp_path / "job.sh")],  # under the CPU lock (the cpu_lock fixture)
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = runs.iterdir()
    run = read_run(run_dir)
    assert run["status"] == "ok"
    assert run["config"]["np"] == 2 and run["config"]["controller"] == "mpi"
    assert run["launch_command"][:7] == [
        "mpirun",
        "-hostfile",
        str(tmp_path / "nodefile"),
        "-n",
        "2",
        "-npernode",
        "2",
    ]
    assert run["env"].get("COBALT_JOBID") == "4242"
    assert len(read_metrics(run_dir)) == 1
    assert (run_dir / "timeline.json").exists()
    assert {p.name for p in (run_dir / "logs").glob("rank.*.log")} == {"rank.0.log", "rank.1.log"}
