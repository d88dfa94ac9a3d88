#!/usr/bin/env bash
# Run the whole test suite: sets up first if needed (idempotent; the Horovod wheel is cached),
# then lint, unit tests, live Horovod runs, papermill notebook runs and the browser test.
#
#   bash scripts/test.sh              # everything
#   bash scripts/test.sh -m "not live" # extra arguments go to pytest
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/scripts/setup.sh" --no-run --test
# shellcheck disable=SC1091
source "${WORKSHOP_VENV:-$REPO/.venv}/bin/activate"
cd "$REPO"
echo; echo "==> ruff"
ruff check workshop tests benchmarks
ruff format --check workshop tests benchmarks
echo; echo "==> pytest"
python -m pytest "$@"
