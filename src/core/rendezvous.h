// Where this process stands in a data-parallel job, read from the launcher's
// environment (no torch: unit-tested on made-up environments). The first
// launcher whose variables are present wins, in this order:
//
//   env       torchrun's convention (python -m torch.distributed.run, or set by
//             hand): RANK, WORLD_SIZE, LOCAL_RANK (default: RANK),
//             MASTER_ADDR, MASTER_PORT
//   openmpi   mpirun: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//             OMPI_COMM_WORLD_LOCAL_RANK (default: the rank); the master from
//             MASTER_ADDR / MASTER_PORT (mpirun -x MASTER_ADDR=... on several hosts)
//   slurm     srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (default: the
//             rank); the master is the first host of SLURM_JOB_NODELIST
//             ("node[01-04,07]" -> node01) unless MASTER_ADDR names one; the
//             port from MASTER_PORT
//   single    none of the above: a world of 1, rank 0
//
// MASTER_ADDR defaults to 127.0.0.1 and MASTER_PORT to kDefaultMasterPort
// (29500, torch's and c10d's TCPStore default). A launcher is "present" when
// its rank or its size variable is set (RANK / WORLD_SIZE, OMPI_COMM_WORLD_RANK
// / _SIZE, SLURM_PROCID / SLURM_NTASKS); then both must be, and consistent.
// Bad or inconsistent values throw Error naming the variable:
// "RANK=3 but WORLD_SIZE=2", "MASTER_PORT: expected an integer in [1, 65535], got 'x'".
//
// Slurm's variables count only inside a job step (srun sets SLURM_STEP_ID):
// the batch script of `sbatch -n N` also has SLURM_PROCID=0 and SLURM_NTASKS=N,
// and a program started there directly would wait for N - 1 peers that never
// come, so that is an error ("start the ranks with srun"); with N = 1 it is a
// world of 1.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace threadburn {

// The same alias as runtime/runtime.h's (core does not depend on runtime).
using EnvGetter = std::function<const char*(const char*)>;

constexpr int kDefaultMasterPort = 29500;
constexpr const char* kDefaultMasterAddr = "127.0.0.1";

struct Rendezvous {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = kDefaultMasterAddr;
  int master_port = kDefaultMasterPort;
  std::string source = "single";  // "env", "openmpi", "slurm" or "single"
};

// Throws Error naming the variable at fault.
Rendezvous rendezvous_from_env(const EnvGetter& env);
// The process's real environment.
Rendezvous rendezvous_from_env();

// Slurm's hostlist syntax: "a,b", "node[01-04,07]" (zero padding kept),
// "r[1-2]-n[1-2]" (every combination, leftmost varying slowest), "n[1-2]-ib".
// Throws Error naming SLURM_JOB_NODELIST when malformed.
std::vector<std::string> expand_nodelist(const std::string& text);

}  // namespace threadburn
