#!/usr/bin/env bash
# Installs exactly the Debian packages threadburn needs; safe to run again.
# Usage: scripts/setup.sh [--check]   (--check: only report what is missing)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache
  libtorch-dev            # PyTorch 1.13.1 C++ (CPU, libgomp)
  libbenchmark-dev        # Google Benchmark
  libgtest-dev            # GoogleTest
  libtbb-dev              # oneTBB 2021
  libdnnl-dev             # oneDNN 2.6 (its CMake config also wants OpenCL:)
  ocl-icd-opencl-dev opencl-c-headers
  libomp-dev              # LLVM OpenMP runtime, for the runtime axis (LD_PRELOAD)
  libopenblas0-openmp     # BLAS for libtorch's matmuls, threaded by the same OpenMP runtime
                          # (without it libblas.so.3 is netlib's single-threaded reference BLAS)
  python3 python3-numpy python3-matplotlib   # the threadburn command (Debian's /usr/bin/python3)
  python3-torch           # real Python trainings as subjects of threadburn run / tune (PyTorch 1.13.1)
  libgloo-dev             # headers that libtorch's c10d (distributed) headers include
  openmpi-bin             # mpirun: a launcher of data-parallel ranks
  slurm-wlm munge         # Slurm: job arrays of sweeps, srun of ranks (scripts/local_slurm.sh)
  iproute2                # ip, bridge: the two-node fleet's namespaces and veths (scripts/local_fleet.sh)
  linux-perf              # perf, for doctor's check of hardware counters
  clang                   # clang -fopenmp: the probe's known answers for LLVM-native OpenMP (__kmpc_fork_call)
  patchelf                # a libgomp copy renamed like a pip wheel's (libgomp-<hash>.so.1), for the probe's test
  time                    # /usr/bin/time: the CPU of a training without the probe, for the probe's test
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "setup: missing: ${missing[*]}"
  exit 1
fi

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
