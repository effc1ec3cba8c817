//===- ExpertParallel.cpp - expert placement, in-process transport -------===//

#include "runtime/ExpertParallel.h"

#include "support/Common.h"
#include "runtime/Cuda.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace k3c::rt {

Placement planPlacement(const std::vector<int64_t> &load, int64_t ranks, bool balance,
                        int64_t minReplicaPairs) {
  if (ranks < 1)
    throw Error("expert parallelism needs at least one rank, got " + std::to_string(ranks));
  if (minReplicaPairs < 1)
    throw Error("the smallest replica share must be at least 1 pair, got " +
                std::to_string(minReplicaPairs));
  Placement p;
  p.ranks = ranks;
  p.experts = static_cast<int64_t>(load.size());
  int64_t E = p.experts, per = (E + ranks - 1) / ranks;
  p.shares.assign(E, {});
  p.computed.assign(ranks, 0);
  p.replicas.assign(ranks, 0);
  for (int64_t e = 0; e < E; ++e) {
    if (load[e] < 0)
      throw Error("expert " + std::to_string(e) + " has a negative pair count");
    p.computed[homeRank(e, E, ranks)] += load[e];
  }
  // Targets: ⌈P/R⌉ for the first P mod R ranks, ⌊P/R⌋ for the rest.
  int64_t total = std::accumulate(load.begin(), load.end(), int64_t{0});
  std::vector<int64_t> target(ranks, total / ranks);
  for (int64_t r = 0; r < total % ranks; ++r)
    ++target[r];
  // What stays home, per expert (reduced as pairs move away).
  std::vector<int64_t> home(load);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> away(E);
  if (balance && ranks > 1) {
    // Donors: ranks above target; receivers: ranks below. A donor gives its
    // experts' pairs, the largest expert first.
    int64_t recv = 0;
    auto nextReceiver = [&] {
      while (recv < ranks && p.computed[recv] >= target[recv])
        ++recv;
    };
    for (int64_t d = 0; d < ranks; ++d) {
      if (p.computed[d] <= target[d])
        continue;
      std::vector<int64_t> mine;
      for (int64_t e = d * per; e < std::min(E, (d + 1) * per); ++e)
        mine.push_back(e);
      std::stable_sort(mine.begin(), mine.end(),
                       [&](int64_t a, int64_t b) { return home[a] > home[b]; });
      for (int64_t e : mine) {
        while (p.computed[d] > target[d] && home[e] > 0) {
          nextReceiver();
          // Skip receivers whose replica budget is spent.
          while (recv < ranks && p.replicas[recv] >= per &&
                 (away[e].empty() || away[e].back().first != recv)) {
            ++recv;
            nextReceiver();
          }
          if (recv >= ranks)
            break;
          int64_t n = std::min({p.computed[d] - target[d], target[recv] - p.computed[recv], home[e]});
          bool fresh = away[e].empty() || away[e].back().first != recv;
          // A new replica costs a copy of the expert's weights: worth it only
          // for a share of at least minReplicaPairs pairs. The donor's
          // experts come largest first, so no later one can do better.
          if (fresh && n < minReplicaPairs) {
            // A receiver short by less than that is left short; else the
            // donor's excess or this expert's pairs are too few.
            if (target[recv] - p.computed[recv] < minReplicaPairs &&
                std::min(p.computed[d] - target[d], home[e]) >= minReplicaPairs) {
              ++recv;
              continue;
            }
            break;
          }
          if (fresh) {
            away[e].push_back({recv, 0});
            ++p.replicas[recv];
          }
          away[e].back().second += n;
          home[e] -= n;
          p.computed[d] -= n;
          p.computed[recv] += n;
        }
      }
    }
  }
  for (int64_t e = 0; e < E; ++e) {
    if (home[e] > 0 || away[e].empty())
      p.shares[e].push_back({homeRank(e, E, ranks), home[e]});
    for (auto &s : away[e])
      p.shares[e].push_back(s);
  }
  return p;
}

int64_t replicaBreakEven(double expertBytes, double flopsPerPair, double linkBytesPerSecond,
                         double flopsPerSecond) {
  if (!(expertBytes >= 0) || !(flopsPerPair > 0) || !(linkBytesPerSecond > 0) ||
      !(flopsPerSecond > 0))
    throw Error("replicaBreakEven: sizes and rates must be positive");
  double pairs = std::ceil((expertBytes / linkBytesPerSecond) / (flopsPerPair / flopsPerSecond));
  return std::max<int64_t>(1, static_cast<int64_t>(std::min(pairs, 1e15)));
}

void Transport::allToAllBuffers(const void *send, const std::vector<size_t> &sendCounts,
                                void *recv, const std::vector<size_t> &recvCounts, bool device) {
  const int64_t R = size();
  if (static_cast<int64_t>(sendCounts.size()) != R || static_cast<int64_t>(recvCounts.size()) != R)
    throw Error("EP: allToAllBuffers needs one count per rank (" + std::to_string(R) + ")");
  std::vector<Piece> out, in;
  size_t so = 0, ro = 0;
  for (int64_t p = 0; p < R; ++p) {
    if (sendCounts[p])
      out.push_back({p, static_cast<uint8_t *>(const_cast<void *>(send)) + so, sendCounts[p]});
    if (recvCounts[p])
      in.push_back({p, static_cast<uint8_t *>(recv) + ro, recvCounts[p]});
    so += sendCounts[p];
    ro += recvCounts[p];
  }
  exchangePieces(out, in, device);
}

