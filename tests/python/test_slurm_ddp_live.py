"""ddp_step_bench launched by Slurm's srun on the local cluster of
scripts/local_slurm.sh (THREADBURN_SLURM_DIR; tests/python/slurm_live.sh
starts one): `srun -n 2` starts two ranks that find each other through
SLURM_PROCID / SLURM_NTASKS / SLURM_JOB_NODELIST, train in step (equal
parameter checksums) and time their all-reduce. Needs the real build."""
import json
import os
import socket
import subprocess
import unittest

import helpers

CLUSTER = os.environ.get("THREADBURN_SLURM_DIR", "")
BUILD = helpers.real_build_dir()
NODE = socket.gethostname().split(".")[0]  # scripts/local_slurm.sh names the node `hostname -s`


def cluster_running():
    if not CLUSTER:
        return False
    status = subprocess.run(["bash", os.path.join(helpers.REPO, "scripts", "local_slurm.sh"), "status", CLUSTER],
                            capture_output=True, text=True, timeout=60)
    return status.returncode == 0


@unittest.skipUnless(cluster_running() and BUILD, "needs a local Slurm (THREADBURN_SLURM_DIR) and the built programs")
class Srun(helpers.TempDir, unittest.TestCase):
    def test_two_ranks_by_srun(self):
        os.chmod(self.tmp, 0o755)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = helpers.clean_env(SLURM_CONF=os.path.join(CLUSTER, "slurm.conf"), MASTER_PORT=port,
                                OMP_NUM_THREADS=1)
        program = os.path.join(BUILD, "bench", "ddp_step_bench")
        result = subprocess.run(["srun", "-n", "2", f"--output={self.tmp}/rank%t.json", program,
                                 "--model=mnist_adadelta", "--steps=3", "--warmup=1", "--gap_ms=0",
                                 "--benchmark_format=json"], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr)
        reports = []
        for rank in (0, 1):
            with open(os.path.join(self.tmp, f"rank{rank}.json")) as f:
                reports.append(json.load(f))
        for rank, report in enumerate(reports):
            self.assertEqual(report["context"]["dist_rendezvous"], "slurm")
            # The master: the first node of SLURM_JOB_NODELIST (this host), MASTER_PORT's port.
            self.assertEqual(report["context"]["dist_master"], f"{os.environ.get('SLURMD_NODENAME') or NODE}:{port}")
            (bench,) = report["benchmarks"]
            self.assertEqual((bench["rank"], bench["world_size"]), (rank, 2))
            self.assertGreater(bench["allreduce_ms"], 0)
            self.assertGreater(bench["step_cpu_gloo_ms"], 0)
        self.assertEqual(reports[0]["benchmarks"][0]["param_checksum"], reports[1]["benchmarks"][0]["param_checksum"])


if __name__ == "__main__":
    unittest.main()
