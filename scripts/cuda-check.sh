#!/usr/bin/env bash
# Builds the CUDA room (src/kernels/cuda) and runs its test where a CUDA 12+ toolchain is
# installed; without a GPU the test skips, saying so. Without the toolchain, says so and
# succeeds. Build directory: build-cuda (FLASHSERVE_CUDA_BUILD_DIR).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FLASHSERVE_CUDA_BUILD_DIR:-$here/build-cuda}"
nvcc="$(command -v nvcc || true)"
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "cuda-check: no nvcc here; the CUDA room is not built"
  exit 0
fi
release="$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
if [ -z "$release" ] || [ "$release" -lt 12 ]; then
  echo "cuda-check: $nvcc is CUDA ${release:-?}; the CUDA room needs 12 or newer (sm_90a)"
  exit 0
fi
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHSERVE_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$nvcc" >/dev/null
cmake --build "$build" -j "$(nproc)" --target cuda_matmul_test cuda_matmul_bench
"$build/src/kernels/cuda/cuda_matmul_test"
