#!/usr/bin/env bash
# Build (or reuse) a Horovod 0.28.1 wheel with PyTorch + TensorFlow + Gloo + MPI, then install it
# into the active Python environment.
#
# PyPI only has Horovod's source release, and it needs two fixes to build against the
# frameworks we pin (see README, "How Horovod is built"):
#   1. its PyTorch extension is compiled as C++14, but torch >= 2.1 headers need C++17:
#      a CXX wrapper appends -std=c++17 as the last flag, so it wins;
#   2. horovod/tensorflow/xla_mpi_ops.cc does not compile against TF >= 2.16 headers (XLA
#      headers moved); it is optional at run time, so it is left out of the build.
# The wheel is cached outside the clone, keyed by Horovod, torch, TensorFlow and Python
# versions, so a second setup (or CI on a fresh clone) does not recompile.
set -euo pipefail

HOROVOD_VERSION="${HOROVOD_VERSION:-0.28.1}"
CACHE_ROOT="${WORKSHOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/horovod-workshop}"
PY="${PYTHON:-python}"
export TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=2

versions=$("$PY" - <<'PY'
import sys, importlib.metadata as md
py = f"py{sys.version_info.major}{sys.version_info.minor}"
print(md.version("torch").split("+")[0], md.version("tensorflow-cpu"), py)
PY
)
read -r TORCH_VERSION TF_VERSION PY_TAG <<<"$versions"
KEY="horovod${HOROVOD_VERSION}-torch${TORCH_VERSION}-tf${TF_VERSION}-${PY_TAG}"
WHEEL_DIR="$CACHE_ROOT/wheels/$KEY"

if "$PY" - "$HOROVOD_VERSION" <<'PY' 2>/dev/null
import sys, importlib.metadata as md
assert md.version("horovod") == sys.argv[1]
import horovod.torch as ht, horovod.tensorflow as htf  # noqa: F401
assert ht.gloo_built() and ht.mpi_built() and htf.gloo_built() and htf.mpi_built()
PY
then
    echo "[horovod] Horovod $HOROVOD_VERSION with torch+tensorflow+gloo+mpi is already installed"
    exit 0
fi

wheel=$(ls "$WHEEL_DIR"/horovod-*.whl 2>/dev/null | head -n 1 || true)
if [[ -z "$wheel" ]]; then
    echo "[horovod] no cached wheel in $WHEEL_DIR: building Horovod $HOROVOD_VERSION from source"
    echo "[horovod] this compiles PyTorch, TensorFlow, Gloo and MPI parts (about 20 min on 2 cores)"
    build_dir=$(mktemp -d "${TMPDIR:-/tmp}/horovod-build.XXXXXX")
    trap 'rm -rf "$build_dir"' EXIT
    (cd "$build_dir" && "$PY" -m pip download --quiet --no-deps --no-binary :all: \
        "horovod==$HOROVOD_VERSION" -d .)
    tar xzf "$build_dir/horovod-$HOROVOD_VERSION.tar.gz" -C "$build_dir"
    src="$build_dir/horovod-$HOROVOD_VERSION"

    # Fix 2: drop the XLA ops source from the TensorFlow extension.
    sed -i '/xla_mpi_ops.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
    if grep -q xla_mpi_ops "$src/horovod/tensorflow/CMakeLists.txt"; then
        echo "[horovod] ERROR: could not remove xla_mpi_ops.cc from the build" >&2
        exit 1
    fi

    # Fix 1: a compiler wrapper that puts -std=c++17 last.
    real_cxx="$(command -v "${CXX:-g++}")"
    cat >"$build_dir/cxx17" <<EOF
#!/bin/sh
exec "$real_cxx" "\$@" -std=c++17
EOF
    chmod +x "$build_dir/cxx17"

    mkdir -p "$WHEEL_DIR"
    log="$build_dir/build.log"
    echo "[horovod] compiling; log: $log (progress every 60 s)"
    (
        cd "$src"
        CXX="$build_dir/cxx17" \
        HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
        HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
        MAKEFLAGS="-j$(nproc)" \
        "$PY" -m pip wheel --no-build-isolation --no-deps -v -w "$build_dir/dist" . >"$log" 2>&1
    ) &
    build_pid=$!
    while kill -0 "$build_pid" 2>/dev/null; do
        sleep 60
        kill -0 "$build_pid" 2>/dev/null || break
        last=$(grep -E '\[ *[0-9]+%\]' "$log" | tail -n 1 || true)
        echo "[horovod] still compiling... ${last:-(configuring)}"
    done
    if ! wait "$build_pid"; then
        echo "[horovod] ERROR: build failed; last lines of $log:" >&2
        tail -n 40 "$log" >&2
        trap - EXIT
        exit 1
    fi
    cp "$build_dir"/dist/horovod-*.whl "$WHEEL_DIR/"
    wheel=$(ls "$WHEEL_DIR"/horovod-*.whl | head -n 1)
    echo "[horovod] cached $wheel"
else
    echo "[horovod] using cached wheel $wheel"
fi

"$PY" -m pip install --quiet --no-deps --force-reinstall "$wheel"
"$PY" - <<'PY'
import horovod.torch as ht, horovod.tensorflow as htf
missing = [name for name, ok in [
    ("torch+gloo", ht.gloo_built()), ("torch+mpi", ht.mpi_built()),
    ("tensorflow+gloo", htf.gloo_built()), ("tensorflow+mpi", htf.mpi_built()),
] if not ok]
if missing:
    raise SystemExit(f"[horovod] ERROR: installed Horovod lacks {', '.join(missing)}")
print("[horovod] installed: torch + tensorflow, gloo + mpi")
PY
