"""Practice missing: lr_scaled. Correct otherwise, but the learning rate stays at
its one-process value while the global batch doubles. Fixture of tests/test_check.py."""

import horovod.torch as hvd
import torch

hvd.init()
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(256, 20, generator=torch.Generator().manual_seed(0))
y = (x[:, 0] > 0).long()
dataset = torch.utils.data.TensorDataset(x, y)
sampler = torch.utils.data.distributed.DistributedSampler(
    dataset, num_replicas=hvd.size(), rank=hvd.rank(), seed=0
)
loader = torch.utils.data.DataLoader(dataset, batch_size=16, sampler=sampler)

model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()
for step, (xb, yb) in enumerate(loader, start=1):
    optimizer.zero_grad()
    loss_fn(model(xb), yb).backward()
    optimizer.step()
    if step == 4:
        break
