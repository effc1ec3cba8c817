//===- Cuda.h - the CUDA driver API, loaded at run time ---------*- C++ -*-===//
//
// libcuda.so.1 is opened with dlopen, so the runtime builds and runs on
// machines without CUDA; every call is checked and a failure names the call
// (and the kernel when there is one). The mgpu* launch ABI that generated
// launch code calls is implemented on top of it (Cuda.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef K3C_RUNTIME_CUDA_H
#define K3C_RUNTIME_CUDA_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace k3c::rt::cuda {

using CUdeviceptr = unsigned long long;

/// Loads the driver, initializes device 0's primary context and a stream.
/// Returns false (with a reason) when no usable GPU is present.
bool initialize(std::string &why);
bool available();
std::string deviceName();
/// Free and total device memory in bytes.
void memInfo(size_t &free, size_t &total);

CUdeviceptr alloc(size_t bytes, const std::string &what);
void release(CUdeviceptr p);
/// Device memory that grows in place (the paged MLA cache's pools): address
/// space for the whole buffer is reserved at once and physical memory mapped
/// onto it as it is needed, in the driver's granularity (2 MB on the H200),
/// so the address never changes (captured graphs stay valid) and memory
/// follows what is used. Each newly mapped range is zeroed.
struct GrowableMemory {
  CUdeviceptr base = 0;
  size_t reserved = 0, mapped = 0, granularity = 0;
  std::vector<unsigned long long> handles; ///< one a growth, mapped in order
  std::vector<size_t> sizes;
  GrowableMemory() = default;
  GrowableMemory(const GrowableMemory &) = delete;
  GrowableMemory &operator=(const GrowableMemory &) = delete;
  ~GrowableMemory();
  /// Reserves `bytes` of address space; false where the driver lacks
  /// virtual memory management or K3C_GROWABLE_POOLS=0 (allocate whole).
  bool reserve(size_t bytes);
  /// Maps memory so that [base, base + bytes) is usable; throws naming
  /// `what` when the device is out of memory.
  void ensure(size_t bytes, const std::string &what);
  /// Unmaps and releases the last growths while what stays mapped still
  /// covers [base, base + bytes); waits for the runtime's stream first (its
  /// launches may still touch them).
  void shrink(size_t bytes, const std::string &what);
};
void upload(CUdeviceptr dst, const void *src, size_t bytes);
void download(void *dst, CUdeviceptr src, size_t bytes);
/// Page-locks host memory [p, p + bytes) for the device's copies (copies
/// into it run at PCIe speed instead of through the driver's staging
/// buffers). False where the driver lacks cuMemHostRegister or refuses
/// (copies then stay pageable: nothing else changes).
bool pinHost(void *p, size_t bytes);
void unpinHost(void *p);
void zero(CUdeviceptr dst, size_t bytes);
/// Device-to-device copy on the runtime's stream (ordered with its launches).
void copyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
/// Device-to-device copies that overlap what is enqueued next on the
/// runtime's stream (e.g. a NCCL exchange's kernels): they start after
/// everything enqueued so far, run on a second stream, and joinSide() makes
/// the runtime's stream wait for them. Without cuStreamWaitEvent (or while
/// capturing a graph) copyBeside is copyAsync.
void copyBeside(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
void joinSide();
void synchronize(const char *where);
/// Makes the runtime's context current on the calling thread (a worker
/// thread that launches kernels or copies).
void bindThread();
/// The runtime's stream (a CUstream), for libraries that enqueue on it.
void *stream();
/// Whether the stream's work has finished (throws on an error).
bool streamDone(const char *where);

/// Programmatic dependent launch: while on, every kernel launch carries
/// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, so its blocks may
/// be scheduled before the kernel ahead of it on the stream completes (as
/// that kernel's blocks exit, or at once where they execute
/// griddepcontrol.launch_dependents: K3C_PDL=1 at compile time). Only for
/// kernel libraries whose every kernel first executes griddepcontrol.wait
/// (the manifest's cuda_library.grid_dependency). A driver without
/// cuLaunchKernelEx launches plainly.
void allowGridDependency(bool on);
bool gridDependencyAllowed();

/// A TMA tensor map as the generated launch code asks for it
/// (mgpuTensorMapEncodeTiledMemref: a ranked memref descriptor, a
/// CUtensorMapDataType, interleave / swizzle / L2 promotion / out-of-bounds
/// fill enums and the box in the memref's dimension order), in
/// cuTensorMapEncodeTiled's terms: innermost dimension first, byte strides
/// of the outer ones. Parsed and checked without a driver.
struct TensorMapRequest {
  int rank = 0, dataType = 0, interleave = 0, swizzle = 0, l2Promotion = 0, oobFill = 0;
  void *address = nullptr; ///< the memref's aligned pointer plus its offset
  uint64_t dims[5] = {1, 1, 1, 1, 1}, strides[4] = {0, 0, 0, 0};
  uint32_t box[5] = {1, 1, 1, 1, 1};
  /// Every field, for the cache of encoded maps.
  std::string key() const;
};
/// Reads `descriptor` (a ranked memref descriptor of `rank` dimensions:
/// allocated and aligned pointers, offset, sizes, strides) into `out` and
/// checks TMA's constraints: rank 1..5, a known data type, a contiguous
/// innermost dimension, a 16-byte aligned start, outer strides multiples of
/// 16 bytes below 2^40, boxes of 1..256 elements a dimension whose inner
/// extent is a multiple of 16 bytes (at most the swizzle's span). A
/// dimension of size 0 (an empty launch, whose grid never runs) is encoded
/// as 1. Returns "" or why the map cannot be made.
std::string tensorMapRequest(int64_t rank, const void *descriptor, int64_t dataType,
                             int64_t interleave, int64_t swizzle, int64_t l2Promotion,
                             int64_t oobFill, const int64_t *box, TensorMapRequest &out);
/// Tensor maps encoded so far (each once, in device memory; the generated
/// launch code asks for one per launch).
size_t tensorMapCount();

/// Launch errors recorded by the mgpu* ABI (which cannot throw through
/// generated code); checked after every kernel entry point.
void checkLaunchError(const std::string &kernel);

/// CUDA graphs: capture the launches issued between begin and end on the
/// runtime's stream (stream synchronizations requested by the generated code
/// are skipped while capturing), then replay them.
bool beginCapture();
void *endCapture(); ///< an executable graph, or null if capture failed
void launchGraph(void *exec);
void destroyGraph(void *exec);

/// Marks inside a CUDA graph capture (profiling a replayed graph): an
/// event recorded as a graph node (CU_EVENT_RECORD_EXTERNAL), so each replay
/// records it between the captured launches around it. False when the
/// driver lacks cuEventRecordWithFlags.
bool canMarkGraphs();
/// K3C_PROFILE_LAUNCHES is on: every launch is timed eagerly, so profiling
/// does not replay graphs.
bool launchesProfiled();
void *markEvent(); ///< a new event recorded on the capturing stream
/// Seconds between two marks of the last replay (after it finished).
double markSeconds(void *from, void *to);
void destroyEvent(void *ev);

/// Device-event timing around a region (profiling).
struct Timer {
  void *start = nullptr, *stop = nullptr;
  Timer() = default;
  Timer(const Timer &) = delete;
  Timer &operator=(const Timer &) = delete;
  ~Timer(); ///< destroys its events
  void begin();
  void end();             ///< records the stop event (does not wait)
  double seconds() const; ///< waits for the stop event: seconds since begin
  double endSeconds() {
    end();
    return seconds();
  }
};

} // namespace k3c::rt::cuda

#endif // K3C_RUNTIME_CUDA_H
