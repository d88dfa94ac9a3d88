#!/bin/bash -l
#SBATCH --job-name=workshop-torch-mnist-1x4
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --time=00:30:00
#SBATCH --output=workshop-torch-mnist-1x4-%j.out
#
# Horovod workshop job for a Slurm cluster (srun):
#   1 node(s) x 4 rank(s) = 4 ranks, CPU only, threads per rank = allocated CPUs / ranks per node.
# It runs the same `workshop run` as on a laptop, so the run directory it writes has the
# layout of docs/run-directory.md and the notebooks read it unchanged. Only the launcher
# differs: Slurm's srun starts the ranks on the allocated nodes, handing them PMIx
# (instead of horovodrun).
#
# Submit:  sbatch slurm-torch-mnist-cpu-1x4.sh
# Made by (regenerate rather than edit):
#   workshop jobscript --system slurm --nodes 1 --gpus-per-node 0 --ranks-per-node 4 \
#       --walltime 00:30:00 --python /home/learner/horovod-workshop/.venv/bin/python \
#       --out /home/learner/horovod-workshop/runs --framework torch --dataset mnist \
#       --data auto --epochs 3 --batch-size 32 --lr 0.01 --lr-scaling linear --warmup-epochs 0 \
#       --steps-per-epoch 50 --timeline --seed 42 -o slurm-torch-mnist-cpu-1x4.sh

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
NODES=1
RANKS_PER_NODE=4
NP=$((NODES * RANKS_PER_NODE))
THREADS=$(( ${SLURM_CPUS_ON_NODE:-$RANKS_PER_NODE} / RANKS_PER_NODE ))
(( THREADS >= 1 )) || THREADS=1
LAUNCHER="srun --mpi=pmix --nodes=1 --ntasks=$NP --ntasks-per-node=4"

echo "workshop job: $NP ranks on $NODES node(s), launcher: $LAUNCHER"
"$WORKSHOP_PYTHON" -m workshop.cli run --launcher "$LAUNCHER" --np "$NP" --controller mpi \
    --device cpu --threads-per-rank "$THREADS" --framework torch --dataset mnist --data auto \
    --epochs 3 --batch-size 32 --lr 0.01 --lr-scaling linear --warmup-epochs 0 \
    --steps-per-epoch 50 --timeline --seed 42 --out /home/learner/horovod-workshop/runs
