#!/bin/bash -l
#SBATCH --job-name=workshop-torch-mnist-2x1
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --time=00:30:00
#SBATCH --output=workshop-torch-mnist-2x1-%j.out
#
# Horovod workshop job for a Slurm cluster (srun):
#   2 node(s) x 1 rank(s) = 2 ranks, CPU only, threads per rank = allocated CPUs / ranks per node.
# It runs the same `workshop run` as on a laptop, so the run directory it writes has the
# layout of docs/run-directory.md and the notebooks read it unchanged. Only the launcher
# differs: Slurm's srun starts the ranks on the allocated nodes, handing them PMIx
# (instead of horovodrun).
#
# Submit:  sbatch slurm-2x1.sh
# Made by (regenerate rather than edit):
#   workshop jobscript --system slurm --nodes 2 --gpus-per-node 0 --ranks-per-node 1 \
#       --walltime 00:30:00 --python /work/main/.venv/bin/python \
#       --out /run/workshop-cluster/work/runs --framework torch --dataset mnist --data subset \
#       --epochs 2 --batch-size 32 --lr 0.01 --lr-scaling linear --warmup-epochs 0 \
#       --steps-per-epoch 20 --timeline --seed 42 --name slurm-2x1 \
#       -o /run/workshop-cluster/work/slurm-2x1.sh

set -euo pipefail

# srun must hand the ranks PMIx (Open MPI's way to find each other); without it each
# rank starts alone. srun --mpi=list shows what this Slurm offers.
if ! srun --mpi=list 2>&1 | grep -qi pmix; then
    echo "workshop job: this srun offers no PMIx (srun --mpi=list:" \
        "$(srun --mpi=list 2>&1 | tr '\n' ' ')); change --mpi= in LAUNCHER to a" \
        "plugin it lists that your MPI supports, or ask the site for PMIx" >&2
    exit 1
fi

WORKSHOP_PYTHON=/work/main/.venv/bin/python
NODES=2
RANKS_PER_NODE=1
NP=$((NODES * RANKS_PER_NODE))
THREADS=$(( ${SLURM_CPUS_ON_NODE:-$RANKS_PER_NODE} / RANKS_PER_NODE ))
(( THREADS >= 1 )) || THREADS=1
LAUNCHER="srun --mpi=pmix --nodes=2 --ntasks=$NP --ntasks-per-node=1"

echo "workshop job: $NP ranks on $NODES node(s), launcher: $LAUNCHER"
"$WORKSHOP_PYTHON" -m workshop.cli run --launcher "$LAUNCHER" --np "$NP" --controller mpi \
    --device cpu --threads-per-rank "$THREADS" --framework torch --dataset mnist --data subset \
    --epochs 2 --batch-size 32 --lr 0.01 --lr-scaling linear --warmup-epochs 0 \
    --steps-per-epoch 20 --timeline --seed 42 --name slurm-2x1 \
    --out /run/workshop-cluster/work/runs
