"""Recording on a quiet machine: the one path by which a performance sample for ``data/`` is made.

A timing is evidence only when nothing else competed with the run for the CPU. On a 2-core
machine, one other busy process takes a core from one of the two ranks, and the step of both
(they wait for each other in every allreduce) slows by up to 2x: an effect larger than most
that the lessons teach. So every recorded run goes through :func:`recorded`:

1. **before** the run, wait until other work has stayed under :data:`MAX_FOREIGN_CORES` over a
   :data:`QUIET_WINDOW_S` window (progress printed while it waits, naming the busiest other
   processes);
2. **during** the run, measure the CPU time other processes took: the machine's busy time
   (``/proc/stat``) minus this process's and its children's (the launcher and the ranks it
   waited for) minus the processes the run started inside the emulated cluster's network
   namespaces (ranks started over ssh are not our children: they are sampled from ``/proc``);
3. write both into the run's ``run.json`` under ``recording`` and, when other work took more
   than :data:`MAX_FOREIGN_CORES` on average over the run, delete the run and record it again
   (``attempts`` at most; every disturbed attempt stays listed).

The threshold, 0.05 cores (5 % of one core) on average: a foreign load of ``c`` cores slows
the slowest rank's step by at most about ``c`` (its core's share), and the ranks wait for the
slowest, so 0.05 cores keeps the disturbance at or under 5 %, half the smallest difference a
lesson calls an effect (10 %). An idle machine of this kind measures 0.00-0.02 cores (kernel
threads, the recorder's own sampling is counted as ours).

``tests/test_recordings_quiet.py`` fails for a performance recording in ``data/`` whose
run.json lacks the record or exceeds the threshold.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from workshop.rules import MAX_FOREIGN_CORES  # 0.05 cores (why: the module docstring)
from workshop.units import write_json_atomic


def max_foreign_cores() -> float:
    """The threshold in force: :data:`MAX_FOREIGN_CORES`, or ``WORKSHOP_QUIET_MAX_CORES`` to
    try the recording path on a busy machine (what it records then fails the data test when
    the value is above 0.05: such runs are no evidence)."""
    text = os.environ.get("WORKSHOP_QUIET_MAX_CORES")
    if not text:
        return MAX_FOREIGN_CORES
    try:
        return float(text)
    except ValueError:
        message = f"WORKSHOP_QUIET_MAX_CORES={text!r}: a number of cores, e.g. 0.05"
        raise ValueError(message) from None


#: The 1-minute load average a run may start at, per core (1.5 on 2 cores): the load average
#: still carries the last minute's work (a sweep's previous run too), which the CPU-time window
#: alone does not see.
MAX_LOADAVG_PER_CORE = 0.75
#: Seconds the machine must stay under the threshold before a run starts.
QUIET_WINDOW_S = 5.0
#: Longest wait for a quiet machine before a recording gives up (an error, nothing recorded).
QUIET_TIMEOUT_S = 1800.0
#: How often the processes started over ssh inside the emulated cluster are sampled.
SAMPLE_S = 0.2
SCHEMA = 1


class BusyMachine(RuntimeError):
    """The machine did not become quiet in time, or every attempt was disturbed."""


def busy_cpu_s() -> float:
    """CPU seconds the whole machine has been busy since boot (``/proc/stat``: user, nice,
    system, irq, softirq, steal), or NaN where there is no /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """CPU seconds of this process (all its threads) and of its children that have ended and
    been waited for (a launcher, and the ranks it waited for, roll up into it)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _proc_stat(pid: str) -> tuple[str, int, float] | None:
    """(command name, parent pid, CPU seconds) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :]
    fields = rest.split()
    ticks = os.sysconf("SC_CLK_TCK")
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks


#: The emulated cluster's state folder (workshop.cluster.emulate.STATE_DIR's default).
CLUSTER_STATE = os.environ.get("WORKSHOP_CLUSTER_DIR", "/run/workshop-cluster").encode()


