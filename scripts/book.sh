#!/usr/bin/env bash
# Build the workshop book: every lesson replayed as a learner first meets it (papermill, default
# parameters: no answers, no solutions), rendered with Sphinx + MyST-NB and the book theme into
# book/_build/html (open book/_build/html/index.html). Sets up first if needed (idempotent).
#
#   bash scripts/book.sh                      # replay the lessons, then build
#   bash scripts/book.sh --replays DIR        # take executed lessons from DIR instead
#   WORKSHOP_BOOK_REPOSITORY=OWNER/REPO bash scripts/book.sh   # where Binder/GitHub links point
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/scripts/setup.sh" --no-run --book
# shellcheck disable=SC1091
source "${WORKSHOP_VENV:-$REPO/.venv}/bin/activate"
cd "$REPO"
echo; echo "==> workshop book"
workshop book "$@"
