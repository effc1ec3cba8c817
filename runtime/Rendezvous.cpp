//===- Rendezvous.cpp - rank 0's id to every rank of an EP group ----------===//
//
// Wire format (all integers big-endian):
//   greeting, rank r -> rank 0:  "K3CRDV01" (8 bytes), u32 rank, u32 world
//   answer,   rank 0 -> rank r:  u8 status (0: ok, 1: refused), u32 length,
//                                 length bytes (the id, or why it was refused)
//
//===----------------------------------------------------------------------===//

#include "runtime/Rendezvous.h"

#include "support/Common.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace k3c::rt {

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'K', '3', 'C', 'R', 'D', 'V', '0', '1'};
constexpr uint32_t kMaxAnswer = 1u << 20;

std::string seconds(std::chrono::milliseconds t) {
  std::ostringstream s;
  s << t.count() / 1000.0 << " s";
  return s.str();
}

/// Milliseconds left until `deadline` (0 when past), for poll().
int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(Fd &&o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd &operator=(Fd &&o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

void putU32(std::string &out, uint32_t v) {
  uint32_t n = htonl(v);
  out.append(reinterpret_cast<const char *>(&n), 4);
}

uint32_t getU32(const char *p) {
  uint32_t n;
  std::memcpy(&n, p, 4);
  return ntohl(n);
}

/// Writes all of `data` before `deadline`; false when the peer went away or
/// the time ran out.
bool sendAll(int fd, const std::string &data, Clock::time_point deadline) {
  size_t done = 0;
  while (done < data.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, msLeft(deadline)) <= 0)
      return false;
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0)
      return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Reads exactly `n` bytes before `deadline`. Returns how many arrived (fewer
/// when the peer closed or the time ran out; `timedOut` tells which).
size_t recvAll(int fd, char *buf, size_t n, Clock::time_point deadline, bool &timedOut) {
  size_t done = 0;
  timedOut = false;
  while (done < n) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, msLeft(deadline));
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0) {
      timedOut = true;
      return done;
    }
    if (r < 0)
      return done;
    ssize_t got = ::recv(fd, buf + done, n - done, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (got <= 0)
      return done;
    done += static_cast<size_t>(got);
  }
  return done;
}

void setNonBlocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

struct AddrInfo {
  addrinfo *list = nullptr;
  ~AddrInfo() {
    if (list)
      ::freeaddrinfo(list);
  }
};

/// getaddrinfo for a TCP `host`:`port`; returns the gai error code (0 = ok).
int resolve(const std::string &host, int port, bool passive, AddrInfo &out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  return ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &out.list);
}

std::string hostPort(const std::string &host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

/// The answer to one rank.
std::string answer(uint8_t status, const std::string &body) {
  std::string out(1, static_cast<char>(status));
  putU32(out, static_cast<uint32_t>(body.size()));
  return out + body;
}

std::string idFromFile(const IdRendezvous &how, int64_t rank, int64_t world,
                       const std::string &payload, std::chrono::milliseconds timeout) {
  const std::string &path = how.idFile;
  if (rank == 0) {
    std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
      if (!out)
        throw Error("EP rendezvous: rank 0 cannot write the id file '" + tmp + "'");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec); // atomic: readers see all or nothing
    if (ec)
      throw Error("EP rendezvous: rank 0 cannot rename '" + tmp + "' to '" + path +
                  "': " + ec.message());
    return payload;
  }
  auto deadline = Clock::now() + timeout;
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!data.empty())
        return data;
    }
    if (Clock::now() > deadline)
      throw Error("EP rendezvous: rank " + std::to_string(rank) + " of " + std::to_string(world) +
                  " found no id from rank 0 in the file '" + path + "' after " +
                  seconds(timeout) + " (is rank 0 running, and the path shared by every rank?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

} // namespace

std::string IdRendezvous::describe() const {
  if (!idFile.empty())
    return "file " + idFile;
  return "tcp://" + hostPort(host, port);
}

int parsePort(const std::string &text, const std::string &name) {
  bool digits = !text.empty() && text.size() <= 5 &&
                std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  int port = digits ? std::stoi(text) : 0;
  if (port < 1 || port > 65535)
    throw Error(name + "='" + text + "' is not a TCP port (a number in [1, 65535])");
  return port;
}

