#!/usr/bin/env bash
# One-command setup of the Horovod workshop, then the main job (a short 2-process Horovod run).
#
#   bash scripts/setup.sh            # set up everything, then `workshop doctor` + `workshop run`
#   bash scripts/setup.sh --no-run   # set up only (used by scripts/test.sh and binder/postBuild)
#   bash scripts/setup.sh --test     # also install the test tools and Chromium (browser test)
#   bash scripts/setup.sh --book     # also install what builds the book (scripts/book.sh)
#   bash scripts/setup.sh --slurm    # as root, also Slurm + munge (workshop cluster up --slurm)
#
# Python 3.11, 3.12 or 3.13: WORKSHOP_PYTHON when set, else the newest of python3.13, python3.12,
# python3.11, python3 on PATH (an existing environment keeps its own). WORKSHOP_VENV: where the
# environment goes (default .venv). Idempotent: every step checks whether it is already done.
# The Horovod wheel is cached outside the clone (see scripts/build_horovod.sh), so only the first
# setup on a machine (per Python version) compiles it.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${WORKSHOP_VENV:-$REPO/.venv}"
RUN_MAIN=1
WITH_TEST=0
WITH_BOOK=0
WITH_SLURM=0
for arg in "$@"; do
    case "$arg" in
        --no-run) RUN_MAIN=0 ;;
        --test) WITH_TEST=1; WITH_BOOK=1 ;;  # the browser test builds the book
        --book) WITH_BOOK=1 ;;
        --slurm) WITH_SLURM=1 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "setup.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    esac
done

step() { echo; echo "==> $*"; }

# 1. Python: an existing environment's, else WORKSHOP_PYTHON, else the newest supported one found.
SUPPORTED_PYTHONS="3.13 3.12 3.11"   # pyproject.toml: requires-python = ">=3.11,<3.14"
py_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
is_supported() { [[ " $SUPPORTED_PYTHONS " == *" $1 "* ]]; }
PYTHON_BIN="" PYTHON_WHY=""
pyenv_hint() {  # a pyenv shim fails for a version that is installed but not selected
    local versions
    command -v pyenv >/dev/null || return 0
    versions=$(pyenv whence "$1" 2>/dev/null | tr '\n' ' ') || return 0
    [[ -n "$versions" ]] || return 0
    echo "pyenv has $1 in: $versions(not selected). Select one (pyenv shell VERSION) or give" \
        "its path: WORKSHOP_PYTHON=$(pyenv root)/versions/${versions%% *}/bin/$1" >&2
}
pick_python() {
    local candidate version
    if [[ -x "$VENV/bin/python" ]]; then
        version=$(py_version "$VENV/bin/python" || true)
        if ! is_supported "$version"; then
            echo "$VENV has Python ${version:-?}; the workshop needs 3.11, 3.12 or 3.13." >&2
            echo "Remove $VENV (or set WORKSHOP_VENV to a new folder) and run setup again." >&2
            exit 1
        fi
        if [[ -n "${WORKSHOP_PYTHON:-}" && "$(py_version "$WORKSHOP_PYTHON" || true)" != "$version" ]]; then
            echo "$VENV already has Python $version, but WORKSHOP_PYTHON=$WORKSHOP_PYTHON is" \
                "$(py_version "$WORKSHOP_PYTHON" || echo 'not a working Python')." >&2
            echo "Remove $VENV, or set WORKSHOP_VENV to another folder, and run setup again." >&2
            exit 1
        fi
        PYTHON_BIN="$VENV/bin/python" PYTHON_WHY="the existing environment's"
        return 0
    fi
    if [[ -n "${WORKSHOP_PYTHON:-}" ]]; then
        version=$(py_version "$WORKSHOP_PYTHON" || true)
        if ! is_supported "$version"; then
            echo "WORKSHOP_PYTHON=$WORKSHOP_PYTHON is ${version:+Python }${version:-not a working Python};" \
                "the workshop needs Python 3.11, 3.12 or 3.13." >&2
            pyenv_hint "$WORKSHOP_PYTHON"
            exit 1
        fi
        PYTHON_BIN="$(command -v "$WORKSHOP_PYTHON")" PYTHON_WHY="WORKSHOP_PYTHON"
        return 0
    fi
    for candidate in python3.13 python3.12 python3.11 python3; do
        version=$(py_version "$candidate" || true)   # pyenv shims exist but fail for absent versions
        if is_supported "$version"; then
            PYTHON_BIN="$(command -v "$candidate")" PYTHON_WHY="the newest supported Python found"
            return 0
        fi
    done
    return 1
}

