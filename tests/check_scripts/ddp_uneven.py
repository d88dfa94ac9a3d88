"""Uneven inputs under PyTorch DDP: each rank trains on its own slice of the data, and rank 0's
slice holds two batches more than rank 1's. Without ``--join`` rank 1 leaves after its last
batch while rank 0's next backward() waits for rank 1's gradients; ``--join`` (the near miss
that works) trains inside ``with model.join():``, DDP's ``Join`` context manager, so the rank
that ran out shadows the other's allreduces. Fixture of tests/test_check_ddp.py.
"""

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--join", action="store_true")
args = parser.parse_args()

dist.init_process_group("gloo")
torch.set_num_threads(1)
rank = dist.get_rank()
batches = 5 if rank == 0 else 3
x = torch.randn(batches * 8, 8, generator=torch.Generator().manual_seed(rank))
y = (x[:, 0] > 0).long()

model = DistributedDataParallel(torch.nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * dist.get_world_size())
loss_fn = torch.nn.CrossEntropyLoss()


def train():
    for xb, yb in zip(x.split(8), y.split(8), strict=True):
        optimizer.zero_grad()
        loss_fn(model(xb), yb).backward()
        optimizer.step()


if args.join:
    with model.join():
        train()
else:
    train()
dist.destroy_process_group()
