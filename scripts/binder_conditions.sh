#!/usr/bin/env bash
# Reproduce mybinder.org's build and run conditions outside Docker, as closely as this machine
# allows, and measure them: the notebook user (not root), a conda-like Python environment that is
# not a venv (a relocated copy of a CPython installation, no pyvenv.cfg) as $NB_PYTHON_PREFIX,
# the repository as that user's home (REPO_DIR=$HOME, as repo2docker does), 1 CPU
# (`taskset -c 0`) and, for the notebooks and the live run, Binder's 2 GiB memory limit (a
# memory cgroup, where the kernel lets us make one; the build runs in it without a limit, to
# measure its peak: mybinder.org builds images outside the user's pod). Then:
#   1. binder/postBuild (it runs scripts/setup.sh --no-run into $NB_PYTHON_PREFIX);
#   2. every notebook replayed with papermill (benchmarks/notebooks_replay.py), via binder/start;
#   3. one live 2-rank run (`workshop run`: PyTorch, MNIST, Gloo, timeline), via binder/start.
# Prints time and peak memory of each step (and writes DIR/summary.txt). Needs root (useradd,
# cgroups) and patchelf (installed when missing). Not part of the test command.
#
#   sudo bash scripts/binder_conditions.sh [--dir DIR] [--python PREFIX] [--build-horovod]
#        [--limit-build] [--cpu-lock FILE]
#
# --python PREFIX: the CPython installation to relocate (default: the prefix of python3.11;
#   Binder's runtime.txt asks for 3.11). Unless --build-horovod is given, the Horovod wheel that
#   this machine's setup already compiled for that Python is copied into the user's cache, so
#   postBuild installs it instead of compiling it again on one CPU (say so when you quote times).
# --limit-build: run postBuild under the 2 GiB limit too (does the image build fit in 2 GiB?).
# --cpu-lock FILE: hold this lock during the timed notebook replay and live run.
# Where PyTorch's CPU index cannot be reached (this workplace), root's pip configuration (here: a
# local CPU torch wheel for Python 3.11) is given to the notebook user instead.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR=/var/tmp/workshop-binder PY_PREFIX="" BUILD=0 CPU_LOCK="" USER_NAME=jovyan LIMIT_BUILD=0
# Binder takes torch from PyTorch's CPU index; where it cannot be reached (this workplace), PyPI
# and pip's own configuration (a local CPU wheel here) instead.
TORCH_INDEX=https://download.pytorch.org/whl/cpu
while (($#)); do
    case "$1" in
        --dir) DIR=$2; shift ;;
        --python) PY_PREFIX=$2; shift ;;
        --build-horovod) BUILD=1 ;;
        --limit-build) LIMIT_BUILD=1 ;;
        --cpu-lock) CPU_LOCK=$2; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "binder_conditions.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done
python3 -m pip --isolated index versions torch --index-url "$TORCH_INDEX" --retries 0 \
    --timeout 10 >/dev/null 2>&1 || TORCH_INDEX=none
[[ $(id -u) == 0 ]] || { echo "binder_conditions.sh needs root (useradd, cgroups)" >&2; exit 1; }
say() { echo "[binder] $*"; }
command -v patchelf >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq patchelf
PY_PREFIX="${PY_PREFIX:-$(python3.11 -c 'import sys; print(sys.base_prefix)')}"
PREFIX="$DIR/conda/envs/notebook"   # Binder: /srv/conda/envs/notebook
HOME_DIR="$DIR/home"                # Binder: /home/jovyan, which is also REPO_DIR
SUMMARY="$DIR/summary.txt"

id "$USER_NAME" >/dev/null 2>&1 || useradd --no-create-home --shell /bin/bash "$USER_NAME"
rm -rf --one-file-system "$DIR"
mkdir -p "$DIR"
chmod 755 "$DIR"

# A conda-like environment: a whole CPython installation at a new prefix (not a venv), with its
# own pip, owned by the notebook user, its libpython found relative to the interpreter.
say "relocating $PY_PREFIX to $PREFIX (without its site-packages)"
mkdir -p "$PREFIX"
cp -a "$PY_PREFIX"/. "$PREFIX"/
pyver=$("$PREFIX/bin/python3" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null \
    || ls "$PREFIX/lib" | sed -n 's/^python\(3\.[0-9]*\)$/\1/p' | head -n 1)
