#!/usr/bin/env bash
# Check the README's two commands on another Debian release, as on a fresh machine: build a
# minimal root with debootstrap from Debian's package archive, copy a clone of this repository
# in, and run `bash scripts/setup.sh` then `bash scripts/test.sh` inside it (chroot, as root).
# Slow (a Horovod build and the whole test suite, about an hour on 2 cores): not part of the
# test command. Needs root and debootstrap (installed when missing).
#
#   sudo bash scripts/check_distro.sh            # Debian 13 (trixie): gcc 14, cmake 3.31,
#                                                # Open MPI 5, Python 3.13
#   sudo bash scripts/check_distro.sh --gcc 13 --cmake 3.28.4 --setup-only
#                                                # Ubuntu 24.04's gcc and cmake, setup only
#
# Options: --suite NAME (default trixie)  --mirror URL (default http://deb.debian.org/debian)
#   --dir DIR (root and logs; default /var/tmp/workshop-check-distro/SUITE[-gccN])
#   --gcc N (build with gcc-N/g++-N)  --cmake VERSION (PyPI's cmake==VERSION instead of Debian's)
#   --setup-only (run only the first command)  --keep (keep the root afterwards)
#   --pytest-args 'ARGS' (the second command with these pytest arguments, e.g. some tests'
#   node ids, for a quicker check than the whole suite)
#   --build-lock FILE (run the setup command, which compiles Horovod, under `flock FILE`)
#   --cpu-lock FILE (share this host lock file with the tests' live runs inside the root)
# The summary (versions, time of each command, pytest's last line) is printed and written to
# DIR/summary.txt; the commands' output goes to DIR/setup.log and DIR/test.log.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUITE=trixie MIRROR=http://deb.debian.org/debian DIR="" GCC="" KEEP=0 BUILD_LOCK="" CPU_LOCK=""
CMAKE="" SETUP_ONLY=0 PYTEST_ARGS=""
while (($#)); do
    case "$1" in
        --suite) SUITE=$2; shift ;;
        --mirror) MIRROR=$2; shift ;;
        --dir) DIR=$2; shift ;;
        --gcc) GCC=$2; shift ;;
        --cmake) CMAKE=$2; shift ;;
        --setup-only) SETUP_ONLY=1 ;;
        --pytest-args) PYTEST_ARGS=$2; shift ;;
        --keep) KEEP=1 ;;
        --build-lock) BUILD_LOCK=$2; shift ;;
        --cpu-lock) CPU_LOCK=$2; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "check_distro.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ $(id -u) == 0 ]] || { echo "check_distro.sh needs root (debootstrap, chroot)" >&2; exit 1; }
DIR="${DIR:-/var/tmp/workshop-check-distro/$SUITE${GCC:+-gcc$GCC}${CMAKE:+-cmake$CMAKE}}"
ROOT="$DIR/root"
say() { echo "[check-distro] $*"; }

if ! command -v debootstrap >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
fi

mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
    if [[ $KEEP == 0 && -d "$ROOT" ]]; then rm -rf --one-file-system "$ROOT"; fi
}
mount_in() {  # mount_in TARGET mount-args...
    [[ -e "$1" ]] || mkdir -p "$1"
    mount "${@:2}" "$1"
    mounted+=("$1")
}

if grep -q " $ROOT/" /proc/mounts; then
    echo "check_distro.sh: something is still mounted under $ROOT (an earlier run?):" >&2
    grep " $ROOT/" /proc/mounts >&2
    exit 1
fi
trap cleanup EXIT
rm -rf --one-file-system "$ROOT"
mkdir -p "$DIR"
rm -f "$DIR"/{debootstrap,setup,test}.log "$DIR/summary.txt"
say "debootstrap $SUITE from $MIRROR into $ROOT (log $DIR/debootstrap.log)"
start=$(date +%s)
# git: a learner has it (they cloned the repository); everything else comes from setup.sh.
debootstrap --variant=minbase --include=ca-certificates,git "$SUITE" "$ROOT" "$MIRROR" \
    >"$DIR/debootstrap.log" 2>&1 || { tail -n 20 "$DIR/debootstrap.log" >&2; exit 1; }
say "root ready in $(($(date +%s) - start)) s"

mount_in "$ROOT/proc" -t proc proc
mount_in "$ROOT/sys" -t sysfs sysfs
mount_in "$ROOT/dev" --bind /dev
mount_in "$ROOT/dev/pts" --bind /dev/pts
mount_in "$ROOT/dev/shm" -t tmpfs -o size=4g tmpfs
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp /etc/hosts "$ROOT/etc/hosts"
# Where HTTPS goes through a proxy with its own CA (this workplace does), the root needs the host's
# CA bundle: pip and Python are pointed at a copy of it. Not a change to what setup.sh does.
certs=()
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/host-ca-certificates.crt"
    certs=(PIP_CERT=/etc/ssl/host-ca-certificates.crt SSL_CERT_FILE=/etc/ssl/host-ca-certificates.crt
        REQUESTS_CA_BUNDLE=/etc/ssl/host-ca-certificates.crt)
