#!/bin/bash -l
#COBALT -n 1
#COBALT -t 00:30:00
#COBALT -q training-gpu
#COBALT -A SDL_Workshop
#COBALT --attrs filesystems=home,grand
#COBALT -O workshop-tensorflow-mnist-1x16
#
# Horovod workshop job for ALCF ThetaGPU (DGX A100, Cobalt):
#   1 node(s) x 16 rank(s) = 16 ranks, CPU only, 8 threads per rank.
# It runs the same `workshop run` as on a laptop, so the run directory it writes has the
# layout of docs/run-directory.md and the notebooks read it unchanged. Only the launcher
# differs: Open MPI's mpirun starts the ranks on the nodes of $COBALT_NODEFILE
# (instead of horovodrun).
#
# Submit:  qsub thetagpu-tensorflow-mnist-cpu-1x16.sh
# Made by (regenerate rather than edit):
#   workshop jobscript --system thetagpu --nodes 1 --gpus-per-node 0 --ranks-per-node 16 \
#       --queue training-gpu --account SDL_Workshop --walltime 00:30:00 \
#       --python /home/learner/horovod-workshop/.venv/bin/python \
#       --out /home/learner/horovod-workshop/runs --framework tensorflow --dataset mnist \
#       --data auto --epochs 3 --batch-size 32 --lr 0.01 --lr-scaling linear --warmup-epochs 0 \
#       --no-timeline --mpi-profile --seed 42 -o thetagpu-tensorflow-mnist-cpu-1x16.sh

set -euo pipefail

WORKSHOP_PYTHON=/home/learner/horovod-workshop/.venv/bin/python
NODES=1
RANKS_PER_NODE=16
NP=$((NODES * RANKS_PER_NODE))
LAUNCHER="mpirun -hostfile $COBALT_NODEFILE -n $NP -npernode 16"

echo "workshop job: $NP ranks on $NODES node(s), launcher: $LAUNCHER"
"$WORKSHOP_PYTHON" -m workshop.cli run --launcher "$LAUNCHER" --np "$NP" --controller mpi \
    --device cpu --threads-per-rank 8 --framework tensorflow --dataset mnist --data auto \
    --epochs 3 --batch-size 32 --lr 0.01 --lr-scaling linear --warmup-epochs 0 --no-timeline \
    --mpi-profile --seed 42 --out /home/learner/horovod-workshop/runs