RendezvousServer::RendezvousServer(const std::string &host, int port) {
  if (port < 0 || port > 65535)
    throw Error("EP rendezvous: port " + std::to_string(port) + " is outside [0, 65535]");
  AddrInfo ai;
  int gai = resolve(host, port, true, ai);
  if (gai != 0)
    throw Error("EP rendezvous: rank 0 cannot resolve its listening address '" + host +
                "': " + ::gai_strerror(gai));
  const addrinfo *a = ai.list;
  Fd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
  if (s.fd < 0)
    throw Error(std::string("EP rendezvous: socket() failed: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc = ::bind(s.fd, a->ai_addr, a->ai_addrlen);
  if (rc != 0 && errno == EADDRNOTAVAIL) {
    // MASTER_ADDR names this host from the outside (NAT, a DNS alias): listen
    // on every interface of that family, as torchrun's store does.
    sockaddr_storage any{};
    socklen_t len;
    if (a->ai_family == AF_INET6) {
      auto *v6 = reinterpret_cast<sockaddr_in6 *>(&any);
      v6->sin6_family = AF_INET6;
      v6->sin6_addr = in6addr_any;
      v6->sin6_port = htons(static_cast<uint16_t>(port));
      len = sizeof(sockaddr_in6);
    } else {
      auto *v4 = reinterpret_cast<sockaddr_in *>(&any);
      v4->sin_family = AF_INET;
      v4->sin_addr.s_addr = htonl(INADDR_ANY);
      v4->sin_port = htons(static_cast<uint16_t>(port));
      len = sizeof(sockaddr_in);
    }
    rc = ::bind(s.fd, reinterpret_cast<sockaddr *>(&any), len);
  }
  if (rc != 0) {
    int e = errno;
    throw Error("EP rendezvous: rank 0 cannot listen on " + hostPort(host, port) + ": " +
                std::strerror(e) +
                (e == EADDRINUSE ? " (another process holds the port: a second job, or "
                                   "torchrun's own store; choose another port with K3C_EP_PORT)"
                                 : ""));
  }
  if (::listen(s.fd, SOMAXCONN) != 0)
    throw Error("EP rendezvous: listen() on " + hostPort(host, port) +
                " failed: " + std::strerror(errno));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(s.fd, reinterpret_cast<sockaddr *>(&bound), &len);
  boundPort = ntohs(bound.ss_family == AF_INET6
                        ? reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port
                        : reinterpret_cast<sockaddr_in *>(&bound)->sin_port);
  where = hostPort(host, boundPort);
  fd = s.fd;
  s.fd = -1;
}

RendezvousServer::~RendezvousServer() {
  if (fd >= 0)
    ::close(fd);
}

void RendezvousServer::serve(int64_t world, const std::string &payload,
                             std::chrono::milliseconds timeout) {
  if (world < 1)
    throw Error("EP rendezvous: world size " + std::to_string(world) + " is not >= 1");
  auto deadline = Clock::now() + timeout;
  std::set<int64_t> served;
  int64_t strays = 0;
  while (static_cast<int64_t>(served.size()) < world - 1) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, msLeft(deadline));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      std::string missing;
      int64_t listed = 0;
      for (int64_t q = 1; q < world && listed < 16; ++q)
        if (!served.count(q)) {
          missing += (listed++ ? ", " : "") + std::to_string(q);
        }
      if (world - 1 - static_cast<int64_t>(served.size()) > listed)
        missing += ", ...";
      throw Error("EP rendezvous: rank 0, listening on " + where + ", heard from " +
                  std::to_string(served.size()) + " of " + std::to_string(world - 1) +
                  " other ranks within " + seconds(timeout) + "; missing rank(s) " + missing +
                  (strays ? " (" + std::to_string(strays) +
                                " connection(s) closed without a complete greeting)"
                          : "") +
                  " (are they started, with the same address, port and world size?)");
    }
    Fd c(::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (c.fd < 0)
      continue;
    // A greeting is 16 bytes: a peer gets a few seconds (bounded by the
    // deadline) before the next one is served.
    auto greetBy = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    char hello[16];
    bool timedOut = false;
    if (recvAll(c.fd, hello, sizeof(hello), greetBy, timedOut) != sizeof(hello) ||
        std::memcmp(hello, kMagic, sizeof(kMagic)) != 0) {
      ++strays;
      continue;
    }
    int64_t rank = getU32(hello + 8), theirs = getU32(hello + 12);
    std::string refusal;
    if (theirs != world)
      refusal = "world size mismatch: rank 0 has world size " + std::to_string(world) +
                ", rank " + std::to_string(rank) + " has " + std::to_string(theirs);
    else if (rank < 1 || rank >= world)
      refusal = "rank " + std::to_string(rank) + " is outside [1, " + std::to_string(world) + ")";
    else if (served.count(rank))
      refusal = "two processes claim rank " + std::to_string(rank);
    if (!refusal.empty()) {
      sendAll(c.fd, answer(1, refusal), Clock::now() + std::chrono::seconds(2));
      throw Error("EP rendezvous on " + where + ": " + refusal);
    }
    if (!sendAll(c.fd, answer(0, payload), deadline)) {
      ++strays; // it went away: it may come back (its own retry)
      continue;
    }
    served.insert(rank);
  }
}

