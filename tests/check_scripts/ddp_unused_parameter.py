"""DDP's unused-parameter failure: the model holds a layer its forward never uses, so DDP
waits for gradients that never come and the second step fails with "Expected to have finished
reduction in the prior iteration". ``--find-unused``: the near miss that runs
(``find_unused_parameters=True``). Fixture of tests/test_check_ddp.py (no workshop import).
"""

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--find-unused", action="store_true")
args = parser.parse_args()


class TwoHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.used = torch.nn.Linear(4, 2)
        self.unused = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.used(x)


dist.init_process_group("gloo")
torch.set_num_threads(1)
model = DistributedDataParallel(TwoHeads(), find_unused_parameters=args.find_unused)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(12, 4, generator=torch.Generator().manual_seed(dist.get_rank()))
for xb in x.split(4):
    optimizer.zero_grad()
    model(xb).sum().backward()
    optimizer.step()
dist.destroy_process_group()
