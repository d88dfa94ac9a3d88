import torch, torch.distributed as dist
dist.init_process_group("gloo")
class M(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.used = torch.nn.Linear(4, 2); self.unused = torch.nn.Linear(4, 2)
    def forward(self, x): return self.used(x)
m = torch.nn.parallel.DistributedDataParallel(M())
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for i in range(3):
    opt.zero_grad(); m(torch.randn(2, 4)).sum().backward(); opt.step()
