"""The emulated cluster's pure parts (no root needed): the spec, the host list workshop run
builds from a state file, which rank and host a failure started on (the launcher's reports,
read once, joined to the rank -> host map), and what the command says without root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workshop.analysis.failure import attribute
from workshop.cli import main
from workshop.cluster import emulate, hosts
from workshop.cluster.spec import MIN_BURST_BYTES, ClusterSpec, parse_rate
from workshop.findings.failure import (
    NODE_LOST_FIX,
    SIGNAL_MEANING,
    failure_fix,
    failure_lines,
    lost_line,
)
from workshop.readers.exits import rank_ends


def test_rates_parse_like_tc():
    assert parse_rate("1gbit") == 1e9
    assert parse_rate("10gbit") == 1e10
    assert parse_rate("500mbit") == 5e8
    for bad in ("1gb", "fast", "0gbit", "-1gbit"):
        with pytest.raises(ValueError, match="--link"):
            parse_rate(bad)


def test_spec_nodes_addresses_and_bucket():
    with pytest.raises(ValueError, match="--nodes 5: 1 to 4"):
        ClusterSpec(nodes=5)
    spec = ClusterSpec(nodes=3, link="10gbit")
    assert [(n.name, n.namespace, n.address) for n in spec.node_list()] == [
        ("nodea", "wsc-nodea", "10.77.0.11"),
        ("nodeb", "wsc-nodeb", "10.77.0.12"),
        ("nodec", "wsc-nodec", "10.77.0.13"),
    ]
    # 1 ms at 10 Gbit/s is 1.25 MB, above the 256 KiB floor; at 1 Gbit/s 125 kB is below it
    assert spec.burst_bytes == 1_250_000
    assert ClusterSpec(link="1gbit").burst_bytes == MIN_BURST_BYTES
    assert spec.tbf_args("hsn0")[:8] == "qdisc add dev hsn0 root tbf rate 10gbit".split()


def test_no_node_name_resolves_to_loopback():
    # a hostname on 127.0.x.x would be handed to the other nodes as this node's address
    lines = ClusterSpec(nodes=4).hosts_file().splitlines()
    assert lines[0] == "127.0.0.1 localhost"
    assert all(not line.startswith("127.") for line in lines[1:]) and len(lines) == 5


def _state_file(tmp_path, nodes=("nodea", "nodeb"), link="1gbit"):
    path = tmp_path / "state.json"
    path.write_text(
        json.dumps(
            {
                "spec": {"nodes": len(nodes), "link": link},
                "nodes": [{"name": n} for n in nodes],
                "interface": "hsn0",
                "link_bits_per_s": parse_rate(link),
                "made": [],
            }
        )
    )
    return path


def test_run_inside_a_cluster_gets_its_host_list(tmp_path):
    assert hosts.cluster_launch(2, env={}) is None  # not inside a cluster: localhost as before
    env = {hosts.ENV_STATE: str(_state_file(tmp_path))}
    launch = hosts.cluster_launch(2, env=env)
    assert launch.hosts == "nodea:1,nodeb:1" and launch.interface == "hsn0"
    assert launch.record["rank_hosts"] == {"0": "nodea", "1": "nodeb"}
    assert launch.record["link"] == "1gbit" and launch.record["link_bits_per_s"] == 1e9
    packed = hosts.cluster_launch(2, env=env | {hosts.ENV_RANKS_PER_NODE: "2"})
    assert packed.hosts == "nodea:2" and packed.record["ranks_per_node"] == {"nodea": 2}
    with pytest.raises(ValueError, match="does not fit 2 node"):
        hosts.cluster_launch(5, env=env | {hosts.ENV_RANKS_PER_NODE: "2"})
    with pytest.raises(ValueError, match="WORKSHOP_CLUSTER=.*is the cluster up"):
        hosts.cluster_launch(2, env={hosts.ENV_STATE: str(tmp_path / "gone.json")})


def test_rank_hosts_follow_the_host_list_order():
    assert hosts.rank_hosts({"nodea": 2, "nodeb": 1}) == {0: "nodea", 1: "nodea", 2: "nodeb"}


RANKS = {0: "nodea", 1: "nodeb"}
# what each rank's log held when the live tests below took nodeb away: training, no error
TRAINING = {0: "Epoch 1: loss 1.8\n", 1: "Epoch 1: loss 1.8\n"}


def first_lost(log: str, rank_hosts: dict[int, str] | None = RANKS) -> tuple[dict, str]:
    """The one answer a cluster run's failure gets (the reader joins the launcher's reports to
    the rank -> host map, attribute decides), and the line `workshop run` prints of it."""
    found = attribute(rank_ends(log, TRAINING, np=2, rank_hosts=rank_hosts))
    record = {"cluster": {"rank_hosts": rank_hosts}, "failure": found}
    return found, lost_line(record)


@pytest.mark.parametrize(
    ("log", "how", "reason"),
    [
        # horovodrun --gloo after rank 1's processes were killed (SIGKILL: 137)
        (
            "[0]<stdout>:epoch 1\nProcess 1 exit with status code 137.\n",
            "killed",
            "killed by SIGKILL",
        ),
        # horovodrun --gloo after `workshop cluster kill nodeb`: rank 1's ssh session ended
        (
            "Process 1 exit with status code 255.\n",
            "exited",
            "its process ended with exit status 255 (255: its ssh session ended: the process "
            "was killed, or the node or its link went down)",
        ),  # fmt: skip
        # ssh gave up on a node whose link went down (Gloo: rank 1's own ssh session)
        (
            "[1]<stderr>:Timeout, server nodeb not responding.\n"
            "Process 0 exit with status code 1.\nProcess 1 exit with status code 255.\n",
            "lost",
            "Timeout, server nodeb not responding",
        ),  # fmt: skip
        # Open MPI: a rank died
        (
            "mpirun noticed that process rank 1 with PID 0 on node nodeb exited on signal 9 "
            "(Killed).\n",
            "killed",
            "killed by SIGKILL",
        ),  # fmt: skip
        # Open MPI's daemon on nodeb unreachable (its ssh): the line names only the host
        (
            "Timeout, server nodeb not responding.\n",
            "lost",
            "Timeout, server nodeb not responding",
        ),
        (
            "ORTE has lost communication with a remote daemon.\n"
            "  Remote daemon: [[1889,0],1] on node nodeb\n",
            "lost",
            "lost contact with the node's Open MPI daemon (its ssh ended: node or link down)",
        ),  # fmt: skip
    ],
)
def test_the_first_lost_rank_is_named_with_its_host(log, how, reason):
    found, line = first_lost(log)
    cause = found["cause"]
    assert (cause["rank"], cause["host"], cause["how"]) == (1, "nodeb", how)
    assert line == f"first lost: rank 1 on host nodeb: {reason}"


def test_a_lost_node_comes_before_what_the_launcher_did_to_the_other_ranks():
    # mpirun ended rank 0 (SIGTERM) before its log said why: nodeb's daemon could not be reached
    log = (
        "mpirun noticed that process rank 0 with PID 7 on node nodea exited on signal 15 "
        "(Terminated).\nTimeout, server nodeb not responding.\n"
    )
    found, line = first_lost(log)
    assert (found["cause"]["rank"], found["cause"]["how"]) == (1, "lost")
    # rank 0's SIGTERM followed from the lost node: a consequence, not a second cause
    assert found["also"] == [] and [e["rank"] for e in found["consequences"]] == [0]
    assert line.startswith("first lost: rank 1 on host nodeb: Timeout")
    said = failure_lines(found)
    assert (
        said[0]
        == 'rank 1 was lost with its node nodeb (ssh: "Timeout, server nodeb not responding")'
    )
    assert said[1] == (
        "rank 0 was ended by SIGTERM (mpirun) after rank 1's end: a consequence of rank 1's "
        "end, not a cause"
    )
    assert failure_fix(found) == NODE_LOST_FIX
    # near miss: no node lost, so the signal that ended rank 0 is the cause
    found, line = first_lost(log.split("Timeout")[0])
    assert (found["cause"]["rank"], found["cause"]["how"]) == (0, "killed")
    assert line == "first lost: rank 0 on host nodea: killed by SIGTERM"
    assert failure_fix(found) == SIGNAL_MEANING["SIGTERM"]


def test_a_node_of_two_ranks_is_said_with_both():
    hosts = {0: "nodea", 1: "nodea", 2: "nodeb", 3: "nodeb"}
    found = attribute(rank_ends("Timeout, server nodeb not responding.\n", {}, np=4,
                                rank_hosts=hosts))  # fmt: skip
    record = {"cluster": {"rank_hosts": hosts}, "failure": found}
    assert (
        lost_line(record)
        == "first lost: rank 2, 3 on host nodeb: Timeout, server nodeb not responding"
    )


def test_nothing_lost_names_no_rank_and_no_host():
    assert first_lost("[0]<stdout>:done\n") == (None, None)
    # near miss of the map: a line naming only a host names no rank without one
    assert first_lost("Timeout, server nodeb not responding.\n", rank_hosts=None) == (None, None)


def test_a_run_json_from_before_the_one_answer_still_says_its_line():
    # run.json files written before issue 56 held the cluster's answer in "first_failure"
    old = {
        "cluster": {},
        "first_failure": {
            "host": "nodeb",
            "ranks": [1],
            "reason": "Timeout",
            "line": "Timeout, server nodeb not responding",
        },
    }
    assert lost_line(old) == "first lost: rank 1 on host nodeb: Timeout"
    # off a cluster, a failure with no host says no line
    found = attribute(rank_ends("Process 1 exit with status code 137.\n", TRAINING, np=2))
    assert found["cause"]["rank"] == 1 and lost_line({"failure": found}) is None


def test_without_root_the_command_says_so_and_points_to_the_recordings(monkeypatch, capsys):
    monkeypatch.setattr(emulate.os, "geteuid", lambda: 1000)
    for argv in (["up"], ["down"], ["status"], ["run", "--", "hostname"]):
        assert main(["cluster", *argv]) == 1
        err = capsys.readouterr().err
        assert "needs root" in err and "data/cluster" in err, argv


def test_a_corrupt_state_file_is_named(tmp_path):
    emulate.state_path(tmp_path).write_text("{not json")
    with pytest.raises(emulate.ClusterError, match=str(tmp_path / "state.json")):
        emulate.read_state(tmp_path)
    assert emulate.read_state(tmp_path / "nothing") is None


def test_horovodrun_gets_the_host_list_and_the_interface_only_across_nodes(tmp_path):
    from workshop.launch.run import RunConfig, launch_command

    env = {hosts.ENV_STATE: str(_state_file(tmp_path))}
    across = hosts.cluster_launch(2, env=env)
    argv, _ = launch_command(RunConfig(np=2), tmp_path, "subset", across)
    assert argv[argv.index("-H") + 1] == "nodea:1,nodeb:1"
    assert argv[argv.index("--network-interface") + 1] == "hsn0"
    # all ranks on one node: horovodrun would refuse hsn0 ("No interface is found for
    # address 127.0.0.1."), so no interface is passed
    one_node = hosts.cluster_launch(2, env=env | {hosts.ENV_RANKS_PER_NODE: "2"})
    argv, _ = launch_command(RunConfig(np=2), tmp_path, "subset", one_node)
    assert argv[argv.index("-H") + 1] == "nodea:2" and "--network-interface" not in argv


def test_keep_alive_interval_reaches_the_nodes_ssh_config():
    from workshop.cluster import emulate

    text = emulate._ssh_config(Path("/state"), 2)
    assert "ServerAliveInterval 2\n" in text and "ServerAliveCountMax 3\n" in text
    assert ClusterSpec().alive_s == 5  # ~15 s to notice a dead link, as before
    with pytest.raises(ValueError, match="--alive-s 0: 1 to 60 seconds"):
        ClusterSpec(alive_s=0)
