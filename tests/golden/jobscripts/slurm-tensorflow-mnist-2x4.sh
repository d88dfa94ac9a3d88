#!/bin/bash -l
#SBATCH --job-name=workshop-tensorflow-mnist-2x4
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=01:00:00
#SBATCH --partition=gpu
#SBATCH --account=proj01
#SBATCH --output=workshop-tensorflow-mnist-2x4-%j.out
#
# Horovod workshop job for a Slurm cluster (srun):
#   2 node(s) x 4 rank(s) = 8 ranks, one GPU per rank, 8 threads per rank.
# It runs the same `workshop run` as on a laptop, so the run directory it writes has the
# layout of docs/run-directory.md and the notebooks read it unchanged. Only the launcher
# differs: Slurm's srun starts the ranks on the allocated nodes, handing them PMIx
# (instead of horovodrun).
# Each rank pins the GPU of its local rank itself (workshop/train/device.py).
#
# Submit:  sbatch slurm-tensorflow-mnist-2x4.sh
# Made by (regenerate rather than edit):
#   workshop jobscript --system slurm --nodes 2 --gpus-per-node 4 --threads-per-rank 8 \
#       --queue gpu --account proj01 --walltime 01:00:00 \
#       --python /home/learner/horovod-workshop/.venv/bin/python \
#       --out /home/learner/horovod-workshop/runs --framework tensorflow --dataset mnist \
#       --data auto --epochs 3 --batch-size 32 --lr 0.01 --lr-scaling linear --warmup-epochs 0 \
#       --timeline --fusion-threshold-mb 32 --cycle-time-ms 3.5 --seed 42 \
#       -o slurm-tensorflow-mnist-2x4.sh

set -euo pipefail
export SLURM_KILL_BAD_EXIT=1  # srun -K: a rank that dies ends the others

# srun must hand the ranks PMIx (Open MPI's way to find each other); without it each
# rank starts alone. srun --mpi=list shows what this Slurm offers.
if ! srun --mpi=list 2>&1 | grep -qi pmix; then
    echo "workshop job: this srun offers no PMIx (srun --mpi=list:" \
        "$(srun --mpi=list 2>&1 | tr '\n' ' ')); change --mpi= in LAUNCHER to a" \
        "plugin it lists that your MPI supports, or ask the site for PMIx" >&2
    exit 1
fi

WORKSHOP_PYTHON=/home/learner/horovod-workshop/.venv/bin/python
NODES=2
RANKS_PER_NODE=4
NP=$((NODES * RANKS_PER_NODE))
LAUNCHER="srun --mpi=pmix --nodes=2 --ntasks=$NP --ntasks-per-node=4 --cpus-per-task=8"

echo "workshop job: $NP ranks on $NODES node(s), launcher: $LAUNCHER"
"$WORKSHOP_PYTHON" -m workshop.cli run --launcher "$LAUNCHER" --np "$NP" --controller mpi \
    --device cuda --threads-per-rank 8 --framework tensorflow --dataset mnist --data auto \
    --epochs 3 --batch-size 32 --lr 0.01 --lr-scaling linear --warmup-epochs 0 --timeline \
    --fusion-threshold-mb 32 --cycle-time-ms 3.5 --seed 42 \
    --out /home/learner/horovod-workshop/runs
