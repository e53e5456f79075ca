# Shared by the bench/ scripts (sourced, not run).
# - nl_built_nightlora: prints $NL_BUILD_DIR/nightlora, built first (configured if need be)
#   unless NL_NO_BUILD=1.
# - nl_bench_prepare: installs what is missing (scripts/setup.sh), builds the benchmark
#   programs into $NL_BUILD_DIR (default build-bench), and sets up PyTorch's BLAS.
# - PyTorch's BLAS: Debian's python3-torch uses whatever libblas.so.3 is selected. The
#   reference BLAS is 20-50x slower, and the pthread OpenBLAS fights torch's OpenMP threads,
#   so we put the OpenMP build of OpenBLAS first on LD_LIBRARY_PATH, set OMP_NUM_THREADS to
#   the thread count, and preload tcmalloc when it is installed. The Python side prints the
#   libraries it really mapped (bench/torch_blas.py).

NL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NL_BUILD_DIR=${NL_BUILD_DIR:-$NL_ROOT/build-bench}
NL_PY=/usr/bin/python3

nl_bench_prepare() {
  local threads=$1; shift
  if ! "$NL_PY" -c 'import torch, numpy' 2>/dev/null || ! dpkg-query -W libopenblas0-openmp >/dev/null 2>&1 \
     || ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
    echo "bench: installing what is missing (scripts/setup.sh)" >&2
    "$NL_ROOT/scripts/setup.sh" >&2
  fi
  if [ ! -f "$NL_BUILD_DIR/build.ninja" ]; then
    cmake -S "$NL_ROOT" -B "$NL_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  fi
  # -j2 by default: the machine this was written on had two cores shared with others.
  ninja -C "$NL_BUILD_DIR" -j"${NL_JOBS:-2}" "$@" >&2

  local multiarch
  multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  local openmp_dir=/usr/lib/$multiarch/openblas-openmp
  if [ -d "$openmp_dir" ]; then
    export LD_LIBRARY_PATH="$openmp_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "bench: PyTorch BLAS: OpenMP OpenBLAS from $openmp_dir (first on LD_LIBRARY_PATH)"
  else
    echo "bench: WARNING: $openmp_dir not found (install libopenblas0-openmp): PyTorch may use a slow BLAS"
  fi
  local tcmalloc
  tcmalloc=$(ls /usr/lib/"$multiarch"/libtcmalloc_minimal.so.4 /usr/lib/"$multiarch"/libtcmalloc.so.4 2>/dev/null | head -1 || true)
  if [ -n "$tcmalloc" ]; then
    NL_TORCH_PRELOAD=$tcmalloc
    echo "bench: PyTorch allocator: tcmalloc ($tcmalloc, LD_PRELOAD for PyTorch only)"
  else
    NL_TORCH_PRELOAD=""
    echo "bench: PyTorch allocator: glibc malloc (tcmalloc not installed: apt-get install libgoogle-perftools4 to use it)"
  fi
  export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
  echo "bench: threads: $threads (OMP_NUM_THREADS=$OMP_NUM_THREADS)"
}

# Runs the Debian python with PyTorch's environment (tcmalloc preloaded when found).
nl_torch_python() {
  LD_PRELOAD="${NL_TORCH_PRELOAD}${LD_PRELOAD:+:$LD_PRELOAD}" "$NL_PY" "$@"
}

nl_built_nightlora() {
  if [ "${NL_NO_BUILD:-0}" != 1 ]; then
    [ -f "$NL_BUILD_DIR/build.ninja" ] || cmake -S "$NL_ROOT" -B "$NL_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
    ninja -C "$NL_BUILD_DIR" -j"${NL_JOBS:-2}" nightlora_cli >&2
  fi
  echo "$NL_BUILD_DIR/nightlora"
}
