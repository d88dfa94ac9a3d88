"""A correct Horovod PyTorch program: what `workshop check` should pass on every practice.

Each rank starts from its own random seed on purpose: the broadcast is what makes the models
equal. ``--steps`` caps each epoch; ``--epochs`` with ``sampler.set_epoch(epoch)`` reshuffles
the shards every epoch (``--no-set-epoch``: the same order every epoch); ``--warmup-epochs``
ramps the LR linearly from the one-worker 0.05 to 0.05 x size. Fixture of tests/test_check.py
(it does not import workshop).
"""

import argparse

import horovod.torch as hvd
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6, help="at most this many steps per epoch")
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--warmup-epochs", type=float, default=0.0)
parser.add_argument("--no-set-epoch", action="store_true")
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
base_lr, target_lr = 0.05, 0.05 * hvd.size()
optimizer = torch.optim.SGD(model.parameters(), lr=target_lr, momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()

warmup_steps = args.warmup_epochs * min(args.steps, len(loader))
step = 0
for epoch in range(args.epochs):
    if not args.no_set_epoch:
        sampler.set_epoch(epoch)
    for batch, (xb, yb) in enumerate(loader, start=1):
        ramp = min(1.0, step / warmup_steps) if warmup_steps else 1.0
        for group in optimizer.param_groups:
            group["lr"] = base_lr + (target_lr - base_lr) * ramp
        step += 1
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch + 1} step {step}: loss {loss.item():.4f}")
        if batch == args.steps:
            break

if hvd.rank() == 0:
    torch.save(model.state_dict(), args.checkpoint)
