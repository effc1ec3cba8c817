//===- k3-ep-bench.cpp - EP dispatch/combine bandwidth and planner time ---===//

#include "support/Common.h"
#include "support/Sha256.h"
#include "runtime/Cuda.h"
#include "runtime/ExpertParallel.h"
#include "runtime/Launcher.h"
#include "runtime/Nccl.h"
#include "tools/common/Args.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

static const char *kHelp = R"(k3-ep-bench: expert-parallel exchange and placement benchmark

usage: k3-ep-bench [--transport inproc|nccl] [--ranks R] [--iters N]
       k3-ep-bench --check-launch

Prints two tables:
  1. all-to-all bandwidth against message size (bytes each rank sends to each
     other rank; what dispatch and combine do every MoE layer): time per
     exchange and GB/s sent per rank; with nccl also from device buffers
     (what k3-run's EP exchange sends), each exchange waited for (as k3-run
     does) and back to back (N enqueued, one wait: how NCCL's own
     all-to-all is timed by bench/nccl-alltoall.py). inproc: R threads of this process
     (default R = 4); nccl: this process's GPU, R = 1 (self send/recv through
     NCCL, including the host<->device staging k3-run uses), or R processes
     started by a launcher (the variables of k3-run --help, --ep: torchrun,
     Open MPI, Slurm or K3C_EP_RANK / K3C_EP_WORLD, with MASTER_ADDR /
     MASTER_PORT or K3C_EP_ID_FILE).
  2. placement planner time per step for K3's router (384 experts, top 8) at
     512 tokens per rank, uniform and Zipf-skewed routing, R = 2, 4, 8, with
     the resulting imbalance (max - min routed pairs per rank).

--check-launch checks a multi-process launch without GPUs or weights: every
process reads its rank, world size, local rank and rendezvous from the launcher
variables exactly as k3-run --ep does, the ranks meet (rank 0 sends a random
128-byte id, as it sends NCCL's), and each prints one line: its rank, the
variables' family, the GPU its local rank selects, the rendezvous and the id's
hash (equal on every rank). Exits 1 with the error when they do not meet.

options:
  --check-launch  only the launch and rendezvous (see above)
  --transport T   inproc (default) or nccl
  --ranks R       ranks (inproc default 4; nccl: 1 or the launcher's world size)
  --iters N       exchanges per message size (default 20)
  --help          this text
)";

using namespace k3c;
using namespace k3c::rt;

static void bandwidth(Transport &t, int64_t iters, bool print) {
  const int64_t R = t.size();
  if (print) {
    std::printf("%-14s %12s %14s\n", "message bytes", "us/exchange", "GB/s per rank");
  }
  for (int64_t bytes : {int64_t(4) << 10, int64_t(64) << 10, int64_t(1) << 20, int64_t(8) << 20,
                        int64_t(64) << 20}) {
    std::vector<std::vector<uint8_t>> send(R), recv;
    for (int64_t d = 0; d < R; ++d)
      send[d].assign(bytes, static_cast<uint8_t>(d + 1));
    t.allToAll(send, recv); // warm-up
    for (int64_t s = 0; s < R; ++s)
      if (recv[s].size() != static_cast<size_t>(bytes) || recv[s][0] != t.rank() + 1)
        throw Error("all-to-all delivered the wrong bytes from rank " + std::to_string(s));
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iters; ++i)
      t.allToAll(send, recv);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    if (print)
      std::printf("%-14lld %12.1f %14.2f\n", static_cast<long long>(bytes), s * 1e6,
                  static_cast<double>(bytes * R) / s / 1e9);
  }
}

