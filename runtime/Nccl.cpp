//===- Nccl.cpp - the EP transport over NCCL ------------------------------===//

#include "runtime/Nccl.h"

#include "models/Common.h"
#include "runtime/Cuda.h"

#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace k3c::rt {

namespace {

struct UniqueId {
  char internal[128];
};
using Comm = void *;
using Result = int; // ncclResult_t: 0 success, 7 in progress
constexpr int kUint8 = 1;

struct Nccl {
  void *lib = nullptr;
  Result (*getUniqueId)(UniqueId *) = nullptr;
  Result (*commInitRank)(Comm *, int, UniqueId, int) = nullptr;
  Result (*commDestroy)(Comm) = nullptr;
  Result (*commAbort)(Comm) = nullptr;
  Result (*commGetAsyncError)(Comm, Result *) = nullptr;
  Result (*send)(const void *, size_t, int, int, Comm, void *) = nullptr;
  Result (*recv)(void *, size_t, int, int, Comm, void *) = nullptr;
  Result (*groupStart)() = nullptr;
  Result (*groupEnd)() = nullptr;
  const char *(*errorString)(Result) = nullptr;
  int (*getVersion)(int *) = nullptr;

  void load() {
    if (lib)
      return;
    lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      throw Error("EP over NCCL: libnccl.so.2 not found (install NCCL or run --ep on the CPU)");
    auto bind = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn)
        throw Error(std::string("EP over NCCL: libnccl.so.2 has no ") + name);
    };
    bind(getUniqueId, "ncclGetUniqueId");
    bind(commInitRank, "ncclCommInitRank");
    bind(commDestroy, "ncclCommDestroy");
    bind(commAbort, "ncclCommAbort");
    bind(commGetAsyncError, "ncclCommGetAsyncError");
    bind(send, "ncclSend");
    bind(recv, "ncclRecv");
    bind(groupStart, "ncclGroupStart");
    bind(groupEnd, "ncclGroupEnd");
    bind(errorString, "ncclGetErrorString");
    bind(getVersion, "ncclGetVersion");
  }
};

Nccl &nccl() {
  static Nccl n;
  n.load();
  return n;
}

