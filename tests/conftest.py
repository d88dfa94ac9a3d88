"""Shared fixtures: the machine-wide CPU lock, Horovod's presence, recorded samples, and the
stand-ins (a fake launcher, fake programs) that several test files use.

Tests that start real processes (Horovod ranks, Gloo workers, mpirun) are marked ``live`` and
take the CPU lock: they are serialised with the other heavy jobs on this machine (2 cores).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import pickle
import resource
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from workshop.launch.programs import find_program
from workshop.launch.run import RunConfig, RunError
from workshop.paths import data_path

REPO = Path(__file__).resolve().parents[1]
SETUP_SH = REPO / "scripts" / "setup.sh"
# No test downloads a data set: `workshop run --data auto` (the default) would otherwise try
# full MNIST on the internet before it falls back to the offline subset (workshop/train/data.py).
# Every process the tests start inherits this; tests of the download path unset it.
os.environ["WORKSHOP_OFFLINE"] = "1"
LOCK_PATH = Path(os.environ.get("WORKSHOP_CPU_LOCK", "/tmp/workshop-cpu.lock"))


def _held_by_an_ancestor(handle) -> bool:
    """True when a parent of this process holds the lock (e.g. `flock LOCK pytest ...`):
    taking it again would wait for ourselves forever."""
    inode = os.fstat(handle.fileno()).st_ino
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return False
    holders = {
        int(line.split()[4])
        for line in lines
        if "->" not in line and line.split()[5].endswith(f":{inode}")
    }
    pid = os.getppid()
    while pid > 1:
        if pid in holders:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
    return False


# Under pytest-xdist (scripts/test.sh runs `pytest -n 2`) the controller process holds the
# machine-wide lock for the whole run: to other users the suite is one heavy job, as before.
# Its workers are the controller's children, so the lock counts as held for them
# (_held_by_an_ancestor); among themselves they share the run's own lane lock: a live test
# takes it shared (at most one live test per worker, so two at a time with -n 2) and a test
# that must run alone (the tests that time how fast runs stop or time out) takes it
# exclusively. The emulated cluster's module shares it: its runs mostly wait (a link going
# down, keep-alives) and its bounds are loose (a lost node ends a run in < 60 s; it takes
# 5-14 s beside other live tests), so the other worker's live tests fill that idle core.
# Without xdist, every live test takes the machine lock itself, as before.
LANES_ENV = "WORKSHOP_TEST_LANES"


def pytest_configure(config):
    if getattr(config.option, "numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER"):
        stack = contextlib.ExitStack()
        config.add_cleanup(stack.close)
        stack.enter_context(_machine_lock())
        handle, lanes = tempfile.mkstemp(prefix="workshop-test-lanes-", suffix=".lock")
        os.close(handle)
        stack.callback(os.unlink, lanes)
        stack.callback(os.environ.pop, LANES_ENV, None)
        os.environ[LANES_ENV] = lanes


# Under xdist (--dist loadgroup), tests that share state within one process run on the same
# worker (see _xdist_group): a module's long-lived processes or expensive fixture (the emulated
# cluster, the Gloo workers, the MPI profiler's build, the laid-out MNIST, repo2docker's
# Dockerfile, the JupyterLab server), and the tests that read one learner's run of a notebook.
SAME_WORKER_MODULES = {
    "test_browser.py",
    "test_check_others.py",
    "test_cluster_live.py",
    "test_cluster_slurm.py",
    "test_jobscript_slurm_live.py",
    "test_parallelism.py",
    "test_profiler.py",
    "test_repo2docker.py",
    "test_torch_trace_live.py",
}
# The modules that bring up the emulated cluster (one at a time: its namespaces have fixed names)
CLUSTER_MODULES = {"test_cluster_live.py", "test_cluster_slurm.py", "test_jobscript_slurm_live.py"}
# Tests elsewhere that bring it up too: lesson 03's live run submits its Slurm job to it (a
# fresh-clone run met it torn down by test_cluster_slurm's teardown on the other worker:
# "nsenter: cannot open /proc/PID/ns/uts")
CLUSTER_TESTS = {"test_notebook_03_live_launches_real_runs"}
# The order xdist hands tests out in (scripts/test.sh passes --no-loadscope-reorder): first the
# tests that run alone (one worker) beside the tests that start no processes (the other), then
# the longest live test, then the other live tests, two at a time. A group goes where its
# latest member would: a module whose fixture holds the lock shared must not wait behind an
# alone test while the other worker runs it.
ALONE, NOT_LIVE, LONGEST, LIVE = range(4)
LONGEST_TESTS = {"test_notebook_02_live_runs_the_programs"}
# The tests that read lesson 02's one live run (the lesson_02_live fixture): one worker.
LESSON_02_LIVE_TESTS = {
    "test_notebook_02_live_runs_the_programs",
    "test_solution_trains_under_horovodrun_and_loss_falls",
    "test_solution_passes_workshop_check_and_skeleton_does_not",
    "test_ddp_and_horovod_train_the_same_model",
}


def _uses(item, fixtures: set[str]) -> bool:
    return bool(fixtures & set(getattr(item, "fixturenames", ())))


def _xdist_rank(item) -> int:
    if _uses(item, {"cpu_alone"}):
        return ALONE
    if getattr(item, "originalname", item.name) in LONGEST_TESTS:
        return LONGEST
    if _uses(item, {"cpu_lock", "cpu_lock_module"}):
        return LIVE
    return NOT_LIVE


# xdist's own loadgroup cannot rename items under pytest 9 (its "@group" suffix is lost), so
# the controller, which collects nothing, groups by test id; the workers check that the ids
# name exactly the tests whose fixtures need it.
ALONE_TESTS = {
    "test_a_busy_core_beside_rank_1_is_diagnosed_as_a_straggler",
    "test_an_endless_script_is_stopped_by_the_timeout",
    "test_ctrl_c_stops_every_rank_and_keeps_the_files",
    "test_term_and_hup_stop_every_rank_like_ctrl_c",
}
LEARNER_TESTS = {
    "test_a_learner_run_answers_nothing_for_the_learner",
    "test_no_prompt_or_hint_contains_the_expected_value",
    "test_nothing_on_screen_gives_an_answer_away",
    "test_every_check_rejects_the_classic_slips",
    "test_no_exercise_is_binary",
}


def _xdist_group(nodeid: str) -> str | None:
    """The group of a test id: tests of one group run on one worker, in collection order."""
    path, _, name = nodeid.partition("::")
    function, _, param = name.partition("[")
    module = path.rsplit("/", 1)[-1]
    if function in ALONE_TESTS:
        return "alone"  # one unit: the tests that run alone
    if function in CLUSTER_TESTS:
        return "emulated-cluster"
    if module in SAME_WORKER_MODULES:
        # one emulated cluster at a time on this machine: its modules on one worker
        return "emulated-cluster" if module in CLUSTER_MODULES else module
    if function in LESSON_02_LIVE_TESTS:
        return "lesson-02-live"
    if function in LEARNER_TESTS:
        return "learner-" + param.rstrip("]")
    return None


def _check_groups(item) -> None:
    group = _xdist_group(item.nodeid)
    if _uses(item, {"cpu_alone"}) != (group == "alone"):
        raise pytest.UsageError(f"{item.nodeid}: update ALONE_TESTS in tests/conftest.py")
    if "learner_run" in item.fixturenames and not (group or "").startswith("learner-"):
        raise pytest.UsageError(f"{item.nodeid}: update LEARNER_TESTS in tests/conftest.py")
    if ("lesson_02_live" in item.fixturenames) != (group == "lesson-02-live"):
        raise pytest.UsageError(f"{item.nodeid}: update LESSON_02_LIVE_TESTS in tests/conftest.py")


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _xdist_group(nodeid) or nodeid

    return Groups(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # without xdist: collection order, unchanged
    groups = {item: _xdist_group(item.nodeid) for item in items}
    rank = {item: _xdist_rank(item) for item in items}
    group_rank: dict[str, int] = {}
    for item, group in groups.items():
        _check_groups(item)
        if group:
            group_rank[group] = max(group_rank.get(group, ALONE), rank[item])
    # stable: collection order within a rank (a module's tests stay in their order)
    items.sort(key=lambda item: group_rank[groups[item]] if groups[item] else rank[item])


# Each test's CPU seconds, beside pytest's wall seconds in the JUnit XML (the property
# ``cpu_s``, which benchmarks/test_command.py sums): this process's and those of the processes
# it waited for, from the start of the test's setup to the end of its teardown. A shared
# fixture counts in the first test that asks for it; processes nobody waits for (the emulated
# cluster's ranks, started by its sshd) are not in it.
_CPU_AT_SETUP = pytest.StashKey[float]()


def _cpu_s() -> float:
    own, waited = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_CPU_AT_SETUP] = _cpu_s()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "teardown" and _CPU_AT_SETUP in item.stash:
        report.user_properties.append(("cpu_s", round(_cpu_s() - item.stash[_CPU_AT_SETUP], 2)))


@contextlib.contextmanager
def _flock(path: Path, mode: int):
    with path.open("a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _machine_lock():
    with LOCK_PATH.open("w") as handle:
        if _held_by_an_ancestor(handle):
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _live_lock(alone: bool):
    """The machine lock; in an xdist worker, the run's lane lock (shared, or exclusive when
    ``alone``) under the machine lock its controller holds."""
    lanes = os.environ.get(LANES_ENV)
    with _machine_lock():
        if lanes and os.environ.get("PYTEST_XDIST_WORKER"):
            with _flock(Path(lanes), fcntl.LOCK_EX if alone else fcntl.LOCK_SH):
                yield
        else:
            yield


@pytest.fixture
def cpu_lock():
    """Hold the machine-wide lock while a live test's processes run."""
    with _live_lock(alone=False):
        yield