def _cluster_namespaces() -> set[int]:
    """Inodes of the emulated cluster's network namespaces (``/run/netns/wsc-*``: only our own
    ``workshop cluster`` makes them). Compared by inode: inside ``ip netns exec`` the host's
    ``/proc/1/ns/net`` cannot be read."""
    found = set()
    for path in Path("/run/netns").glob("wsc-*"):
        try:
            found.add(os.stat(path).st_ino)
        except OSError:
            continue
    return found


def _cluster_pids(namespaces: set[int], own: set[int]) -> dict[int, float]:
    """pid -> CPU seconds of the processes inside the emulated cluster's nodes (and of its
    daemons outside them: munged) that are not this recorder's descendants: what a cluster
    run started over ssh (sshd's children) or through Slurm (slurmd's)."""
    found = {}
    if not namespaces:
        return found
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in own:
            continue
        try:
            inside = os.stat(proc / "ns" / "net").st_ino in namespaces
            # the cluster's own daemons outside the nodes (munged for Slurm) name its state
            # folder on their command line
            if not inside and CLUSTER_STATE not in (proc / "cmdline").read_bytes():
                continue
        except OSError:
            continue
        stat = _proc_stat(proc.name)
        if stat:
            found[int(proc.name)] = stat[2]
    return found


def _descendants(root: int) -> set[int]:
    parents = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and (stat := _proc_stat(proc.name)):
            parents[int(proc.name)] = stat[1]
    found, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items() if parent == pid]
        found.update(children)
        frontier.extend(children)
    return found


def busiest_others(window_s: float = 1.0, top: int = 3) -> list[tuple[str, float]]:
    """The ``top`` other processes by CPU over ``window_s`` seconds: (name, cores), for the
    progress line of a wait (who keeps the machine busy)."""
    mine = _descendants(os.getpid())

    def snapshot() -> dict[int, tuple[str, float]]:
        taken = {}
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit() and int(proc.name) not in mine:
                if stat := _proc_stat(proc.name):
                    taken[int(proc.name)] = (stat[0], stat[2])
        return taken

    before = snapshot()
    time.sleep(window_s)
    after = snapshot()
    used = [(name, (cpu - before[pid][1]) / window_s)
            for pid, (name, cpu) in after.items() if pid in before]  # fmt: skip
    return sorted((u for u in used if u[1] > 0.01), key=lambda u: -u[1])[:top]


def foreign_cores_now(window_s: float) -> float:
    """Cores other work kept busy over the next ``window_s`` seconds (this process's own CPU
    time taken out)."""
    busy, ours = busy_cpu_s(), own_cpu_s()
    time.sleep(window_s)
    return max(0.0, (busy_cpu_s() - busy) - (own_cpu_s() - ours)) / window_s


def wait_for_quiet(
    *,
    max_cores: float | None = None,
    window_s: float = QUIET_WINDOW_S,
    timeout_s: float = QUIET_TIMEOUT_S,
    report: Callable[[str], None] = print,
) -> dict:
    """Wait until other work has stayed under ``max_cores`` for ``window_s`` seconds and the
    1-minute load average is under :data:`MAX_LOADAVG_PER_CORE` per core.

    Progress: a line every 30 s of waiting, with the foreign load and its busiest processes.

    Returns:
        ``waited_s`` and ``quiet_before_cores`` (the load of the window that passed).

    Raises:
        BusyMachine: not quiet within ``timeout_s`` (the message says how busy, and by whom).
    """
    max_cores = max_foreign_cores() if max_cores is None else max_cores
    max_loadavg = MAX_LOADAVG_PER_CORE * (os.cpu_count() or 1)
    started = time.monotonic()
    last_report = started
    while True:
        load = foreign_cores_now(window_s)
        waited = time.monotonic() - started
        loadavg = os.getloadavg()[0]
        if load <= max_cores and loadavg < max_loadavg:
            return {"waited_s": round(waited, 1), "quiet_before_cores": round(load, 3)}
        others = ", ".join(f"{name} {cores:.2f}" for name, cores in busiest_others())
        if waited >= timeout_s:
            raise BusyMachine(
                f"the machine was not quiet for {timeout_s:.0f} s: other work used "
                f"{load:.2f} cores (threshold {max_cores}; busiest: {others or 'short-lived'}), "
                f"load average {loadavg:.2f} (under {max_loadavg:g} wanted). "
                "Stop the other work (tests, builds, notebooks) and record again."
            )
        if time.monotonic() - last_report >= 30:
            last_report = time.monotonic()
            busiest = others or "short-lived"
            report(
                f"waiting for a quiet machine ({waited:.0f} s): other work uses {load:.2f} "
                f"cores, threshold {max_cores} (busiest: {busiest}); load average "
                f"{loadavg:.2f}, under {max_loadavg:g} wanted"
            )


