"""Which BLAS PyTorch really uses here, and how fast it is: shared by the PyTorch baselines
(bench/torch_products.py, tools/torch_ref/lora_trainer_bench.py).

Debian's python3-torch calls whatever libblas.so.3 the alternatives system (or
LD_LIBRARY_PATH) selects: the reference BLAS is 20-50x slower than OpenBLAS, and the
pthread OpenBLAS fights torch's own OpenMP threads. The scripts select the OpenMP build
(/usr/lib/x86_64-linux-gnu/openblas-openmp) and this module reports what got loaded.
"""
from __future__ import annotations

import os
import time


def loaded_blas_libraries():
    """Paths of the BLAS-like shared libraries mapped into this process."""
    keys = ("blas", "lapack", "mkl", "gomp", "omp", "tcmalloc", "jemalloc")
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[5].startswith("/"):
                    path = parts[5]
                    name = os.path.basename(path).lower()
                    if any(k in name for k in keys) and path not in found:
                        found.append(path)
    except OSError:
        pass
    return found


def blas_kind(paths):
    """A one-word verdict from the mapped library paths."""
    real = [os.path.realpath(p) for p in paths]
    joined = " ".join(real)
    if "openblas-openmp" in joined:
        return "openblas-openmp"
    if "openblas-pthread" in joined:
        return "openblas-pthread"
    if "mkl" in joined:
        return "mkl"
    if "openblas" in joined:
        return "openblas (unknown threading)"
    if "/blas/" in joined:
        return "reference-blas"
    return "unknown"


def square_matmul_gflops(torch, n=1024, reps=3):
    """Best GFLOP/s of an n x n f32 matmul: a sanity check that a fast BLAS is in use."""
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    a @ b
    best = 1e300
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n ** 3 / best / 1e9


def describe(torch):
    """Lines saying what BLAS and threads torch uses, for the benchmark headers."""
    torch.ones(64, 64) @ torch.ones(64, 64)  # make sure the BLAS is loaded
    paths = loaded_blas_libraries()
    cfg = torch.__config__.show()
    # The build settings are one long comma-separated line: keep the BLAS-related entries.
    blas_info = [item.strip() for item in cfg.replace("\n", ",").split(",")
                 if any(k in item for k in ("BLAS_INFO", "LAPACK_INFO", "USE_OPENMP", "USE_MKL"))]
    lines = [
        f"torch {torch.__version__}, {torch.get_num_threads()} threads "
        f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}), "
        f"LD_LIBRARY_PATH={os.environ.get('LD_LIBRARY_PATH', '')}, "
        f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}",
        f"BLAS in use: {blas_kind(paths)}; mapped: " + ", ".join(os.path.realpath(p) for p in paths),
        "torch build: " + ("; ".join(blas_info) if blas_info else "(no BLAS line in torch.__config__.show())"),
    ]
    return lines
