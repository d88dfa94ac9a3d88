"""Sharded by hand with x[rank::size] over 1,001 samples: rank 0 gets 501, rank 1 500, so with
batches of 25 rank 0 makes 21 steps per epoch and rank 1 20. Horovod pairs rank 0's extra step
with rank 1's next one, and rank 0's last steps wait for a rank that has finished. Fixture of
tests/test_check.py."""

import horovod.torch as hvd
import torch

hvd.init()
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(1001, 20, generator=torch.Generator().manual_seed(0))
y = (x[:, 0] > 0).long()
x, y = x[hvd.rank() :: hvd.size()], y[hvd.rank() :: hvd.size()]

model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()
for _epoch in range(2):
    for start in range(0, len(x), 25):
        optimizer.zero_grad()
        loss_fn(model(x[start : start + 25]), y[start : start + 25]).backward()
        optimizer.step()
