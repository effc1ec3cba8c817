//===- ExpertParallel.h - expert placement, transports, EP exchange -*- C++ -*-===//
//
// Expert parallelism (docs/runtime.md, "Expert parallelism"): the routed
// experts of every MoE layer have a home rank (contiguous blocks of ⌈E/R⌉);
// each step, the ranks exchange their per-expert routed-pair counts, plan the
// same placement (balanced: replicas of hot experts on ranks with spare
// capacity, so every rank computes the same number of pairs ±1), fetch replica
// weights from the home ranks, send each pair's latent vector to the rank
// that computes it and get the expert output back. No LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_RUNTIME_EXPERTPARALLEL_H
#define K3C_RUNTIME_EXPERTPARALLEL_H

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace k3c::rt {

/// Where each expert's routed pairs are computed this step.
struct Placement {
  int64_t ranks = 1, experts = 0;
  /// shares[e]: (rank, pairs) in the order the expert's pairs are assigned
  /// (global pair order: source rank, then the source's order).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> shares;
  /// Pairs each rank computes.
  std::vector<int64_t> computed;
  /// Replicas (non-home experts) each rank holds.
  std::vector<int64_t> replicas;
};

/// The home rank of expert e: contiguous blocks of ⌈E/R⌉ experts.
inline int64_t homeRank(int64_t e, int64_t experts, int64_t ranks) {
  int64_t per = (experts + ranks - 1) / ranks;
  return e / per;
}

/// The expert slots of one rank, per MoE layer: its home experts
/// [first, first + home) in slots [0, home), then room for replicas, up to
/// min(⌈E/R⌉, E − home) (at least one slot in all). What the runtime
/// allocates per stacked expert weight, and what k3-compile's deployment
/// plan counts.
struct ExpertSlots {
  int64_t first = 0, home = 0, slots = 0;
  int64_t replicas() const { return slots - home; }
};
inline ExpertSlots expertSlots(int64_t experts, int64_t ranks, int64_t rank) {
  ExpertSlots s;
  int64_t per = (experts + ranks - 1) / ranks;
  s.first = std::min(experts, rank * per);
  s.home = std::min(experts, s.first + per) - s.first;
  s.slots = std::max<int64_t>(1, s.home + std::min(per, experts - s.home));
  return s;
}

/// Plans one step from the global per-expert pair counts. Without balancing
/// every expert stays on its home rank. With balancing, pairs of experts on
/// ranks above the mean move to ranks below it (a new replica each time an
/// expert starts a share on another rank) until every rank computes
/// ⌊P/R⌋ or ⌈P/R⌉ pairs, never giving a rank more than ⌈E/R⌉ replicas; when
/// that budget is exhausted the remaining imbalance is kept. A replica is
/// made only for a share of at least `minReplicaPairs` pairs (fetching an
/// expert's weights must cost less than computing the pairs it moves), so
/// with a threshold above 1 the ranks end within about minReplicaPairs of
/// each other per expert left unmoved.
Placement planPlacement(const std::vector<int64_t> &load, int64_t ranks, bool balance,
                        int64_t minReplicaPairs = 1);

/// The smallest share worth a replica on a GPU: ⌈fetch time / time per
/// pair⌉ for an expert of `expertBytes` weight bytes (over the link at
/// `linkBytesPerSecond`) and `flopsPerPair` (at `flopsPerSecond`); at least 1.
int64_t replicaBreakEven(double expertBytes, double flopsPerPair, double linkBytesPerSecond,
                         double flopsPerSecond);

/// Moves bytes between the ranks of one EP group. Every call is collective:
/// all ranks call it in the same order. Failures (a rank that died, a
/// timeout, a NCCL error) throw k3c::Error on every rank.
class Transport {
public:
  virtual ~Transport() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  /// Rank r sends send[d] to every rank d and receives recv[s] from every s.
  virtual void allToAll(const std::vector<std::vector<uint8_t>> &send,
                        std::vector<std::vector<uint8_t>> &recv) = 0;
  /// Rank r sends sendCounts[d] bytes to each d from `send` (contiguous, in
  /// rank order) and receives recvCounts[s] bytes from each s into `recv`
  /// (the same layout). `device`: the pointers are CUDA device memory. The
  /// default stages through host messages; NCCL sends device buffers
  /// directly.
  virtual void allToAllBuffers(const void *send, const std::vector<size_t> &sendCounts, void *recv,
                               const std::vector<size_t> &recvCounts, bool device);
  /// Returns when every rank has called it (one byte to and from every
  /// rank): e.g. after loading weights, so that no rank's first MoE
  /// exchange waits out another rank's slower load.
  void barrier();
  /// A piece of a grouped exchange: `bytes` at `ptr`, to or from `peer`.
  struct Piece {
    int64_t peer = 0;
    void *ptr = nullptr;
    size_t bytes = 0;
  };
  /// Sends and receives every piece in one collective round, with no size
  /// messages: both sides know the pieces. Pieces between the same two ranks
  /// match in the order they are listed; a size mismatch throws. `device`:
  /// CUDA device pointers (NCCL moves them directly; the default stages
  /// them through host messages). allToAllBuffers is one piece per peer.
  virtual void exchangePieces(const std::vector<Piece> &sends, const std::vector<Piece> &recvs,
                              bool device);
  /// Marks the group failed (a rank's own error), so no rank waits forever.
  virtual void abort(const std::string &why) = 0;
  /// With deferDeviceWaits set, an exchange of device pieces is only
  /// enqueued on the runtime's stream (work enqueued after it runs after it)
  /// and flush() waits for all of them, with the same error and timeout
  /// checks as an exchange that waits. Nothing may block on the stream in
  /// between (a peer that died would hang it): the caller flushes before
  /// any host copy or synchronization. Host pieces always wait.
  bool deferDeviceWaits = false;
  virtual void flush() {}
  /// Bytes sent so far (for the dispatch/combine benchmark).
  int64_t bytesSent = 0;

protected:
  /// Throws unless every piece's peer is a rank of this group.
  void checkPeers(const std::vector<Piece> &sends, const std::vector<Piece> &recvs) const;
};

/// Ranks as threads of one process: a shared mailbox and a barrier with a
/// timeout. Create one hub, then one transport per rank.
class InProcessHub {
public:
  InProcessHub(int64_t ranks, std::chrono::milliseconds timeout = std::chrono::seconds(120));
  std::unique_ptr<Transport> transport(int64_t rank);

private:
  friend class InProcessTransport;
  void barrier(int64_t rank);
  int64_t ranks;
  std::chrono::milliseconds timeout;
  std::mutex mu;
  std::condition_variable cv;
  int64_t arrived = 0, generation = 0;
  std::string failure;
  std::vector<std::vector<std::vector<uint8_t>>> box; // [src][dst]
};

/// Counts of one rank's routed pairs per expert; `idx` is [T, K] i32.
std::vector<int64_t> countPairs(const int32_t *idx, int64_t pairs, int64_t experts);

} // namespace k3c::rt

#endif // K3C_RUNTIME_EXPERTPARALLEL_H
