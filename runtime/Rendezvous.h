//===- Rendezvous.h - rank 0's id to every rank of an EP group -*- C++ -*-===//
//
// Before NCCL can connect a group, every rank needs the same opaque unique
// id, which rank 0 creates. Two ways to share it (docs/runtime.md,
// "Launching"):
//
//  * TCP: rank 0 listens on MASTER_ADDR:MASTER_PORT; every other rank
//    connects (retrying with backoff until the timeout), says who it is
//    (rank, world size) and receives the id. Rank 0 checks the world sizes
//    agree and that no rank comes twice. No shared file system needed.
//  * a file (K3C_EP_ID_FILE): rank 0 writes it atomically, the others poll.
//
// POSIX sockets only; no LLVM/MLIR, no other dependency. Every failure
// (bad port, unresolvable host, timeout, a peer that closes early, a
// world-size mismatch) throws k3c::Error naming the address and the ranks.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_RUNTIME_RENDEZVOUS_H
#define K3C_RUNTIME_RENDEZVOUS_H

#include <chrono>
#include <cstdint>
#include <string>

namespace k3c::rt {

/// How rank 0's id reaches the other ranks: a file when `idFile` is set,
/// else TCP to `host`:`port`.
struct IdRendezvous {
  std::string idFile;
  std::string host;
  int port = 0;
  bool empty() const { return idFile.empty() && host.empty(); }
  /// "file PATH" or "tcp://HOST:PORT" (for messages).
  std::string describe() const;
};

/// Rank 0 publishes `payload` (rank 0's id; ignored on the other ranks) and
/// every rank returns it. Collective over the `world` ranks; throws after
/// `timeout` when the group does not come together.
std::string exchangeId(const IdRendezvous &how, int64_t rank, int64_t world,
                       const std::string &payload, std::chrono::milliseconds timeout);

/// A TCP port from text: a decimal number in [1, 65535]. `name` (e.g.
/// "MASTER_PORT") is quoted in the error.
int parsePort(const std::string &text, const std::string &name);

/// Rank 0's side of the TCP rendezvous: listens from construction (so the
/// port is taken before any rank is told about it); port 0 picks a free port.
class RendezvousServer {
public:
  /// Listens on `host`'s address, or on every interface of its address
  /// family when `host` is not an address of this machine.
  RendezvousServer(const std::string &host, int port);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer &) = delete;
  RendezvousServer &operator=(const RendezvousServer &) = delete;
  /// The port it listens on.
  int port() const { return boundPort; }
  /// Waits for ranks 1..world-1, sends each `payload`. Throws (after telling
  /// the offending peer why) on a world-size mismatch, a rank outside
  /// [1, world) or a rank that comes twice; after `timeout`, naming the
  /// missing ranks. Connections that close before a complete greeting (port
  /// scanners, health checks) are ignored.
  void serve(int64_t world, const std::string &payload, std::chrono::milliseconds timeout);

private:
  int fd = -1;
  int boundPort = 0;
  std::string where; ///< "HOST:PORT" for messages
};

/// The other ranks' side: connects to `host`:`port` (retrying with backoff
/// while rank 0 is not listening yet), sends (rank, world) and returns the
/// payload.
std::string fetchId(const std::string &host, int port, int64_t rank, int64_t world,
                    std::chrono::milliseconds timeout);

} // namespace k3c::rt

#endif // K3C_RUNTIME_RENDEZVOUS_H
