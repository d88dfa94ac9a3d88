#!/usr/bin/env bash
# Run the whole test suite: sets up first if needed (idempotent; the Horovod wheel is cached),
# then lint, unit tests, live Horovod runs, papermill notebook runs and the browser test.
#
#   bash scripts/test.sh              # everything
#   bash scripts/test.sh -m "not live" # extra arguments go to pytest
#   WORKSHOP_TEST_WORKERS=0 bash scripts/test.sh  # in one process (no xdist)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# As root also Slurm, for the tests that submit job scripts to the emulated cluster.
if [[ $(id -u) == 0 ]]; then
    bash "$REPO/scripts/setup.sh" --no-run --test --slurm
else
    bash "$REPO/scripts/setup.sh" --no-run --test
fi
# shellcheck disable=SC1091
source "${WORKSHOP_VENV:-$REPO/.venv}/bin/activate"
cd "$REPO"
echo; echo "==> ruff"
ruff check workshop tests benchmarks tools
ruff format --check workshop tests benchmarks tools
echo; echo "==> pytest"
# Two pytest-xdist workers: on 2 cores, tests that start no processes and live runs' idle
# moments (launch, rendezvous, waiting for a stop) fill the other core. Live tests still take
# the CPU lock (tests/conftest.py says how they share it). WORKSHOP_TEST_WORKERS=0: one
# process, the collection order.
python -m pytest -n "${WORKSHOP_TEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder "$@"
