"""A script that never ends (an endless training loop). Fixture of tests/test_check.py."""

import horovod.torch as hvd
import torch

hvd.init()
torch.set_num_threads(1)
model = torch.nn.Linear(20, 2)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
x = torch.randn(64, 20)[hvd.rank() :: hvd.size()]
while True:
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()
