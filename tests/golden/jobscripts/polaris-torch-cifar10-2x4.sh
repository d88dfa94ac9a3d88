#!/bin/bash -l
#PBS -N workshop-torch-cifar10-2x4
#PBS -l select=2:system=polaris
#PBS -l place=scatter
#PBS -l walltime=00:20:00
#PBS -l filesystems=home:eagle
#PBS -q debug
#PBS -A MyProject
#PBS -j oe
#
# Horovod workshop job for ALCF Polaris (4 A100 per node, PBS Pro):
#   2 node(s) x 4 rank(s) = 8 ranks, one GPU per rank, 8 threads per rank.
# It runs the same `workshop run` as on a laptop, so the run directory it writes has the
# layout of docs/run-directory.md and the notebooks read it unchanged. Only the launcher
# differs: Cray MPICH's mpiexec starts the ranks, each bound to 8 core(s) of its own
# (instead of horovodrun).
# Each rank pins the GPU of its local rank itself (workshop/train/device.py).
#
# Submit:  qsub polaris-torch-cifar10-2x4.sh
# Made by (regenerate rather than edit):
#   workshop jobscript --system polaris --nodes 2 --queue debug --account MyProject \
#       --walltime 00:20:00 --python /home/learner/horovod-workshop/.venv/bin/python \
#       --out /home/learner/horovod-workshop/runs --setup 'module use /soft/modulefiles' \
#       --setup 'module load conda' --setup 'conda activate base' --framework torch \
#       --dataset cifar10 --data auto --epochs 3 --batch-size 64 --lr 0.01 --lr-scaling sqrt \
#       --warmup-epochs 1 --timeline --seed 42 --name polaris-cifar10-8gpu \
#       -o polaris-torch-cifar10-2x4.sh

set -euo pipefail
cd "$PBS_O_WORKDIR"

# Site environment (conda activation scripts may read unset variables).
set +u
module use /soft/modulefiles
module load conda
conda activate base
set -u

WORKSHOP_PYTHON=/home/learner/horovod-workshop/.venv/bin/python
NODES=2
RANKS_PER_NODE=4
NP=$((NODES * RANKS_PER_NODE))
LAUNCHER="mpiexec -n $NP -ppn 4 --depth 8 --cpu-bind depth"

echo "workshop job: $NP ranks on $NODES node(s), launcher: $LAUNCHER"
"$WORKSHOP_PYTHON" -m workshop.cli run --launcher "$LAUNCHER" --np "$NP" --controller mpi \
    --device cuda --threads-per-rank 8 --framework torch --dataset cifar10 --data auto \
    --epochs 3 --batch-size 64 --lr 0.01 --lr-scaling sqrt --warmup-epochs 1 --timeline \
    --seed 42 --name polaris-cifar10-8gpu --out /home/learner/horovod-workshop/runs
