"""Lesson 02's DDP program (ddp_torch.py: the MNIST CNN, its data, batch 32 per rank, Gloo on
the CPU) for a number of steps, with DDP's bucket size as an option.

    workshop run --script ddp_buckets.py -np 2 --profile-steps 5 -- [--bucket-cap-mb MB]

The model and the data are ddp_torch.py's own (imported from lesson 02's programs folder); the
loop is its training loop without the epochs, the learning-rate warm-up and the checkpoints.
``--bucket-cap-mb`` is passed to ``DistributedDataParallel`` (left out: DDP's default,
25 MiB). ``workshop run --script`` starts it with torchrun and measures each step;
``--profile-steps N`` records N steps in a torch.profiler trace per rank after one skipped and
one warm-up step (in the first step DDP reduces every gradient in one bucket and then builds
its buckets in the order the gradients became ready: the rebuild happens once).
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
    parser.add_argument("--bucket-cap-mb", type=float, default=None, help="DDP's bucket_cap_mb")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps")
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
    for images, labels in itertools.islice(itertools.cycle(loader), args.steps):
        optimizer.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # as ddp_torch.py: end without Python's shutdown (Gloo's worker threads outlive the group)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
