//===- Launcher.cpp - rank, world and rendezvous from the launcher --------===//

#include "runtime/Launcher.h"

#include "support/Common.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <vector>

namespace k3c::rt {

namespace {

/// A launcher family: its variables and whether it is explicit.
struct Family {
  const char *name, *rankVar, *worldVar, *localVar;
  bool explicit_;
};

const Family kFamilies[] = {
    {"k3c (K3C_EP_RANK, K3C_EP_WORLD)", "K3C_EP_RANK", "K3C_EP_WORLD", nullptr, true},
    {"torchrun (RANK, WORLD_SIZE)", "RANK", "WORLD_SIZE", "LOCAL_RANK", true},
    {"Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)", "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", false},
    {"Slurm (SLURM_PROCID, SLURM_NTASKS)", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", false},
};

/// A non-negative decimal integer, or an error naming the variable.
int64_t parseCount(const char *var, const char *value) {
  std::string v = value;
  bool digits = !v.empty() && v.size() <= 9 &&
                std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits)
    throw Error(std::string(var) + "='" + v + "' is not a non-negative integer");
  return std::stoll(v);
}

struct Found {
  const Family *f = nullptr;
  int64_t rank = -1, world = 0, local = -1;
};

} // namespace

std::string LaunchEnv::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(world) + " (" + family + ")";
}

LaunchEnv readLaunchEnv(const EnvLookup &get) {
  auto val = [&](const char *name) -> const char * {
    const char *v = name ? get(name) : nullptr;
    return v && *v ? v : nullptr; // an empty variable counts as unset
  };
  std::vector<Found> found;
  for (const Family &f : kFamilies) {
    const char *r = val(f.rankVar), *w = val(f.worldVar);
    if (!r && !w)
      continue;
    if (!r || !w) {
      if (!f.explicit_)
        continue; // e.g. SLURM_NTASKS of an allocation, outside any srun step
      throw Error(std::string(r ? f.rankVar : f.worldVar) + " is set but " +
                  (r ? f.worldVar : f.rankVar) + " is not (" + f.name +
                  ": a launcher sets both)");
    }
    Found x;
    x.f = &f;
    x.rank = parseCount(f.rankVar, r);
    x.world = parseCount(f.worldVar, w);
    if (const char *l = val(f.localVar))
      x.local = parseCount(f.localVar, l);
    if (!f.explicit_ && x.world <= 1)
      continue;
    if (x.world < 1)
      throw Error(std::string(f.worldVar) + "=0: a group has at least one rank");
    if (x.rank >= x.world)
      throw Error(std::string(f.rankVar) + "=" + r + " is outside [0, " + f.worldVar + "=" + w +
                  ")");
    found.push_back(x);
  }
  LaunchEnv env;
  std::optional<Found> use;
  for (const Found &x : found) {
    if (!use) {
      use = x;
      continue;
    }
    if (!x.f->explicit_ || !use->f->explicit_)
      continue; // an explicit family overrides the ambient ones
    if (x.rank != use->rank || x.world != use->world)
      throw Error(std::string("the launcher variables disagree: ") + use->f->rankVar + "=" +
                  std::to_string(use->rank) + " " + use->f->worldVar + "=" +
                  std::to_string(use->world) + " but " + x.f->rankVar + "=" +
                  std::to_string(x.rank) + " " + x.f->worldVar + "=" + std::to_string(x.world) +
                  " (unset one family)");
    if (use->local < 0)
      use->local = x.local; // the same group; torchrun's LOCAL_RANK picks the GPU
  }
  if (use) {
    env.family = use->f->name;
    env.worldVar = use->f->worldVar;
    env.rank = use->rank;
    env.world = use->world;
    env.localRank = use->local;
  }
  // The rendezvous.
  if (const char *file = val("K3C_EP_ID_FILE")) {
    env.rendezvous.idFile = file;
    env.rendezvousFrom = "K3C_EP_ID_FILE";
    return env;
  }
  const char *addrVar = val("K3C_EP_ADDR") ? "K3C_EP_ADDR" : "MASTER_ADDR";
  const char *portVar = val("K3C_EP_PORT") ? "K3C_EP_PORT" : "MASTER_PORT";
  const char *addr = val(addrVar), *port = val(portVar);
  if (!addr && !port)
    return env;
  if (!addr || !port)
    throw Error(std::string(addr ? portVar : addrVar) + " is not set but " +
                (addr ? addrVar : portVar) +
                " is (the TCP rendezvous needs rank 0's address and port)");
  env.rendezvous.host = addr;
  env.rendezvous.port = parsePort(port, portVar);
  env.rendezvousFrom = std::string(addrVar) + "/" + portVar;
  if (std::string(portVar) == "MASTER_PORT") {
    const char *agent = val("TORCHELASTIC_USE_AGENT_STORE");
    if (agent && std::string(agent) == "True") {
      // torchrun's agent serves its own store on MASTER_PORT.
      if (env.rendezvous.port == 65535)
        throw Error("MASTER_PORT=65535 is held by torchrun's store and there is no next port; "
                    "set K3C_EP_PORT");
      ++env.rendezvous.port;
      env.rendezvousFrom += " + 1 (torchrun's agent store holds MASTER_PORT)";
    }
  }
  return env;
}

LaunchEnv readLaunchEnv() {
  return readLaunchEnv([](const char *name) { return std::getenv(name); });
}

void checkLaunch(const LaunchEnv &env, int64_t ranks) {
  if (!env.launched())
    return;
  if (env.world != ranks)
    throw Error("--ep " + std::to_string(ranks) + " but " + env.worldVar + "=" +
                std::to_string(env.world) + " (" + env.family +
                "): the launcher's world size must equal the EP ranks");
  if (env.world > 1 && env.rendezvous.empty())
    throw Error(env.describe() + " needs a rendezvous: set MASTER_ADDR and MASTER_PORT (rank 0 "
                                 "listens there, the others connect) or K3C_EP_ID_FILE (a path "
                                 "every rank can read)");
}

std::string deviceForLocalRank(int64_t localRank, const char *visible) {
  if (localRank < 0)
    return "";
  if (!visible)
    return std::to_string(localRank);
  std::vector<std::string> list;
  std::string v = visible;
  for (size_t a = 0, b; a <= v.size(); a = b + 1) {
    b = v.find(',', a);
    if (b == std::string::npos)
      b = v.size();
    if (b > a)
      list.push_back(v.substr(a, b - a));
  }
  if (list.size() == 1)
    return ""; // the launcher gave this process its GPU already
  if (localRank >= static_cast<int64_t>(list.size()))
    throw Error("local rank " + std::to_string(localRank) + " has no GPU: CUDA_VISIBLE_DEVICES='" +
                v + "' lists " + std::to_string(list.size()));
  return list[localRank];
}

} // namespace k3c::rt