class NcclTransport : public Transport {
public:
  NcclTransport(int64_t rank, int64_t size, const std::string &idFile,
                std::chrono::milliseconds timeout)
      : me(rank), n(size), timeout(timeout) {
    Nccl &nc = nccl();
    if (!cuda::available())
      throw Error("EP over NCCL needs the CUDA device (run with --device cuda)");
    UniqueId id;
    if (size == 1 || rank == 0) {
      check(nc.getUniqueId(&id), "ncclGetUniqueId");
      if (size > 1) {
        std::string tmp = idFile + ".tmp";
        std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof(id.internal));
        std::filesystem::rename(tmp, idFile);
      }
    } else {
      auto start = std::chrono::steady_clock::now();
      while (true) {
        std::ifstream in(idFile, std::ios::binary);
        if (in && in.read(id.internal, sizeof(id.internal)))
          break;
        if (std::chrono::steady_clock::now() - start > timeout)
          throw Error("EP rank " + std::to_string(rank) + ": no NCCL id from rank 0 in " +
                      idFile + " after " + std::to_string(timeout.count()) + " ms");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    check(nc.commInitRank(&comm, static_cast<int>(size), id, static_cast<int>(rank)),
          "ncclCommInitRank");
  }
  ~NcclTransport() override {
    if (comm)
      nccl().commDestroy(comm);
    for (auto p : {sendBuf, recvBuf})
      if (p)
        cuda::release(p);
  }
  int64_t rank() const override { return me; }
  int64_t size() const override { return n; }

  void allToAll(const std::vector<std::vector<uint8_t>> &send,
                std::vector<std::vector<uint8_t>> &recv) override {
    if (failed)
      throw Error(failure);
    // Sizes first (8 bytes to and from every rank), then the bytes.
    std::vector<std::vector<uint8_t>> sizes(n), got;
    for (int64_t d = 0; d < n; ++d) {
      uint64_t s = send[d].size();
      sizes[d].resize(8);
      std::memcpy(sizes[d].data(), &s, 8);
    }
    exchange(sizes, got);
    std::vector<size_t> in(n);
    for (int64_t s = 0; s < n; ++s)
      std::memcpy(&in[s], got[s].data(), 8);
    exchange(send, recv, &in);
    for (auto &m : send)
      bytesSent += static_cast<int64_t>(m.size());
  }

  void allToAllBuffers(const void *send, const std::vector<size_t> &sendCounts, void *recv,
                       const std::vector<size_t> &recvCounts, bool device) override {
    if (!device) {
      Transport::allToAllBuffers(send, sendCounts, recv, recvCounts, device);
      return;
    }
    if (failed)
      throw Error(failure);
    // Device buffers: NCCL reads and writes them where they are.
    sendRecv(static_cast<const uint8_t *>(send), sendCounts, static_cast<uint8_t *>(recv),
             recvCounts);
    for (size_t c : sendCounts)
      bytesSent += static_cast<int64_t>(c);
  }

  void abort(const std::string &why) override {
    failed = true;
    failure = "EP rank " + std::to_string(me) + " failed: " + why;
    if (comm) {
      nccl().commAbort(comm);
      comm = nullptr;
    }
  }

private:
  void check(Result r, const char *call) {
    if (r != 0 && r != 7)
      throw Error(std::string("EP over NCCL: ") + call + " failed: " + nccl().errorString(r));
  }
  void ensure(cuda::CUdeviceptr &buf, size_t &cap, size_t need) {
    if (need <= cap)
      return;
    if (buf)
      cuda::release(buf);
    cap = std::max<size_t>(need, 2 * cap);
    buf = cuda::alloc(cap, "EP staging buffer");
  }
  /// One grouped ncclSend/ncclRecv round between device buffers laid out
  /// rank by rank, waited for (with the async-error and timeout checks).
  void sendRecv(const uint8_t *send, const std::vector<size_t> &sendCounts, uint8_t *recv,
                const std::vector<size_t> &recvCounts) {
    Nccl &nc = nccl();
    void *stream = cuda::stream();
    size_t so = 0, ro = 0;
    check(nc.groupStart(), "ncclGroupStart");
    for (int64_t p = 0; p < n; ++p) {
      if (sendCounts[p])
        check(nc.send(send + so, sendCounts[p], kUint8, static_cast<int>(p), comm, stream),
              "ncclSend");
      if (recvCounts[p])
        check(nc.recv(recv + ro, recvCounts[p], kUint8, static_cast<int>(p), comm, stream),
              "ncclRecv");
      so += sendCounts[p];
      ro += recvCounts[p];
    }
    check(nc.groupEnd(), "ncclGroupEnd");
    wait();
  }
  /// One round through the staging buffers; `known` gives the receive sizes.
  void exchange(const std::vector<std::vector<uint8_t>> &send,
                std::vector<std::vector<uint8_t>> &recv, const std::vector<size_t> *known = nullptr) {
    std::vector<size_t> sb(n), rb(n);
    for (int64_t d = 0; d < n; ++d) {
      sb[d] = send[d].size();
      rb[d] = known ? (*known)[d] : sb[d];
    }
    std::vector<uint8_t> host;
    for (const auto &m : send)
      host.insert(host.end(), m.begin(), m.end());
    size_t inBytes = 0;
    for (size_t c : rb)
      inBytes += c;
    ensure(sendBuf, sendCap, std::max<size_t>(host.size(), 1));
    ensure(recvBuf, recvCap, std::max<size_t>(inBytes, 1));
    if (!host.empty())
      cuda::upload(sendBuf, host.data(), host.size());
    sendRecv(reinterpret_cast<const uint8_t *>(sendBuf), sb, reinterpret_cast<uint8_t *>(recvBuf),
             rb);
    std::vector<uint8_t> back(inBytes);
    if (!back.empty())
      cuda::download(back.data(), recvBuf, back.size());
    recv.assign(n, {});
    size_t at = 0;
    for (int64_t s = 0; s < n; ++s) {
      recv[s].assign(back.begin() + at, back.begin() + at + rb[s]);
      at += rb[s];
    }
  }
  /// Polls the stream and NCCL's async error until done or the timeout.
  void wait() {
    auto start = std::chrono::steady_clock::now();
    while (!cuda::streamDone("NCCL all-to-all")) {
      Result async = 0;
      nccl().commGetAsyncError(comm, &async);
      if (async != 0 && async != 7) {
        std::string why = std::string("NCCL error: ") + nccl().errorString(async);
        abort(why);
        throw Error(failure);
      }
      if (std::chrono::steady_clock::now() - start > timeout) {
        abort("timed out after " + std::to_string(timeout.count()) +
              " ms in an all-to-all (a peer rank died or stalled)");
        throw Error(failure);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  int64_t me, n;
  std::chrono::milliseconds timeout;
  Comm comm = nullptr;
  cuda::CUdeviceptr sendBuf = 0, recvBuf = 0;
  size_t sendCap = 0, recvCap = 0;
  bool failed = false;
  std::string failure;
};

} // namespace

std::unique_ptr<Transport> makeNcclTransport(int64_t rank, int64_t size, const std::string &idFile,
                                             std::chrono::milliseconds timeout) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error("EP over NCCL: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                " is not a valid rank");
  if (size > 1 && idFile.empty())
    throw Error("EP over NCCL with " + std::to_string(size) +
                " ranks needs a rendezvous file (K3C_EP_ID_FILE)");
  return std::make_unique<NcclTransport>(rank, size, idFile, timeout);
}

} // namespace k3c::rt
