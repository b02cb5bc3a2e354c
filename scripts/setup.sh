#!/usr/bin/env bash
# Installs exactly the Debian packages threadburn needs; safe to run again.
# Usage: scripts/setup.sh [--check]   (--check: only report what is missing)
# One line per step; apt's own output goes to a log ($THREADBURN_SETUP_LOG,
# default a new /tmp/threadburn-setup.*.log), whose tail and the failing package are
# printed when a step fails.
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
  python3-scipy           # scipy.stats: the t and other distributions of the decision rule
  chromium fonts-dejavu-core   # a headless browser and the page's font: the test of threadburn report (tests/python/test_report_browser.py)
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

# A fresh log each time: two checkouts on one machine may set up at once.
LOG=${THREADBURN_SETUP_LOG:-$(mktemp --suffix=.log /tmp/threadburn-setup.XXXXXX)}
: >"$LOG"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# Another apt on this machine (a colleague's setup) holds the lock: wait for it.
APT=($SUDO apt-get -y -o DPkg::Lock::Timeout=900 -o Acquire::Retries=3)

# step TEXT CMD...: one line on the terminal, the command's output in the log.
step() {
  local what=$1; shift
  printf 'setup: %s ... ' "$what"
  echo "== $what: $*" >>"$LOG"
  local t0=$SECONDS
  if "$@" >>"$LOG" 2>&1; then
    echo "ok ($((SECONDS - t0)) s)"
  else
    echo "FAILED"
    return 1
  fi
}

# The package(s) a failed apt-get names in its error lines ("Unable to locate
# package X", "Package 'X' has no installation candidate", "X : Depends: ...",
# "dpkg: error processing package X").
failed_packages() {
  sed -nE -e "s/^E: Unable to locate package ([^ ]+).*/\1/p" \
          -e "s/^E: Package '([^']+)' has no installation candidate.*/\1/p" \
          -e "s/^ ([^ ]+) : (Pre)?Depends:.*/\1/p" \
          -e "s/^dpkg: error processing package ([^ ]+) .*/\1/p" "$LOG" | sed 's/:amd64$//' | sort -u | tr '\n' ' ' | sed 's/ $//'
}

fail() {
  echo "setup: the last lines of $LOG:"
  tail -n 25 "$LOG" | sed 's/^/  | /'
  echo "setup: $1"
  exit 1
}

echo "setup: ${#missing[@]} of ${#PACKAGES[@]} packages to install: ${missing[*]} (full log: $LOG)"
step "apt-get update" "${APT[@]}" update || fail "apt-get update failed (network, mirror or sources.list)"
if ! step "apt-get install (${#missing[@]} packages)" "${APT[@]}" install --no-install-recommends "${missing[@]}"; then
  bad=$(failed_packages)
  if [ -z "$bad" ]; then
    # apt named none: one package at a time finds the one that fails.
    for p in "${missing[@]}"; do
      step "apt-get install $p" "${APT[@]}" install --no-install-recommends "$p" || { bad=$p; break; }
    done
  fi
  fail "installing failed; the failing package: ${bad:-none found (see the log)}"
fi
echo "setup: done, ${#missing[@]} packages installed"
