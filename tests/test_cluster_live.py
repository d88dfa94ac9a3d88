"""An emulated 2-node cluster, live (root): `workshop cluster up`, a Gloo and an MPI 2-rank
Horovod job across the nodes, a node lost mid-run (its ranks killed, or its link down), and
`workshop cluster down` leaving no namespace and no process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import processes_with

from workshop.cluster import emulate
from workshop.cluster.spec import NAMESPACE_PREFIX

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="workshop cluster needs root (network namespaces, veth links, tc, one sshd per "
        "node): run the test command as root, as CI does; without root the recorded cluster "
        "runs in data/cluster are checked by tests/test_cluster_recorded.py",
    ),
]

NODES = ("nodea", "nodeb")


def workshop(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "workshop.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def on_cluster(*run_args: str) -> list[str]:
    """`workshop cluster run -- workshop run ...` as one command line."""
    return [
        sys.executable, "-m", "workshop.cli", "cluster", "run", "--",
        sys.executable, "-m", "workshop.cli", "run", *run_args,
    ]  # fmt: skip


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(NAMESPACE_PREFIX)]


def daemons_on(node: str) -> list[str]:
    """orted (Open MPI's daemon) processes left in a node's namespace."""
    pids = emulate.node_pids(NAMESPACE_PREFIX + node)
    names = []
    for pid in pids:
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            continue
    return [name for name in names if name == "orted"]


@pytest.fixture(scope="module")
def cluster(cpu_lock_module, horovod_ready):
    if not Path(emulate.SSHD).exists():
        pytest.fail(f"{emulate.SSHD} missing: setup.sh installs openssh-server when root")
    if namespaces() or emulate.state_path().exists():
        pytest.skip(
            f"a cluster is up already ({', '.join(namespaces()) or emulate.state_path()}): "
            "`workshop cluster down` first"
        )
    # keep-alives every 2 s: a dead link is noticed in ~6 s instead of the default ~15 s
    up = workshop("cluster", "up", "--nodes", "2", "--link", "1gbit", "--alive-s", "2")
    assert up.returncode == 0, up.stdout + up.stderr
    yield
    workshop("cluster", "down")  # also when a test failed half-way


def test_up_makes_two_nodes(cluster):
    result = workshop("cluster", "status", "--json")
    state = json.loads(result.stdout)
    assert [n["name"] for n in state["nodes"]] == list(NODES)
    for node in state["nodes"]:
        assert node["namespace_exists"] and node["sshd_running"] and node["link_up"], node
        assert "tbf" in node["qdisc"] and "rate 1Gbit" in node["qdisc"], node["qdisc"]
    assert sorted(namespaces()) == sorted(["wsc-switch", "wsc-nodea", "wsc-nodeb"])


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_a_job_across_two_nodes(cluster, controller, tmp_path):
    argv = on_cluster(
        "-np", "2", "--controller", controller, "--epochs", "1", "--steps-per-epoch", "5",
        "--no-timeline", "--out", str(tmp_path), "--name", "run",
    )  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "ok" and run["config"]["controller"] == controller
    launch = run["launch_command"]
    assert launch[launch.index("-H") + 1] == "nodea:1,nodeb:1" and "--network-interface" in launch
    cluster_record = run["cluster"]
    assert cluster_record["link"] == "1gbit" and cluster_record["link_bits_per_s"] == 1e9
    assert cluster_record["rank_hosts"] == {"0": "nodea", "1": "nodeb"}
    # each rank wrote the hostname of the node it ran on: rank 1 really ran on nodeb
    assert cluster_record["rank_hosts_seen"] == {"0": "nodea", "1": "nodeb"}
    # the launcher ran on nodea, not on this machine's own hostname
    assert run["host"]["hostname"] == "nodea"


@pytest.mark.parametrize(
    ("controller", "fault"), [("gloo", "kill"), ("mpi", "kill"), ("gloo", "link"), ("mpi", "link")]
)
def test_a_node_lost_mid_run_ends_the_run_naming_host_and_rank(
    cluster, controller, fault, tmp_path
):
    run_dir = tmp_path / "run"
    argv = on_cluster(
        "-np", "2", "--controller", controller, "--epochs", "50", "--steps-per-epoch", "100",
        "--no-timeline", "--out", str(tmp_path), "--name", "run",
    )  # fmt: skip
    job = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        rank1_log = run_dir / "logs" / "rank.1.log"
        deadline = time.monotonic() + 90
        while "Epoch 1:" not in (rank1_log.read_text() if rank1_log.exists() else ""):
            assert job.poll() is None and time.monotonic() < deadline, "rank 1 never trained"
            time.sleep(0.3)
        if fault == "kill":
            done = workshop("cluster", "kill", "nodeb")
        else:
            done = workshop("cluster", "link", "nodeb", "down")
        assert done.returncode == 0, done.stdout + done.stderr
        lost_at = time.monotonic()
        out, err = job.communicate(timeout=90)
        took_s = time.monotonic() - lost_at
    finally:
        if job.poll() is None:
            job.kill()
        if fault == "link":
            workshop("cluster", "link", "nodeb", "up")
    assert job.returncode != 0 and took_s < 60, (took_s, out + err)
    assert "first lost: rank 1 on host nodeb" in err, err
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "failed"
    # run.json's one answer (attribute's cause) names the rank and its host
    cause = run["failure"]["cause"]
    assert cause["host"] == "nodeb" and cause["rank"] == 1 and run["failure"]["also"] == []
    assert processes_with(str(run_dir)) == []
    assert daemons_on("nodeb") == [] and daemons_on("nodea") == []


def test_down_leaves_nothing(cluster):
    sshd = json.loads(emulate.state_path().read_text())["sshd"]
    result = workshop("cluster", "down")
    assert result.returncode == 0, result.stdout + result.stderr
    assert namespaces() == []
    assert not emulate.state_path().exists()
    assert not any(Path(f"/etc/netns/{NAMESPACE_PREFIX}{node}").exists() for node in NODES)
    assert [pid for pid in sshd.values() if Path(f"/proc/{pid}").exists()] == []
    assert processes_with(str(emulate.STATE_DIR)) == []
    # down again: nothing to remove, still fine
    again = workshop("cluster", "down")
    assert again.returncode == 0 and "nothing" in again.stdout


@pytest.mark.parametrize("after_s", [0.0, 0.6])
def test_down_after_up_was_killed_half_way(cluster, after_s):
    # `up` lists each item in the state file before making it; SIGKILL leaves a half-made
    # cluster (how much: after_s after the state file appeared) that `down` must remove
    up = subprocess.Popen([sys.executable, "-m", "workshop.cli", "cluster", "up"])
    deadline = time.monotonic() + 30
    while not emulate.state_path().exists():
        assert up.poll() is None and time.monotonic() < deadline, "up wrote no state file"
        time.sleep(0.01)
    time.sleep(after_s)
    up.kill()
    up.wait()
    result = workshop("cluster", "down")
    assert result.returncode == 0, result.stdout + result.stderr
    assert namespaces() == [] and not emulate.state_path().exists()
    assert processes_with(str(emulate.STATE_DIR)) == []
