#!/usr/bin/env bash
# One-command setup of the Horovod workshop, then the main job (a short 2-process Horovod run).
#
#   bash scripts/setup.sh            # set up everything, then `workshop doctor` + `workshop run`
#   bash scripts/setup.sh --no-run   # set up only (used by scripts/test.sh and binder/postBuild)
#   bash scripts/setup.sh --test     # also install the test tools and Chromium (browser test)
#
# Idempotent: every step checks whether it is already done. The Horovod wheel is cached outside
# the clone (see scripts/build_horovod.sh), so only the first setup on a machine compiles it.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${WORKSHOP_VENV:-$REPO/.venv}"
RUN_MAIN=1
WITH_TEST=0
for arg in "$@"; do
    case "$arg" in
        --no-run) RUN_MAIN=0 ;;
        --test) WITH_TEST=1 ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "setup.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    esac
done

step() { echo; echo "==> $*"; }

# 1. System packages: Open MPI, a C++ compiler, cmake (and Chromium for the browser test).
step "system packages"
apt_packages=()
command -v mpicc >/dev/null || apt_packages+=(libopenmpi-dev)
command -v mpirun >/dev/null || apt_packages+=(openmpi-bin)
command -v g++ >/dev/null || apt_packages+=(g++)
command -v make >/dev/null || apt_packages+=(make)
command -v cmake >/dev/null || apt_packages+=(cmake)
if [[ $WITH_TEST == 1 ]]; then
    command -v chromium >/dev/null || apt_packages+=(chromium)
fi
if ((${#apt_packages[@]})); then
    if [[ $(id -u) == 0 ]]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${apt_packages[@]}"
    else
        echo "Missing system packages: ${apt_packages[*]}" >&2
        echo "Run this once (needs root), then run setup again:" >&2
        echo "    sudo apt-get update && sudo apt-get install -y ${apt_packages[*]}" >&2
        exit 1
    fi
fi
echo "mpirun: $(mpirun --version 2>/dev/null | head -n 1); cmake: $(cmake --version | head -n 1)"

# 2. A virtual environment with Python 3.11.
step "virtual environment $VENV"
PYTHON_BIN="${WORKSHOP_PYTHON:-python3.11}"
command -v "$PYTHON_BIN" >/dev/null || PYTHON_BIN=python3
if ! "$PYTHON_BIN" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    echo "Python 3.11 is needed; found $("$PYTHON_BIN" --version 2>&1) at $(command -v "$PYTHON_BIN")." >&2
    echo "Install python3.11 (and python3.11-venv), or set WORKSHOP_PYTHON=/path/to/python3.11." >&2
    exit 1
fi
[[ -x "$VENV/bin/python" ]] || "$PYTHON_BIN" -m venv "$VENV"
if [[ -f "$VENV/pyvenv.cfg" ]]; then
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
else
    # An existing environment that is not a venv (Binder's conda env $NB_PYTHON_PREFIX): use it.
    export PATH="$VENV/bin:$PATH"
fi

# 3. Python packages (skipped when the requirement files have not changed).
step "Python packages"
req_files=("$REPO/requirements/base.txt")
[[ $WITH_TEST == 1 ]] && req_files+=("$REPO/requirements/test.txt")
stamp="$VENV/.workshop-requirements"
want=$(cat "${req_files[@]}" | sha256sum | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
    echo "requirements unchanged; nothing to install"
else
    pip_args=()
    [[ -n "${WORKSHOP_TORCH_INDEX:-}" ]] && pip_args+=(--extra-index-url "$WORKSHOP_TORCH_INDEX")
    python -m pip install --progress-bar off "${pip_args[@]}" "${req_files[@]/#/-r}"
    echo "$want" >"$stamp"
fi

# 4. Horovod 0.28.1, built from source once and cached.
step "Horovod"
PYTHON="$VENV/bin/python" bash "$REPO/scripts/build_horovod.sh"

# 5. The workshop package itself, and our PMPI profiler library.
step "workshop package"
python -m pip install --quiet --no-deps --no-build-isolation -e "$REPO"
echo "installed: $(command -v workshop)"
workshop profiler build --quiet

if [[ $RUN_MAIN == 1 ]]; then
    step "workshop doctor"
    workshop doctor
    step "main job: workshop run (2-process PyTorch MNIST, timeline on)"
    workshop run
    echo
    echo "Done. Activate the environment with:  source $VENV/bin/activate"
    echo "Then open the notebooks with:        jupyter lab notebooks/00-welcome.ipynb"
fi
