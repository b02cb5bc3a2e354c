#!/usr/bin/env bash
# ctest -L slurm: the Slurm tests against a real Slurm. Starts a private
# single-node cluster (scripts/local_slurm.sh) in a temporary folder on its own
# ports, runs the tests of tests/python/test_slurm*.py that need it, stops it.
# Those that need none run in the unit pass, not again here: py_slurm_unit (all
# of test_slurm_unit.py) and py_slurm_sweep (test_slurm_sweep.py's SlurmFlags).
# Exit 77 (ctest: skipped) when this is not root or Slurm/munge are not installed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
python=${THREADBURN_PYTHON:-/usr/bin/python3}
if [ "$EUID" -ne 0 ]; then echo "skipped: the local Slurm needs root"; exit 77; fi
for t in slurmctld slurmd munged sbatch; do
    if ! command -v "$t" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$t" ]; then
        echo "skipped: $t not installed (scripts/setup.sh installs slurm-wlm and munge)"; exit 77
    fi
done
dir=$(mktemp -d /tmp/threadburn-slurm-test.XXXXXX)
export THREADBURN_SLURM_PORT=${THREADBURN_SLURM_TEST_PORT:-6937}
stop() { bash "$repo/scripts/local_slurm.sh" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"; }
trap stop EXIT
bash "$repo/scripts/local_slurm.sh" start "$dir" || { echo "the local Slurm did not start; logs in $dir"; trap - EXIT; exit 1; }
eval "$(bash "$repo/scripts/local_slurm.sh" env "$dir")"
# Every test of test_slurm*.py (a new file is picked up) but the unit pass's.
"$python" - "$here" <<'EOF'
import sys
import unittest
UNIT_PASS = ("test_slurm_unit.", "test_slurm_sweep.SlurmFlags.")
def tests(suite):
    for t in suite:
        yield from tests(t) if isinstance(t, unittest.TestSuite) else [t]
found = tests(unittest.defaultTestLoader.discover(sys.argv[1], pattern="test_slurm*.py"))
live = unittest.TestSuite(t for t in found if not t.id().startswith(UNIT_PASS))
sys.exit(not unittest.TextTestRunner(verbosity=2).run(live).wasSuccessful())
EOF
