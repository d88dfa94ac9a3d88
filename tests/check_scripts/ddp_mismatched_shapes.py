"""Mismatched shapes under torch.distributed: each rank all-reduces a tensor whose length
depends on its rank (3 elements on rank 0, 4 on rank 1). Gloo does not check: rank 0 returns
and leaves, rank 1 waits for the rest until its connection closes. Fixture of
tests/test_check_ddp.py (it does not import workshop).
"""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
counts = torch.ones(3 + dist.get_rank())
dist.all_reduce(counts)
dist.destroy_process_group()
