//===- LaunchTest.cpp - TCP/file rendezvous and launcher variables --------===//
//
// The rendezvous on loopback with ranks as threads and as processes, its
// error paths (world-size mismatch, a rank twice, timeouts naming the
// address and the missing ranks, a peer that closes early, a port held by
// something else, bad ports, unresolvable hosts), the launcher variable
// families with their precedence, and the TMA tensor-map requests of the
// launch ABI.
//
//===----------------------------------------------------------------------===//

#include "runtime/Cuda.h"
#include "runtime/Launcher.h"
#include "runtime/Rendezvous.h"
#include "support/Common.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <thread>

using namespace k3c;
using namespace k3c::rt;
using namespace std::chrono_literals;

// The mgpu* ABI entry the generated launch code calls (runtime/Cuda.cpp).
extern "C" void *mgpuTensorMapEncodeTiledMemref(int64_t, void *, int64_t, int64_t, int64_t,
                                                int64_t, int64_t, int64_t *);
extern "C" void mgpuLaunchClusterKernel(void *, intptr_t, intptr_t, intptr_t, intptr_t, intptr_t,
                                        intptr_t, intptr_t, intptr_t, intptr_t, int32_t, void *,
                                        void **, void **, size_t);

namespace {

/// 128 bytes like NCCL's id, zeros included.
std::string testId(int seed) {
  std::string s(128, '\0');
  for (int i = 0; i < 128; ++i)
    s[i] = static_cast<char>((i * 37 + seed * 11) % 256);
  s[5] = '\0';
  return s;
}

/// Runs `f`, returns the k3c::Error's message ("" when it did not throw).
std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

/// A port nothing listens on (taken from the kernel, then released).
int freePort() {
  RendezvousServer s("127.0.0.1", 0);
  return s.port();
}

/// A hand-written "rank 0": accepts one connection, reads the 16-byte
/// greeting, writes `reply` and closes.
class FakeRankZero {
public:
  explicit FakeRankZero(std::string reply) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(fd, 4), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
    port = ntohs(a.sin_port);
    thread = std::thread([this, reply] {
      int c = ::accept(fd, nullptr, nullptr);
      char hello[16];
      size_t got = 0;
      while (got < sizeof(hello)) {
        ssize_t n = ::recv(c, hello + got, sizeof(hello) - got, 0);
        if (n <= 0)
          break;
        got += static_cast<size_t>(n);
      }
      ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      ::close(c);
    });
  }
  ~FakeRankZero() {
    thread.join();
    ::close(fd);
  }
  int port = 0;

private:
  int fd = -1;
  std::thread thread;
};

std::string header(uint8_t status, uint32_t len) {
  std::string s(1, static_cast<char>(status));
  uint32_t n = htonl(len);
  s.append(reinterpret_cast<const char *>(&n), 4);
  return s;
}

} // namespace

TEST(Rendezvous, RanksAsThreadsGetRankZerosId) {
  const int64_t R = 4;
  RendezvousServer server("127.0.0.1", 0);
  ASSERT_GT(server.port(), 0);
  std::vector<std::string> got(R);
  std::vector<std::string> errors(R);
  std::vector<std::thread> ranks;
  for (int64_t r = 1; r < R; ++r)
    ranks.emplace_back([&, r] {
      errors[r] = errorOf([&] { got[r] = fetchId("127.0.0.1", server.port(), r, R, 10s); });
    });
  server.serve(R, testId(1), 10s);
  for (auto &t : ranks)
    t.join();
  for (int64_t r = 1; r < R; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(got[r], testId(1)) << "rank " << r;
  }
}

// R processes on loopback through exchangeId (what the NCCL transport
// calls): the other ranks start first and retry with backoff until rank 0
// listens; each child exits 0 only when it received rank 0's exact bytes.
TEST(Rendezvous, RanksAsProcessesWithRetry) {
  const int64_t R = 4;
  IdRendezvous how;
  how.host = "127.0.0.1";
  how.port = freePort();
  std::vector<pid_t> kids;
  for (int64_t r = 1; r < R; ++r) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 3;
      try {
        code = exchangeId(how, r, R, "", 10s) == testId(2) ? 0 : 1;
      } catch (const std::exception &e) {
        std::fprintf(stderr, "rank %lld: %s\n", static_cast<long long>(r), e.what());
        code = 2;
      }
      ::_exit(code);
    }
    kids.push_back(pid);
  }
  std::this_thread::sleep_for(300ms); // the others are already knocking
  EXPECT_EQ(exchangeId(how, 0, R, testId(2), 10s), testId(2));
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "0: got the id, 1: wrong bytes, 2: error (stderr)";
  }
}

