"""A deadlock learners write: the test accuracy is averaged over the ranks on rank 0 only.
``hvd.allreduce`` needs every rank; rank 1 never calls it and goes on to the next epoch's
gradient allreduces, which rank 0 never reaches. Fixture of tests/test_check.py."""

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
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()
for epoch in range(3):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        optimizer.zero_grad()
        loss_fn(model(xb), yb).backward()
        optimizer.step()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean()
    if hvd.rank() == 0:
        acc = hvd.allreduce(acc, name="test_acc")
        print(f"epoch {epoch}: accuracy {acc.item():.3f}", flush=True)
