#!/usr/bin/env bash
# ctest -L fleet: the multi-node tests on a private two-node Slurm whose nodes
# are network namespaces (scripts/local_fleet.sh): sweep --slurm over both
# nodes, a node dying mid-array, ddp_step ranks on two hosts. Starts the
# fleet in a temporary folder, runs tests/python/test_fleet*.py against it,
# tears everything down (also on failure or interrupt) and then checks that
# nothing is left: no tbfleet namespace or link, no daemon of the folder.
# Exit 77 (ctest: skipped) when this is not root or a tool is missing.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
python=${THREADBURN_PYTHON:-/usr/bin/python3}
fleet=$repo/scripts/local_fleet.sh
PATH=$PATH:/usr/sbin:/sbin
if [ "$EUID" -ne 0 ]; then echo "skipped: the fleet's namespaces and slurmd need root"; exit 77; fi
for t in slurmctld slurmd munged sbatch srun ip nsenter unshare bridge; do
    command -v "$t" >/dev/null 2>&1 || { echo "skipped: $t not installed (slurm-wlm, munge, iproute2, util-linux)"; exit 77; }
done
dir=$(mktemp -d /tmp/threadburn-fleet-test.XXXXXX)
export THREADBURN_FLEET_PORT=${THREADBURN_FLEET_TEST_PORT:-6957}
tests=""
teardown() {
    local rc=$?
    trap - EXIT INT TERM
    # Interrupted: the tests' process group first (their sweeps, sruns, ranks), then the fleet.
    if [ -n "$tests" ] && kill -0 "$tests" 2>/dev/null; then
        kill -TERM -- "-$tests" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$tests" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$tests" 2>/dev/null
    fi
    bash "$fleet" stop "$dir"
    echo "== teardown check"
    if bash "$fleet" leftovers "$dir"; then rm -rf "$dir"; else echo "FAIL: the fleet left the above behind"; rc=1; fi
    exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM
t0=$(date +%s)
bash "$fleet" start "$dir" || { echo "the local fleet did not start (logs in $dir/log)"; exit 1; }
eval "$(bash "$fleet" env "$dir")"
# In a process group of its own, waited for in the background, so that an
# interrupt reaches the trap at once and ends the tests with the fleet.
setsid "$python" -m unittest discover -s "$here" -p 'test_fleet*.py' -v &
tests=$!
wait "$tests"
rc=$?
tests=""
echo "== fleet tests: $(( $(date +%s) - t0 )) s"
exit $rc