void Transport::barrier() {
  const int64_t R = size();
  std::vector<uint8_t> out(R, 1), in(R, 0);
  std::vector<size_t> ones(R, 1);
  allToAllBuffers(out.data(), ones, in.data(), ones, /*device=*/false);
}

void Transport::checkPeers(const std::vector<Piece> &sends,
                           const std::vector<Piece> &recvs) const {
  for (const auto *list : {&sends, &recvs})
    for (const Piece &p : *list)
      if (p.peer < 0 || p.peer >= size())
        throw Error("EP: a piece for rank " + std::to_string(p.peer) + " in a group of " +
                    std::to_string(size()));
}

void Transport::exchangePieces(const std::vector<Piece> &sends, const std::vector<Piece> &recvs,
                               bool device) {
  const int64_t R = size();
  checkPeers(sends, recvs);
  std::vector<std::vector<uint8_t>> out(R), in;
  for (const Piece &p : sends) {
    auto &m = out[p.peer];
    size_t at = m.size();
    m.resize(at + p.bytes);
    if (p.bytes == 0)
      continue;
    if (device)
      cuda::download(m.data() + at, reinterpret_cast<cuda::CUdeviceptr>(p.ptr), p.bytes);
    else
      std::memcpy(m.data() + at, p.ptr, p.bytes);
  }
  allToAll(out, in);
  std::vector<size_t> at(R, 0);
  for (const Piece &p : recvs) {
    if (at[p.peer] + p.bytes > in[p.peer].size())
      throw Error("EP: rank " + std::to_string(p.peer) + " sent " +
                  std::to_string(in[p.peer].size()) + " bytes where more were expected");
    if (p.bytes && device)
      cuda::upload(reinterpret_cast<cuda::CUdeviceptr>(p.ptr), in[p.peer].data() + at[p.peer],
                   p.bytes);
    else if (p.bytes)
      std::memcpy(p.ptr, in[p.peer].data() + at[p.peer], p.bytes);
    at[p.peer] += p.bytes;
  }
  for (int64_t s = 0; s < R; ++s)
    if (at[s] != in[s].size())
      throw Error("EP: rank " + std::to_string(s) + " sent " + std::to_string(in[s].size()) +
                  " bytes where " + std::to_string(at[s]) + " were expected");
}

std::vector<int64_t> countPairs(const int32_t *idx, int64_t pairs, int64_t experts) {
  std::vector<int64_t> c(experts, 0);
  for (int64_t i = 0; i < pairs; ++i) {
    if (idx[i] < 0 || idx[i] >= experts)
      throw Error("router chose expert " + std::to_string(idx[i]) + " outside [0, " +
                  std::to_string(experts) + ")");
    ++c[idx[i]];
  }
  return c;
}

class InProcessTransport : public Transport {
public:
  InProcessTransport(InProcessHub &hub, int64_t rank) : hub(hub), me(rank) {}
  int64_t rank() const override { return me; }
  int64_t size() const override { return hub.ranks; }
  void allToAll(const std::vector<std::vector<uint8_t>> &send,
                std::vector<std::vector<uint8_t>> &recv) override {
    if (static_cast<int64_t>(send.size()) != hub.ranks)
      throw Error("EP rank " + std::to_string(me) + ": all-to-all with " +
                  std::to_string(send.size()) + " messages for " + std::to_string(hub.ranks) +
                  " ranks");
    {
      std::lock_guard<std::mutex> g(hub.mu);
      for (int64_t d = 0; d < hub.ranks; ++d) {
        hub.box[me][d] = send[d];
        bytesSent += static_cast<int64_t>(send[d].size());
      }
    }
    hub.barrier(me);
    recv.assign(hub.ranks, {});
    {
      std::lock_guard<std::mutex> g(hub.mu);
      for (int64_t s = 0; s < hub.ranks; ++s)
        recv[s] = std::move(hub.box[s][me]);
    }
    hub.barrier(me);
  }
  void abort(const std::string &why) override {
    std::lock_guard<std::mutex> g(hub.mu);
    if (hub.failure.empty())
      hub.failure = "EP rank " + std::to_string(me) + " failed: " + why;
    hub.cv.notify_all();
  }

private:
  InProcessHub &hub;
  int64_t me;
};

InProcessHub::InProcessHub(int64_t ranks, std::chrono::milliseconds timeout)
    : ranks(ranks), timeout(timeout) {
  if (ranks < 1)
    throw Error("expert parallelism needs at least one rank, got " + std::to_string(ranks));
  box.assign(ranks, std::vector<std::vector<uint8_t>>(ranks));
}

std::unique_ptr<Transport> InProcessHub::transport(int64_t rank) {
  return std::make_unique<InProcessTransport>(*this, rank);
}

void InProcessHub::barrier(int64_t rank) {
  std::unique_lock<std::mutex> g(mu);
  if (!failure.empty())
    throw Error(failure);
  int64_t gen = generation;
  if (++arrived == ranks) {
    arrived = 0;
    ++generation;
    cv.notify_all();
    return;
  }
  bool ok = cv.wait_for(g, timeout, [&] { return generation != gen || !failure.empty(); });
  if (!failure.empty())
    throw Error(failure);
  if (!ok) {
    failure = "EP rank " + std::to_string(rank) + ": timed out after " +
              std::to_string(timeout.count()) + " ms waiting for the other ranks";
    cv.notify_all();
    throw Error(failure);
  }
}

} // namespace k3c::rt
