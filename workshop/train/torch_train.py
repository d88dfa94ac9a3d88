"""One rank of a Horovod data-parallel PyTorch training run.

Started by ``workshop run`` (through horovodrun) or directly by a cluster's MPI launcher::

    python -m workshop.train.torch_train --run-dir RUN_DIR --dataset mnist --epochs 3

Horovod practice, step by step: ``hvd.init()``; pin the device and the number of compute
threads; shard the data by rank; scale the learning rate with the number of workers; wrap the
optimizer in ``hvd.DistributedOptimizer`` (gradients averaged by allreduce, optionally
compressed to float16, optionally accumulated over several backward passes per allreduce);
broadcast the initial parameters and optimizer state from rank 0; average metrics over ranks;
print on rank 0.
"""

from __future__ import annotations

import sys
from functools import partial

from workshop.train.common import (
    EpochTotals,
    Reductions,
    StepPlan,
    StepTimes,
    build_parser,
    env_rank,
    inject_fault,
    lr_at,
    pin_device,
    plan_steps,
    run_rank,
    run_training,
    shard_indices,
    threads_per_rank,
)


def build_model(dataset: str):
    """The network trained on each dataset (same architecture as the TensorFlow program)."""
    from torch import nn

    if dataset == "materials":
        from workshop.train.materials import torch_model

        return torch_model()
    if dataset == "mnist":
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
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 8 * 8, 256),
        nn.ReLU(),
        nn.Linear(256, 10),
    )


def train(args, rank_io) -> None:
    import horovod.torch as hvd
    import torch

    from workshop.train import data as datasets
    from workshop.train.device import pin_torch, torch_gpu_count

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    inject_fault(rank)
    choice, device_name = pin_device(
        hvd, args, rank_io, gpu_count=torch_gpu_count(), pin=pin_torch
    )
    threads = threads_per_rank(hvd.local_size(), args.threads)
    torch.set_num_threads(threads)
    torch.manual_seed(args.seed)

    dataset = datasets.load(args.dataset, args.data, seed=args.seed)
    regression = dataset.task == "regression"
    device = torch.device(choice.torch_device)
    x_train = torch.from_numpy(dataset.x_train)
    y_train = torch.from_numpy(dataset.y_train)
    test_idx = shard_indices(len(dataset.y_test), rank, size, epoch=0, seed=args.seed)
    x_test = torch.from_numpy(dataset.x_test[test_idx]).to(device)
    y_test = torch.from_numpy(dataset.y_test[test_idx]).to(device)

    plan = plan_steps(args, size, len(y_train))
    model = build_model(args.dataset).to(device)
    optimizer = distributed_optimizer(hvd, model, args)
    loss_fn = torch.nn.MSELoss() if regression else torch.nn.CrossEntropyLoss()
    rank_io.print(
        f"workshop.train.torch_train: np={size} device={device_name} threads/rank={threads} "
        f"data={dataset.info['source']} batch={args.batch_size}/worker x {plan.passes} backward "
        f"pass(es)/step ({plan.global_batch} global) steps/epoch={plan.steps_per_epoch} "
        f"lr {plan.base_lr:g} -> {plan.target_lr:g} ({args.lr_scaling}, warmup "
        f"{args.warmup_epochs:g} epochs) compression={args.compression}"
    )
    run_training(
        "torch",
        args,
        rank_io,
        hvd,
        plan,
        dataset=dataset,
        device=device_name,
        threads=threads,
        reduce=torch_reductions(hvd),
        train_epoch=partial(
            train_epoch,
            model=model,
            optimizer=optimizer,
            loss_fn=loss_fn,
            x_train=x_train,
            y_train=y_train,
            device=device,
            plan=plan,
            warmup_epochs=args.warmup_epochs,
            regression=regression,
        ),
        evaluate=partial(evaluate, model, loss_fn, x_test, y_test, regression=regression),
    )
    hvd.shutdown()


