"""Practice missing: sharded. Every rank loads all the data, shuffled the same way (same
seed): two ranks do the work of one. ``--steps`` caps each epoch (16 is the whole data set).
Fixture of tests/test_check.py."""

import argparse

import horovod.torch as hvd
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4, help="at most this many steps per epoch")
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()

hvd.init()
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(256, 20, generator=torch.Generator().manual_seed(0))
y = (x[:, 0] > 0).long()
dataset = torch.utils.data.TensorDataset(x, y)
loader = torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=True)

model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()
for _epoch in range(args.epochs):
    for step, (xb, yb) in enumerate(loader, start=1):
        optimizer.zero_grad()
        loss_fn(model(xb), yb).backward()
        optimizer.step()
        if step == args.steps:
            break
