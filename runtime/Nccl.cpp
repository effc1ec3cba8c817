//===- Nccl.cpp - the EP transport over NCCL ------------------------------===//

#include "runtime/Nccl.h"

#include "support/Common.h"
#include "runtime/Cuda.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
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
  NcclTransport(int64_t rank, int64_t size, const IdRendezvous &how,
                std::chrono::milliseconds timeout)
      : me(rank), n(size), timeout(timeout) {
    Nccl &nc = nccl();
    if (!cuda::available())
      throw Error("EP over NCCL needs the CUDA device (run with --device cuda)");
    UniqueId id;
    std::string mine;
    if (rank == 0) {
      check(nc.getUniqueId(&id), "ncclGetUniqueId");
      mine.assign(id.internal, sizeof(id.internal));
    }
    std::string got = exchangeId(how, rank, size, mine, timeout);
    if (got.size() != sizeof(id.internal))
      throw Error("EP rank " + std::to_string(rank) + ": the NCCL id from rank 0 (" +
                  how.describe() + ") has " + std::to_string(got.size()) + " bytes, not " +
                  std::to_string(sizeof(id.internal)));
    std::memcpy(id.internal, got.data(), sizeof(id.internal));
    check(nc.commInitRank(&comm, static_cast<int>(size), id, static_cast<int>(rank)),
          "ncclCommInitRank");
    // NCCL connects a pair of ranks at their first send/recv (hundreds of
    // milliseconds over NVLink): one small exchange with every peer here, so
    // that cost is not paid inside the first MoE layer. K3C_EP_WARMUP=0 skips it.
    if (size > 1 && k3c::envSwitch("K3C_EP_WARMUP", true)) {
      ensure(sendBuf, sendCap, 4096 * static_cast<size_t>(size));
      ensure(recvBuf, recvCap, 4096 * static_cast<size_t>(size));
      std::vector<Piece> s, r;
      for (int64_t p = 0; p < size; ++p)
        if (p != rank) {
          s.push_back({p, reinterpret_cast<void *>(sendBuf + 4096 * p), 4096});
          r.push_back({p, reinterpret_cast<void *>(recvBuf + 4096 * p), 4096});
        }
      group(s, r);
    }
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

  void exchangePieces(const std::vector<Piece> &sends, const std::vector<Piece> &recvs,
                      bool device) override {
    if (failed)
      throw Error(failure);
    checkPeers(sends, recvs);
    size_t out = 0;
    for (const Piece &p : sends)
      out += p.bytes;
    if (device) {
      // Device memory: NCCL reads and writes the pieces where they are.
      group(sends, recvs, deferDeviceWaits);
    } else {
      flush();
      // Host memory: through the staging buffers, in piece order.
      size_t in = 0;
      for (const Piece &p : recvs)
        in += p.bytes;
      ensure(sendBuf, sendCap, std::max<size_t>(out, 1));
      ensure(recvBuf, recvCap, std::max<size_t>(in, 1));
      std::vector<uint8_t> host(out);
      std::vector<Piece> ds, dr;
      size_t at = 0;
      for (const Piece &p : sends) {
        if (p.bytes)
          std::memcpy(host.data() + at, p.ptr, p.bytes);
        ds.push_back({p.peer, reinterpret_cast<void *>(sendBuf + at), p.bytes});
        at += p.bytes;
      }
      at = 0;
      for (const Piece &p : recvs) {
        dr.push_back({p.peer, reinterpret_cast<void *>(recvBuf + at), p.bytes});
        at += p.bytes;
      }
      if (out)
        cuda::upload(sendBuf, host.data(), out);
      group(ds, dr);
      std::vector<uint8_t> back(in);
      if (in)
        cuda::download(back.data(), recvBuf, in);
      at = 0;
      for (const Piece &p : recvs) {
        if (p.bytes)
          std::memcpy(p.ptr, back.data() + at, p.bytes);
        at += p.bytes;
      }
    }
    bytesSent += static_cast<int64_t>(out);
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
  /// One grouped ncclSend/ncclRecv round over device pieces (pieces between
  /// two ranks match in order), waited for with the async-error and timeout
  /// checks.
  void group(const std::vector<Piece> &sends, const std::vector<Piece> &recvs,
             bool defer = false) {
    Nccl &nc = nccl();
    void *stream = cuda::stream();
    // Pieces to this rank itself are device copies (matched in order), not
    // NCCL self-sends (which take NCCL's channels), on a second stream so
    // they overlap the sends to the other ranks; the runtime's stream waits
    // for both.
    std::vector<const Piece *> selfSend, selfRecv;
    for (const Piece &p : sends)
      if (p.bytes && p.peer == me)
        selfSend.push_back(&p);
    for (const Piece &p : recvs)
      if (p.bytes && p.peer == me)
        selfRecv.push_back(&p);
    if (selfSend.size() != selfRecv.size())
      throw Error("EP rank " + std::to_string(me) + ": " + std::to_string(selfSend.size()) +
                  " pieces to itself but " + std::to_string(selfRecv.size()) + " from itself");
    for (size_t i = 0; i < selfSend.size(); ++i) {
      if (selfSend[i]->bytes != selfRecv[i]->bytes)
        throw Error("EP rank " + std::to_string(me) + ": a piece to itself of " +
                    std::to_string(selfSend[i]->bytes) + " bytes is received as " +
                    std::to_string(selfRecv[i]->bytes));
      cuda::copyBeside(reinterpret_cast<cuda::CUdeviceptr>(selfRecv[i]->ptr),
                       reinterpret_cast<cuda::CUdeviceptr>(selfSend[i]->ptr), selfSend[i]->bytes);
    }
    check(nc.groupStart(), "ncclGroupStart");
    for (const Piece &p : sends)
      if (p.bytes && p.peer != me)
        check(nc.send(p.ptr, p.bytes, kUint8, static_cast<int>(p.peer), comm, stream), "ncclSend");
    for (const Piece &p : recvs)
      if (p.bytes && p.peer != me)
        check(nc.recv(p.ptr, p.bytes, kUint8, static_cast<int>(p.peer), comm, stream), "ncclRecv");
    check(nc.groupEnd(), "ncclGroupEnd");
    cuda::joinSide();
    if (defer)
      pending = true;
    else
      wait();
  }
  /// Host messages of any size: the sizes first (8 bytes to and from every
  /// rank), then the bytes; both through the staging buffers.
  void exchange(const std::vector<std::vector<uint8_t>> &send,
                std::vector<std::vector<uint8_t>> &recv, const std::vector<size_t> *known = nullptr) {
    std::vector<Piece> out, in;
    recv.assign(n, {});
    for (int64_t d = 0; d < n; ++d) {
      recv[d].resize(known ? (*known)[d] : send[d].size());
      out.push_back({d, const_cast<uint8_t *>(send[d].data()), send[d].size()});
      in.push_back({d, recv[d].data(), recv[d].size()});
    }
    int64_t counted = bytesSent; // allToAll counts its payload itself
    exchangePieces(out, in, /*device=*/false);
    bytesSent = counted;
  }
  void flush() override {
    if (pending)
      wait();
  }
  /// Polls the stream and NCCL's async error until done or the timeout.
  void wait() {
    pending = false;
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
      // Spin (yielding) for the first 2 ms: a small exchange finishes in
      // tens of microseconds, and a sleep's granularity would dominate it.
      if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  int64_t me, n;
  std::chrono::milliseconds timeout;
  Comm comm = nullptr;
  cuda::CUdeviceptr sendBuf = 0, recvBuf = 0;
  size_t sendCap = 0, recvCap = 0;
  bool failed = false, pending = false;
  std::string failure;
};

} // namespace

std::unique_ptr<Transport> makeNcclTransport(int64_t rank, int64_t size, const IdRendezvous &how,
                                             std::chrono::milliseconds timeout) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error("EP over NCCL: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                " is not a valid rank");
  if (size > 1 && how.empty())
    throw Error("EP over NCCL with " + std::to_string(size) +
                " ranks needs a rendezvous: MASTER_ADDR and MASTER_PORT, or K3C_EP_ID_FILE");
  return std::make_unique<NcclTransport>(rank, size, how, timeout);
}

} // namespace k3c::rt
