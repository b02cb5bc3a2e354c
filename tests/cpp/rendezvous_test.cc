// The rendezvous read from made-up launcher environments: torchrun's, Open
// MPI's and Slurm's variables, their order, the defaults, Slurm's host-list
// syntax, and each error naming its variable.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "core/rendezvous.h"

namespace threadburn {
namespace {

using Env = std::map<std::string, std::string>;

EnvGetter env_of(const Env& env) {
  return [env](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

Rendezvous from(const Env& env) { return rendezvous_from_env(env_of(env)); }

// The Error's message, or "" when none was thrown.
std::string error_of(const Env& env) {
  try {
    from(env);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Rendezvous, NothingSetIsAWorldOfOne) {
  const Rendezvous rv = from({{"HOME", "/root"}, {"LOCAL_RANK", "0"}});
  EXPECT_EQ(rv.source, "single");
  EXPECT_EQ(rv.rank, 0);
  EXPECT_EQ(rv.world_size, 1);
  EXPECT_EQ(rv.local_rank, 0);
  EXPECT_EQ(rv.master_addr, "127.0.0.1");
  EXPECT_EQ(rv.master_port, kDefaultMasterPort);
}

TEST(Rendezvous, Torchrun) {
  const Rendezvous rv = from({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                              {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29400"}});
  EXPECT_EQ(rv.source, "env");
  EXPECT_EQ(rv.rank, 5);
  EXPECT_EQ(rv.world_size, 8);
  EXPECT_EQ(rv.local_rank, 1);
  EXPECT_EQ(rv.master_addr, "10.0.0.7");
  EXPECT_EQ(rv.master_port, 29400);
}

TEST(Rendezvous, PlainEnvironmentDefaults) {
  // By hand: no LOCAL_RANK (the rank then), no master (loopback, the default port).
  const Rendezvous rv = from({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(rv.source, "env");
  EXPECT_EQ(rv.local_rank, 1);
  EXPECT_EQ(rv.master_addr, "127.0.0.1");
  EXPECT_EQ(rv.master_port, 29500);
}

TEST(Rendezvous, OpenMpi) {
  const Rendezvous rv = from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"MASTER_PORT", "31000"}});
  EXPECT_EQ(rv.source, "openmpi");
  EXPECT_EQ(rv.rank, 3);
  EXPECT_EQ(rv.world_size, 4);
  EXPECT_EQ(rv.local_rank, 1);
  EXPECT_EQ(rv.master_addr, "127.0.0.1");
  EXPECT_EQ(rv.master_port, 31000);
  EXPECT_EQ(from({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"MASTER_ADDR", "h0"}}).master_addr,
            "h0");
}

TEST(Rendezvous, Slurm) {
  const Rendezvous rv = from({{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "2"}, {"SLURM_STEP_ID", "0"},
                              {"SLURM_JOB_NODELIST", "node[03-04,07],gpu1"}});
  EXPECT_EQ(rv.source, "slurm");
  EXPECT_EQ(rv.rank, 6);
  EXPECT_EQ(rv.world_size, 8);
  EXPECT_EQ(rv.local_rank, 2);
  EXPECT_EQ(rv.master_addr, "node03");
  EXPECT_EQ(rv.master_port, 29500);
  // MASTER_ADDR, when set, names the master instead.
  EXPECT_EQ(from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_NODELIST", "a,b"},
                  {"MASTER_ADDR", "b"}})
                .master_addr,
            "b");
  // One task needs no master: no host list is fine.
  EXPECT_EQ(from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).master_addr, "127.0.0.1");
}

TEST(Rendezvous, LaunchersInOrder) {
  // mpirun inside a Slurm allocation: Open MPI's variables win over Slurm's;
  // torchrun's over both.
  Env env = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"OMPI_COMM_WORLD_RANK", "1"},
             {"OMPI_COMM_WORLD_SIZE", "2"}};
  EXPECT_EQ(from(env).source, "openmpi");
  EXPECT_EQ(from(env).rank, 1);
  env["RANK"] = "2";
  env["WORLD_SIZE"] = "3";
  EXPECT_EQ(from(env).source, "env");
  EXPECT_EQ(from(env).rank, 2);
  EXPECT_EQ(from(env).world_size, 3);
}

TEST(Nodelist, Expands) {
  using V = std::vector<std::string>;
  EXPECT_EQ(expand_nodelist("node01"), V({"node01"}));
  EXPECT_EQ(expand_nodelist("a,b"), V({"a", "b"}));
  EXPECT_EQ(expand_nodelist("node[01-04,07]"), V({"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(expand_nodelist("n[8-10]"), V({"n8", "n9", "n10"}));
  EXPECT_EQ(expand_nodelist("n[098-101]"), V({"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_nodelist("gpu[1-2]-ib,login"), V({"gpu1-ib", "gpu2-ib", "login"}));
  EXPECT_EQ(expand_nodelist("r[1-2]-n[1,3]"), V({"r1-n1", "r1-n3", "r2-n1", "r2-n3"}));
  EXPECT_EQ(expand_nodelist("x[5],y[1-2]"), V({"x5", "y1", "y2"}));
}

TEST(Nodelist, RefusesMalformedLists) {
  for (const char* bad : {"", "node[01-04", "node01-04]", "n[a-b]", "n[4-2]", "n[]", "a,,b", "n[1-2][", "n[[1]]",
                          "n[1-2,]", "n[1-9999999]", "r[1-1000]-n[1-1000]-x[1-2]"}) {
    try {
      expand_nodelist(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("SLURM_JOB_NODELIST"), std::string::npos) << e.what();
    }
  }
  // A huge range is refused before it is expanded.
  try {
    expand_nodelist("n[1-9999999]");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("range '1-9999999' too large"), std::string::npos) << e.what();
  }
}

TEST(RendezvousErrors, RankNotBelowWorldSize) {
  EXPECT_EQ(error_of({{"RANK", "3"}, {"WORLD_SIZE", "2"}}), "RANK=3 but WORLD_SIZE=2");
  EXPECT_EQ(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), "RANK=2 but WORLD_SIZE=2");
  EXPECT_EQ(error_of({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}),
            "OMPI_COMM_WORLD_RANK=4 but OMPI_COMM_WORLD_SIZE=4");
  EXPECT_EQ(error_of({{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_NODELIST", "a"}}),
            "SLURM_PROCID=9 but SLURM_NTASKS=2");
}

TEST(RendezvousErrors, LocalRankNotBelowWorldSize) {
  EXPECT_EQ(error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}}), "LOCAL_RANK=2 but WORLD_SIZE=2");
  EXPECT_EQ(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "5"}, {"SLURM_STEP_ID", "0"},
                      {"SLURM_JOB_NODELIST", "a"}}),
            "SLURM_LOCALID=5 but SLURM_NTASKS=2");
}

TEST(RendezvousErrors, HalfALauncher) {
  EXPECT_EQ(error_of({{"RANK", "0"}}), "RANK is set but WORLD_SIZE is not");
  EXPECT_EQ(error_of({{"WORLD_SIZE", "2"}}), "WORLD_SIZE is set but RANK is not");
  EXPECT_EQ(error_of({{"OMPI_COMM_WORLD_SIZE", "2"}}), "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not");
  EXPECT_EQ(error_of({{"SLURM_PROCID", "0"}}), "SLURM_PROCID is set but SLURM_NTASKS is not");
}

TEST(RendezvousErrors, NotIntegers) {
  EXPECT_EQ(error_of({{"RANK", "one"}, {"WORLD_SIZE", "2"}}), "RANK: expected an integer in [0, 2147483647], got 'one'");
  EXPECT_EQ(error_of({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}), "RANK: expected an integer in [0, 2147483647], got '-1'");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), "WORLD_SIZE: expected an integer in [1, 1048576], got '0'");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", ""}}), "WORLD_SIZE: expected an integer in [1, 1048576], got ''");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1.0"}}),
            "LOCAL_RANK: expected an integer in [0, 2147483647], got '1.0'");
}