@pytest.fixture(scope="module")
def cpu_lock_module():
    """The same lock, held across a module whose tests share long-lived processes."""
    with _live_lock(alone=False):
        yield


@pytest.fixture(scope="module")
def cpu_alone_module():
    """:func:`cpu_alone` across a module whose tests share one timed run."""
    with _live_lock(alone=True):
        yield


@pytest.fixture
def cpu_alone():
    """:func:`cpu_lock` for a test whose timing assertions need the machine to itself: under
    xdist no other live test runs beside it (without xdist, the same as ``cpu_lock``)."""
    with _live_lock(alone=True):
        yield


@pytest.fixture(scope="session")
def horovod_ready():
    """Skip nothing silently: live tests fail loudly when Horovod is missing."""
    if not find_program("horovodrun"):
        pytest.fail("horovodrun not found: run `bash scripts/setup.sh --no-run` first")


# Lesson 02's live run: every program of the lesson for real (serial, Horovod with PyTorch,
# TensorFlow and Keras, DDP, workshop check, the Keras probe, one benchmark repeat). The notebook
# test and the lessons' live tests read the same run instead of starting those programs again.
LESSON_02 = REPO / "notebooks" / "02-your-first-horovod-program.ipynb"
# Objects of the run, taken from the kernel after the notebook's last cell.
LESSON_02_OBJECTS = ("hvd_run", "ddp_run", "skeleton_report", "report")
_KEEP_CELL = """\
import pickle as _pickle
with open({path!r}, "wb") as _out:
    _pickle.dump({{_name: globals()[_name] for _name in {names!r}}}, _out)
"""


