"""A correct Horovod PyTorch program: what `workshop check` should pass on every practice.

Each rank starts from its own random seed on purpose: the broadcast is what makes the models
equal. Fixture of tests/test_check.py (it does not import workshop).
"""

import argparse

import horovod.torch as hvd
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--checkpoint", default="checkpoint.pt")
args = parser.parse_args()

hvd.init()
torch.set_num_threads(1)
torch.manual_seed(1000 + hvd.rank())

data = torch.Generator().manual_seed(0)
x = torch.randn(256, 20, generator=data)
y = (x[:, 0] > 0).long()
dataset = torch.utils.data.TensorDataset(x, y)
sampler = torch.utils.data.distributed.DistributedSampler(
    dataset, num_replicas=hvd.size(), rank=hvd.rank(), seed=0
)
loader = torch.utils.data.DataLoader(dataset, batch_size=16, sampler=sampler)

model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(), momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()

for step, (xb, yb) in enumerate(loader, start=1):
    optimizer.zero_grad()
    loss = loss_fn(model(xb), yb)
    loss.backward()
    optimizer.step()
    if hvd.rank() == 0:
        print(f"step {step}: loss {loss.item():.4f}")
    if step == args.steps:
        break

if hvd.rank() == 0:
    torch.save(model.state_dict(), args.checkpoint)