def distributed_optimizer(hvd, model, args):
    """SGD wrapped in ``hvd.DistributedOptimizer``, with the model's parameters and the
    optimizer's state broadcast from rank 0 so that every worker starts alike.

    ``backward_passes_per_step``: Horovod's hooks count the backward passes and start the
    allreduce of a gradient only on the last one; the gradients add up in ``.grad`` until then.
    """
    import torch

    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    optimizer = hvd.DistributedOptimizer(
        optimizer,
        named_parameters=model.named_parameters(),
        compression=getattr(hvd.Compression, args.compression),
        backward_passes_per_step=args.backward_passes_per_step,
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    return optimizer


def train_epoch(
    indices,
    first_step: int,
    step_times: StepTimes,
    *,
    model,
    optimizer,
    loss_fn,
    x_train,
    y_train,
    device,
    plan: StepPlan,
    warmup_epochs: float,
    regression: bool,
) -> EpochTotals:
    """One epoch's optimizer steps on this rank's shard ``indices`` (see
    :func:`workshop.train.common.run_training`); each step takes ``plan.passes`` batches.

    Each step's times go to ``step_times``: the gradients' allreduces are awaited by an explicit
    ``optimizer.synchronize()`` and the update runs under ``optimizer.skip_synchronize()``
    (Horovod's own pattern, horovod/torch/optimizer.py:305-320 at 0.28.1), so the wait is
    timed apart from this rank's compute.
    """
    import torch

    model.train()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device)
    seen = 0
    lr = plan.base_lr
    clock = _clock(device)
    for batch in range(plan.steps_per_epoch):
        step_times.start()
        step_start = clock()
        step = first_step + batch
        lr = lr_at(step, plan.steps_per_epoch, plan.base_lr, plan.target_lr, warmup_epochs)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad()
        data_s = compute_s = 0.0
        for part in range(plan.passes):
            fetch = clock()
            first = batch * plan.step_samples + part * plan.batch_size
            idx = torch.from_numpy(indices[first : first + plan.batch_size])
            inputs, targets = x_train[idx].to(device), y_train[idx].to(device)
            begin = clock()
            step_times.computing()
            outputs = model(inputs)
            loss = loss_fn(outputs, targets)
            # the step applies the sum of the passes' gradients: average them instead
            (loss / plan.passes).backward()
            loss_sum += loss.detach() * len(idx)
            if not regression:
                correct += (outputs.argmax(1) == targets).sum()
            seen += len(idx)
            end = clock()
            step_times.computed()
            data_s, compute_s = data_s + begin - fetch, compute_s + end - begin
        wait_start = clock()
        optimizer.synchronize()
        update_start = clock()
        step_times.computing()
        with optimizer.skip_synchronize():
            optimizer.step()
        step_end = clock()
        step_times.computed()
        compute_s += step_end - update_start
        step_times.add(step, data_s, compute_s, update_start - wait_start, step_end - step_start)
    return EpochTotals(loss_sum=loss_sum, correct=correct, seen=seen, lr=lr)


def _clock(device):
    """``time.perf_counter`` that, on a GPU, first waits for the work queued so far (each time
    must include the kernels it started; on the CPU the work is done when the call returns)."""
    import time

    import torch

    if device.type != "cuda":
        return time.perf_counter

    def synchronized() -> float:
        torch.cuda.synchronize()
        return time.perf_counter()

    return synchronized


def evaluate(model, loss_fn, x_test, y_test, *, regression: bool):
    """This rank's test loss and score (accuracy, or R2 for the materials regression)."""
    import torch

    model.eval()
    with torch.no_grad():
        outputs = model(x_test)
        test_loss = loss_fn(outputs, y_test)
        if regression:
            from workshop.train.materials import materials_score

            test_score = torch.tensor(materials_score(y_test.cpu().numpy(), outputs.cpu().numpy()))
        else:
            test_score = (outputs.argmax(1) == y_test).float().mean()
    return test_loss, test_score


def torch_reductions(hvd) -> Reductions:
    """Average and maximum of a metric over the ranks, with horovod.torch's allreduce."""
    import torch

    def mean(value, name):
        return hvd.allreduce(
            torch.as_tensor(value, dtype=torch.float32).cpu(), name=name, op=hvd.Average
        ).item()

    def slowest(value, name):
        return hvd.allreduce(torch.tensor(value), name=name, op=hvd.Max).item()

    return Reductions(mean=mean, slowest=slowest)


def main(argv: list[str] | None = None) -> int:
    args = build_parser("workshop.train.torch_train").parse_args(argv)
    return run_rank(env_rank(), args.run_dir, lambda rank_io: train(args, rank_io))


if __name__ == "__main__":
    sys.exit(main())
