"""A Horovod PyTorch program whose rank 1 alone decides to stop early (its own loss looked
good enough) and leaves with sys.exit(0) after its first epoch, while rank 0 goes on into the
second epoch's allreduces and is shut down. Issue 49's early exit; fixture of
tests/test_run_script.py (it does not import workshop)."""

import sys

import horovod.torch as hvd
import torch

hvd.init()
torch.set_num_threads(1)
x = torch.randn(256, 20, generator=torch.Generator().manual_seed(hvd.rank()))
y = (x[:, 0] > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()
for epoch in range(3):
    for i in range(0, len(x), 32):
        optimizer.zero_grad()
        loss = loss_fn(model(x[i : i + 32]), y[i : i + 32])
        loss.backward()
        optimizer.step()
    if hvd.rank() == 1 and loss.item() < 10.0:
        print(f"rank 1: loss {loss.item():.3f} after epoch {epoch + 1}: stopping early")
        sys.exit(0)
