"""A correct Horovod PyTorch program with a sparse gradient: ``nn.Embedding(sparse=True)``,
whose gradient ``hvd.DistributedOptimizer`` reduces with an allgather of its indices and
values. Every practice holds. Fixture of tests/test_check_mean.py (no workshop import).
"""

import horovod.torch as hvd
import torch

hvd.init()
torch.set_num_threads(1)
torch.manual_seed(1000 + hvd.rank())
tokens = torch.randint(0, 50, (64, 4), generator=torch.Generator().manual_seed(0))
y = (tokens[:, 0] % 2).long()
dataset = torch.utils.data.TensorDataset(tokens, y)
sampler = torch.utils.data.distributed.DistributedSampler(
    dataset, num_replicas=hvd.size(), rank=hvd.rank(), seed=0
)
loader = torch.utils.data.DataLoader(dataset, batch_size=8, sampler=sampler)


class Bag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 8, sparse=True)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, tokens):
        return self.head(self.embedding(tokens).mean(dim=1))


model = Bag()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()
sampler.set_epoch(0)
for xb, yb in loader:
    optimizer.zero_grad()
    loss_fn(model(xb), yb).backward()
    optimizer.step()
if hvd.rank() == 0:
    torch.save(model.state_dict(), "checkpoint.pt")