/// The same sweep with the bytes in device memory (what k3-run's EP exchange
/// sends over NCCL: the permuted rows where the row kernel wrote them).
static void deviceBandwidth(Transport &t, int64_t iters, bool print) {
  const int64_t R = t.size();
  if (print)
    std::printf("\ndevice buffers (waited: each exchange waited for, as k3-run does; back to "
                "back: %lld enqueued, then one wait, as NCCL's own all-to-all is timed)\n"
                "%-14s %12s %14s %16s %18s\n",
                static_cast<long long>(iters), "message bytes", "us/exchange", "GB/s per rank",
                "us back to back", "GB/s back to back");
  for (int64_t bytes : {int64_t(4) << 10, int64_t(64) << 10, int64_t(1) << 20, int64_t(8) << 20,
                        int64_t(64) << 20}) {
    size_t total = static_cast<size_t>(bytes * R);
    cuda::CUdeviceptr src = cuda::alloc(total, "benchmark send buffer"),
                      dst = cuda::alloc(total, "benchmark receive buffer");
    std::vector<uint8_t> host(total);
    for (int64_t d = 0; d < R; ++d)
      std::fill(host.begin() + d * bytes, host.begin() + (d + 1) * bytes,
                static_cast<uint8_t>(7 * t.rank() + d + 1));
    cuda::upload(src, host.data(), total);
    std::vector<size_t> counts(R, static_cast<size_t>(bytes));
    auto *s = reinterpret_cast<void *>(src);
    auto *r = reinterpret_cast<void *>(dst);
    t.allToAllBuffers(s, counts, r, counts, true); // warm-up and check
    cuda::download(host.data(), dst, total);
    for (int64_t from = 0; from < R; ++from)
      if (host[from * bytes] != static_cast<uint8_t>(7 * from + t.rank() + 1) ||
          host[(from + 1) * bytes - 1] != static_cast<uint8_t>(7 * from + t.rank() + 1))
        throw Error("device all-to-all delivered the wrong bytes from rank " +
                    std::to_string(from));
    // Every rank starts the timed loop together (as the NCCL peer's barrier).
    t.barrier();
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iters; ++i)
      t.allToAllBuffers(s, counts, r, counts, true);
    double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    // Back to back: the exchanges only enqueued, one wait at the end.
    t.barrier();
    t.deferDeviceWaits = true;
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iters; ++i)
      t.allToAllBuffers(s, counts, r, counts, true);
    t.flush();
    double batched =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    t.deferDeviceWaits = false;
    if (print)
      std::printf("%-14lld %12.1f %14.2f %16.1f %18.2f\n", static_cast<long long>(bytes),
                  sec * 1e6, static_cast<double>(bytes * R) / sec / 1e9, batched * 1e6,
                  static_cast<double>(bytes * R) / batched / 1e9);
    cuda::release(src);
    cuda::release(dst);
  }
}

static void planner() {
  const int64_t E = 384, K = 8, T = 512;
  std::printf("\n%-8s %-6s %14s %18s %18s\n", "routing", "ranks", "us/plan", "imbalance before",
              "imbalance after");
  for (const char *kind : {"uniform", "zipf1.2"})
    for (int64_t R : {2, 4, 8}) {
      std::mt19937_64 g(42);
      std::vector<double> w(E, 1.0);
      if (kind[0] == 'z')
        for (int64_t e = 0; e < E; ++e)
          w[e] = 1.0 / std::pow(static_cast<double>(e + 1), 1.2);
      std::discrete_distribution<int64_t> d(w.begin(), w.end());
      std::vector<int64_t> load(E, 0);
      for (int64_t i = 0; i < T * K * R; ++i)
        ++load[d(g)];
      auto spread = [](const Placement &p) {
        auto [mn, mx] = std::minmax_element(p.computed.begin(), p.computed.end());
        return *mx - *mn;
      };
      int64_t before = spread(planPlacement(load, R, false)), after = 0;
      const int reps = 200;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i)
        after = spread(planPlacement(load, R, true));
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
      std::printf("%-8s %-6lld %14.2f %18lld %18lld\n", kind, static_cast<long long>(R), s * 1e6,
                  static_cast<long long>(before), static_cast<long long>(after));
    }
}

/// K3C_EP_TIMEOUT_S (default 120), as k3-run reads it.
static std::chrono::milliseconds timeout() {
  const char *env = std::getenv("K3C_EP_TIMEOUT_S");
  int64_t s = env ? std::atoll(env) : 120;
  return std::chrono::seconds(std::max<int64_t>(1, s));
}

