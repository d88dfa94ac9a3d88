"""A correct PyTorch DDP program: what `workshop check` should pass on every practice.

``init_process_group("gloo")`` (torchrun sets RANK, WORLD_SIZE, MASTER_ADDR),
``DistributedDataParallel`` (it broadcasts rank 0's parameters at construction: each rank
seeds differently on purpose), ``DistributedSampler`` with ``set_epoch`` (``--no-set-epoch``:
the near miss, the same shuffle every epoch), the LR scaled by the world size, a rank-0
checkpoint; ``--no-init``: no ``init_process_group`` at all. Fixture of
tests/test_check_ddp.py (it does not import workshop).
"""

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4, help="at most this many steps per epoch")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--no-set-epoch", action="store_true")
parser.add_argument("--no-init", action="store_true", help="forget init_process_group")
args = parser.parse_args()

if not args.no_init:
    dist.init_process_group("gloo")
torch.set_num_threads(1)
torch.manual_seed(1000 + dist.get_rank())

x = torch.randn(128, 8, generator=torch.Generator().manual_seed(0))
y = (x[:, 0] > 0).long()
dataset = TensorDataset(x, y)
sampler = DistributedSampler(dataset, seed=0)
loader = DataLoader(dataset, batch_size=8, sampler=sampler)

model = DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * dist.get_world_size())
loss_fn = torch.nn.CrossEntropyLoss()
for epoch in range(args.epochs):
    if not args.no_set_epoch:
        sampler.set_epoch(epoch)
    for batch, (xb, yb) in enumerate(loader, start=1):
        optimizer.zero_grad()
        loss_fn(model(xb), yb).backward()
        optimizer.step()
        if batch == args.steps:
            break

if dist.get_rank() == 0:
    torch.save(model.module.state_dict(), "checkpoint.pt")
dist.destroy_process_group()
