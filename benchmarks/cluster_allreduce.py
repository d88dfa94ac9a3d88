"""Allreduce time vs message size inside one node and across emulated links (needs root).

Brings up a 2-node emulated cluster (workshop.cluster; torn down at the end, also on error),
then, in every repeat, launches one horovodrun job per configuration, in this order:

  intra         2 ranks on nodea (Gloo; the ranks talk over the node's own loopback)
  cross-1gbit   1 rank on nodea + 1 on nodeb (Gloo), links capped at 1 Gbit/s with tc tbf
  cross-10gbit  the same at 10 Gbit/s (the rate is changed in place between jobs)
  mpi-flat      2 + 2 ranks over MPI at 1 Gbit/s, HOROVOD_HIERARCHICAL_ALLREDUCE=0
  mpi-hier      the same with HOROVOD_HIERARCHICAL_ALLREDUCE=1 (Horovod 0.28.1 switches it
                off again in a build without NCCL or DDL: operations.cc, "Hierarchical allreduce
                is not supported without NCCL or DDL"; measured to show what it changes here)

Each job allreduces (sum, float32) one tensor of each size in --sizes-mib, --iters times after
one warm-up, and rank 0 prints the time of each call. A job's value per size is the median of
its --iters calls; the repeats give min / median / max per configuration and size.

    flock /tmp/workshop-cpu.lock python benchmarks/cluster_allreduce.py --repeats 5 \\
        --out data/cluster/allreduce
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _recording import run_record, started_now

from workshop.launch.horovodrun import ROOT_ENV, horovodrun_command

CONFIGS = {
    # name: (controller, np, hosts, link, extra environment)
    "intra": ("gloo", 2, "nodea:2", None, {}),
    "cross-1gbit": ("gloo", 2, "nodea:1,nodeb:1", "1gbit", {}),
    "cross-10gbit": ("gloo", 2, "nodea:1,nodeb:1", "10gbit", {}),
    "mpi-flat": ("mpi", 4, "nodea:2,nodeb:2", "1gbit", {"HOROVOD_HIERARCHICAL_ALLREDUCE": "0"}),
    "mpi-hier": ("mpi", 4, "nodea:2,nodeb:2", "1gbit", {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1"}),
}


def worker(sizes_mib: list[int], iters: int) -> None:
    """One rank: time ``iters`` allreduces of each size; rank 0 prints one JSON line."""
    import horovod.torch as hvd
    import torch

    hvd.init()
    torch.set_num_threads(1)
    hosts = hvd.allgather_object(socket.gethostname())
    times = {}
    for size in sizes_mib:
        tensor = torch.ones(size * 2**20 // 4, dtype=torch.float32)
        calls = []
        for i in range(iters + 1):
            hvd.allreduce(torch.zeros(1), name=f"sync.{size}.{i}")  # start together
            start = time.perf_counter()
            hvd.allreduce(tensor, op=hvd.Sum, name=f"ar.{size}.{i}")
            if i:  # the first call of each size is a warm-up (buffers, fusion setup)
                calls.append(time.perf_counter() - start)
        times[str(size)] = calls
    if hvd.rank() == 0:
        print("RESULT " + json.dumps({"hosts": hosts, "times_s": times}), flush=True)
    hvd.shutdown()


def run_job(state: dict, name: str, sizes: list[int], iters: int) -> dict:
    from workshop.cluster import emulate
    from workshop.launch.programs import program_path_env

    controller, np, hosts, link, extra = CONFIGS[name]
    if link and state["spec"]["link"] != link:
        state = emulate.set_rate(state, link)
    argv = horovodrun_command(
        np,
        [sys.executable, __file__, "--worker", "--sizes-mib", ",".join(map(str, sizes)),
         "--iters", str(iters)],
        controller=controller,
        hosts=hosts,
        # with only local hosts horovodrun wants an interface holding 127.0.0.1: none on one node
        interface=state["interface"] if "," in hosts else None,
        program="horovodrun",  # found on the nodes through PATH
    )  # fmt: skip
    env = (
        os.environ
        | extra
        | ROOT_ENV
        | {
            "PATH": program_path_env(),
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        }
    )
    prefix = emulate.node_prefix(state, "nodea")
    start = time.perf_counter()
    result = subprocess.run(prefix + argv, capture_output=True, text=True, env=env, timeout=300)
    wall = time.perf_counter() - start
    for line in result.stdout.splitlines():
        if "RESULT " in line:
            # Open MPI's --tag-output may glue the next line's tag to this one: read one object
            data, _ = json.JSONDecoder().raw_decode(line.split("RESULT ", 1)[1])
            return {"config": name, "command": argv, "wall_s": round(wall, 2), **data}
    output = (result.stdout + result.stderr)[-3000:]
    raise RuntimeError(f"{name} failed ({result.returncode}):\n{output}")


def summarize(jobs: list[dict]) -> dict:
    """Per configuration and size: each repeat's median call time, and min / median / max."""
    out = {}
    for job in jobs:
        for size, calls in job["times_s"].items():
            out.setdefault(job["config"], {}).setdefault(size, []).append(statistics.median(calls))
    return {
        config: {
            size: {"min": min(v), "median": statistics.median(v), "max": max(v), "repeats": v}
            for size, v in sizes.items()
        }
        for config, sizes in out.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--sizes-mib", default="1,2,4,8,16,32,64")
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--out", type=Path, default=None, help="folder for result.json")
    parser.add_argument(
        "--budget-s", type=float, default=None, help="start no repeat that would end after this"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes_mib.split(",")]
    if args.worker:
        worker(sizes, args.iters)
        return 0
    from workshop.cluster import emulate
    from workshop.cluster.spec import ClusterSpec
    from workshop.launch.record import provenance

    started, load = started_now()
    configs = args.configs.split(",")
    state = emulate.up(ClusterSpec(nodes=2, link="1gbit"))
    jobs, failed = [], []
    begin = time.monotonic()
    try:
        for repeat in range(args.repeats):
            repeat_start = time.monotonic()
            for name in configs:
                try:
                    job = run_job(state, name, sizes, args.iters)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:  # kept, not hidden
                    failed.append({"repeat": repeat, "config": name, "error": str(exc)[-2000:]})
                    print(f"repeat {repeat + 1} {name}: FAILED {str(exc)[-300:]}", flush=True)
                    continue
                finally:
                    state = emulate.read_state()
                jobs.append({"repeat": repeat, **job})
                big = statistics.median(job["times_s"][str(sizes[-1])])
                where = f"hosts {','.join(job['hosts'])}, {job['wall_s']} s"
                print(
                    f"repeat {repeat + 1} {name:13s} {sizes[-1]} MiB: {big * 1e3:7.1f} ms",
                    f"({where})",
                    flush=True,
                )
            took = time.monotonic() - repeat_start
            if args.budget_s and time.monotonic() - begin + 1.2 * took > args.budget_s:
                print(f"stopping after {repeat + 1} repeats: --budget-s {args.budget_s}")
                break
    finally:
        emulate.down()
    result = {
        **run_record(started, load),
        "settings": {
            "sizes_mib": sizes,
            "iters_per_size": args.iters,
            "repeats": len({job["repeat"] for job in jobs}),
            "order": configs,
            "configs": {
                n: dict(zip(("controller", "np", "hosts", "link", "env"), CONFIGS[n], strict=True))
                for n in configs
            },  # fmt: skip
            "tbf": "tc qdisc add dev hsn0 root tbf rate RATE burst max(256 KiB, 1 ms) "
            "latency 50ms, on each node's hsn0 and on its switch port",
        },
        "allreduce_s": summarize(jobs),
        "jobs": jobs,
        "failed_jobs": failed,
        **provenance(),
    }
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out / 'result.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
