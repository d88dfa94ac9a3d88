"""A learner's homework as it often comes: no broadcast (each rank starts from its own random
model), and a crash after the first epoch (a NameError in the line that prints the epoch's
loss). ``workshop check`` still judges the steps that ran: broadcast FAILs, the crash is
reported, exit code 2. Fixture of tests/test_check.py (it does not import workshop).
"""

import horovod.torch as hvd
import torch

hvd.init()
torch.set_num_threads(1)
torch.manual_seed(hvd.rank())  # a different model on each rank, and nothing broadcast

data = torch.Generator().manual_seed(0)
x = torch.randn(128, 20, generator=data)
y = (x[:, 0] > 0).long()
dataset = torch.utils.data.TensorDataset(x, y)
sampler = torch.utils.data.distributed.DistributedSampler(
    dataset, num_replicas=hvd.size(), rank=hvd.rank(), seed=0
)
loader = torch.utils.data.DataLoader(dataset, batch_size=16, sampler=sampler)
model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
loss_fn = torch.nn.CrossEntropyLoss()

for epoch in range(3):
    sampler.set_epoch(epoch)
    total = 0.0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch + 1}: mean loss {totl / len(loader):.4f}")  # noqa: F821 (the bug)
