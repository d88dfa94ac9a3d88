#!/usr/bin/env bash
# Build (or reuse) a Horovod 0.28.1 wheel with PyTorch + TensorFlow + Gloo + MPI, CPU only, then
# install it into the active Python environment (Python 3.11, 3.12 or 3.13).
#
# PyPI only has Horovod's source release, and it needs fixes to build against the frameworks
# and Pythons we support (see README, "How Horovod is built"); each is applied below and checked:
#   1. its PyTorch extension is compiled as C++14, but torch >= 2.1 headers need C++17 and
#      torch >= 2.14 headers C++20 ("#error C++20 or later compatible compiler is required to
#      use PyTorch"): a CXX wrapper appends the standard as the last flag, so it wins: the one
#      torch's headers ask for on the files that include them, C++17 on the others (TensorFlow's);
#   2. horovod/tensorflow/xla_mpi_ops.cc does not compile against TF >= 2.16 headers (XLA
#      headers moved); it is optional at run time, so it is left out of the build;
#   3. a CUDA build of torch (PyPI's default on Linux) makes Horovod's CMake add its CUDA
#      operations, which need a CUDA toolkit ("Could NOT find CUDAToolkit"): the build is made
#      CPU-only whatever torch build is installed (no CUDA/ROCm detection from torch or nvcc);
#   4. Python 3.12 removed distutils: the torch CMake file asks distutils for Python's include
#      folder, and horovodrun imports distutils.spawn; both use sysconfig / shutil instead;
#   5. gcc >= 13 (Debian 13, Ubuntu 24.04) no longer includes <stdexcept> and <string> through
#      other standard headers ("'logic_error' is not a member of 'std'", "'string' in namespace
#      'std' does not name a type"): the includes are added; gcc 14 rejects flatbuffers'
#      never-used span::operator= ("assignment of read-only member"): it is removed.
#   6. memory: Horovod builds RelWithDebInfo (-O3 -g), and debug info for the TensorFlow and
#      torch headers makes one compiler process reach 2.3 GiB, more than Binder's 2 GiB or a
#      small VM has: the build is Release (-O3, no -g), and gcc collects its garbage more often
#      (--param ggc-min-expand=20 --param ggc-min-heapsize=65536). Measured here (-j1, largest
#      compiler process): 2,347 MiB before, 1,750 MiB Release, 1,489 MiB Release + ggc; the wheel
#      is 1.9 MB instead of 35.6 MB.
#   7. Keras: horovod/tensorflow/keras/__init__.py and callbacks.py take their backend with
#      `from keras import backend as K`, which is Keras 3 even with TF_USE_LEGACY_KERAS=1, while
#      the models and optimizers they wrap are tf-keras (`tensorflow.keras`); Horovod's
#      LearningRateWarmupCallback (K.get_value) and MetricAverageCallback (K.constant) then
#      fail. Both files use the backend of the Keras that `tensorflow.keras` resolves to.
#   8. launch time: before it starts any rank, horovodrun asks an extension whether Gloo / MPI
#      was built (horovod/common/util.py, gloo_built / mpi_built), importing the extensions in
#      the order ['tensorflow', 'torch', 'mxnet'] until one answers: every launch imports
#      TensorFlow (about 2.4 s here) even for a PyTorch run. The order becomes torch first
#      (the answer is the same: both are built with Gloo and MPI, which setup checks);
#      benchmarks/launch_check.py measures the difference.
#   9. launch time, again: even torch first, the check imports torch (about 1 CPU-s) only to
#      call a function of the extension's own library (horovod_gloo_built ...). The built-with
#      checks (MPI, Gloo, NCCL, DDL, CCL) load that library with ctypes instead, as the
#      extension itself does (HorovodBasics), without its framework's Python package; the
#      library still links the framework's libraries, so a broken one still answers nothing.
#      A library that does not load alone (TensorFlow's finds libtensorflow_framework only
#      once TensorFlow is imported) is asked as before, by importing the extension.
#      `horovodrun --check-build`'s "available frameworks" still imports each framework.
# The wheel is cached outside the clone, keyed by Horovod, torch (version and build),
# TensorFlow and Python versions, so a second setup (or CI on a fresh clone) does not recompile.
# The build log is kept in the cache folder: $WORKSHOP_CACHE/logs/.
set -euo pipefail

HOROVOD_VERSION="${HOROVOD_VERSION:-0.28.1}"
CACHE_ROOT="${WORKSHOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/horovod-workshop}"
PY="${PYTHON:-python}"
export TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=2

