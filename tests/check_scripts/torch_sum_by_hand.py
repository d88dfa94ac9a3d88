"""Practice missing: averaged (a Sum for a mean). The gradients are allreduced by hand with
``op=hvd.Sum`` and the LR is scaled by ``hvd.size()`` as well, so at np=2 every step is 4x the
serial one; every rank applies the same gradients, so equality alone would pass it.
``--average``: the near miss that is right (``op=hvd.Average``). Fixture of
tests/test_check_mean.py (it does not import workshop).
"""

import argparse

import horovod.torch as hvd
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--average", action="store_true")
args = parser.parse_args()

hvd.init()
torch.set_num_threads(1)
torch.manual_seed(1000 + hvd.rank())
x = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
y = (x[:, 0] > 0).long()
dataset = torch.utils.data.TensorDataset(x, y)
sampler = torch.utils.data.distributed.DistributedSampler(
    dataset, num_replicas=hvd.size(), rank=hvd.rank(), seed=0
)
loader = torch.utils.data.DataLoader(dataset, batch_size=8, sampler=sampler)

model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()
op = hvd.Average if args.average else hvd.Sum
sampler.set_epoch(0)
for xb, yb in loader:
    optimizer.zero_grad()
    loss_fn(model(xb), yb).backward()
    for name, p in model.named_parameters():
        hvd.allreduce_(p.grad, op=op, name=name)
    optimizer.step()