TEST(Rendezvous, IdFile) {
  std::string dir = ::testing::TempDir() + "k3c-rdv-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  IdRendezvous how;
  how.idFile = dir + "/id";
  std::string got;
  std::thread other([&] { got = exchangeId(how, 1, 2, "", 10s); });
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(exchangeId(how, 0, 2, testId(3), 10s), testId(3));
  other.join();
  EXPECT_EQ(got, testId(3));
  EXPECT_EQ(how.describe(), "file " + how.idFile);
  // No rank 0: the waiting rank names the file.
  IdRendezvous none;
  none.idFile = dir + "/never";
  std::string e = errorOf([&] { exchangeId(none, 1, 2, "", 100ms); });
  EXPECT_NE(e.find("rank 1 of 2 found no id from rank 0 in the file '" + none.idFile + "'"),
            std::string::npos)
      << e;
  std::filesystem::remove_all(dir);
}

TEST(Rendezvous, WorldSizeMismatchFailsBothSides) {
  RendezvousServer server("127.0.0.1", 0);
  std::string clientError;
  std::thread rank1(
      [&] { clientError = errorOf([&] { fetchId("127.0.0.1", server.port(), 1, 2, 10s); }); });
  std::string serverError = errorOf([&] { server.serve(3, testId(4), 10s); });
  rank1.join();
  const std::string why = "world size mismatch: rank 0 has world size 3, rank 1 has 2";
  EXPECT_NE(serverError.find(why), std::string::npos) << serverError;
  EXPECT_NE(clientError.find("refused this rank: " + why), std::string::npos) << clientError;
}

TEST(Rendezvous, RankTwiceIsRefused) {
  RendezvousServer server("127.0.0.1", 0);
  std::string serverError;
  std::thread rank0([&] { serverError = errorOf([&] { server.serve(3, testId(5), 10s); }); });
  EXPECT_EQ(fetchId("127.0.0.1", server.port(), 1, 3, 10s), testId(5));
  std::string second = errorOf([&] { fetchId("127.0.0.1", server.port(), 1, 3, 10s); });
  rank0.join();
  EXPECT_NE(second.find("two processes claim rank 1"), std::string::npos) << second;
  EXPECT_NE(serverError.find("two processes claim rank 1"), std::string::npos) << serverError;
}

TEST(Rendezvous, RankZeroTimeoutNamesMissingRanks) {
  RendezvousServer server("127.0.0.1", 0);
  std::thread rank2([&] { fetchId("127.0.0.1", server.port(), 2, 4, 10s); });
  // A connection that closes without a greeting (a port scanner) is ignored.
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(server.port()));
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
    ::close(fd);
  }
  std::string e = errorOf([&] { server.serve(4, testId(6), 1500ms); });
  rank2.join();
  EXPECT_NE(e.find("listening on 127.0.0.1:" + std::to_string(server.port()) +
                   ", heard from 1 of 3 other ranks within 1.5 s; missing rank(s) 1, 3 (1 "
                   "connection(s) closed without a complete greeting)"),
            std::string::npos)
      << e;
}

TEST(Rendezvous, OtherRankTimeoutNamesTheAddress) {
  int port = freePort();
  auto t0 = std::chrono::steady_clock::now();
  std::string e = errorOf([&] { fetchId("127.0.0.1", port, 3, 4, 400ms); });
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_NE(e.find("rank 3 of 4 could not get the id from rank 0 at 127.0.0.1:" +
                   std::to_string(port) + " within 0.4 s (last error: Connection refused)"),
            std::string::npos)
      << e;
  EXPECT_GE(took, 350ms) << "it retried until the deadline";
  EXPECT_LT(took, 3s) << "and stopped there";
}

TEST(Rendezvous, PeerClosedEarly) {
  FakeRankZero fake(header(0, 128) + std::string(10, 'x'));
  std::string e = errorOf([&] { fetchId("127.0.0.1", fake.port, 1, 2, 5s); });
  EXPECT_NE(e.find("rank 0 at 127.0.0.1:" + std::to_string(fake.port) +
                   " closed the connection early (10 of 128 bytes of the id)"),
            std::string::npos)
      << e;
}

