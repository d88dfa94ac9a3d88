"""Reproduce two multi-host pitfalls on an emulated cluster and record what Horovod prints (root).

Brings up a 2-node cluster (workshop.cluster; torn down at the end, also on error) and runs a
2-rank job (one rank per node, one 1 MiB allreduce) in each of these states:

  ok                     as `workshop cluster up` makes it: every node has hsn0, its own name
  iface-differs-flag     nodea's interface renamed eth1, `--network-interface hsn0`
  iface-differs-noflag   the same without --network-interface (horovodrun looks for one)
  same-hostname          nodeb's hostname set to nodea (the other node's name)
  same-hostname-mpi      the same over MPI (--mpi)
  same-hostname-loopback both nodes' hostname is "node", which each node's /etc/hosts maps to
                         127.0.1.1 (a cloned Debian/Ubuntu image); -H still nodea,nodeb

Each case's command, exit code and output go to OUT/<case>.log, and OUT/result.json lists
them with provenance. docs/clusters.md quotes these logs.

    flock /tmp/workshop-cpu.lock python benchmarks/cluster_pitfalls.py --out data/cluster/pitfalls
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _recording import run_record, started_now

from workshop.launch.horovodrun import ROOT_ENV, horovodrun_command

# Lines of TensorFlow's C++ start-up chatter, dropped from the recorded logs.
NOISE = ("oneDNN", "absl::", "cudart_stub", "cpu_feature_guard", "To enable the following")


def worker() -> None:
    """One rank: say where it runs and what Horovod told it, then allreduce 1 MiB."""
    import socket

    print(
        "WORKER "
        + json.dumps(
            {
                "rank": os.environ.get("HOROVOD_RANK", os.environ.get("OMPI_COMM_WORLD_RANK")),
                "gethostname": socket.gethostname(),
                "HOROVOD_HOSTNAME": os.environ.get("HOROVOD_HOSTNAME"),
                "HOROVOD_GLOO_IFACE": os.environ.get("HOROVOD_GLOO_IFACE"),
            }
        ),
        flush=True,
    )
    import horovod.torch as hvd
    import torch

    hvd.init()
    out = hvd.allreduce(torch.ones(2**18), op=hvd.Sum, name="x")
    print(f"OK rank {hvd.rank()} local_size {hvd.local_size()} sum {float(out[0])}", flush=True)
    hvd.shutdown()


def _hostname(state: dict, node: str, name: str) -> None:
    pid = state["sshd"][node]
    subprocess.run(["nsenter", f"--uts=/proc/{pid}/ns/uts", "hostname", name], check=True)


def _rename(namespace: str, old: str, new: str) -> None:
    for argv in (["set", old, "down"], ["set", old, "name", new], ["set", new, "up"]):
        subprocess.run(["ip", "netns", "exec", namespace, "ip", "link", *argv], check=True)


def run_case(
    state: dict, name: str, hosts: str, iface: str | None, out: Path, controller: str = "gloo"
) -> dict:
    from workshop.cluster import emulate
    from workshop.launch.programs import program_path_env

    argv = horovodrun_command(
        2,
        [sys.executable, str(Path(__file__).resolve()), "--worker"],
        controller=controller,
        hosts=hosts,
        interface=iface,
        program="horovodrun",  # found on the nodes through PATH
    )
    env = os.environ | {"PATH": program_path_env(), "HOROVOD_GLOO_TIMEOUT_SECONDS": "20"}
    env |= ROOT_ENV
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    start = time.perf_counter()
    try:
        result = subprocess.run(
            emulate.node_prefix(state, "nodea") + argv,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        code, text = result.returncode, result.stdout + result.stderr
    except subprocess.TimeoutExpired as exc:
        code, text = "timeout", (exc.stdout or b"").decode() + (exc.stderr or b"").decode()
    wall = round(time.perf_counter() - start, 1)
    lines = [line for line in text.splitlines() if not any(n in line for n in NOISE)]
    (out / f"{name}.log").write_text(
        f"$ {' '.join(argv)}\n# on nodea; exit code {code}; {wall} s\n" + "\n".join(lines) + "\n"
    )
    print(f"{name:24s} exit {code} in {wall} s", flush=True)
    return {"case": name, "command": argv, "exit_code": code, "wall_s": wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("data/cluster/pitfalls"))
    args = parser.parse_args()
    if args.worker:
        worker()
        return 0
    from workshop.cluster import emulate
    from workshop.cluster.spec import ClusterSpec
    from workshop.launch.record import provenance

    args.out.mkdir(parents=True, exist_ok=True)
    started, load = started_now()
    spec = ClusterSpec(nodes=2, link="1gbit")
    state = emulate.up(spec)
    cases = []
    try:
        cases.append(run_case(state, "ok", "nodea:1,nodeb:1", "hsn0", args.out))
        _rename("wsc-nodea", "hsn0", "eth1")
        cases.append(run_case(state, "iface-differs-flag", "nodea:1,nodeb:1", "hsn0", args.out))
        cases.append(run_case(state, "iface-differs-noflag", "nodea:1,nodeb:1", None, args.out))
        _rename("wsc-nodea", "eth1", "hsn0")
        _hostname(state, "nodeb", "nodea")
        cases.append(run_case(state, "same-hostname", "nodea:1,nodeb:1", "hsn0", args.out))
        cases.append(
            run_case(state, "same-hostname-mpi", "nodea:1,nodeb:1", "hsn0", args.out, "mpi")
        )
        for node in ("nodea", "nodeb"):
            _hostname(state, node, "node")
            hosts_file = emulate.NETNS_ETC / f"wsc-{node}" / "hosts"
            hosts_file.write_text("127.0.1.1 node\n" + hosts_file.read_text())
        cases.append(
            run_case(state, "same-hostname-loopback", "nodea:1,nodeb:1", "hsn0", args.out)
        )
    finally:
        emulate.down()
    result = {
        **run_record(started, load),
        "cases": cases,
        **provenance(),
    }
    (args.out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
