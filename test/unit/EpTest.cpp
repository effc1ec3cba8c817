//===- EpTest.cpp - expert placement planner and in-process transport ----===//

#include "runtime/ExpertParallel.h"
#include "support/Common.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>

using namespace k3c;
using namespace k3c::rt;

namespace {

/// Checks the planner's invariants; returns max - min computed pairs.
int64_t checkPlan(const Placement &p, const std::vector<int64_t> &load, bool balance) {
  int64_t E = static_cast<int64_t>(load.size()), R = p.ranks, per = (E + R - 1) / R;
  std::vector<int64_t> computed(R, 0), replicas(R, 0);
  for (int64_t e = 0; e < E; ++e) {
    int64_t sum = 0;
    for (auto [r, n] : p.shares[e]) {
      EXPECT_GE(r, 0);
      EXPECT_LT(r, R);
      EXPECT_GE(n, 0);
      sum += n;
      computed[r] += n;
      if (r != homeRank(e, E, R))
        ++replicas[r];
    }
    EXPECT_EQ(sum, load[e]) << "expert " << e << " pairs lost or duplicated";
    if (!balance) {
      EXPECT_EQ(p.shares[e].size(), 1u);
      EXPECT_EQ(p.shares[e][0].first, homeRank(e, E, R));
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    EXPECT_EQ(computed[r], p.computed[r]);
    EXPECT_EQ(replicas[r], p.replicas[r]);
    EXPECT_LE(replicas[r], per) << "rank " << r << " holds more than ceil(E/R) replicas";
  }
  auto [mn, mx] = std::minmax_element(computed.begin(), computed.end());
  return *mx - *mn;
}

std::vector<int64_t> uniformLoad(int64_t E, int64_t pairs, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<int64_t> l(E, 0);
  for (int64_t i = 0; i < pairs; ++i)
    ++l[g() % E];
  return l;
}

std::vector<int64_t> zipfLoad(int64_t E, int64_t pairs, double s, uint64_t seed) {
  std::vector<double> w(E);
  for (int64_t e = 0; e < E; ++e)
    w[e] = 1.0 / std::pow(static_cast<double>(e + 1), s);
  std::mt19937_64 g(seed);
  std::discrete_distribution<int64_t> d(w.begin(), w.end());
  std::vector<int64_t> l(E, 0);
  for (int64_t i = 0; i < pairs; ++i)
    ++l[d(g)];
  return l;
}

} // namespace

TEST(Placement, HomeRanksAreContiguousBlocks) {
  EXPECT_EQ(homeRank(0, 384, 8), 0);
  EXPECT_EQ(homeRank(47, 384, 8), 0);
  EXPECT_EQ(homeRank(48, 384, 8), 1);
  EXPECT_EQ(homeRank(383, 384, 8), 7);
  EXPECT_EQ(homeRank(15, 16, 3), 2); // ceil(16/3) = 6: 0..5, 6..11, 12..15
}

TEST(Placement, WithoutBalancingExpertsStayHome) {
  for (int64_t R : {1, 2, 4, 8}) {
    auto load = zipfLoad(384, 8 * 4096, 1.2, 1);
    Placement p = planPlacement(load, R, false);
    checkPlan(p, load, false);
    for (int64_t r = 0; r < R; ++r)
      EXPECT_EQ(p.replicas[r], 0);
  }
}

TEST(Placement, UniformRoutingBalancesToOne) {
  for (int64_t R : {2, 4, 8})
    for (uint64_t seed : {1, 2, 3}) {
      auto load = uniformLoad(384, 8 * 512, seed);
      EXPECT_LE(checkPlan(planPlacement(load, R, true), load, true), 1) << "R " << R;
    }
}

TEST(Placement, ZipfSkewBalancesToOne) {
  for (int64_t R : {2, 4, 8})
    for (double s : {0.8, 1.2, 2.0}) {
      auto load = zipfLoad(384, 8 * 4096, s, 7);
      Placement unbalanced = planPlacement(load, R, false);
      int64_t before = checkPlan(unbalanced, load, false);
      int64_t after = checkPlan(planPlacement(load, R, true), load, true);
      EXPECT_LE(after, 1) << "R " << R << " s " << s;
      EXPECT_GT(before, 100) << "the skewed routing should be unbalanced without planning";
    }
}

TEST(Placement, OneHotExpertIsSpreadOverAllRanks) {
  for (int64_t R : {2, 4, 8}) {
    std::vector<int64_t> load(384, 0);
    load[5] = 8 * 1000 + 3; // every pair routed to expert 5
    Placement p = planPlacement(load, R, true);
    EXPECT_LE(checkPlan(p, load, true), 1);
    EXPECT_EQ(static_cast<int64_t>(p.shares[5].size()), R);
    for (int64_t r = 1; r < R; ++r)
      EXPECT_EQ(p.replicas[r], 1);
  }
}

TEST(Placement, ReplicaBudgetIsRespectedWhenTight) {
  // 4 experts over 4 ranks: ceil(E/R) = 1 replica per rank, one hot expert
  // plus a warm one: balance as far as the budget allows, never beyond it.
  std::vector<int64_t> load = {1000, 0, 0, 600};
  Placement p = planPlacement(load, 4, true);
  checkPlan(p, load, true);
  for (int64_t r = 0; r < 4; ++r)
    EXPECT_LE(p.replicas[r], 1);
}

TEST(Placement, ReplicasOnlyForSharesWorthTheirFetch) {
  // Decode-sized steps (16 tokens x top 16 over 256 experts): with a
  // threshold above any expert's load nothing is replicated, and the plan is
  // the home-only one.
  for (int64_t R : {2, 4}) {
    auto load = zipfLoad(256, 16 * 16, 1.2, 3);
    int64_t hottest = *std::max_element(load.begin(), load.end());
    Placement p = planPlacement(load, R, true, hottest + 1);
    checkPlan(p, load, true);
    Placement home = planPlacement(load, R, false);
    for (int64_t r = 0; r < R; ++r) {
      EXPECT_EQ(p.replicas[r], 0) << "R " << R;
      EXPECT_EQ(p.computed[r], home.computed[r]);
    }
  }
  // Prefill-sized skewed steps: every replica share holds at least the
  // threshold, and the ranks still end within the threshold of each other
  // (the first-fit only stops short of a share smaller than it).
  for (int64_t R : {2, 4, 8})
    for (int64_t minPairs : {2, 50, 200}) {
      auto load = zipfLoad(384, 8 * 4096, 1.2, 7);
      Placement p = planPlacement(load, R, true, minPairs);
      int64_t spread = checkPlan(p, load, true);
      // A replica share starts at the threshold or above and only grows.
      for (int64_t e = 0; e < 384; ++e)
        for (auto [r, n] : p.shares[e]) {
          if (r != homeRank(e, 384, R)) {
            EXPECT_GE(n, minPairs) << "expert " << e;
          }
        }
      int64_t unbalanced = checkPlan(planPlacement(load, R, false), load, false);
      EXPECT_LT(spread, unbalanced) << "R " << R << " min " << minPairs;
      EXPECT_LE(spread, 2 * R * minPairs) << "R " << R << " min " << minPairs;
    }
  // One hot expert: spread in shares of at least the threshold.
  std::vector<int64_t> load(64, 0);
  load[0] = 1000;
  Placement p = planPlacement(load, 4, true, 200);
  EXPECT_EQ(checkPlan(p, load, true), 0);
  EXPECT_EQ(p.shares[0].size(), 4u);
  // Shares of 250 are below a 300-pair threshold: the expert stays home.
  p = planPlacement(load, 4, true, 300);
  EXPECT_EQ(checkPlan(p, load, true), 1000);
  EXPECT_THROW(planPlacement(load, 4, true, 0), Error);
}

TEST(Placement, ReplicaBreakEven) {
  // K3's expert: 17.55 MB, 3 x 3072 x 3584 weights -> 66 MFLOP a pair;
  // 250 GB/s and 200 TFLOP/s: 70.2 us against 0.33 us a pair.
  EXPECT_EQ(replicaBreakEven(17.55e6, 2.0 * 3 * 3072 * 3584, 250e9, 200e12), 213);
  EXPECT_EQ(replicaBreakEven(0, 1, 1, 1), 1);
  EXPECT_THROW(replicaBreakEven(1, 0, 1, 1), Error);
}

TEST(Placement, EmptyStepAndBadInput) {
  std::vector<int64_t> load(16, 0);
  EXPECT_EQ(checkPlan(planPlacement(load, 4, true), load, true), 0);
  EXPECT_THROW(planPlacement(load, 0, true), Error);
  load[3] = -1;
  EXPECT_THROW(planPlacement(load, 2, true), Error);
  int32_t idx[3] = {0, 7, 16};
  EXPECT_THROW(countPairs(idx, 3, 16), Error);
  EXPECT_EQ(countPairs(idx, 2, 16)[7], 1);
}

TEST(InProcessTransport, AllToAllDeliversEveryMessage) {
  for (int64_t R : {1, 2, 4}) {
    InProcessHub hub(R);
    std::vector<std::vector<std::vector<uint8_t>>> got(R);
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < R; ++r)
      threads.emplace_back([&, r] {
        auto t = hub.transport(r);
        for (int round = 0; round < 3; ++round) {
          std::vector<std::vector<uint8_t>> send(R);
          for (int64_t d = 0; d < R; ++d)
            send[d].assign(static_cast<size_t>(r + d + round), static_cast<uint8_t>(16 * r + d));
          t->allToAll(send, got[r]);
        }
      });
    for (auto &t : threads)
      t.join();
    for (int64_t r = 0; r < R; ++r)
      for (int64_t s = 0; s < R; ++s) {
        ASSERT_EQ(got[r][s].size(), static_cast<size_t>(s + r + 2));
        for (uint8_t b : got[r][s])
          EXPECT_EQ(b, static_cast<uint8_t>(16 * s + r));
      }
  }
}

