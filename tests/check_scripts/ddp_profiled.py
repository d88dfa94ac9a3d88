"""A small PyTorch DDP program that records one torch.profiler Chrome trace per rank.

``init_process_group("gloo")`` (torchrun sets RANK, WORLD_SIZE, MASTER_ADDR), a three-layer
MLP under ``DistributedDataParallel`` with a small ``bucket_cap_mb`` (0.25 MB: the 3 layers'
~1.2 MB of float32 gradients fall into several buckets, each its own Gloo allreduce), and
``torch.profiler.profile`` with a schedule that skips warm-up (``wait=1, warmup=1,
active=--active``): the first step builds the buckets, the second warms the profiler up.
Each rank writes ``OUT/rank<R>.json`` when its active steps end (``on_trace_ready``).
``--slow-rank R --slow-ms M``: rank R sleeps M ms before each backward pass (a straggler the
others wait for). Fixture of tests/test_torch_trace_live.py (it does not import workshop).
"""

import argparse
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("out", help="folder for the traces (rank<R>.json)")
parser.add_argument("--active", type=int, default=3, help="profiled steps")
parser.add_argument("--bucket-cap-mb", type=float, default=0.25)
parser.add_argument("--slow-rank", type=int, default=-1)
parser.add_argument("--slow-ms", type=float, default=0.0)
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
torch.manual_seed(0)
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)

model = DistributedDataParallel(
    torch.nn.Sequential(
        torch.nn.Linear(256, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    ),
    bucket_cap_mb=args.bucket_cap_mb,
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * dist.get_world_size())
loss_fn = torch.nn.CrossEntropyLoss()
generator = torch.Generator().manual_seed(rank)


def write_trace(prof: torch.profiler.profile) -> None:
    prof.export_chrome_trace(str(out / f"rank{rank}.json"))


schedule = torch.profiler.schedule(wait=1, warmup=1, active=args.active, repeat=1)
with torch.profiler.profile(
    activities=[torch.profiler.ProfilerActivity.CPU],
    schedule=schedule,
    on_trace_ready=write_trace,
    record_shapes=True,
) as prof:
    for _ in range(2 + args.active):
        x = torch.randn(64, 256, generator=generator)
        y = torch.randint(0, 10, (64,), generator=generator)
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        if rank == args.slow_rank:
            time.sleep(args.slow_ms / 1000)
        loss.backward()
        optimizer.step()
        prof.step()

dist.destroy_process_group()