# 2. System packages: Open MPI, a C++ compiler, cmake, Python's venv and headers when missing
#    (and Chromium for the browser test; as root also openssh-server and iproute2 for the
#    emulated cluster).
step "system packages"
apt_packages=()
command -v mpicc >/dev/null || apt_packages+=(libopenmpi-dev)
command -v mpirun >/dev/null || apt_packages+=(openmpi-bin)
command -v g++ >/dev/null || apt_packages+=(g++)
command -v make >/dev/null || apt_packages+=(make)
command -v cmake >/dev/null || apt_packages+=(cmake)
if ! pick_python; then
    apt_packages+=(python3 python3-venv python3-dev)
elif [[ "$PYTHON_BIN" == /usr/bin/* ]]; then
    # Debian/Ubuntu split venv (ensurepip) and the C headers (Python.h) out of python3.X.
    pyver=$(py_version "$PYTHON_BIN")
    [[ -x "$VENV/bin/python" ]] || "$PYTHON_BIN" -c 'import ensurepip' 2>/dev/null \
        || apt_packages+=("python$pyver-venv")
    "$PYTHON_BIN" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        || apt_packages+=("python$pyver-dev")
fi
if [[ $WITH_TEST == 1 ]]; then
    command -v chromium >/dev/null || apt_packages+=(chromium)
fi
# The emulated cluster (`workshop cluster`, root only): an sshd per node, namespaces and tc links.
if [[ $(id -u) == 0 ]]; then
    [[ -x /usr/sbin/sshd ]] || apt_packages+=(openssh-server)
    # ip and tc live in /usr/sbin, which a user's PATH (or a test's) may lack: look there too.
    { PATH="$PATH:/usr/sbin:/sbin" command -v ip && PATH="$PATH:/usr/sbin:/sbin" command -v tc; } \
        >/dev/null || apt_packages+=(iproute2)
    # Slurm on the emulated cluster (`workshop cluster up --slurm`), only when asked.
    if [[ $WITH_SLURM == 1 ]]; then
        for tool in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge; do
            PATH="$PATH:/usr/sbin:/sbin" command -v "${tool%%:*}" >/dev/null \
                || apt_packages+=("${tool##*:}")
        done
    fi
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
[[ -n "$PYTHON_BIN" ]] || pick_python || {
    echo "No Python 3.11, 3.12 or 3.13 found (tried python3.13, python3.12, python3.11, python3)." >&2
    echo "Install one, or set WORKSHOP_PYTHON=/path/to/python3.1x." >&2
    exit 1
}
echo "mpirun: $(mpirun --version 2>/dev/null | head -n 1); cmake: $(cmake --version | head -n 1);" \
    "$(g++ --version | head -n 1)"

# 3. A virtual environment (or an existing non-venv environment such as Binder's conda env).
step "environment $VENV"
echo "Python $(py_version "$PYTHON_BIN"): $PYTHON_BIN ($PYTHON_WHY; set WORKSHOP_PYTHON to choose)"
[[ -x "$VENV/bin/python" ]] || "$PYTHON_BIN" -m venv "$VENV"
if [[ -f "$VENV/pyvenv.cfg" ]]; then
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
else
    # An existing environment that is not a venv (Binder's conda env $NB_PYTHON_PREFIX): use it.
    export PATH="$VENV/bin:$PATH"
fi

# 4. Python packages (skipped when the requirement files have not changed).
step "Python packages"
req_files=("$REPO/requirements/base.txt")
[[ $WITH_TEST == 1 ]] && req_files+=("$REPO/requirements/test.txt")
[[ $WITH_BOOK == 1 ]] && req_files+=("$REPO/requirements/book.txt")
no_deps="$REPO/requirements/no-deps.txt"  # tf-keras: see the file
# The stamp holds a checksum per requirement file installed (with no-deps.txt's): a set-up that
# asks for fewer files than the last one (--book after --test) installs nothing.
stamp="$VENV/.workshop-requirements"
want=$(for f in "${req_files[@]}"; do cat "$f" "$no_deps" | sha256sum | cut -d' ' -f1; done)
if [[ -f $stamp ]] && ! grep -qvxF -f "$stamp" <<<"$want"; then
    echo "requirements unchanged; nothing to install"
else
    # PyPI's Linux torch is the CUDA build (GBs of CUDA libraries). Without an NVIDIA GPU, take
    # the CPU build from PyTorch's CPU wheel index when it can be reached (WORKSHOP_TORCH_INDEX
    # overrides; set it to "none" for PyPI only). Horovod is built CPU-only either way.
    cpu_index="https://download.pytorch.org/whl/cpu"
    torch_index="${WORKSHOP_TORCH_INDEX:-}"
    if [[ -z "$torch_index" ]]; then
        if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
            echo "torch: an NVIDIA GPU is present: PyPI's CUDA build"
        elif python -m pip --isolated index versions torch --index-url "$cpu_index" \
                --retries 0 --timeout 10 >/dev/null 2>&1; then
            torch_index="$cpu_index"
            echo "torch: no NVIDIA GPU: the CPU build from $cpu_index"
        else
            echo "torch: no NVIDIA GPU, and PyTorch's CPU wheel index cannot be reached: pip takes" \
                "torch from PyPI/pip's configured indexes (on Linux that is the CUDA build, ~3 GB" \
                "with its CUDA libraries, unless a CPU wheel is configured locally); it runs on the CPU"
        fi
    fi
    pip_args=()
    [[ -n "$torch_index" && "$torch_index" != none ]] && pip_args+=(--extra-index-url "$torch_index")
    python -m pip install --progress-bar off "${pip_args[@]}" "${req_files[@]/#/-r}"
    python -m pip install --progress-bar off --no-deps -r "$no_deps"
    # A venv set up before no-deps.txt has PyPI's full "tensorflow" (tf-keras pulled it in) over
    # tensorflow-cpu's files: put tensorflow-cpu's own files back.
    if python -m pip show tensorflow >/dev/null 2>&1; then
        tf_cpu=$(grep -E '^tensorflow-cpu==' "$REPO/requirements/base.txt")
        echo "replacing PyPI's full 'tensorflow' (once pulled in by tf-keras) by $tf_cpu"
        python -m pip uninstall --yes tensorflow tensorflow-cpu
        python -m pip install --progress-bar off --no-deps "$tf_cpu"
    fi
    # torch and torchvision must be the same build (CPU or CUDA): a mismatch fails at import.
    if ! tv_error=$(python -c "import torchvision" 2>&1); then
        echo "ERROR: torchvision does not import beside torch" \
            "($(python -c 'import torch; print(torch.__version__)' 2>&1)):" >&2
        echo "$tv_error" | tail -n 3 >&2
        echo "torch and torchvision must be the same build (both CPU or both CUDA): install both" \
            "from one index (WORKSHOP_TORCH_INDEX)" >&2
        exit 1
    fi
    # Kept: the files installed before that are still unchanged (base.txt's for --book).
    { [[ -f $stamp ]] && cat "$stamp"; echo "$want"; } | sort -u >"$stamp.new"
    mv "$stamp.new" "$stamp"
fi

# 5. Horovod 0.28.1, built from source once and cached.
step "Horovod"
PYTHON="$VENV/bin/python" bash "$REPO/scripts/build_horovod.sh"

# 6. The workshop package itself, and our PMPI profiler library.
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