TEST(InProcessTransport, PiecesMatchInOrderWithoutSizeMessages) {
  // Rank r sends rank d pieces of sizes 1..(r+d+1) filled with (r, d, piece);
  // the receiver lists the same pieces into separate buffers.
  const int64_t R = 3;
  InProcessHub hub(R);
  std::vector<std::vector<std::vector<uint8_t>>> got(R); // [me][piece]
  std::vector<std::string> errors(R);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < R; ++r)
    threads.emplace_back([&, r] {
      auto t = hub.transport(r);
      std::vector<std::vector<uint8_t>> out;
      std::vector<Transport::Piece> sends, recvs;
      for (int64_t d = 0; d < R; ++d)
        for (int64_t j = 0; j <= r + d; ++j)
          out.emplace_back(static_cast<size_t>(j + 1), static_cast<uint8_t>(100 * r + 10 * d + j));
      for (int64_t d = 0, at = 0; d < R; ++d)
        for (int64_t j = 0; j <= r + d; ++j, ++at)
          sends.push_back({d, out[at].data(), out[at].size()});
      for (int64_t s = 0; s < R; ++s)
        for (int64_t j = 0; j <= s + r; ++j)
          got[r].emplace_back(static_cast<size_t>(j + 1), 0);
      for (int64_t s = 0, at = 0; s < R; ++s)
        for (int64_t j = 0; j <= s + r; ++j, ++at)
          recvs.push_back({s, got[r][at].data(), got[r][at].size()});
      try {
        t->exchangePieces(sends, recvs, false);
      } catch (const Error &e) {
        errors[r] = e.what();
      }
    });
  for (auto &t : threads)
    t.join();
  for (int64_t r = 0; r < R; ++r) {
    EXPECT_EQ(errors[r], "");
    for (int64_t s = 0, at = 0; s < R; ++s)
      for (int64_t j = 0; j <= s + r; ++j, ++at)
        for (uint8_t b : got[r][at])
          EXPECT_EQ(b, static_cast<uint8_t>(100 * s + 10 * r + j)) << r << " " << s << " " << j;
  }
}