TEST(RendezvousErrors, BadMaster) {
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}),
            "MASTER_PORT: expected an integer in [1, 65535], got '70000'");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "0"}}),
            "MASTER_PORT: expected an integer in [1, 65535], got '0'");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "http"}}),
            "MASTER_PORT: expected an integer in [1, 65535], got 'http'");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", ""}}), "MASTER_ADDR is set but empty");
}

TEST(RendezvousErrors, SlurmHostList) {
  EXPECT_EQ(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}}),
            "SLURM_JOB_NODELIST is not set (the master's host with SLURM_NTASKS=2); set MASTER_ADDR instead");
  EXPECT_EQ(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"},
                      {"SLURM_JOB_NODELIST", "node[01-"}}),
            "SLURM_JOB_NODELIST: unbalanced '[' in 'node[01-'");
}

TEST(RendezvousErrors, SlurmBatchScriptWithoutStep) {
  // sbatch -n 2 --wrap 'ddp_step_bench': the batch shell's variables, no step.
  EXPECT_EQ(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                      {"SLURM_JOB_NODELIST", "vm"}}),
            "SLURM_NTASKS=2 outside a job step (no SLURM_STEP_ID: the batch script itself): start the ranks with srun");
  // One task there is a world of 1.
  EXPECT_EQ(from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_NODELIST", "vm"}}).world_size, 1);
}

}  // namespace
}  // namespace threadburn