/// --check-launch: the launcher variables and the rendezvous, nothing else.
static int checkLaunchOnly() {
  LaunchEnv launch = readLaunchEnv();
  if (!launch.launched())
    throw Error("--check-launch: no launcher variables are set (RANK/WORLD_SIZE, "
                "OMPI_COMM_WORLD_RANK/_SIZE, SLURM_PROCID/SLURM_NTASKS or "
                "K3C_EP_RANK/K3C_EP_WORLD)");
  checkLaunch(launch, launch.world);
  std::string dev = deviceForLocalRank(launch.localRank, std::getenv("CUDA_VISIBLE_DEVICES"));
  std::string id;
  if (launch.rank == 0) { // what NCCL's unique id is: 128 opaque bytes
    std::random_device rd;
    for (int i = 0; i < 128; ++i)
      id.push_back(static_cast<char>(rd() & 0xFF));
  }
  auto t0 = std::chrono::steady_clock::now();
  id = exchangeId(launch.rendezvous, launch.rank, launch.world, id, timeout());
  double ms =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3;
  Sha256 sha;
  sha.update(id.data(), id.size());
  std::string hash = sha.hex().substr(0, 16);
  std::printf("%s; local rank %lld -> CUDA_VISIBLE_DEVICES=%s; rendezvous %s (%s) in %.1f ms; "
              "id %zu bytes, sha256 %s\n",
              launch.describe().c_str(), static_cast<long long>(launch.localRank),
              dev.empty() ? (std::getenv("CUDA_VISIBLE_DEVICES") ? "unchanged" : "unset")
                          : dev.c_str(),
              launch.world > 1 ? launch.rendezvous.describe().c_str() : "none",
              launch.world > 1 ? launch.rendezvousFrom.c_str() : "one rank", ms, id.size(),
              hash.c_str());
  return 0;
}

int main(int argc, char **argv) {
  try {
    Args args(argc, argv, {"transport", "ranks", "iters"}, {"help", "check-launch"});
    if (args.has("help")) {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (args.has("check-launch"))
      return checkLaunchOnly();
    std::string kind = args.get("transport", "inproc");
    int64_t iters = args.getInt("iters", 20);
    if (kind == "inproc") {
      int64_t R = args.getInt("ranks", 4);
      InProcessHub hub(R);
      std::printf("transport: in-process, %lld ranks (threads)\n", static_cast<long long>(R));
      std::vector<std::string> errors(R);
      std::vector<std::thread> threads;
      for (int64_t r = 0; r < R; ++r)
        threads.emplace_back([&, r] {
          auto t = hub.transport(r);
          try {
            bandwidth(*t, iters, r == 0);
          } catch (const std::exception &e) {
            errors[r] = e.what();
            t->abort(e.what());
          }
        });
      for (auto &t : threads)
        t.join();
      for (auto &e : errors)
        if (!e.empty())
          throw Error(e);
    } else if (kind == "nccl") {
      LaunchEnv launch = readLaunchEnv();
      int64_t R = launch.launched() ? launch.world : args.getInt("ranks", 1);
      int64_t me = launch.launched() ? launch.rank : 0;
      checkLaunch(launch, R);
      std::string dev = deviceForLocalRank(launch.localRank, std::getenv("CUDA_VISIBLE_DEVICES"));
      if (!dev.empty())
        ::setenv("CUDA_VISIBLE_DEVICES", dev.c_str(), 1);
      std::string why;
      if (!cuda::initialize(why))
        throw Error("--transport nccl: " + why);
      auto t = makeNcclTransport(me, R, launch.rendezvous, timeout());
      std::printf("transport: NCCL, %lld ranks, this is rank %lld (%s)\n",
                  static_cast<long long>(R), static_cast<long long>(me), cuda::deviceName().c_str());
      bandwidth(*t, iters, me == 0);
      deviceBandwidth(*t, iters, me == 0);
    } else {
      throw Error("--transport must be inproc or nccl, got '" + kind + "'");
    }
    planner();
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "k3-ep-bench: error: %s\n", e.what());
    return 1;
  }
}