TEST(InProcessTransport, PiecesOfTheWrongSizeAreAnError) {
  InProcessHub hub(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto t = hub.transport(r);
      std::vector<uint8_t> out(8, 1), in(r == 0 ? 4 : 8);
      try {
        t->exchangePieces({{1 - r, out.data(), out.size()}}, {{1 - r, in.data(), in.size()}}, false);
      } catch (const Error &e) {
        errors[r] = e.what();
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_NE(errors[0].find("EP: rank 1 sent 8 bytes where 4 were expected"), std::string::npos)
      << errors[0];
  EXPECT_EQ(errors[1], "");
}

TEST(InProcessTransport, AFailedRankStopsTheOthers) {
  InProcessHub hub(3, std::chrono::seconds(30));
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      auto t = hub.transport(r);
      try {
        if (r == 1) {
          t->abort("out of device memory");
          return;
        }
        std::vector<std::vector<uint8_t>> send(3), recv;
        t->allToAll(send, recv);
      } catch (const Error &e) {
        errors[r] = e.what();
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_NE(errors[0].find("EP rank 1 failed: out of device memory"), std::string::npos);
  EXPECT_NE(errors[2].find("EP rank 1 failed"), std::string::npos);
}

TEST(InProcessTransport, AMissingRankTimesOut) {
  InProcessHub hub(2, std::chrono::milliseconds(200));
  auto t = hub.transport(0);
  std::vector<std::vector<uint8_t>> send(2), recv;
  try {
    t->allToAll(send, recv);
    FAIL() << "all-to-all without the other rank returned";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("timed out after 200 ms"), std::string::npos);
  }
}

// The slots a rank allocates per stacked expert weight (what the runtime
// loads and what k3-compile's deployment plan counts): the home blocks tile
// the experts, each expert's home rank holds it, and the replica room is
// min(⌈E/R⌉, E − home).
TEST(Placement, ExpertSlotsTileTheExperts) {
  for (auto [E, R] : {std::pair<int64_t, int64_t>{16, 3}, {896, 8}, {896, 64}, {384, 7}, {4, 8},
                      {1, 1}, {16, 1}}) {
    int64_t per = (E + R - 1) / R, covered = 0;
    for (int64_t r = 0; r < R; ++r) {
      ExpertSlots s = expertSlots(E, R, r);
      EXPECT_EQ(s.first, covered) << "E " << E << " R " << R << " rank " << r;
      for (int64_t e = s.first; e < s.first + s.home; ++e)
        EXPECT_EQ(homeRank(e, E, R), r);
      EXPECT_EQ(s.replicas(), std::max<int64_t>(1, s.home + std::min(per, E - s.home)) - s.home);
      covered += s.home;
    }
    EXPECT_EQ(covered, E);
  }
  ExpertSlots k3 = expertSlots(896, 8, 5);
  EXPECT_EQ(std::make_tuple(k3.first, k3.home, k3.replicas()), std::make_tuple(560, 112, 112));
  ExpertSlots last = expertSlots(16, 3, 2);
  EXPECT_EQ(std::make_tuple(last.first, last.home, last.replicas()), std::make_tuple(12, 4, 6));
  ExpertSlots one = expertSlots(16, 1, 0);
  EXPECT_EQ(std::make_tuple(one.home, one.replicas()), std::make_tuple(16, 0));
  ExpertSlots idle = expertSlots(4, 8, 6); // more ranks than experts: no home, one slot
  EXPECT_EQ(std::make_tuple(idle.first, idle.home, idle.slots), std::make_tuple(4, 0, 1));
}
