#!/bin/bash -l
#COBALT -n 2
#COBALT -t 00:30:00
#COBALT -q full-node
#COBALT -A SDL_Workshop
#COBALT --attrs filesystems=home,grand
#COBALT -O workshop-torch-mnist-2x8
#
# Horovod workshop job for ALCF ThetaGPU (DGX A100, Cobalt):
#   2 node(s) x 8 rank(s) = 16 ranks, one GPU per rank, 16 threads per rank.
# It runs the same `workshop run` as on a laptop, so the run directory it writes has the
# layout of docs/run-directory.md and the notebooks read it unchanged. Only the launcher
# differs: Open MPI's mpirun starts the ranks on the nodes of $COBALT_NODEFILE
# (instead of horovodrun).
# Each rank pins the GPU of its local rank itself (workshop/train/device.py).
#
# Submit:  qsub thetagpu-torch-mnist-2x8.sh
# Made by (regenerate rather than edit):
#   workshop jobscript --system thetagpu --nodes 2 --queue full-node --account SDL_Workshop \
#       --walltime 00:30:00 --python /home/learner/horovod-workshop/.venv/bin/python \
#       --out /home/learner/horovod-workshop/runs --framework torch --dataset mnist \
#       --data auto --epochs 4 --batch-size 32 --lr 0.01 --lr-scaling linear --warmup-epochs 0 \
#       --timeline --mpi-profile --seed 42 -o thetagpu-torch-mnist-2x8.sh

set -euo pipefail

WORKSHOP_PYTHON=/home/learner/horovod-workshop/.venv/bin/python
NODES=2
RANKS_PER_NODE=8
NP=$((NODES * RANKS_PER_NODE))
LAUNCHER="mpirun -hostfile $COBALT_NODEFILE -n $NP -npernode 8"

echo "workshop job: $NP ranks on $NODES node(s), launcher: $LAUNCHER"
"$WORKSHOP_PYTHON" -m workshop.cli run --launcher "$LAUNCHER" --np "$NP" --controller mpi \
    --device cuda --threads-per-rank 16 --framework torch --dataset mnist --data auto \
    --epochs 4 --batch-size 32 --lr 0.01 --lr-scaling linear --warmup-epochs 0 --timeline \
    --mpi-profile --seed 42 --out /home/learner/horovod-workshop/runs
