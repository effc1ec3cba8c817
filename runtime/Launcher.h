//===- Launcher.h - rank, world and rendezvous from the launcher -*- C++ -*-===//
//
// A multi-process EP run learns its rank and world size from the variables
// its launcher sets (docs/runtime.md, "Launching"), in this order of
// precedence:
//
//   1. K3C_EP_RANK, K3C_EP_WORLD          k3c's own (k3-run's local launcher)
//   2. RANK, WORLD_SIZE, LOCAL_RANK        torchrun (and torch.distributed.launch)
//   3. OMPI_COMM_WORLD_RANK, _SIZE,        Open MPI's mpirun
//      OMPI_COMM_WORLD_LOCAL_RANK
//   4. SLURM_PROCID, SLURM_NTASKS,         Slurm's srun
//      SLURM_LOCALID
//
// Families 1 and 2 are explicit: a half-set family is an error, and when
// both are set they must agree. Families 3 and 4 are ambient (a whole
// allocation carries them, also around a launcher started inside it): they
// count only when no explicit family is set, both of their variables are set
// and their world is larger than 1.
//
// Rendezvous (how rank 0's NCCL id reaches the others): K3C_EP_ID_FILE when
// set; else TCP to K3C_EP_ADDR / K3C_EP_PORT, each falling back to
// MASTER_ADDR / MASTER_PORT. Under torchrun with TORCHELASTIC_USE_AGENT_STORE
// =True, torchrun's own store holds MASTER_PORT, so the default port is
// MASTER_PORT + 1.
//
// No LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_RUNTIME_LAUNCHER_H
#define K3C_RUNTIME_LAUNCHER_H

#include "runtime/Rendezvous.h"

#include <cstdint>
#include <functional>
#include <string>

namespace k3c::rt {

struct LaunchEnv {
  /// The family that set rank and world ("torchrun (RANK, WORLD_SIZE)", ...);
  /// empty when none did.
  std::string family;
  /// The variable that holds the world size (for messages: "WORLD_SIZE").
  std::string worldVar;
  int64_t rank = -1, world = 0;
  int64_t localRank = -1; ///< -1: the launcher set none
  IdRendezvous rendezvous;
  /// Which variables the rendezvous came from ("MASTER_ADDR/MASTER_PORT").
  std::string rendezvousFrom;
  bool launched() const { return world > 0; }
  /// "rank 1 of 4 (torchrun (RANK, WORLD_SIZE))".
  std::string describe() const;
};

/// Reads the variables through `get` (std::getenv; a table in the tests).
/// Throws k3c::Error naming the variables on a malformed value, a half-set
/// explicit family, a disagreement between the explicit families or a rank
/// outside [0, world).
using EnvLookup = std::function<const char *(const char *)>;
LaunchEnv readLaunchEnv(const EnvLookup &get);
LaunchEnv readLaunchEnv();

/// Checks a launched EP group against `--ep R`: the world sizes must agree,
/// and a group of more than one rank needs a rendezvous. Throws naming both.
void checkLaunch(const LaunchEnv &env, int64_t ranks);

/// The CUDA_VISIBLE_DEVICES value that gives this process the GPU of its
/// local rank: entry `localRank` of the current list (`visible`, null when
/// unset), or the ordinal itself when unset. Empty: leave it as it is (no
/// local rank, or the launcher already gave the process one GPU). Throws
/// when the local rank exceeds the list.
std::string deviceForLocalRank(int64_t localRank, const char *visible);

} // namespace k3c::rt

#endif // K3C_RUNTIME_LAUNCHER_H