rm -rf "$PREFIX/lib/python$pyver/site-packages"/* "$PREFIX/bin"/{pip,pip3,pip$pyver}
# shellcheck disable=SC2016  # $ORIGIN is for the dynamic loader, not the shell
patchelf --set-rpath '$ORIGIN/../lib' "$PREFIX/bin/python$pyver"
ln -sf "python$pyver" "$PREFIX/bin/python"
"$PREFIX/bin/python" -m ensurepip --default-pip >/dev/null
"$PREFIX/bin/python" - "$PREFIX" <<'PY'
import os, sys
prefix = os.path.realpath(sys.argv[1])
assert os.path.realpath(sys.prefix) == prefix, (sys.prefix, prefix)
assert sys.prefix == sys.base_prefix, "this is a venv, not a conda-like environment"
assert not os.path.exists(os.path.join(prefix, "pyvenv.cfg"))
PY
[[ -e "$PREFIX/pyvenv.cfg" ]] && { echo "unexpected pyvenv.cfg" >&2; exit 1; }

# The repository as the notebook user's home (repo2docker: REPO_DIR=${HOME}, owned by NB_USER).
git clone --quiet --no-hardlinks "$REPO" "$HOME_DIR"
commit=$(git -C "$HOME_DIR" log -1 --format=%h)
seeded="no (compiled in postBuild)"
if [[ $BUILD == 0 ]]; then
    for wheel_dir in "${WORKSHOP_CACHE:-$HOME/.cache/horovod-workshop}"/wheels/*-py${pyver/./}; do
        [[ -d "$wheel_dir" ]] || continue
        mkdir -p "$HOME_DIR/.cache/horovod-workshop/wheels"
        cp -a "$wheel_dir" "$HOME_DIR/.cache/horovod-workshop/wheels/"
        seeded="yes: $(basename "$wheel_dir")"
    done
fi
if [[ $TORCH_INDEX == none && -f "$HOME/.config/pip/pip.conf" ]]; then
    mkdir -p "$HOME_DIR/.config/pip"   # (/etc/pip.conf is read by every user anyway)
    cp "$HOME/.config/pip/pip.conf" "$HOME_DIR/.config/pip/pip.conf"
fi
chown -R "$USER_NAME:" "$DIR"

# A memory cgroup (cgroup v1 memory controller) for the peaks and the limit, where we may make one.
# Each step gets a new one, so that no page cache of an earlier step is charged to it.
CG_PARENT=""
memory_cg=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
if [[ -n "$memory_cg" && -d "/sys/fs/cgroup/memory$memory_cg" ]]; then
    CG_PARENT="/sys/fs/cgroup/memory$memory_cg"
fi

# as_user LABEL COMMAND: run COMMAND as the notebook user in Binder's environment, 1 CPU, in a
# new cgroup; print its wall time (from when it got the CPU lock), the largest process's peak
# RSS, the cgroup's peak (all processes, page cache included), and how often it hit its limit.
as_user() {
    local label=$1 command=$2 rc=0 peak="" fail="" lock=() limit=-1 CG=""
    # No limit for the build (see above) unless --limit-build; Binder's 2 GiB for everything
    # the learner runs.
    [[ $label == postBuild && $LIMIT_BUILD == 0 ]] || limit=$((2 * 1024 ** 3))
    if [[ -n "$CG_PARENT" ]]; then
        CG="$CG_PARENT/workshop-binder-$label"
        mkdir "$CG"
        echo "$limit" >"$CG/memory.limit_in_bytes"
    fi
    [[ -n "$CPU_LOCK" && $label != postBuild ]] && lock=(flock "$CPU_LOCK")
    "${lock[@]}" sh -c '[ -n "$0" ] && echo $$ > "$0/cgroup.procs"; exec "$@"' "$CG" \
        runuser -u "$USER_NAME" -- env -i HOME="$HOME_DIR" USER="$USER_NAME" LANG=C.UTF-8 \
        NB_USER="$USER_NAME" NB_PYTHON_PREFIX="$PREFIX" CONDA_DIR="$DIR/conda" \
        WORKSHOP_TORCH_INDEX="$TORCH_INDEX" \
        PATH="$PREFIX/bin:$HOME_DIR/.local/bin:/usr/local/bin:/usr/bin:/bin" \
        /usr/bin/time -f "%e %M" -o "$DIR/$label.time" taskset -c 0 \
        bash -c "cd '$HOME_DIR' && $command" >"$DIR/$label.log" 2>&1 || rc=$?
    local seconds maxrss
    read -r seconds maxrss < <(tail -n 1 "$DIR/$label.time" 2>/dev/null || echo "? 0")
    if [[ -n "$CG" ]]; then
        peak="; all processes (cgroup, page cache included) $(($(cat \
            "$CG/memory.max_usage_in_bytes") / 2 ** 20)) MiB"
        [[ $limit == -1 ]] || fail=" of a 2048 MiB limit (reached $(cat "$CG/memory.failcnt") times)"
        rmdir "$CG"
    fi
    printf '%-10s exit %s, %s s, largest process %s MiB%s%s\n' "$label" "$rc" "$seconds" \
        "$((maxrss / 1024))" "$peak" "$fail" \
        | tee -a "$SUMMARY"
    return "$rc"
}

{
    echo "Binder conditions, commit $commit: user $USER_NAME (uid $(id -u "$USER_NAME")), 1 CPU" \
        "(taskset -c 0), environment $PREFIX (relocated $PY_PREFIX, Python $pyver, no" \
        "pyvenv.cfg), memory cgroups ${CG_PARENT:+under }${CG_PARENT:-unavailable}; Horovod wheel seeded: $seeded;" \
        "WORKSHOP_TORCH_INDEX=$TORCH_INDEX"
} | tee "$SUMMARY"
say "postBuild (log $DIR/postBuild.log)"
as_user postBuild "./binder/postBuild"
grep -E "^(Python |torch: |\[horovod\] )" "$DIR/postBuild.log" | tee -a "$SUMMARY"
say "notebooks in replay (log $DIR/replay.log)"
as_user replay "binder/start python benchmarks/notebooks_replay.py" || true
grep -E "^[0-9]{2}-|^total" "$DIR/replay.log" | tee -a "$SUMMARY"
say "one live 2-rank run (log $DIR/live.log)"
as_user live "binder/start workshop run" || true
grep -E "epoch|samples/s|run directory|Run directory" "$DIR/live.log" | head -n 8 \
    | tee -a "$SUMMARY"
say "summary: $SUMMARY"
