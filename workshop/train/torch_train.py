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
import time

from workshop.train.common import (
    PROCESS_START,
    build_parser,
    env_rank,
    epoch_record,
    inject_fault,
    lr_at,
    run_rank,
    run_summary,
    scaled_lr,
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
    from workshop.train.device import (
        horovod_gpu_support,
        pin_torch,
        select_device_from_env,
        torch_gpu_count,
    )

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    inject_fault(rank)
    choice = select_device_from_env(
        args.device,
        torch_gpu_count(),
        horovod_gpu=horovod_gpu_support(hvd),
        local_rank=hvd.local_rank(),
        local_size=hvd.local_size(),
    )
    device_name = pin_torch(choice)
    if choice.note and rank == 0:
        rank_io.print(f"device: {choice.note}")
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

    model = build_model(args.dataset).to(device)
    passes = args.backward_passes_per_step
    # one optimizer step averages the gradients of `passes` batches on every worker
    global_batch = args.batch_size * passes * size
    base_batch = args.base_batch_size or args.batch_size * passes
    base_lr = args.lr
    target_lr = scaled_lr(base_lr, global_batch, base_batch, args.lr_scaling)
    optimizer = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=args.momentum)
    # backward_passes_per_step: Horovod's hooks count the backward passes and start the
    # allreduce of a gradient only on the last one; the gradients add up in .grad until then.
    optimizer = hvd.DistributedOptimizer(
        optimizer,
        named_parameters=model.named_parameters(),
        compression=getattr(hvd.Compression, args.compression),
        backward_passes_per_step=passes,
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    loss_fn = torch.nn.MSELoss() if regression else torch.nn.CrossEntropyLoss()

    shard_size = len(y_train) // size
    step_samples = args.batch_size * passes  # per worker and optimizer step
    steps_per_epoch = max(1, shard_size // step_samples)
    if args.steps_per_epoch:
        steps_per_epoch = min(steps_per_epoch, args.steps_per_epoch)
    rank_io.print(
        f"workshop.train.torch_train: np={size} device={device_name} threads/rank={threads} "
        f"data={dataset.info['source']} batch={args.batch_size}/worker x {passes} backward "
        f"pass(es)/step ({global_batch} global) steps/epoch={steps_per_epoch} "
        f"lr {base_lr:g} -> {target_lr:g} ({args.lr_scaling}, warmup {args.warmup_epochs:g} "
        f"epochs) compression={args.compression}"
    )
    init_time_s = time.time() - PROCESS_START
    train_start = time.perf_counter()
    step = 0
    lr = base_lr
    train_total_s = 0.0
    record = {}
    for epoch in range(1, args.epochs + 1):
        model.train()
        indices = shard_indices(len(y_train), rank, size, epoch, args.seed)
        epoch_start = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), device=device)
        seen = 0
        for batch in range(steps_per_epoch):
            lr = lr_at(step, steps_per_epoch, base_lr, target_lr, args.warmup_epochs)
            for group in optimizer.param_groups:
                group["lr"] = lr
            optimizer.zero_grad()
            for part in range(passes):
                first = batch * step_samples + part * args.batch_size
                idx = torch.from_numpy(indices[first : first + args.batch_size])
                inputs, targets = x_train[idx].to(device), y_train[idx].to(device)
                outputs = model(inputs)
                loss = loss_fn(outputs, targets)
                # the step applies the sum of the passes' gradients: average them instead
                (loss / passes).backward()
                loss_sum += loss.detach() * len(idx)
                if not regression:
                    correct += (outputs.argmax(1) == targets).sum()
                seen += len(idx)
            optimizer.step()
            step += 1
        if device.type == "cuda":
            torch.cuda.synchronize()
        train_time_s = time.perf_counter() - epoch_start

        test_start = time.perf_counter()
        model.eval()
        with torch.no_grad():
            outputs = model(x_test)
            test_loss = loss_fn(outputs, y_test)
            if regression:
                from workshop.train.materials import materials_score

                test_score = torch.tensor(
                    materials_score(y_test.cpu().numpy(), outputs.cpu().numpy())
                )
            else:
                test_score = (outputs.argmax(1) == y_test).float().mean()
        test_time_s = time.perf_counter() - test_start
        train_total_s += train_time_s

        def mean(value, name):
            return hvd.allreduce(
                torch.as_tensor(value, dtype=torch.float32).cpu(), name=name, op=hvd.Average
            ).item()

        def slowest(value, name):
            return hvd.allreduce(torch.tensor(value), name=name, op=hvd.Max).item()

        record = epoch_record(
            epoch,
            mean=mean,
            slowest=slowest,
            train_time_s=train_time_s,
            test_time_s=test_time_s,
            steps=steps_per_epoch,
            seen=seen,
            size=size,
            loss_sum=loss_sum,
            correct=correct,
            test_loss=test_loss,
            test_score=test_score,
            lr=lr,
            elapsed_s=time.perf_counter() - train_start,
            regression=regression,
        )
        rank_io.write_epoch(record, dataset.task)

    rank_io.write_summary(
        run_summary(
            "torch",
            args,
            size=size,
            device=device_name,
            devices=hvd.allgather_object(device_name),
            threads=threads,
            data_info=dataset.info,
            init_time_s=init_time_s,
            train_time_s=train_total_s,
            steps_per_epoch=steps_per_epoch,
            global_batch=global_batch,
            lr_effective=target_lr,
            last_epoch=record,
        )
    )
    hvd.shutdown()


def main(argv: list[str] | None = None) -> int:
    args = build_parser("workshop.train.torch_train").parse_args(argv)
    return run_rank(env_rank(), args.run_dir, lambda rank_io: train(args, rank_io))


if __name__ == "__main__":
    sys.exit(main())