versions=$("$PY" - <<'PY'
import sys, importlib.metadata as md
py = f"py{sys.version_info.major}{sys.version_info.minor}"
import importlib.util, pathlib, re
torch = md.version("torch").split("+")[0]
# The torch build (CPU or CUDA) without importing torch: torch/version.py says `cuda = '13.0'`.
spec = importlib.util.find_spec("torch")
text = (pathlib.Path(spec.origin).parent / "version.py").read_text()
cuda = re.search(r"^cuda[^=]*=\s*'([0-9.]+)'", text, re.M)
build = "" if cuda is None else "cu" + cuda[1].replace(".", "")
print(torch + build, md.version("tensorflow-cpu"), py)
PY
)
read -r TORCH_VERSION TF_VERSION PY_TAG <<<"$versions"
# "release-tfkeras-torchfirst-ctypescheck": the recipe with fixes 6 to 9 (a wheel cached by an
# earlier recipe is not reused).
KEY="horovod${HOROVOD_VERSION}-torch${TORCH_VERSION}-tf${TF_VERSION}-${PY_TAG}-release-tfkeras-torchfirst-ctypescheck"
WHEEL_DIR="$CACHE_ROOT/wheels/$KEY"
LOG_DIR="$CACHE_ROOT/logs"

if "$PY" - "$HOROVOD_VERSION" <<'PY' 2>/dev/null
import sys, importlib.metadata as md
assert md.version("horovod") == sys.argv[1]
import horovod.torch as ht, horovod.tensorflow as htf  # noqa: F401
assert ht.gloo_built() and ht.mpi_built() and htf.gloo_built() and htf.mpi_built()
from horovod.common.util import EXTENSIONS
assert EXTENSIONS[0] == "torch", "built before fix 8"
from horovod.common.util import _extension_library  # noqa: F401 (fix 9)
PY
then
    echo "[horovod] Horovod $HOROVOD_VERSION with torch+tensorflow+gloo+mpi is already installed"
    exit 0
fi

wheel=$(ls "$WHEEL_DIR"/horovod-*.whl 2>/dev/null | head -n 1 || true)
if [[ -z "$wheel" ]]; then
    echo "[horovod] no cached wheel in $WHEEL_DIR: building Horovod $HOROVOD_VERSION from source"
    echo "[horovod] this compiles PyTorch, TensorFlow, Gloo and MPI parts (4-20 min, by machine)"
    build_dir=$(mktemp -d "${TMPDIR:-/tmp}/horovod-build.XXXXXX")
    trap 'rm -rf "$build_dir"' EXIT
    (cd "$build_dir" && "$PY" -m pip download --quiet --no-deps --no-binary :all: \
        "horovod==$HOROVOD_VERSION" -d .)
    tar xzf "$build_dir/horovod-$HOROVOD_VERSION.tar.gz" -C "$build_dir"
    src="$build_dir/horovod-$HOROVOD_VERSION"

    # Fixes 2-4: edit the sources; every edit must apply, or the build stops here.
    "$PY" - "$src" <<'PY'
import pathlib, re, sys
src = pathlib.Path(sys.argv[1])

def edit(relative, old, new, count=1):
    path = src / relative
    text = path.read_text()
    found = len(re.findall(old, text, flags=re.S))
    if found != count:
        sys.exit(f"[horovod] ERROR: {relative}: expected {count} match(es) of {old!r}, found {found}")
    path.write_text(re.sub(old, new, text, flags=re.S))

# 2. No XLA ops (they do not compile against TF >= 2.16 headers).
edit("horovod/tensorflow/CMakeLists.txt", r"[^\n]*xla_mpi_ops\.cc[^\n]*\n", "")
# 3. CPU-only: torch's CUDA/ROCm build is not taken as a request for GPU operations ...
edit("cmake/Modules/FindPytorch.cmake",
     r"print\(True if \(\(torch\.version\.cuda is not None\) and \(CUDA_HOME is not None\)\) else False\)",
     "print(False)")
edit("cmake/Modules/FindPytorch.cmake",
     r"print\(True if \(\(torch\.version\.hip is not None\) and \(ROCM_HOME is not None\)\) else False\)",
     "print(False)")
# ... and no CUDA compiler is looked for (an nvcc that does not work with this gcc would fail).
edit("CMakeLists.txt", r"include\(CheckLanguage\)\ncheck_language\(CUDA\).*?enable_language\(CUDA\)\nendif\(\)\n",
     "# horovod-workshop: CPU-only build, no CUDA compiler detection\n")
# 4. Python 3.12+: no distutils.
edit("horovod/torch/CMakeLists.txt",
     r'"from distutils\.sysconfig import get_python_inc; print\(get_python_inc\(\)\)"',
     "\"import sysconfig; print(sysconfig.get_paths()['include'])\"")
edit("horovod/runner/js_run.py", r"from distutils\.spawn import find_executable",
     "from shutil import which as find_executable")
# 5. gcc >= 13/14: missing standard includes, and an ill-formed template member that gcc 14
#    rejects even though it is never used (flatbuffers' span::operator= assigns a const member).
edit("horovod/common/common.h", r"#include <functional>\n", "#include <functional>\n#include <stdexcept>\n")
edit("horovod/common/group_table.h", r"#include <queue>\n", "#include <queue>\n#include <string>\n")
edit("third_party/flatbuffers/include/flatbuffers/stl_emulation.h",
     r"\n  FLATBUFFERS_CONSTEXPR_CPP14 span &operator=\(const span &other\)\n"
     r"      FLATBUFFERS_NOEXCEPT \{\n    data_ = other.data_;\n    count_ = other.count_;\n  \}\n",
     "\n")
