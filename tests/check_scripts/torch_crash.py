"""A script that crashes on rank 1 at its third step. Fixture of tests/test_check.py."""

import horovod.torch as hvd
import torch

hvd.init()
torch.set_num_threads(1)
model = torch.nn.Linear(20, 2)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
x = torch.randn(64, 20)[hvd.rank() :: hvd.size()]
for step in range(1, 6):
    if step == 3 and hvd.rank() == 1:
        raise ValueError("batch 3 is corrupt on this rank")
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()