@dataclasses.dataclass
class Lesson02Live:
    """Lesson 02 executed with LIVE (and SOLUTIONS): its results file, the learner's work folder
    and the kernel's objects named in ``LESSON_02_OBJECTS`` (``hvd_run``: the Horovod PyTorch
    solution's launch, 3 epochs of 20 steps; ``ddp_run``: the DDP script's, same arguments;
    ``skeleton_report`` / ``report``: ``workshop check`` of the skeleton / the solution)."""

    results: dict
    work_dir: Path
    objects: dict


@pytest.fixture(scope="session")
def lesson_02_live(tmp_path_factory, horovod_ready) -> Lesson02Live:
    """Lesson 02 run live once per test process (its tests share one xdist worker:
    LESSON_02_LIVE_TESTS), under the CPU lock while it runs."""
    import nbformat

    from tools.notebook_run import execute

    folder = tmp_path_factory.mktemp("lesson-02-live")
    objects_path = folder / "objects.pickle"
    copy = nbformat.read(LESSON_02, as_version=4)
    keep = _KEEP_CELL.format(path=str(objects_path), names=LESSON_02_OBJECTS)
    copy.cells.append(nbformat.v4.new_code_cell(keep))
    source = folder / f"source-{LESSON_02.name}"
    nbformat.write(copy, source)
    parameters = {
        "RESULTS_PATH": str(folder / "results.json"),
        "LIVE": True,
        "SOLUTIONS": True,
        "BENCHMARK_REPEATS": 1,
        "WORK_DIR": str(folder / "mine"),
    }
    with pytest.MonkeyPatch.context() as patch, _live_lock(alone=False):
        patch.setenv("WORKSHOP_RUNS", str(folder / "runs"))
        # from the notebooks folder, as a learner runs it
        execute(source, folder / LESSON_02.name, parameters, cwd=LESSON_02.parent)
    with objects_path.open("rb") as handle:
        objects = pickle.load(handle)
    results = json.loads((folder / "results.json").read_text())
    return Lesson02Live(results, folder / "mine", objects)