# 6. Release: no debug info (memory of the compiler, size of the wheel).
edit("setup.py", r"else 'RelWithDebInfo'", "else 'Release'")
# 7. Keras: the backend of tensorflow.keras (tf-keras), not Keras 3's.
for module in ("horovod/tensorflow/keras/__init__.py", "horovod/tensorflow/keras/callbacks.py"):
    edit(module, r"\n    from keras import backend as K\n",
         "\n    K = keras.backend  # horovod-workshop: tensorflow.keras's backend (tf-keras)\n")
# 8. horovodrun's build check imports torch before TensorFlow (a faster answer, the same one).
edit("horovod/common/util.py", r"EXTENSIONS = \['tensorflow', 'torch', 'mxnet'\]",
     "EXTENSIONS = ['torch', 'tensorflow', 'mxnet']  # horovod-workshop: torch first (launch time)")
# 9. ... and answers the built-with checks from the extension's library, without its framework.
edit("horovod/common/util.py", r"\ndef _check_extension_lambda\(", """
def _extension_library(ext_base_name):
    \"\"\"horovod-workshop (build fix 9): the extension's own library, loaded with ctypes as the
    extension loads it (HorovodBasics), without importing its framework: enough to ask how
    Horovod was built (mpi_built, gloo_built, nccl_built, ddl_built, ccl_built). A library
    that does not load alone (TensorFlow's needs libtensorflow_framework, which only importing
    TensorFlow puts in reach) is asked as in 0.28.1, through the imported extension.\"\"\"
    import importlib
    from horovod.common.basics import HorovodBasics
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           ext_base_name, '__init__.py')
    try:
        return HorovodBasics(package, 'mpi_lib_v2' if ext_base_name == 'torch' else 'mpi_lib')
    except OSError:
        return importlib.import_module('.' + ext_base_name, 'horovod')


def _check_extension_lambda(""")
edit("horovod/common/util.py",
     r"\n            ext = importlib\.import_module\('\.' \+ ext_base_name, 'horovod'\)\n",
     """
            if fn_desc.startswith('built with '):  # horovod-workshop: fix 9
                ext = _extension_library(ext_base_name)
            else:
                ext = importlib.import_module('.' + ext_base_name, 'horovod')
""")
print("[horovod] source fixes applied: no XLA ops, CPU-only, no distutils, gcc 13/14, Release,"
      " tf-keras backend, torch-first build check from the extension's library")
PY

    # Fix 1: a compiler wrapper that puts the C++ standard last (and fix 6's gcc memory
    # settings): C++20 for files that include torch's headers when they require it, else C++17.
    real_cxx="$(command -v "${CXX:-g++}")"
    gc_params=""
    if "$real_cxx" --version | grep -q "Free Software Foundation"; then
        gc_params="--param ggc-min-expand=20 --param ggc-min-heapsize=65536"
    fi
    torch_std=c++17
    torch_all_h=$("$PY" -c "import importlib.util, pathlib; \
print(pathlib.Path(importlib.util.find_spec('torch').origin).parent \
/ 'include/torch/csrc/api/include/torch/all.h')")
    if grep -q "C++20 or later" "$torch_all_h" 2>/dev/null; then
        torch_std=c++20
    fi
    echo "[horovod] C++ standard: $torch_std for the PyTorch extension, c++17 for the rest"
    cat >"$build_dir/cxx17" <<EOF
#!/bin/sh
std=-std=c++17
case "\$*" in *torch/include*) std=-std=$torch_std ;; esac
exec "$real_cxx" "\$@" \$std $gc_params
EOF
    chmod +x "$build_dir/cxx17"

    # cmake >= 4 refuses Gloo's `cmake_minimum_required(VERSION 2.8.12)`; cmake 4 reads this
    # variable (cmake 3.x ignores it). The distribution's cmake 3.x is what has been tested.
    export CMAKE_POLICY_VERSION_MINIMUM=3.5
    mkdir -p "$WHEEL_DIR" "$LOG_DIR"
    log="$LOG_DIR/build-$KEY.log"
    echo "[horovod] $(cmake --version | head -n 1), $("$real_cxx" --version | head -n 1)," \
        "$(mpirun --version 2>/dev/null | head -n 1)"
    echo "[horovod] compiling; log: $log (progress every 60 s)"
    build_start=$(date +%s)
    (
        cd "$src"
        # CPU-only: no GPU operations, whatever the caller's environment asks for.
        unset HOROVOD_GPU HOROVOD_GPU_OPERATIONS HOROVOD_GPU_ALLREDUCE HOROVOD_GPU_ALLGATHER \
            HOROVOD_GPU_BROADCAST HOROVOD_GPU_ALLTOALL HOROVOD_GPU_REDUCESCATTER HOROVOD_CUDA_HOME
        CXX="$build_dir/cxx17" \
        HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
        HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
        MAKEFLAGS="${MAKEFLAGS:--j$(nproc)}" \
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
        echo "[horovod] the whole log: $log (the patched sources are in $src)" >&2
        trap - EXIT
        exit 1
    fi
    echo "[horovod] built in $(($(date +%s) - build_start)) s"
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