std::string fetchId(const std::string &host, int port, int64_t rank, int64_t world,
                    std::chrono::milliseconds timeout) {
  const std::string where = hostPort(host, port);
  const std::string who = "EP rendezvous: rank " + std::to_string(rank) + " of " +
                          std::to_string(world);
  auto deadline = Clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(10);
  std::string lastError = "no attempt";
  while (true) {
    AddrInfo ai;
    int gai = resolve(host, port, false, ai);
    if (gai != 0 && gai != EAI_AGAIN)
      throw Error(who + ": cannot resolve the address of rank 0 '" + host +
                  "' (MASTER_ADDR): " + ::gai_strerror(gai));
    if (gai == EAI_AGAIN)
      lastError = std::string("resolving '") + host + "': " + ::gai_strerror(gai);
    for (const addrinfo *a = ai.list; a; a = a->ai_next) {
      Fd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (s.fd < 0) {
        lastError = std::string("socket(): ") + std::strerror(errno);
        continue;
      }
      // Non-blocking connect: an unreachable host must not outlast the deadline.
      setNonBlocking(s.fd, true);
      int rc = ::connect(s.fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{s.fd, POLLOUT, 0};
        int attempt = std::min(msLeft(deadline), 5000);
        if (::poll(&p, 1, attempt) <= 0) {
          lastError = "connect timed out";
          continue;
        }
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err ? -1 : 0;
        errno = err;
      }
      if (rc != 0) {
        lastError = std::strerror(errno);
        continue;
      }
      int one = 1;
      ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::string hello(kMagic, sizeof(kMagic));
      putU32(hello, static_cast<uint32_t>(rank));
      putU32(hello, static_cast<uint32_t>(world));
      if (!sendAll(s.fd, hello, deadline)) {
        lastError = "the connection closed while sending the greeting";
        continue;
      }
      char head[5];
      bool timedOut = false;
      size_t got = recvAll(s.fd, head, sizeof(head), deadline, timedOut);
      if (got == 0 && !timedOut) {
        // Accepted by the backlog, then closed: rank 0 went away (or is a
        // restarting process); keep trying until the deadline.
        lastError = "rank 0 closed the connection before answering";
        continue;
      }
      if (got != sizeof(head))
        throw Error(who + ": rank 0 at " + where +
                    (timedOut ? " accepted the connection but did not answer within " +
                                    seconds(timeout)
                              : " closed the connection in the middle of its answer (" +
                                    std::to_string(got) + " of 5 header bytes)"));
      uint8_t status = static_cast<uint8_t>(head[0]);
      uint32_t len = getU32(head + 1);
      if (status > 1 || len > kMaxAnswer)
        throw Error(who + ": the process at " + where +
                    " does not answer as a k3c rendezvous (another service on that port? "
                    "under torchrun, its agent's store may hold MASTER_PORT: set K3C_EP_PORT)");
      std::string body(len, '\0');
      got = recvAll(s.fd, body.data(), len, deadline, timedOut);
      if (got != len)
        throw Error(who + ": rank 0 at " + where + " closed the connection early (" +
                    std::to_string(got) + " of " + std::to_string(len) + " bytes of the id" +
                    (timedOut ? ", timed out" : "") + ")");
      if (status == 1)
        throw Error(who + ": rank 0 at " + where + " refused this rank: " + body);
      return body;
    }
    if (Clock::now() >= deadline)
      throw Error(who + " could not get the id from rank 0 at " + where + " within " +
                  seconds(timeout) + " (last error: " + lastError +
                  "); is rank 0 running, and are MASTER_ADDR/MASTER_PORT the same on every rank?");
    // One last attempt at the deadline.
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        backoff, std::chrono::milliseconds(msLeft(deadline))));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

std::string exchangeId(const IdRendezvous &how, int64_t rank, int64_t world,
                       const std::string &payload, std::chrono::milliseconds timeout) {
  if (world < 1 || rank < 0 || rank >= world)
    throw Error("EP rendezvous: rank " + std::to_string(rank) + " of " + std::to_string(world) +
                " is not a valid rank");
  if (world == 1)
    return payload;
  if (how.empty())
    throw Error("EP rendezvous with " + std::to_string(world) +
                " ranks needs MASTER_ADDR and MASTER_PORT (TCP to rank 0) or K3C_EP_ID_FILE "
                "(a file every rank can read)");
  if (!how.idFile.empty())
    return idFromFile(how, rank, world, payload, timeout);
  if (rank == 0) {
    RendezvousServer server(how.host, how.port);
    server.serve(world, payload, timeout);
    return payload;
  }
  return fetchId(how.host, how.port, rank, world, timeout);
}

} // namespace k3c::rt