fi
if [[ -n "$CPU_LOCK" ]]; then
    touch "$CPU_LOCK" "$ROOT/tmp/workshop-cpu.lock"
    mount_in "$ROOT/tmp/workshop-cpu.lock" --bind "$CPU_LOCK"
fi

git clone --quiet --no-hardlinks "$REPO" "$ROOT/root/workshop"
commit=$(git -C "$ROOT/root/workshop" log -1 --format='%h %s' | cut -c1-80)

in_root() {  # in_root [--lock] COMMAND: a bash command line in the root, clean environment
    local prefix=()
    if [[ $1 == --lock ]]; then
        [[ -n "$BUILD_LOCK" ]] && prefix=(flock "$BUILD_LOCK")
        shift
    fi
    # (the start time is written once the lock is held, so waiting for it is not counted)
    "${prefix[@]}" sh -c 'date +%s >"$0"; exec "$@"' "$DIR/started" \
        chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        ${GCC:+CC=gcc-$GCC CXX=g++-$GCC} "${certs[@]}" \
        bash -c "cd /root/workshop && $1"
}

if [[ -n "$GCC" ]]; then
    say "installing gcc-$GCC g++-$GCC"
    in_root "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends gcc-$GCC g++-$GCC" >"$DIR/gcc.log" 2>&1 \
        || { tail -n 20 "$DIR/gcc.log" >&2; exit 1; }
fi

if [[ -n "$CMAKE" ]]; then
    say "installing PyPI's cmake==$CMAKE as /usr/local/bin/cmake"
    in_root "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends python3-venv >/dev/null && python3 -m venv /opt/cmake \
        && /opt/cmake/bin/pip install -q cmake==$CMAKE \
        && ln -sf \$(/opt/cmake/bin/python -c 'import cmake; print(cmake.CMAKE_BIN_DIR)')/cmake \
            /usr/local/bin/cmake && cmake --version" >"$DIR/cmake.log" 2>&1 \
        || { tail -n 20 "$DIR/cmake.log" >&2; exit 1; }
fi

say "README command 1: bash scripts/setup.sh (log $DIR/setup.log)"
start=$(date +%s)
setup_rc=0
in_root --lock "bash scripts/setup.sh" >"$DIR/setup.log" 2>&1 || setup_rc=$?
setup_s=$(($(date +%s) - $(cat "$DIR/started" 2>/dev/null || echo "$start")))
say "setup: exit $setup_rc after $setup_s s"

test_rc=-1 test_s=0
if [[ $setup_rc == 0 && $SETUP_ONLY == 0 ]]; then
    say "README command 2: bash scripts/test.sh $PYTEST_ARGS (log $DIR/test.log)"
    start=$(date +%s)
    test_rc=0
    in_root "bash scripts/test.sh $PYTEST_ARGS" >"$DIR/test.log" 2>&1 || test_rc=$?
    test_s=$(($(date +%s) - start))
    say "tests: exit $test_rc after $test_s s"
fi

versions=$(in_root 'echo "Debian $(cat /etc/debian_version)";
    ${CXX:-g++} --version | head -n 1; cmake --version | head -n 1;
    mpirun --version | head -n 1; .venv/bin/python --version;
    .venv/bin/workshop doctor 2>/dev/null | grep -A1 "^torch" | tr -s " " | paste -sd " "' \
    2>&1 || true)
{
    echo "suite: $SUITE ($MIRROR)${GCC:+, CC=gcc-$GCC CXX=g++-$GCC}${CMAKE:+, PyPI cmake $CMAKE};" \
        "commit: $commit;" \
        "host CA bundle for HTTPS: $( ((${#certs[@]})) && echo yes || echo no)"
    echo "$versions"
    echo "horovod build: $(grep -a -E '^\[horovod\] (cmake|built in|installed|using cached)' \
        "$DIR/setup.log" | paste -sd ' ' || true)"
    echo "bash scripts/setup.sh: exit $setup_rc, $setup_s s"
    if [[ $test_rc != -1 ]]; then
        echo "bash scripts/test.sh${PYTEST_ARGS:+ $PYTEST_ARGS}: exit $test_rc, $test_s s;" \
            "pytest: $(grep -a -E '^=+ .*(passed|failed|error).* =+$' "$DIR/test.log" | tail -n 1)"
    elif [[ $setup_rc == 0 ]]; then
        echo "bash scripts/test.sh: not run (--setup-only)"
    else
        echo "bash scripts/test.sh: not run (setup failed; last lines of setup.log below)"
        tail -n 30 "$DIR/setup.log"
    fi
    grep -a -E '^(FAILED|ERROR) ' "$DIR/test.log" 2>/dev/null || true
} | tee "$DIR/summary.txt"
[[ $setup_rc == 0 && ($test_rc == 0 || $SETUP_ONLY == 1) ]]
