#!/usr/bin/env bash
# Record the evidence of lessons 06 and 08 (issue 37) on a quiet machine, through the one
# recording path (workshop sweep --record: waits for quiet, measures other work, re-records a
# disturbed run). Root only for the emulated cluster's part. Every run's provenance is in its
# run.json; what each folder shows is in its README.
#
#   sudo bash scripts/record_evidence.sh [cpu] [cluster]    # default: both
#
# Stop everything else first (tests, builds, notebooks): a recording waits for quiet.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
source "${WORKSHOP_VENV:-$REPO/.venv}/bin/activate"
cd "$REPO"
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(cpu cluster)
COMMON=(--threads-per-rank 1 --lr-scaling none --no-timeline --rounds 5 --record --quiet)

for part in "${parts[@]}"; do
  case "$part" in
    cpu)
      # Compute-bound: the CIFAR-10 network (1.07 M parameters) at batch 64 per worker, one core
      # per rank; synthetic data (CIFAR-10 needs a download; the arithmetic is the same).
      workshop sweep --dataset cifar10 --data synthetic --np 1 2 --batch-size 64 --epochs 4 \
        --steps-per-epoch 25 --compute-baseline "${COMMON[@]}" --out data/sweeps/scaling-cpu
      ;;
    cluster)
      # Communication-bound: 2 emulated nodes, 1 rank each, links capped at 100 Mbit/s; MNIST
      # (the 5,000-image offline subset) at batch 32 per worker.
      workshop cluster up --nodes 2 --link 100mbit
      trap 'workshop cluster down' EXIT
      MNIST=(--data subset --batch-size 32 --epochs 3 --steps-per-epoch 30)
      workshop cluster run -- workshop sweep --np 1 2 "${MNIST[@]}" --compute-baseline \
        "${COMMON[@]}" --out data/cluster/scaling-100mbit
      workshop cluster run -- workshop sweep --np 2 "${MNIST[@]}" --one-at-a-time \
        --fusion-threshold-mb 128 0 --cycle-time-ms 1 20 --cache-capacity 1024 0 \
        --compression none fp16 --backward-passes-per-step 1 2 \
        "${COMMON[@]}" --out data/cluster/knobs-100mbit
      workshop cluster down
      trap - EXIT
      ;;
    *) echo "record_evidence.sh: unknown part '$part' (cpu, cluster)" >&2; exit 2 ;;
  esac
done
