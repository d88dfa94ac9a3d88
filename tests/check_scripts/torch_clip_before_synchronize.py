"""Practice missing: averaged (a clip racing the reduction). ``clip_grad_norm_`` between
``backward()`` and ``step()`` under ``hvd.DistributedOptimizer`` clips gradients while Horovod
still reduces them in the background. ``--synchronize-first``: the near miss that is right
(``optimizer.synchronize()``, clip, ``with optimizer.skip_synchronize(): optimizer.step()``,
as Horovod's docs show). ``--change-on-rank-1``: after the reduction, rank 1 alone doubles
its gradients. Fixture of tests/test_check_mean.py (it does not import workshop).
"""

import argparse

import horovod.torch as hvd
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--synchronize-first", action="store_true")
parser.add_argument("--change-on-rank-1", action="store_true")
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
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()
sampler.set_epoch(0)
for xb, yb in loader:
    optimizer.zero_grad()
    loss_fn(model(xb), yb).backward()
    if args.synchronize_first or args.change_on_rank_1:
        optimizer.synchronize()
        if args.change_on_rank_1:
            if hvd.rank() == 1:
                for p in model.parameters():
                    p.grad.mul_(2.0)
        else:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.01)
        with optimizer.skip_synchronize():
            optimizer.step()
    else:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.01)
        optimizer.step()
