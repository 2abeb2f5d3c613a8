// Launch detection from the launchers' variables (a table, no process started): what each
// launcher's variables give, and the one line a missing or contradictory variable ends in.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "harness/driver/launch.h"

namespace {

using Env = std::map<std::string, std::string>;

zb::Status detect(const Env& env, zb::Launch* out) {
  return zb::detect_launch(
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      out);
}

const Env kTorchrun{{"RANK", "1"},        {"WORLD_SIZE", "4"},           {"LOCAL_RANK", "1"},
                    {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29500"}};
const Env kSlurm{{"SLURM_PROCID", "3"},      {"SLURM_NTASKS", "4"},  {"SLURM_LOCALID", "1"},
                 {"SLURM_STEP_ID", "2"},     {"SLURM_JOB_ID", "1000"},
                 {"SLURM_STEP_NODELIST", "gpu[07-08,12],cpu1"}};

Env with(Env env, const std::string& name, const char* value) {
  if (value)
    env[name] = value;
  else
    env.erase(name);
  return env;
}

}  // namespace

TEST(Launch, NoVariablesIsOneProcess) {
  zb::Launch l;
  ASSERT_TRUE(detect({}, &l));
  EXPECT_EQ(l.kind, zb::LaunchKind::none);
  EXPECT_EQ(l.size, 1);
}

TEST(Launch, AnMpiLauncherWinsOverEveryOther) {
  zb::Launch l;
  ASSERT_TRUE(detect(with(kTorchrun, "OMPI_COMM_WORLD_RANK", "3"), &l));
  EXPECT_EQ(l.kind, zb::LaunchKind::mpi);
  EXPECT_EQ(l.rank, 3);
}

TEST(Launch, AnMpiLaunchersLocalSizeIsReadWhereItSaysOne) {
  zb::Launch l;
  ASSERT_TRUE(detect({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}, &l));
  EXPECT_EQ(l.local_size, 4);
  ASSERT_TRUE(detect({{"PMI_RANK", "1"}, {"MPI_LOCALNRANKS", "3"}}, &l));  // MPICH's hydra
  EXPECT_EQ(l.local_size, 3);
  // PMIx under srun says nothing before MPI starts; nor does a value that is no count.
  ASSERT_TRUE(detect({{"PMIX_RANK", "1"}}, &l));
  EXPECT_EQ(l.local_size, -1);
  ASSERT_TRUE(detect({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "x"}}, &l));
  EXPECT_EQ(l.local_size, -1);
}

TEST(Launch, TorchrunVariablesGiveRankSizeLocalRankAndAddress) {
  zb::Launch l;
  ASSERT_TRUE(detect(kTorchrun, &l));
  EXPECT_EQ(l.kind, zb::LaunchKind::torchrun);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_size, 2);
  EXPECT_EQ(l.address(), "10.0.0.7:29500");
  // torchrun's agent keeps its store on MASTER_PORT: the control plane takes the next port.
  ASSERT_TRUE(detect(with(kTorchrun, "TORCHELASTIC_USE_AGENT_STORE", "True"), &l));
  EXPECT_EQ(l.port, 29501);
  ASSERT_TRUE(detect(with(kTorchrun, "MASTER_ADDR", "fd00::7"), &l));
  EXPECT_EQ(l.address(), "[fd00::7]:29500");
}

TEST(Launch, SlurmWithoutPmiTakesTheStepsFirstHostAndAPortFromItsIds) {
  zb::Launch l;
  ASSERT_TRUE(detect(kSlurm, &l));
  EXPECT_EQ(l.kind, zb::LaunchKind::slurm);
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.host, "gpu07");
  EXPECT_EQ(l.port, zb::slurm_port(1000, 2));
  EXPECT_NE(zb::slurm_port(1000, 2), zb::slurm_port(1000, 3));
  ASSERT_TRUE(detect(with(with(kSlurm, "MASTER_ADDR", "head"), "MASTER_PORT", "4000"), &l));
  EXPECT_EQ(l.address(), "head:4000");
}

TEST(Launch, FirstSlurmHostReadsHostLists) {
  EXPECT_EQ(zb::first_slurm_host("node[07-09,12],gpu3"), "node07");
  EXPECT_EQ(zb::first_slurm_host("gpu3,node[1-2]"), "gpu3");
  EXPECT_EQ(zb::first_slurm_host("solo"), "solo");
  EXPECT_EQ(zb::first_slurm_host(""), "");
}

// Every row is one line naming the variable (and, for a contradiction, both).
TEST(Launch, AMissingOrContradictoryVariableIsOneLineNamingIt) {
  const std::vector<std::pair<Env, std::string>> rows = {
      {with(kTorchrun, "WORLD_SIZE", nullptr), "torchrun/Kubernetes launch: WORLD_SIZE is not set"},
      {with(kTorchrun, "RANK", nullptr), "torchrun/Kubernetes launch: RANK is not set"},
      {with(kTorchrun, "MASTER_ADDR", nullptr), "MASTER_ADDR is not set"},
      {with(kTorchrun, "MASTER_PORT", nullptr), "MASTER_PORT is not set"},
      {with(kTorchrun, "MASTER_PORT", "70000"), "MASTER_PORT=70000 is not a TCP port"},
      {with(kTorchrun, "RANK", "4"), "RANK=4 contradicts WORLD_SIZE=4"},
      {with(kTorchrun, "RANK", "one"), "RANK='one' is not a whole number"},
      {with(kTorchrun, "LOCAL_RANK", "2"), "LOCAL_RANK=2 contradicts LOCAL_WORLD_SIZE=2"},
      {with(kTorchrun, "LOCAL_WORLD_SIZE", "8"), "LOCAL_WORLD_SIZE=8 contradicts WORLD_SIZE=4"},
      {with(kSlurm, "SLURM_NTASKS", nullptr), "Slurm (no PMI) launch: SLURM_NTASKS is not set"},
      {with(kSlurm, "SLURM_LOCALID", nullptr), "SLURM_LOCALID is not set"},
      {with(kSlurm, "SLURM_PROCID", "9"), "SLURM_PROCID=9 contradicts SLURM_NTASKS=4"},
      {with(kSlurm, "SLURM_STEP_NUM_TASKS", "2"), "SLURM_NTASKS=4 contradicts SLURM_STEP_NUM_TASKS=2"},
      {with(kSlurm, "SLURM_STEP_NODELIST", ""), "SLURM_JOB_NODELIST='' names no host"},
  };
  for (const auto& [env, expected] : rows) {
    zb::Launch l;
    zb::Status s = detect(env, &l);
    ASSERT_FALSE(s) << expected;
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  }
}

TEST(Launch, LauncherRankIsTheFirstRankVariableSet) {
  Env env{{"PMI_RANK", "2"}, {"RANK", "5"}};
  auto lookup = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(zb::launcher_rank(lookup), 2);
  env.erase("PMI_RANK");
  EXPECT_EQ(zb::launcher_rank(lookup), 5);
  env.clear();
  EXPECT_EQ(zb::launcher_rank(lookup), -1);
}
