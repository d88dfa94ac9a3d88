"""Lesson 02's DDP program (ddp_torch.py: the MNIST CNN, its data, batch 32 per rank, Gloo on
the CPU) with a torch.profiler Chrome trace per rank, and DDP's bucket size as an option.

    torchrun --standalone --nproc_per_node 2 ddp_profiled.py OUT [--bucket-cap-mb MB]

The model and the data are ddp_torch.py's own (imported from lesson 02's programs folder); the
loop is its training loop without the epochs, the learning-rate warm-up and the checkpoints.
``torch.profiler.schedule(wait=WAIT, warmup=1, active=ACTIVE)`` leaves the first steps out:
in the first one DDP reduces every gradient in one bucket and then builds its buckets in the
order the gradients became ready (the rebuild happens once). Each rank writes
``OUT/rank<R>.json`` when its active steps end. ``--bucket-cap-mb`` is passed to
``DistributedDataParallel`` (left out: DDP's default, 25 MiB).
"""

import argparse
import itertools
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "l02_first_program" / "programs"))
from ddp_torch import build_model, load_mnist  # noqa: E402  (lesson 02's model and data)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for the traces (rank<R>.json)")
    parser.add_argument("--bucket-cap-mb", type=float, default=None, help="DDP's bucket_cap_mb")
    parser.add_argument("--wait", type=int, default=4, help="steps before the profiler starts")
    parser.add_argument("--active", type=int, default=5, help="profiled steps")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    return parser.parse_args()


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    # as ddp_torch.py on a CPU: the processes share the cores, each takes its share of threads
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["LOCAL_WORLD_SIZE"])))
    torch.manual_seed(42)
    train_set, _ = load_mnist()
    sampler = DistributedSampler(train_set, num_replicas=size, rank=rank)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    buckets = {} if args.bucket_cap_mb is None else {"bucket_cap_mb": args.bucket_cap_mb}
    model = DistributedDataParallel(build_model(), **buckets)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    args.out.mkdir(parents=True, exist_ok=True)

    def write_trace(prof):
        prof.export_chrome_trace(str(args.out / f"rank{rank}.json"))

    steps = args.wait + 1 + args.active
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=args.wait, warmup=1, active=args.active, repeat=1),
        on_trace_ready=write_trace,
        record_shapes=True,
    ) as prof:
        for images, labels in itertools.islice(loader, steps):
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # as ddp_torch.py: end without Python's shutdown (Gloo's worker threads outlive the group)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
