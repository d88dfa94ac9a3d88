"""A collective only one rank calls, under PyTorch DDP: rank 0 averages its loss across the
ranks with ``dist.all_reduce`` inside ``if dist.get_rank() == 0:``, so rank 0 waits there for a
partner that never comes while rank 1 goes on to its next step. Fixture of
tests/test_check_ddp.py (it does not import workshop).
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
torch.set_num_threads(1)
model = DistributedDataParallel(torch.nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * dist.get_world_size())
x = torch.randn(16, 4, generator=torch.Generator().manual_seed(dist.get_rank()))
for xb in x.split(4):
    optimizer.zero_grad()
    loss = model(xb).pow(2).mean()
    loss.backward()
    optimizer.step()
    if dist.get_rank() == 0:
        dist.all_reduce(loss.detach())
dist.destroy_process_group()