TEST(Rendezvous, SomethingElseOnThePort) {
  FakeRankZero fake("HTTP/1.1 400 Bad Request\r\n\r\n");
  std::string e = errorOf([&] { fetchId("127.0.0.1", fake.port, 1, 2, 5s); });
  EXPECT_NE(e.find("does not answer as a k3c rendezvous"), std::string::npos) << e;
}

TEST(Rendezvous, PortInUseAndBadAddresses) {
  RendezvousServer first("127.0.0.1", 0);
  std::string e = errorOf([&] { RendezvousServer second("127.0.0.1", first.port()); });
  EXPECT_NE(e.find("rank 0 cannot listen on 127.0.0.1:" + std::to_string(first.port()) +
                   ": Address already in use"),
            std::string::npos)
      << e;
  e = errorOf([&] { fetchId("no-such-host.invalid", 29500, 1, 2, 2s); });
  EXPECT_NE(e.find("rank 1 of 2: cannot resolve the address of rank 0 'no-such-host.invalid' "
                   "(MASTER_ADDR)"),
            std::string::npos)
      << e;
  for (const char *bad : {"", "0", "65536", "99999", "29500x", "-1", "http"}) {
    e = errorOf([&] { parsePort(bad, "MASTER_PORT"); });
    EXPECT_EQ(e, std::string("MASTER_PORT='") + bad +
                     "' is not a TCP port (a number in [1, 65535])");
  }
  EXPECT_EQ(parsePort("29500", "MASTER_PORT"), 29500);
  EXPECT_EQ(parsePort("65535", "MASTER_PORT"), 65535);
  IdRendezvous none;
  e = errorOf([&] { exchangeId(none, 0, 2, testId(7), 1s); });
  EXPECT_NE(e.find("needs MASTER_ADDR and MASTER_PORT"), std::string::npos) << e;
  EXPECT_EQ(exchangeId(none, 0, 1, testId(7), 1s), testId(7)) << "one rank needs no rendezvous";
}

//===----------------------------------------------------------------------===//
// Launcher variables.
//===----------------------------------------------------------------------===//