class ForeignLoad:
    """Measures, while it runs, the CPU seconds that other work took (see the module).

    Args:
        pids: long-lived processes of ours that are not waited for during the measurement
            (lesson 01's demo workers): their CPU time counts as ours.
    """

    def __init__(self, pids: tuple[int, ...] = ()) -> None:
        self._pids = tuple(pids)
        self._namespaces = _cluster_namespaces()
        self._stop = threading.Event()
        self._remote_start: dict[int, float] = {}
        self._remote_last: dict[int, float] = {}
        # Only a run on the emulated cluster starts ranks outside our process tree.
        self._cluster = bool(self._namespaces)
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> ForeignLoad:
        self._wall = time.monotonic()
        self._busy, self._ours = busy_cpu_s(), own_cpu_s() + self._pids_cpu_s()
        if self._cluster:
            self._remote_start = _cluster_pids(self._namespaces, _descendants(os.getpid()))
            self._thread.start()
        return self

    def _sample(self) -> None:
        # Known ranks are read every SAMPLE_S (the CPU a rank takes after its last sample is
        # lost to the foreign side: at most SAMPLE_S per rank); new ones are looked for every
        # 5th sample (scanning /proc costs more).
        for count in itertools.count():
            if self._stop.wait(SAMPLE_S):
                return
            if count % 5 == 0:
                found = _cluster_pids(self._namespaces, _descendants(os.getpid()))
            else:
                found = {pid: stat[2] for pid in self._remote_last
                         if (stat := _proc_stat(str(pid)))}  # fmt: skip
            self._remote_last.update(found)

    def _pids_cpu_s(self) -> float:
        return sum(stat[2] for pid in self._pids if (stat := _proc_stat(str(pid))))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._cluster:
            self._thread.join()
        self.seconds = time.monotonic() - self._wall
        remote = sum(cpu - self._remote_start.get(pid, 0.0)
                     for pid, cpu in self._remote_last.items())  # fmt: skip
        self.remote_cpu_s = max(0.0, remote)
        self.own_cpu_s = own_cpu_s() + self._pids_cpu_s() - self._ours
        self.busy_cpu_s = busy_cpu_s() - self._busy
        self.foreign_cpu_s = max(0.0, self.busy_cpu_s - self.own_cpu_s - self.remote_cpu_s)

    @property
    def foreign_cores(self) -> float:
        return self.foreign_cpu_s / self.seconds if self.seconds > 0 else 0.0


def add_record(run_dir: Path, record: dict) -> None:
    """Add ``record`` to ``run_dir/run.json`` under ``recording`` (written atomically: a
    crash leaves the old file whole)."""
    path = Path(run_dir) / "run.json"
    data = json.loads(path.read_text())
    data["recording"] = record
    write_json_atomic(path, data)


def describe(load: ForeignLoad, max_cores: float, **fields) -> dict:
    """The ``recording`` record of one measured attempt (see :func:`recorded`)."""
    return {
        "schema": SCHEMA,
        "max_foreign_cores": max_cores,
        **fields,
        "seconds": round(load.seconds, 2),
        "foreign_cpu_s": round(load.foreign_cpu_s, 2),
        "foreign_cores": round(load.foreign_cores, 3),
        "remote_cpu_s": round(load.remote_cpu_s, 2),
        "quiet": load.foreign_cores <= max_cores,
    }


