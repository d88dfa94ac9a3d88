"""A small PyTorch Horovod script with one of the Horovod errors a learner can cause, chosen by
``--error``. Fixture of tests/test_check_crashes.py (it does not import workshop).

- ``root_rank``: the broadcast names root_rank=hvd.rank() (a different root on each rank);
- ``shape``: a metric allreduced with a shape that depends on the rank;
- ``dtype``: a metric cast to float64 on rank 1 only;
- ``op``: hvd.Sum on rank 1, hvd.Average on rank 0, under one name;
- ``passes``: two backward passes per step (gradient accumulation) without
  backward_passes_per_step;
- ``duplicate``: two async allreduces in flight under one name;
- ``no_init``: hvd.rank() before hvd.init();
- ``exit``: rank 1 leaves with sys.exit(3) after training while rank 0 still allreduces
  ("Horovod has been shut down" on rank 0);
- ``none``: no error (the near miss: every practice holds).
"""

import argparse
import sys

import horovod.torch as hvd
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--error", default="none")
args = parser.parse_args()

if args.error == "no_init":
    print("rank", hvd.rank())
hvd.init()
torch.set_num_threads(1)
torch.manual_seed(1000 + hvd.rank())
x = torch.randn(64, 20, generator=torch.Generator().manual_seed(0))[hvd.rank() :: hvd.size()]
model = torch.nn.Linear(20, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
root = hvd.rank() if args.error == "root_rank" else 0
hvd.broadcast_parameters(model.state_dict(), root_rank=root)
for _ in range(4):
    optimizer.zero_grad()
    model(x[:16]).sum().backward()
    if args.error == "passes":
        model(x[16:]).sum().backward()
    optimizer.step()
loss = model(x).pow(2).mean().detach()
if args.error == "exit" and hvd.rank() == 1:
    sys.exit(3)
if args.error == "shape":
    hvd.allreduce(loss.repeat(1 + hvd.rank()), name="loss")
elif args.error == "dtype":
    hvd.allreduce(loss.double() if hvd.rank() == 1 else loss, name="loss")
elif args.error == "op":
    hvd.allreduce(loss, name="loss", op=hvd.Sum if hvd.rank() == 1 else hvd.Average)
elif args.error == "duplicate":
    first = hvd.allreduce_async(loss, name="loss")
    second = hvd.allreduce_async(loss * 2, name="loss")
    hvd.synchronize(first)
    hvd.synchronize(second)
else:
    hvd.allreduce(loss, name="loss")
