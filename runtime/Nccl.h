//===- Nccl.h - the EP transport over NCCL, loaded at run time --*- C++ -*-===//
//
// libnccl.so.2 is opened with dlopen (the runtime builds without NCCL).
// all-to-all = sizes exchanged first, then grouped ncclSend/ncclRecv of the
// bytes through device staging buffers on the runtime's CUDA stream. Every
// wait polls ncclCommGetAsyncError and the stream with a timeout; on an
// error or a timeout the communicator is aborted and the call throws, so no
// rank waits forever.
//
// Rendezvous (runtime/Rendezvous.h): rank 0 creates the NCCL unique id and
// sends it to the other ranks over TCP (MASTER_ADDR:MASTER_PORT) or through
// a file (K3C_EP_ID_FILE); a single-rank group creates its own.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_RUNTIME_NCCL_H
#define K3C_RUNTIME_NCCL_H

#include "runtime/ExpertParallel.h"
#include "runtime/Rendezvous.h"

#include <chrono>
#include <memory>
#include <string>

namespace k3c::rt {

/// A transport for `rank` of `size` GPUs (one process each, the CUDA
/// runtime of this process already initialized). `how`: how rank 0's unique
/// id reaches the others (ignored when size is 1); `timeout` bounds the
/// rendezvous and every later wait.
std::unique_ptr<Transport> makeNcclTransport(int64_t rank, int64_t size, const IdRendezvous &how,
                                             std::chrono::milliseconds timeout);

} // namespace k3c::rt

#endif // K3C_RUNTIME_NCCL_H