def quietly(
    make: Callable[[], object],
    *,
    label: Callable[[object], str],
    discard: Callable[[object], None] | None = None,
    attempts: int = 5,
    max_cores: float | None = None,
    report: Callable[[str], None] = print,
    wait: Callable[..., dict] = wait_for_quiet,
    measure: Callable[[], ForeignLoad] = ForeignLoad,
) -> tuple[object, dict]:
    """Call ``make()`` on a quiet machine, and again (``attempts`` times at most) when other
    work disturbed it; ``discard`` undoes a disturbed attempt, ``label`` names one in the
    progress lines.

    Returns:
        ``(what make returned, its record)``: the first undisturbed attempt's, or the last
        one's with ``quiet: false`` when every attempt was disturbed.
    """
    max_cores = max_foreign_cores() if max_cores is None else max_cores
    disturbed: list[float] = []
    for attempt in range(1, attempts + 1):
        waited = wait(max_cores=max_cores, report=report)
        loadavg = [round(x, 2) for x in os.getloadavg()]
        with measure() as load:
            result = make()
        record = describe(load, max_cores, **waited, loadavg_before=loadavg,
                          disturbed_attempts=list(disturbed))  # fmt: skip
        if record["quiet"] or attempt == attempts:
            return result, record
        disturbed.append(round(load.foreign_cores, 3))
        report(f"{label(result)}: other work took {load.foreign_cores:.2f} cores "
               f"(threshold {max_cores}); recording it again")  # fmt: skip
        if discard is not None:
            discard(result)
    raise AssertionError("unreachable")  # pragma: no cover


def recorded(
    run: Callable[[], Path],
    *,
    attempts: int = 5,
    max_cores: float | None = None,
    extra: dict | None = None,
    report: Callable[[str], None] = print,
    wait: Callable[..., dict] = wait_for_quiet,
    measure: Callable[[], ForeignLoad] = ForeignLoad,
) -> Path:
    """Run ``run()`` (which makes one run directory and returns it) on a quiet machine.

    Args:
        run: makes the run; called again for each attempt.
        attempts: how many times a disturbed run is recorded again.
        max_cores: the threshold (default :func:`max_foreign_cores`).
        extra: more fields for the record (e.g. the sweep's round).
        report: where progress lines go.
        wait: the quiet wait (tests pass a stand-in).
        measure: makes the foreign-load measurement (tests pass a stand-in).

    Returns:
        The run directory of the first undisturbed attempt; its run.json holds ``recording``:
        ``schema``, ``max_foreign_cores``, ``waited_s``, ``quiet_before_cores``,
        ``seconds``, ``foreign_cpu_s``, ``foreign_cores``, ``remote_cpu_s`` (ranks started
        over ssh, counted as the run's own), ``loadavg_before``, ``disturbed_attempts`` (the
        foreign cores of each attempt deleted and recorded again), ``quiet`` (True).

    Raises:
        BusyMachine: no quiet moment, or every attempt disturbed (the last one's directory is
            kept, its record says ``quiet: false``, and the message names it).
    """
    run_dir, record = quietly(
        lambda: Path(run()), label=lambda d: d.name, discard=shutil.rmtree, attempts=attempts,
        max_cores=max_cores, report=report, wait=wait, measure=measure,
    )  # fmt: skip
    add_record(run_dir, record | (extra or {}))
    if not record["quiet"]:
        loads = [*record["disturbed_attempts"], record["foreign_cores"]]
        raise BusyMachine(
            f"{run_dir}: every one of {attempts} attempts was disturbed (other work took "
            f"{', '.join(f'{c:.2f}' for c in loads)} cores; "
            f"threshold {record['max_foreign_cores']}); the last one is kept with quiet: false"
        )
    return run_dir


@contextmanager
def measured() -> Iterator[ForeignLoad]:
    """The foreign load of the block, for recordings that are not run directories (the
    compute probe of a scaling sweep): ``with measured() as load: ...``."""
    with ForeignLoad() as load:
        yield load
