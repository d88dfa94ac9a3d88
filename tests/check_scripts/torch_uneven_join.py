"""Uneven shards handled the way Horovod documents: 1,000 samples split 600 / 400 between two
ranks (weights size - rank + 1), batches of 25, so rank 0 makes 24 steps per epoch and rank 1
16. At the end of each epoch every rank calls hvd.join(): rank 1, out of batches first, joins
and answers rank 0's 8 remaining allreduces with zeros until rank 0 joins too. Correct: the
near miss is torch_unequal_shards.py (unequal steps, no join). Fixture of
tests/test_check_join.py."""

import horovod.torch as hvd
import torch

hvd.init()
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(1000, 20, generator=torch.Generator().manual_seed(0))
y = (x[:, 0] > 0).long()
weights = [hvd.size() - r + 1 for r in range(hvd.size())]
bounds = [len(x) * sum(weights[:r]) // sum(weights) for r in range(hvd.size() + 1)]
shard = slice(bounds[hvd.rank()], bounds[hvd.rank() + 1])
x, y = x[shard], y[shard]

model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()
for epoch in range(2):
    for start in range(0, len(x), 25):
        optimizer.zero_grad()
        loss_fn(model(x[start : start + 25]), y[start : start + 25]).backward()
        optimizer.step()
    last = hvd.join()
    if hvd.rank() == 0:
        print(f"epoch {epoch}: rank {last} joined last")