namespace {

LaunchEnv readFrom(const std::map<std::string, std::string> &vars) {
  return readLaunchEnv([&](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string readError(const std::map<std::string, std::string> &vars) {
  return errorOf([&] { readFrom(vars); });
}

} // namespace

TEST(Launcher, EachFamily) {
  LaunchEnv none = readFrom({});
  EXPECT_FALSE(none.launched());
  EXPECT_TRUE(none.rendezvous.empty());

  LaunchEnv t = readFrom({{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "5"},
                          {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(t.family, "torchrun (RANK, WORLD_SIZE)");
  EXPECT_EQ(t.rank, 5);
  EXPECT_EQ(t.world, 16);
  EXPECT_EQ(t.localRank, 5);
  EXPECT_EQ(t.rendezvous.describe(), "tcp://10.0.0.7:29500");
  EXPECT_EQ(t.rendezvousFrom, "MASTER_ADDR/MASTER_PORT");

  LaunchEnv m = readFrom({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(m.family, "Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)");
  EXPECT_EQ(m.worldVar, "OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(std::make_tuple(m.rank, m.world, m.localRank), std::make_tuple(3, 8, 1));

  LaunchEnv s = readFrom({{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "32"}, {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(s.family, "Slurm (SLURM_PROCID, SLURM_NTASKS)");
  EXPECT_EQ(std::make_tuple(s.rank, s.world, s.localRank), std::make_tuple(9, 32, 1));

  LaunchEnv k = readFrom({{"K3C_EP_RANK", "1"}, {"K3C_EP_WORLD", "2"}, {"K3C_EP_ID_FILE", "/x"}});
  EXPECT_EQ(k.family, "k3c (K3C_EP_RANK, K3C_EP_WORLD)");
  EXPECT_EQ(k.localRank, -1);
  EXPECT_EQ(k.rendezvous.describe(), "file /x");
}

TEST(Launcher, Precedence) {
  // An explicit family overrides the ambient ones (torchrun inside srun:
  // SLURM_* describe the node-level tasks).
  LaunchEnv t = readFrom({{"RANK", "6"}, {"WORLD_SIZE", "16"}, {"SLURM_PROCID", "0"},
                          {"SLURM_NTASKS", "2"}, {"OMPI_COMM_WORLD_RANK", "1"},
                          {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(t.family, "torchrun (RANK, WORLD_SIZE)");
  EXPECT_EQ(t.rank, 6);
  // Open MPI before Slurm (mpirun inside an allocation).
  LaunchEnv m = readFrom({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"},
                          {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "8"}});
  EXPECT_EQ(m.rank, 2);
  EXPECT_EQ(m.world, 8);
  // An ambient world of one (a batch script with one task, or half-set
  // variables of an allocation) launches nothing.
  EXPECT_FALSE(readFrom({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).launched());
  EXPECT_FALSE(readFrom({{"SLURM_NTASKS", "8"}}).launched());
  // Both explicit families: they must agree; torchrun's LOCAL_RANK is kept.
  LaunchEnv both = readFrom({{"K3C_EP_RANK", "3"}, {"K3C_EP_WORLD", "4"}, {"RANK", "3"},
                             {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}});
  EXPECT_EQ(both.family, "k3c (K3C_EP_RANK, K3C_EP_WORLD)");
  EXPECT_EQ(both.localRank, 3);
  EXPECT_EQ(readError({{"K3C_EP_RANK", "1"}, {"K3C_EP_WORLD", "2"}, {"RANK", "1"},
                       {"WORLD_SIZE", "4"}}),
            "the launcher variables disagree: K3C_EP_RANK=1 K3C_EP_WORLD=2 but RANK=1 "
            "WORLD_SIZE=4 (unset one family)");
  // Rendezvous: the id file wins over TCP; K3C_EP_ADDR/PORT over MASTER_*.
  LaunchEnv f = readFrom({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"},
                          {"MASTER_PORT", "1234"}, {"K3C_EP_ID_FILE", "/shared/id"}});
  EXPECT_EQ(f.rendezvous.describe(), "file /shared/id");
  LaunchEnv o = readFrom({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}, {"K3C_EP_PORT", "4321"}});
  EXPECT_EQ(o.rendezvous.describe(), "tcp://h:4321");
  EXPECT_EQ(o.rendezvousFrom, "MASTER_ADDR/K3C_EP_PORT");
  // torchrun's agent store holds MASTER_PORT: the next port.
  LaunchEnv a = readFrom({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
                          {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(a.rendezvous.port, 29501);
  LaunchEnv a2 = readFrom({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}, {"K3C_EP_PORT", "7"},
                           {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(a2.rendezvous.port, 7) << "an explicit K3C_EP_PORT is used as given";
}

TEST(Launcher, Errors) {
  EXPECT_EQ(readError({{"RANK", "0"}}),
            "RANK is set but WORLD_SIZE is not (torchrun (RANK, WORLD_SIZE): a launcher sets both)");
  EXPECT_EQ(readError({{"K3C_EP_WORLD", "2"}}),
            "K3C_EP_WORLD is set but K3C_EP_RANK is not (k3c (K3C_EP_RANK, K3C_EP_WORLD): a "
            "launcher sets both)");
  EXPECT_EQ(readError({{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
            "RANK=4 is outside [0, WORLD_SIZE=4)");
  EXPECT_EQ(readError({{"RANK", "one"}, {"WORLD_SIZE", "4"}}),
            "RANK='one' is not a non-negative integer");
  EXPECT_EQ(readError({{"SLURM_PROCID", "-1"}, {"SLURM_NTASKS", "4"}}),
            "SLURM_PROCID='-1' is not a non-negative integer");
  EXPECT_EQ(readError({{"WORLD_SIZE", "0"}, {"RANK", "0"}}),
            "WORLD_SIZE=0: a group has at least one rank");
  EXPECT_EQ(readError({{"MASTER_ADDR", "h"}}),
            "MASTER_PORT is not set but MASTER_ADDR is (the TCP rendezvous needs rank 0's "
            "address and port)");
  EXPECT_EQ(readError({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}),
            "MASTER_PORT='70000' is not a TCP port (a number in [1, 65535])");

  // Against --ep R.
  LaunchEnv t = readFrom({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"},
                          {"MASTER_PORT", "1"}});
  EXPECT_EQ(errorOf([&] { checkLaunch(t, 2); }),
            "--ep 2 but WORLD_SIZE=4 (torchrun (RANK, WORLD_SIZE)): the launcher's world size "
            "must equal the EP ranks");
  EXPECT_EQ(errorOf([&] { checkLaunch(t, 4); }), "");
  LaunchEnv s = readFrom({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}});
  EXPECT_EQ(errorOf([&] { checkLaunch(s, 2); }),
            "rank 1 of 2 (Slurm (SLURM_PROCID, SLURM_NTASKS)) needs a rendezvous: set "
            "MASTER_ADDR and MASTER_PORT (rank 0 listens there, the others connect) or "
            "K3C_EP_ID_FILE (a path every rank can read)");
  EXPECT_EQ(errorOf([&] { checkLaunch(readFrom({}), 8); }), "") << "no launcher: nothing to check";
}

TEST(Launcher, LocalRankPicksTheGpu) {
  EXPECT_EQ(deviceForLocalRank(-1, nullptr), "");
  EXPECT_EQ(deviceForLocalRank(3, nullptr), "3");
  EXPECT_EQ(deviceForLocalRank(1, "4,5,6,7"), "5");
  EXPECT_EQ(deviceForLocalRank(2, "GPU-aa,GPU-bb,GPU-cc"), "GPU-cc");
  EXPECT_EQ(deviceForLocalRank(1, "6"), "") << "srun --gpus-per-task gave it one GPU already";
  EXPECT_EQ(errorOf([&] { deviceForLocalRank(2, "0,1"); }),
            "local rank 2 has no GPU: CUDA_VISIBLE_DEVICES='0,1' lists 2");
}

// TMA tensor maps (runtime/Cuda.h): the generated launch code's request read
// from a ranked memref descriptor and checked against TMA's rules, without a
// driver; the device-side encode is exercised on the GPU (bench/).
namespace {
/// A rank-2 memref descriptor as the generated code passes it.
struct Memref2 {
  void *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
};
constexpr int64_t kBf16 = 9, kSwizzle128 = 3, kL2Promo256 = 3;
} // namespace

TEST(TensorMap, ReadsABf16OperandInnermostFirst) {
  alignas(64) static char storage[1024];
  Memref2 m{storage, storage, 8, {128, 7168}, {7168, 1}};
  const int64_t box[2] = {256, 64};
  cuda::TensorMapRequest r;
  ASSERT_EQ(cuda::tensorMapRequest(2, &m, kBf16, 0, kSwizzle128, kL2Promo256, 0, box, r), "");
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.address, storage + 16) << "the aligned pointer plus the offset in bytes";
  EXPECT_EQ(r.dims[0], 7168u);
  EXPECT_EQ(r.dims[1], 128u);
  EXPECT_EQ(r.strides[0], 7168u * 2);
  EXPECT_EQ(r.box[0], 64u);
  EXPECT_EQ(r.box[1], 256u);
  EXPECT_EQ(r.swizzle, 3);
  EXPECT_EQ(r.l2Promotion, 3);

  // An empty launch's operand (T = 0) still encodes: its grid never runs.
  Memref2 empty{storage, storage, 0, {0, 7168}, {7168, 1}};
  cuda::TensorMapRequest e;
  ASSERT_EQ(cuda::tensorMapRequest(2, &empty, kBf16, 0, kSwizzle128, 0, 0, box, e), "");
  EXPECT_EQ(e.dims[1], 1u);

  // The cache key tells maps apart by every field.
  cuda::TensorMapRequest other = r;
  other.dims[1] = 64;
  EXPECT_NE(r.key(), other.key());
  other = r;
  other.box[1] = 128;
  EXPECT_NE(r.key(), other.key());
  EXPECT_EQ(r.key(), cuda::TensorMapRequest(r).key());
}

TEST(TensorMap, RefusesWhatTmaCannotCopy) {
  alignas(64) static char storage[1024];
  const int64_t box[2] = {128, 64};
  auto why = [&](Memref2 m, int64_t rank = 2, int64_t type = kBf16, int64_t swizzle = kSwizzle128,
                 const int64_t *b = nullptr) {
    cuda::TensorMapRequest r;
    return cuda::tensorMapRequest(rank, &m, type, 0, swizzle, 0, 0, b ? b : box, r);
  };
  const Memref2 ok{storage, storage, 0, {100, 512}, {512, 1}};
  EXPECT_EQ(why(ok), "");
  Memref2 m = ok;
  m.offset = 3;
  EXPECT_EQ(why(m), "the tensor's start is not 16-byte aligned");
  m = ok;
  m.sizes[1] = 500;
  m.strides[0] = 500 * 1 + 4; // 1008 bytes: a multiple of 16
  EXPECT_EQ(why(m), "");
  m.strides[0] = 501; // 1002 bytes
  EXPECT_EQ(why(m), "a stride of 1002 bytes in dimension 0 (a multiple of 16 below 2^40)");
  m = ok;
  m.strides[1] = 2;
  EXPECT_EQ(why(m), "the innermost dimension is not contiguous (stride 2)");
  const int64_t big[2] = {512, 64};
  EXPECT_EQ(why(ok, 2, kBf16, kSwizzle128, big),
            "a box of 512 elements in dimension 0 (1 to 256)");
  const int64_t wide[2] = {64, 128};
  EXPECT_EQ(why(ok, 2, kBf16, kSwizzle128, wide),
            "the box's inner extent of 256 bytes exceeds the swizzle's 128");
  EXPECT_EQ(why(ok, 2, kBf16, 0, wide), "") << "no swizzle: any multiple of 16 bytes";
  const int64_t odd[2] = {64, 4};
  EXPECT_EQ(why(ok, 2, kBf16, 0, odd), "the box's inner extent of 8 bytes is not a multiple of 16");
  EXPECT_EQ(why(ok, 6), "rank 6 (a tensor map has 1 to 5 dimensions)");
  EXPECT_EQ(why(ok, 0), "rank 0 (a tensor map has 1 to 5 dimensions)");
  EXPECT_EQ(why(ok, 2, 13), "unknown tensor-map data type 13");
  EXPECT_EQ(why(ok, 2, kBf16, 4), "an interleave, swizzle, L2-promotion or fill mode out of range");
  cuda::TensorMapRequest r;
  EXPECT_EQ(cuda::tensorMapRequest(2, &ok, kBf16, /*interleave=*/1, 0, 0, 0, box, r),
            "an interleaved layout (k3c's kernels ask for none; its rules are not checked here)");
}

TEST(ClusterLaunch, WithoutCuLaunchKernelExTheLaunchCodeGetsAnError) {
  // A clustered launch needs cuLaunchKernelEx (CUDA 12): without it (here:
  // no driver) the ABI entry records why instead of launching without the
  // cluster, and the error surfaces at the kernel entry's check. A null
  // function (a module that failed to load) launches nothing, silently.
  if (cuda::available())
    GTEST_SKIP() << "a GPU is initialized in this process";
  mgpuLaunchClusterKernel(nullptr, 2, 1, 1, 8, 1, 1, 256, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(errorOf([] { cuda::checkLaunchError("k3_test"); }), "");
  static char fake;
  mgpuLaunchClusterKernel(&fake, 2, 1, 1, 8, 1, 1, 256, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  const std::string e = errorOf([] { cuda::checkLaunchError("k3_test"); });
  EXPECT_NE(e.find("kernel k3_test: cuLaunchKernelEx (a clustered launch needs CUDA 12 or newer) "
                   "failed"),
            std::string::npos)
      << e;
}

TEST(TensorMap, WithoutADriverTheLaunchCodeGetsAnError) {
  // No GPU here (or not initialized): the ABI entry records why and returns
  // null, and the error surfaces at the kernel entry's check.
  if (cuda::available())
    GTEST_SKIP() << "a GPU is initialized in this process";
  alignas(64) static char storage[1024];
  Memref2 m{storage, storage, 0, {100, 512}, {512, 1}};
  const int64_t box[2] = {128, 64};
  EXPECT_EQ(mgpuTensorMapEncodeTiledMemref(2, &m, kBf16, 0, kSwizzle128, 0, 0,
                                           const_cast<int64_t *>(box)),
            nullptr);
  EXPECT_EQ(errorOf([] { cuda::checkLaunchError("k3_test"); }),
            "kernel k3_test: TMA tensor map: this CUDA driver has no cuTensorMapEncodeTiled (CUDA "
            "12 or newer is needed for kernels built with K3C_WGMMA_TMA)");
  m.offset = 1;
  EXPECT_EQ(mgpuTensorMapEncodeTiledMemref(2, &m, kBf16, 0, kSwizzle128, 0, 0,
                                           const_cast<int64_t *>(box)),
            nullptr);
  EXPECT_EQ(errorOf([] { cuda::checkLaunchError("k3_test"); }),
            "kernel k3_test: TMA tensor map refused: the tensor's start is not 16-byte aligned");
}
