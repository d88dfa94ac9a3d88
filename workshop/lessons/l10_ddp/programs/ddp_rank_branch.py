"""A DDP program whose ranks build different graphs, for lesson 10: rank 1 skips the model's
middle layer in its forward pass (a branch on the rank, as a script that gives one rank extra
work or less might take). DDP agrees on nothing at run time: every rank launches its bucket
allreduces in the same fixed order, and rank 1's never gets the skipped layer's gradients.
See what happens with ``workshop check``:

    workshop check ddp_rank_branch.py -np 2

``--find-unused``: DDP(..., find_unused_parameters=True), which marks a parameter that got no
gradient as ready after each forward pass.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(16, 32)
        self.middle = nn.Linear(32, 32)
        self.last = nn.Linear(32, 10)

    def forward(self, x, skip_middle=False):
        x = torch.relu(self.first(x))
        if not skip_middle:
            x = torch.relu(self.middle(x))
        return self.last(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--find-unused", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = DistributedDataParallel(Net(), find_unused_parameters=args.find_unused)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * dist.get_world_size())
    generator = torch.Generator().manual_seed(rank)
    for step in range(args.steps):
        x = torch.randn(32, 16, generator=generator)
        y = torch.randint(0, 10, (32,), generator=generator)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x, skip_middle=rank == 1), y)
        loss.backward()
        optimizer.step()
        print(f"rank {rank}: step {step} done", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
