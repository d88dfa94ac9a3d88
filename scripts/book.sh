#!/usr/bin/env bash
# Build the workshop book, the reader's edition: every lesson replayed as CI runs it (papermill,
# SOLUTIONS = True, no answers given; solutions and revealed results in closed blocks under each
# exercise), rendered with Sphinx + MyST-NB and the book theme into book/_build/html (open
# book/_build/html/index.html). Sets up first if needed (idempotent).
#
#   bash scripts/book.sh                            # replay the lessons, then build
#   bash scripts/book.sh --replays DIR              # take executed lessons from DIR instead
#   bash scripts/book.sh --repository OWNER/NAME    # where Binder links and GitHub button point
#   (or WORKSHOP_BOOK_REPOSITORY=OWNER/NAME; with no repository known, no such links)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/scripts/setup.sh" --no-run --book
# shellcheck disable=SC1091
source "${WORKSHOP_VENV:-$REPO/.venv}/bin/activate"
cd "$REPO"
echo; echo "==> workshop book"
workshop book "$@"