@pytest.fixture(scope="session")
def mpi_tools():
    """Open MPI's mpicc and mpirun (setup.sh installs them): a test that needs them fails loudly
    when they are missing, it is not skipped."""
    missing = [name for name in ("mpicc", "mpirun") if shutil.which(name) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: run `bash scripts/setup.sh --no-run`")


@pytest.fixture
def tiny_run_argv():
    """The command line of a tiny live run (2 ranks, 1 epoch of a few steps):
    ``tiny_run_argv(out_dir, name, *options, steps=3, timeline=False, executable=None)`` ->
    ``[executable] run -np 2 --epochs 1 --steps-per-epoch STEPS [--no-timeline] --out OUT_DIR
    --name NAME OPTIONS...``; without ``executable``, the arguments of ``workshop``."""

    def build(
        out_dir: Path,
        name: str,
        *options: str,
        steps: int = 3,
        timeline: bool = False,
        executable: str | None = None,
    ) -> list[str]:
        argv = ["run", "-np", "2", "--epochs", "1", "--steps-per-epoch", str(steps)]
        if not timeline:
            argv.append("--no-timeline")
        argv += ["--out", str(out_dir), "--name", name, *options]
        return [executable, *argv] if executable else argv

    return build


# --------------------------------------------------------------------------------------------
# Recorded samples (data/, see each folder's README for its provenance)


@pytest.fixture(scope="session")
def seed000_logs() -> list[Path]:
    """Seed 000's per-epoch logs of PyTorch CIFAR-10 on ThetaGPU, 1, 2 and 4 GPUs."""
    return [data_path("seeds", f"000-pytorch_cifar10.out.{n}") for n in (1, 2, 4)]


@pytest.fixture(scope="session")
def seed004_tables() -> list[Path]:
    """Seed 004's two result tables (wall time, throughput) of resnet_v2_101, 1-32 GPUs."""
    return [
        data_path("seeds", f"004-resnet_v2_101-{kind}.tsv") for kind in ("walltime", "throughput")
    ]


# --------------------------------------------------------------------------------------------
# Stand-ins


@pytest.fixture
def fake_program():
    """Make an executable shell script: ``fake_program(path, body) -> path`` (a stand-in for
    horovodrun, mpirun, a site's ``module`` command, ...); missing folders are created."""

    def make(path: Path, body: str = "exit 0\n") -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return path

    return make


# The build tools scripts/setup.sh looks for before it builds anything.
SETUP_TOOLS = ("mpicc", "mpirun", "g++", "make", "cmake")


@pytest.fixture
def run_setup_sh(fake_program):
    """Run ``bash scripts/setup.sh --no-run`` against stand-in tools:
    ``run_setup_sh(stubs, home, **env) -> CompletedProcess``. The build tools it looks for
    become programs in ``stubs`` that only say their version; PATH is ``stubs`` then
    ``/usr/bin:/bin``, HOME is ``home``, and ``env`` adds to the environment."""

    def run(stubs: Path, home: Path, **env: str) -> subprocess.CompletedProcess:
        for tool in SETUP_TOOLS:
            fake_program(stubs / tool, "echo stub 1.0\n")
        # never the real apt-get: no test installs system packages (as root it would, racing
        # the other xdist worker for apt's lock and reaching the network)
        fake_program(stubs / "apt-get", 'echo "apt-get stub: setup.sh tried: $*" >&2; exit 100\n')
        return subprocess.run(
            ["bash", str(SETUP_SH), "--no-run"],
            env={"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(home), **env},
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run


class FakeLauncher:
    """Stands in for :func:`workshop.launch.run.run_one`: writes a finished run directory in the
    documented layout (docs/run-directory.md) whose timings follow a simple model, so sweeps and
    their analyses can be tested without Horovod. Runs named in ``fail`` fail."""

    def __init__(self, fail: set[str] = frozenset()):
        self.calls: list[str] = []
        self.fail = fail

    def __call__(self, config: RunConfig, *, out_dir, name, quiet, command):
        self.calls.append(name)
        run_dir = Path(out_dir) / name
        suffix = 2
        while run_dir.exists():
            run_dir = Path(out_dir) / f"{name}-{suffix}"
            suffix += 1
        run_dir.mkdir()
        status = "failed" if name in self.fail else "ok"
        step = 0.001 * config.batch_size + 0.002 * (config.np - 1)
        steps = 10
        metrics = []
        for epoch in range(1, config.epochs + 1):
            train = steps * step + (1.0 if epoch == 1 else 0.0)
            metrics.append(
                {
                    "epoch": epoch,
                    "train_time_s": train,
                    "test_time_s": 0.1,
                    "epoch_time_s": train + 0.1,
                    "samples_per_s": steps * config.batch_size * config.np / train,
                    "steps": steps,
                    "samples": steps * config.batch_size,
                    "train_loss": 1.0 / epoch,
                    "train_accuracy": 0.5 + 0.1 * epoch,
                    "test_loss": 1.1 / epoch,
                    "test_accuracy": 0.45 + 0.1 * epoch,
                    "lr": config.lr,
                    "elapsed_s": train * epoch,
                }
            )
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
        total_train = sum(m["train_time_s"] for m in metrics)
        summary = {
            "init_time_s": 2.0,
            "train_time_s": total_train,
            "total_time_s": 2.0 + total_train + 0.3,
            "final_test_accuracy": metrics[-1]["test_accuracy"],
            "lr_effective": config.lr,
        }
        if status == "ok":
            (run_dir / "summary.json").write_text(json.dumps(summary))
        record = {
            "schema": 1,
            "name": run_dir.name,
            "config": dataclasses.asdict(config),
            "status": status,
            "host": {"cores": os.cpu_count()},
            "data": {"name": config.dataset, "synthetic": False},
            "duration_s": 3.0,
        }
        (run_dir / "run.json").write_text(json.dumps(record))
        if status != "ok":
            raise RunError(f"run failed; see {run_dir}/logs")
        return run_dir


@pytest.fixture
def fake_launcher():
    """The :class:`FakeLauncher` class: ``fake_launcher()`` or ``fake_launcher(fail={...})``."""
    return FakeLauncher


@pytest.fixture
def sweep_base() -> RunConfig:
    """The base configuration the sweep tests vary: one worker, 3 epochs, fixed LR."""
    return RunConfig(np=1, epochs=3, batch_size=32, lr_scaling="none", timeline=False)
