"""A Horovod PyTorch program whose rank 1 fails while taking a batch (its input pipeline: a
record it cannot decode), while rank 0 waits for it in the allreduce and is then shut down.
Issue 49's first case; fixture of tests/test_run_script.py (it does not import workshop)."""

import argparse

import horovod.torch as hvd
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--fail-at", type=int, default=5, help="rank 1 fails at this batch")
args = parser.parse_args()

hvd.init()
torch.set_num_threads(1)


class Records(torch.utils.data.Dataset):
    def __init__(self, rank: int):
        self.rank = rank
        self.x = torch.randn(512, 20, generator=torch.Generator().manual_seed(rank))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.rank == 1 and i == args.fail_at * 16:
            raise RuntimeError(f"record {i} is truncated: cannot decode it")
        return self.x[i], (self.x[i, 0] > 0).long()


loader = torch.utils.data.DataLoader(Records(hvd.rank()), batch_size=16)
model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
loss_fn = torch.nn.CrossEntropyLoss()
for xb, yb in loader:
    optimizer.zero_grad()
    loss_fn(model(xb), yb).backward()
    optimizer.step()
