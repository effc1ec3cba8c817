//===- Cuda.cpp - CUDA driver loader and the mgpu* launch ABI -------------===//

#include "runtime/Cuda.h"

#include "support/Common.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <vector>
#include <map>
#include <mutex>
#include <tuple>

namespace k3c::rt::cuda {

namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUevent = void *;

/// CUlaunchAttribute and CUlaunchConfig of cuda.h (CUDA 12+), for
/// cuLaunchKernelEx: a 4-byte attribute id padded to 8, a 64-byte value.
struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmaticStreamSerializationAllowed;
    unsigned clusterDim[3];
  } value;
};
static_assert(sizeof(LaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes");
struct LaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  CUstream hStream;
  LaunchAttribute *attrs;
  unsigned numAttrs;
};
constexpr int kLaunchAttributeClusterDimension = 4;
constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;

/// CUmemLocation, CUmemAllocationProp and CUmemAccessDesc of cuda.h (virtual
/// memory management, CUDA >= 10.2).
struct MemLocation {
  int type; ///< CU_MEM_LOCATION_TYPE_DEVICE = 1
  int id;
};
struct MemAllocationProp {
  int type;                 ///< CU_MEM_ALLOCATION_TYPE_PINNED = 1
  int requestedHandleTypes; ///< 0: none
  MemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType, gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
static_assert(sizeof(MemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");
struct MemAccessDesc {
  MemLocation location;
  int flags; ///< CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
};
static_assert(sizeof(MemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");

struct Driver {
  void *lib = nullptr;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuMemGetInfo)(size_t *, size_t *);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernelEx)(const LaunchConfig *, CUfunction, void **,
                               void **) = nullptr; // optional (CUDA >= 12.0)
  bool gridDependency = false; ///< allowGridDependency
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr; // optional
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventRecordWithFlags)(CUevent, CUstream, unsigned) = nullptr; // optional
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, void **);
  CUresult (*cuGraphInstantiateWithFlags)(void **, void *, unsigned long long);
  CUresult (*cuGraphLaunch)(void *, CUstream);
  CUresult (*cuGraphExecDestroy)(void *);
  CUresult (*cuGraphDestroy)(void *);
  CUresult (*cuFuncGetName)(const char **, CUfunction) = nullptr; // optional (CUDA >= 12.3)
  /// TMA tensor maps (CUDA >= 12.0; optional: only kernels built with
  /// K3C_WGMMA_TMA ask for them).
  CUresult (*cuTensorMapEncodeTiled)(void *, int, unsigned, void *, const uint64_t *,
                                     const uint64_t *, const uint32_t *, const uint32_t *, int,
                                     int, int, int) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream) = nullptr;
  CUstream mapStream = nullptr; ///< tensor-map uploads (non-blocking: legal while capturing)
  CUresult (*cuMemHostRegister)(void *, size_t, unsigned) = nullptr; // optional
  /// Virtual memory management (optional): growable buffers.
  CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
                                  unsigned long long) = nullptr;
  CUresult (*cuMemAddressFree)(CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemCreate)(unsigned long long *, size_t, const MemAllocationProp *,
                          unsigned long long) = nullptr;
  CUresult (*cuMemRelease)(unsigned long long) = nullptr;
  CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, unsigned long long,
                       unsigned long long) = nullptr;
  CUresult (*cuMemUnmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*cuOccupancyMaxActiveClusters)(int *, CUfunction, const LaunchConfig *) =
      nullptr; // optional
  CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const MemAccessDesc *, size_t) = nullptr;
  CUresult (*cuMemGetAllocationGranularity)(size_t *, const MemAllocationProp *, int) = nullptr;
  CUdevice dev = 0;
  CUresult (*cuMemHostUnregister)(void *) = nullptr;
  bool capturing = false;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  CUstream side = nullptr;                  ///< copyBeside's stream (made on first use)
  CUevent forkEv = nullptr, joinEv = nullptr; ///< ordering between the two streams
  bool forked = false;
  std::string name;
  bool ready = false;
};

Driver d;
std::mutex launchMutex;
thread_local std::string launchError; // per thread: each checks its own launches

std::string errorText(CUresult r) {
  const char *s = nullptr;
  if (d.cuGetErrorString)
    d.cuGetErrorString(r, &s);
  return s ? s : ("CUDA error " + std::to_string(r));
}

void check(CUresult r, const char *call, const std::string &what = "") {
  if (r != 0)
    throw Error(std::string(call) + " failed: " + errorText(r) + (what.empty() ? "" : " (" + what + ")"));
}

template <typename F> bool bind(F &f, const char *name) {
  f = reinterpret_cast<F>(dlsym(d.lib, name));
  return f != nullptr;
}

} // namespace

bool initialize(std::string &why) {
  if (d.ready)
    return true;
  d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!d.lib) {
    why = "libcuda.so.1 not found (no NVIDIA driver)";
    return false;
  }
  bool ok = bind(d.cuInit, "cuInit") && bind(d.cuDeviceGetCount, "cuDeviceGetCount") &&
            bind(d.cuDeviceGet, "cuDeviceGet") && bind(d.cuDeviceGetName, "cuDeviceGetName") &&
            bind(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
            bind(d.cuCtxSetCurrent, "cuCtxSetCurrent") &&
            bind(d.cuCtxSynchronize, "cuCtxSynchronize") && bind(d.cuMemAlloc, "cuMemAlloc_v2") &&
            bind(d.cuMemFree, "cuMemFree_v2") && bind(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2") &&
            bind(d.cuMemcpyDtoH, "cuMemcpyDtoH_v2") &&
            bind(d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2") && bind(d.cuMemsetD8, "cuMemsetD8_v2") &&
            bind(d.cuMemGetInfo, "cuMemGetInfo_v2") &&
            bind(d.cuModuleLoadData, "cuModuleLoadData") &&
            bind(d.cuModuleUnload, "cuModuleUnload") &&
            bind(d.cuModuleGetFunction, "cuModuleGetFunction") &&
            bind(d.cuLaunchKernel, "cuLaunchKernel") &&
            bind(d.cuFuncSetAttribute, "cuFuncSetAttribute") &&
            bind(d.cuStreamCreate, "cuStreamCreate") &&
            bind(d.cuStreamSynchronize, "cuStreamSynchronize") &&
            bind(d.cuStreamQuery, "cuStreamQuery") &&
            bind(d.cuEventCreate, "cuEventCreate") && bind(d.cuEventRecord, "cuEventRecord") &&
            bind(d.cuEventSynchronize, "cuEventSynchronize") &&
            bind(d.cuEventElapsedTime, "cuEventElapsedTime") &&
            bind(d.cuGetErrorString, "cuGetErrorString");
  if (!bind(d.cuLaunchKernelEx, "cuLaunchKernelEx"))
    d.cuLaunchKernelEx = nullptr;
  if (!bind(d.cuFuncGetName, "cuFuncGetName"))
    d.cuFuncGetName = nullptr;
  if (!bind(d.cuOccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters"))
    d.cuOccupancyMaxActiveClusters = nullptr;
  if (!bind(d.cuEventRecordWithFlags, "cuEventRecordWithFlags"))
    d.cuEventRecordWithFlags = nullptr;
  if (!bind(d.cuStreamWaitEvent, "cuStreamWaitEvent"))
    d.cuStreamWaitEvent = nullptr;
  if (!bind(d.cuEventDestroy, "cuEventDestroy_v2"))
    d.cuEventDestroy = nullptr;
  if (!(bind(d.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled") &&
        bind(d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")))
    d.cuTensorMapEncodeTiled = nullptr;
  if (!(bind(d.cuMemAddressReserve, "cuMemAddressReserve") &&
        bind(d.cuMemAddressFree, "cuMemAddressFree") && bind(d.cuMemCreate, "cuMemCreate") &&
        bind(d.cuMemRelease, "cuMemRelease") && bind(d.cuMemMap, "cuMemMap") &&
        bind(d.cuMemUnmap, "cuMemUnmap") && bind(d.cuMemSetAccess, "cuMemSetAccess") &&
        bind(d.cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity")))
    d.cuMemAddressReserve = nullptr; // growable buffers are allocated whole
  if (!(bind(d.cuMemHostRegister, "cuMemHostRegister_v2") &&
        bind(d.cuMemHostUnregister, "cuMemHostUnregister")))
    d.cuMemHostRegister = nullptr;
  // Graph support is optional: without it decode runs eagerly.
  if (!(bind(d.cuStreamBeginCapture, "cuStreamBeginCapture_v2") &&
        bind(d.cuStreamEndCapture, "cuStreamEndCapture") &&
        bind(d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags") &&
        bind(d.cuGraphLaunch, "cuGraphLaunch") &&
        bind(d.cuGraphExecDestroy, "cuGraphExecDestroy") &&
        bind(d.cuGraphDestroy, "cuGraphDestroy")))
    d.cuStreamBeginCapture = nullptr;
  if (!ok) {
    why = "libcuda.so.1 lacks a driver API entry point this runtime needs";
    return false;
  }
  if (d.cuInit(0) != 0) {
    why = "cuInit failed (no usable GPU)";
    return false;
  }
  int count = 0;
  if (d.cuDeviceGetCount(&count) != 0 || count == 0) {
    why = "no CUDA device";
    return false;
  }
  CUdevice dev;
  check(d.cuDeviceGet(&dev, 0), "cuDeviceGet");
  d.dev = dev;
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName");
  d.name = name;
  check(d.cuDevicePrimaryCtxRetain(&d.ctx, dev), "cuDevicePrimaryCtxRetain");
  check(d.cuCtxSetCurrent(d.ctx), "cuCtxSetCurrent");
  check(d.cuStreamCreate(&d.stream, 0), "cuStreamCreate");
  d.ready = true;
  return true;
}

bool available() { return d.ready; }

void allowGridDependency(bool on) { d.gridDependency = on && d.cuLaunchKernelEx; }
bool gridDependencyAllowed() { return d.gridDependency; }
std::string deviceName() { return d.name; }

void memInfo(size_t &free, size_t &total) { check(d.cuMemGetInfo(&free, &total), "cuMemGetInfo"); }

CUdeviceptr alloc(size_t bytes, const std::string &what) {
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAlloc(&p, bytes ? bytes : 1);
  if (r != 0) {
    size_t free = 0, total = 0;
    d.cuMemGetInfo(&free, &total);
    throw Error("out of device memory allocating " + std::to_string(bytes) + " bytes for " + what +
                " (" + std::to_string(free) + " of " + std::to_string(total) +
                " bytes free): " + errorText(r));
  }
  return p;
}

namespace {
MemAllocationProp deviceProp() {
  MemAllocationProp prop{};
  prop.type = 1;
  prop.location = {1, d.dev};
  return prop;
}
} // namespace

GrowableMemory::~GrowableMemory() {
  if (!base || !d.ready)
    return;
  size_t off = 0;
  for (size_t i = 0; i < handles.size(); ++i) {
    d.cuMemUnmap(base + off, sizes[i]);
    d.cuMemRelease(handles[i]);
    off += sizes[i];
  }
  d.cuMemAddressFree(base, reserved);
}

bool GrowableMemory::reserve(size_t bytes) {
  if (!d.cuMemAddressReserve || !k3c::envSwitch("K3C_GROWABLE_POOLS", true))
    return false;
  MemAllocationProp prop = deviceProp();
  size_t g = 0;
  if (d.cuMemGetAllocationGranularity(&g, &prop, /*MINIMUM*/ 0) != 0 || g == 0)
    return false;
  const size_t size = (std::max<size_t>(bytes, 1) + g - 1) / g * g;
  CUdeviceptr p = 0;
  if (d.cuMemAddressReserve(&p, size, g, 0, 0) != 0)
    return false;
  base = p;
  reserved = size;
  granularity = g;
  return true;
}

void GrowableMemory::ensure(size_t bytes, const std::string &what) {
  if (bytes <= mapped)
    return;
  if (bytes > reserved)
    throw Error("growing " + what + " to " + std::to_string(bytes) + " bytes: only " +
                std::to_string(reserved) + " are reserved");
  const size_t upTo = std::min(reserved, (bytes + granularity - 1) / granularity * granularity);
  const size_t grow = upTo - mapped;
  MemAllocationProp prop = deviceProp();
  unsigned long long h = 0;
  if (CUresult r = d.cuMemCreate(&h, grow, &prop, 0)) {
    size_t free = 0, total = 0;
    d.cuMemGetInfo(&free, &total);
    throw Error("out of device memory growing " + what + " by " + std::to_string(grow) +
                " bytes to " + std::to_string(upTo) + " (" + std::to_string(free) + " of " +
                std::to_string(total) + " bytes free): " + errorText(r));
  }
  if (CUresult r = d.cuMemMap(base + mapped, grow, 0, h, 0)) {
    d.cuMemRelease(h);
    throw Error("cuMemMap failed growing " + what + ": " + errorText(r));
  }
  MemAccessDesc access{{1, d.dev}, 3};
  if (CUresult r = d.cuMemSetAccess(base + mapped, grow, &access, 1)) {
    d.cuMemUnmap(base + mapped, grow);
    d.cuMemRelease(h);
    throw Error("cuMemSetAccess failed growing " + what + ": " + errorText(r));
  }
  handles.push_back(h);
  sizes.push_back(grow);
  check(d.cuMemsetD8(base + mapped, 0, grow), "cuMemsetD8", what);
  mapped = upTo;
}

void GrowableMemory::shrink(size_t bytes, const std::string &what) {
  if (handles.empty() || mapped - sizes.back() < bytes)
    return;
  synchronize(("shrinking " + what).c_str());
  while (!handles.empty() && mapped - sizes.back() >= bytes) {
    // (unmapped before `mapped` drops: a failure leaves the growth listed,
    // for the destructor)
    const size_t from = mapped - sizes.back();
    check(d.cuMemUnmap(base + from, sizes.back()), "cuMemUnmap", what);
    const unsigned long long h = handles.back();
    handles.pop_back();
    sizes.pop_back();
    mapped = from;
    check(d.cuMemRelease(h), "cuMemRelease", what);
  }
}

void release(CUdeviceptr p) {
  if (p && d.ready)
    d.cuMemFree(p);
}
void upload(CUdeviceptr dst, const void *src, size_t bytes) {
  check(d.cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD");
}
void download(void *dst, CUdeviceptr src, size_t bytes) {
  check(d.cuStreamSynchronize(d.stream), "cuStreamSynchronize");
  check(d.cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH");
}
bool pinHost(void *p, size_t bytes) {
  return d.ready && d.cuMemHostRegister && p && bytes &&
         d.cuMemHostRegister(p, bytes, /*CU_MEMHOSTREGISTER_PORTABLE*/ 1) == 0;
}
void unpinHost(void *p) {
  if (d.ready && d.cuMemHostRegister && p)
    d.cuMemHostUnregister(p);
}
void zero(CUdeviceptr dst, size_t bytes) { check(d.cuMemsetD8(dst, 0, bytes), "cuMemsetD8"); }
void copyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  check(d.cuMemcpyDtoDAsync(dst, src, bytes, d.stream), "cuMemcpyDtoDAsync");
}
void copyBeside(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (!d.cuStreamWaitEvent || d.capturing) {
    copyAsync(dst, src, bytes);
    return;
  }
  if (!d.side) {
    check(d.cuStreamCreate(&d.side, /*CU_STREAM_NON_BLOCKING*/ 1), "cuStreamCreate (side stream)");
    check(d.cuEventCreate(&d.forkEv, /*CU_EVENT_DISABLE_TIMING*/ 2), "cuEventCreate");
    check(d.cuEventCreate(&d.joinEv, 2), "cuEventCreate");
  }
  if (!d.forked) {
    // The copies start after everything enqueued on the runtime's stream.
    check(d.cuEventRecord(d.forkEv, d.stream), "cuEventRecord");
    check(d.cuStreamWaitEvent(d.side, d.forkEv, 0), "cuStreamWaitEvent");
    d.forked = true;
  }
  check(d.cuMemcpyDtoDAsync(dst, src, bytes, d.side), "cuMemcpyDtoDAsync (side stream)");
}
void joinSide() {
  if (!d.forked)
    return;
  check(d.cuEventRecord(d.joinEv, d.side), "cuEventRecord");
  check(d.cuStreamWaitEvent(d.stream, d.joinEv, 0), "cuStreamWaitEvent");
  d.forked = false;
}
void synchronize(const char *where) { check(d.cuStreamSynchronize(d.stream), where); }

void *stream() { return d.stream; }

void bindThread() {
  if (d.ready)
    check(d.cuCtxSetCurrent(d.ctx), "cuCtxSetCurrent");
}

bool streamDone(const char *where) {
  CUresult r = d.cuStreamQuery(d.stream);
  if (r == 600) // CUDA_ERROR_NOT_READY
    return false;
  check(r, where);
  return true;
}

void checkLaunchError(const std::string &kernel) {
  std::lock_guard<std::mutex> g(launchMutex);
  if (!launchError.empty()) {
    std::string e = launchError;
    launchError.clear();
    throw Error("kernel " + kernel + ": " + e);
  }
}

bool beginCapture() {
  if (!d.cuStreamBeginCapture)
    return false;
  // Relaxed mode: the loader's other driver calls (module/function lookups)
  // stay legal while capturing.
  if (d.cuStreamBeginCapture(d.stream, /*CU_STREAM_CAPTURE_MODE_RELAXED=*/2) != 0)
    return false;
  d.capturing = true;
  return true;
}

void *endCapture() {
  d.capturing = false;
  void *graph = nullptr, *exec = nullptr;
  if (d.cuStreamEndCapture(d.stream, &graph) != 0 || !graph)
    return nullptr;
  CUresult r = d.cuGraphInstantiateWithFlags(&exec, graph, 0);
  d.cuGraphDestroy(graph);
  return r == 0 ? exec : nullptr;
}

void launchGraph(void *exec) { check(d.cuGraphLaunch(exec, d.stream), "cuGraphLaunch"); }

void destroyGraph(void *exec) {
  if (exec && d.ready)
    d.cuGraphExecDestroy(exec);
}

bool canMarkGraphs() { return d.cuEventRecordWithFlags && d.cuStreamBeginCapture; }

bool launchesProfiled() {
  return k3c::envSwitch("K3C_PROFILE_LAUNCHES", false);
}

void *markEvent() {
  CUevent ev = nullptr;
  check(d.cuEventCreate(&ev, 0), "cuEventCreate");
  check(d.cuEventRecordWithFlags(ev, d.stream, /*CU_EVENT_RECORD_EXTERNAL=*/1),
        "cuEventRecordWithFlags");
  return ev;
}

double markSeconds(void *from, void *to) {
  float ms = 0;
  check(d.cuEventElapsedTime(&ms, static_cast<CUevent>(from), static_cast<CUevent>(to)),
        "cuEventElapsedTime");
  return ms / 1e3;
}

void destroyEvent(void *ev) {
  if (ev && d.ready && d.cuEventDestroy)
    d.cuEventDestroy(static_cast<CUevent>(ev));
}

void Timer::begin() {
  if (!start) {
    check(d.cuEventCreate(&start, 0), "cuEventCreate");
    check(d.cuEventCreate(&stop, 0), "cuEventCreate");
  }
  check(d.cuEventRecord(start, d.stream), "cuEventRecord");
}

Timer::~Timer() {
  destroyEvent(start);
  destroyEvent(stop);
}

void Timer::end() { check(d.cuEventRecord(stop, d.stream), "cuEventRecord"); }

double Timer::seconds() const {
  check(d.cuEventSynchronize(stop), "cuEventSynchronize");
  float ms = 0;
  check(d.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
  return ms / 1e3;
}

std::string TensorMapRequest::key() const {
  std::string k;
  auto put = [&](uint64_t v) { k.append(reinterpret_cast<const char *>(&v), sizeof(v)); };
  for (int v : {rank, dataType, interleave, swizzle, l2Promotion, oobFill})
    put(static_cast<uint64_t>(v));
  put(reinterpret_cast<uintptr_t>(address));
  for (int i = 0; i < 5; ++i)
    put(dims[i]), put(box[i]);
  for (uint64_t v : strides)
    put(v);
  return k;
}

std::string tensorMapRequest(int64_t rank, const void *descriptor, int64_t dataType,
                             int64_t interleave, int64_t swizzle, int64_t l2Promotion,
                             int64_t oobFill, const int64_t *box, TensorMapRequest &out) {
  // Element bytes of CUtensorMapDataType 0..12 (uint8 .. tfloat32_ftz).
  static constexpr int64_t kBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  if (rank < 1 || rank > 5)
    return "rank " + std::to_string(rank) + " (a tensor map has 1 to 5 dimensions)";
  if (dataType < 0 || dataType > 12)
    return "unknown tensor-map data type " + std::to_string(dataType);
  if (interleave < 0 || interleave > 2 || swizzle < 0 || swizzle > 3 || l2Promotion < 0 ||
      l2Promotion > 3 || oobFill < 0 || oobFill > 1)
    return "an interleave, swizzle, L2-promotion or fill mode out of range";
  if (interleave)
    return "an interleaved layout (k3c's kernels ask for none; its rules are not checked here)";
  if (!descriptor || !box)
    return "no memref descriptor or box";
  const int64_t elt = kBytes[dataType];
  // {allocated, aligned, offset, sizes[rank], strides[rank]}
  struct Head {
    char *allocated, *aligned;
    int64_t offset;
  };
  const auto *head = static_cast<const Head *>(descriptor);
  const auto *sizes = reinterpret_cast<const int64_t *>(head + 1);
  const int64_t *strides = sizes + rank;
  out = TensorMapRequest{};
  out.rank = static_cast<int>(rank);
  out.dataType = static_cast<int>(dataType);
  out.interleave = static_cast<int>(interleave);
  out.swizzle = static_cast<int>(swizzle);
  out.l2Promotion = static_cast<int>(l2Promotion);
  out.oobFill = static_cast<int>(oobFill);
  out.address = head->aligned + head->offset * elt;
  if (reinterpret_cast<uintptr_t>(out.address) % 16)
    return "the tensor's start is not 16-byte aligned";
  if (strides[rank - 1] != 1)
    return "the innermost dimension is not contiguous (stride " +
           std::to_string(strides[rank - 1]) + ")";
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t size = sizes[rank - 1 - i];
    if (size < 0 || size > (int64_t(1) << 32))
      return "dimension " + std::to_string(rank - 1 - i) + " of size " + std::to_string(size);
    out.dims[i] = size ? static_cast<uint64_t>(size) : 1;
    const int64_t b = box[rank - 1 - i];
    if (b < 1 || b > 256)
      return "a box of " + std::to_string(b) + " elements in dimension " +
             std::to_string(rank - 1 - i) + " (1 to 256)";
    out.box[i] = static_cast<uint32_t>(b);
  }
  for (int64_t i = 0; i + 1 < rank; ++i) {
    const int64_t bytes = strides[rank - 2 - i] * elt;
    if (bytes <= 0 || bytes % 16 || bytes >= (int64_t(1) << 40))
      return "a stride of " + std::to_string(bytes) + " bytes in dimension " +
             std::to_string(rank - 2 - i) + " (a multiple of 16 below 2^40)";
    out.strides[i] = static_cast<uint64_t>(bytes);
  }
  const int64_t innerBytes = out.box[0] * elt;
  if (innerBytes % 16)
    return "the box's inner extent of " + std::to_string(innerBytes) +
           " bytes is not a multiple of 16";
  static constexpr int64_t kSpan[] = {0, 32, 64, 128};
  if (swizzle && innerBytes > kSpan[swizzle])
    return "the box's inner extent of " + std::to_string(innerBytes) +
           " bytes exceeds the swizzle's " + std::to_string(kSpan[swizzle]);
  return "";
}

namespace {
/// Encoded tensor maps by request, in device memory (128 bytes each, in
/// 64 KB blocks); never freed while the driver is up: CUDA graphs captured
/// with a map keep its address.
struct TensorMaps {
  std::mutex m;
  std::map<std::string, CUdeviceptr> byKey;
  CUdeviceptr block = 0;
  size_t used = 0;
  static constexpr size_t kMapBytes = 128, kBlockBytes = 65536;
};
TensorMaps tensorMaps;
} // namespace

size_t tensorMapCount() {
  std::lock_guard<std::mutex> g(tensorMaps.m);
  return tensorMaps.byKey.size();
}

} // namespace k3c::rt::cuda

//===----------------------------------------------------------------------===//
// The mgpu* ABI of MLIR's gpu-to-llvm lowering, called by the generated
// launch code in kernels_cuda.so. Errors are recorded, not thrown: the
// runtime checks them after each kernel entry point returns.
//===----------------------------------------------------------------------===//

using namespace k3c::rt::cuda;

static void record(const char *call, int r) {
  std::lock_guard<std::mutex> g(launchMutex);
  if (launchError.empty())
    launchError = std::string(call) + " failed: " + errorText(r);
}
static void recordText(const std::string &what) {
  std::lock_guard<std::mutex> g(launchMutex);
  if (launchError.empty())
    launchError = what;
}

/// K3C_PROFILE_LAUNCHES=1: every eager launch is timed by device events and
/// synchronized (slow: for finding where a fused kernel's time goes, not for
/// its total); the table of device functions (the kernel's strategy-named
/// launches: its prologue, GEMM tiles, epilogue) goes to stderr at exit.
/// K3C_PROFILE_REPEAT=N (1..1000; 1, the default, times each launch once as
/// above) with N >= 2 times each profiled launch in steady state instead:
/// the launch runs once untimed, then N times back to back, each timed
/// alone, and its row gets the median, as a peer's benchmark loop times its
/// kernel. With N >= 2 only the launches whose device function's name
/// contains K3C_PROFILE_MATCH (when set) are repeated and listed. A repeated
/// launch that accumulates into its output (a residual added in place, a
/// state read and written) leaves other values than one launch: the run's
/// tokens are then not meaningful; the times are.
namespace {
struct LaunchProfile {
  bool on = false;
  int repeat = 1;
  std::string match;
  struct Row {
    int64_t launches = 0;
    double ms = 0;
  };
  std::map<std::string, Row> rows;
  CUevent start = nullptr, stop = nullptr;
  LaunchProfile() {
    on = launchesProfiled();
    if (!on)
      return;
    if (const char *v = std::getenv("K3C_PROFILE_REPEAT"); v && *v) {
      char *end = nullptr;
      long n = std::strtol(v, &end, 10);
      if (*end || n < 1 || n > 1000) {
        std::fprintf(stderr, "error: K3C_PROFILE_REPEAT must be an integer in 1..1000, got '%s'\n",
                     v);
        std::exit(2);
      }
      repeat = static_cast<int>(n);
    }
    if (const char *v = std::getenv("K3C_PROFILE_MATCH"))
      match = v;
  }
  bool selected(const char *name) const {
    return match.empty() || (name && std::string(name).find(match) != std::string::npos);
  }
  ~LaunchProfile() {
    if (rows.empty())
      return;
    std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto &a, const auto &b) { return a.second.ms > b.second.ms; });
    if (repeat > 1)
      std::fprintf(stderr,
                   "launch profile (K3C_PROFILE_LAUNCHES, each launch the median of %d repeats "
                   "after one untimed): device function, launches, total ms, mean us\n",
                   repeat);
    else
      std::fprintf(stderr, "launch profile (K3C_PROFILE_LAUNCHES): device function, launches, "
                           "total ms, mean us\n");
    for (const auto &[name, r] : sorted)
      std::fprintf(stderr, "  %-72s %8lld %10.3f %10.1f\n", name.c_str(),
                   static_cast<long long>(r.launches), r.ms, 1e3 * r.ms / r.launches);
  }
};
LaunchProfile launchProfile;
} // namespace

extern "C" {

__attribute__((visibility("default"))) void *mgpuModuleLoad(void *data, size_t) {
  void *m = nullptr;
  if (int r = d.cuModuleLoadData(&m, data))
    record("cuModuleLoadData", r);
  return m;
}

__attribute__((visibility("default"))) void *mgpuModuleLoadJIT(void *data, int) {
  return mgpuModuleLoad(data, 0);
}

__attribute__((visibility("default"))) void mgpuModuleUnload(void *module) {
  if (module && d.ready)
    d.cuModuleUnload(module);
}

__attribute__((visibility("default"))) void *mgpuModuleGetFunction(void *module, const char *name) {
  void *f = nullptr;
  if (!module) {
    record("cuModuleGetFunction (module failed to load)", 1);
    return nullptr;
  }
  if (int r = d.cuModuleGetFunction(&f, module, name))
    record("cuModuleGetFunction", r);
  return f;
}

/// One launch of `function`; `cluster` (x, y, z), where not all 1, groups
/// the blocks into thread block clusters (the cluster launch of
/// mgpuLaunchClusterKernel: cuLaunchKernelEx with the cluster dimension,
/// besides programmatic dependent launch where on).
static void launchKernel(void *function, const intptr_t cluster[3], intptr_t gx, intptr_t gy,
                         intptr_t gz, intptr_t bx, intptr_t by, intptr_t bz, int32_t smem,
                         void *stream, void **params, void **extra);

__attribute__((visibility("default"))) void
mgpuLaunchKernel(void *function, intptr_t gx, intptr_t gy, intptr_t gz, intptr_t bx, intptr_t by,
                 intptr_t bz, int32_t smem, void *stream, void **params, void **extra, size_t) {
  const intptr_t none[3] = {1, 1, 1};
  launchKernel(function, none, gx, gy, gz, bx, by, bz, smem, stream, params, extra);
}

/// gpu.launch_func with cluster sizes (the lowering's clustered blocks,
/// e.g. the MLA decode core's head groups sharing multicast cache tiles):
/// the grid in blocks, a multiple of the cluster in every dimension.
__attribute__((visibility("default"))) void
mgpuLaunchClusterKernel(void *function, intptr_t cx, intptr_t cy, intptr_t cz, intptr_t gx,
                        intptr_t gy, intptr_t gz, intptr_t bx, intptr_t by, intptr_t bz,
                        int32_t smem, void *stream, void **params, void **extra, size_t) {
  const intptr_t cluster[3] = {cx, cy, cz};
  launchKernel(function, cluster, gx, gy, gz, bx, by, bz, smem, stream, params, extra);
}

static void launchKernel(void *function, const intptr_t cluster[3], intptr_t gx, intptr_t gy,
                         intptr_t gz, intptr_t bx, intptr_t by, intptr_t bz, int32_t smem,
                         void *stream, void **params, void **extra) {
  if (!function)
    return;
  const bool clustered = cluster[0] * cluster[1] * cluster[2] > 1;
  if (clustered && !d.cuLaunchKernelEx) {
    record("cuLaunchKernelEx (a clustered launch needs CUDA 12 or newer)", 1);
    return;
  }
  if (gx == 0 || gy == 0 || gz == 0)
    return; // an empty grid (no tokens for this launch)
  if (!launchError.empty())
    return; // an earlier failure in this kernel entry (e.g. a refused tensor map)
  if (smem > 48 * 1024) {
    // Dynamic shared memory past the static 48 KB needs the kernel's opt-in
    // limit raised once (tensor-core GEMM tiles: up to 227 KB on sm_90).
    static std::mutex m;
    static std::map<void *, int32_t> raised;
    std::lock_guard<std::mutex> g(m);
    int32_t &have = raised[function];
    if (have < smem) {
      constexpr int kMaxDynamicSharedSizeBytes = 8; // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
      if (int r = d.cuFuncSetAttribute(function, kMaxDynamicSharedSizeBytes, smem)) {
        record("cuFuncSetAttribute (dynamic shared memory)", r);
        return;
      }
      have = smem;
    }
  }
  if (clustered && d.cuOccupancyMaxActiveClusters) {
    // Once a (kernel, shared memory, cluster): a cluster whose blocks cannot
    // share one GPC (shared memory, registers) would fail to launch with the
    // driver's bare error; name what does not fit and the way out instead.
    static std::mutex m;
    static std::map<std::tuple<void *, int32_t, intptr_t>, int> fits;
    std::lock_guard<std::mutex> g(m);
    const intptr_t blocks = cluster[0] * cluster[1] * cluster[2];
    auto [it, fresh] = fits.try_emplace({function, smem, blocks}, -1);
    if (fresh) {
      LaunchAttribute attr = {};
      attr.id = kLaunchAttributeClusterDimension;
      for (int i = 0; i < 3; ++i)
        attr.value.clusterDim[i] = static_cast<unsigned>(cluster[i]);
      LaunchConfig config{static_cast<unsigned>(gx), static_cast<unsigned>(gy),
                          static_cast<unsigned>(gz), static_cast<unsigned>(bx),
                          static_cast<unsigned>(by), static_cast<unsigned>(bz),
                          static_cast<unsigned>(smem), nullptr, &attr, 1};
      int n = -1; // (no stream: a query, legal while a graph is captured)
      if (d.cuOccupancyMaxActiveClusters(&n, function, &config) == 0)
        it->second = n;
    }
    if (it->second == 0) {
      recordText("a cluster of " + std::to_string(blocks) + " blocks of " +
                 std::to_string(bx * by * bz) + " threads and " + std::to_string(smem) +
                 " bytes of shared memory each cannot be scheduled on this GPU "
                 "(cuOccupancyMaxActiveClusters: 0); compile without clusters "
                 "(K3C_MLA_DECODE_CLUSTER=0, K3C_MLA_COMBINE_CLUSTER=1, "
                 "K3C_MLA_COMBINE_ROWS_CLUSTER=0, K3C_WGMMA_CLUSTER=1, "
                 "K3C_WGMMA_CLUSTER_PREFILL=1)");
      return;
    }
  }
  const char *name = nullptr;
  const bool timed = launchProfile.on && !d.capturing;
  if (timed) {
    if (!launchProfile.start &&
        (d.cuEventCreate(&launchProfile.start, 0) || d.cuEventCreate(&launchProfile.stop, 0)))
      launchProfile.on = false;
    else if (d.cuFuncGetName)
      d.cuFuncGetName(&name, function);
  }
  auto launchOnce = [&](bool plain) -> bool {
    const bool pdl = d.gridDependency && plain;
    if (pdl || clustered) {
      LaunchAttribute attrs[2] = {};
      unsigned n = 0;
      if (clustered) {
        attrs[n].id = kLaunchAttributeClusterDimension;
        for (int i = 0; i < 3; ++i)
          attrs[n].value.clusterDim[i] = static_cast<unsigned>(cluster[i]);
        ++n;
      }
      if (pdl) {
        attrs[n].id = kLaunchAttributeProgrammaticStreamSerialization;
        attrs[n].value.programmaticStreamSerializationAllowed = 1;
        ++n;
      }
      LaunchConfig config{static_cast<unsigned>(gx), static_cast<unsigned>(gy),
                          static_cast<unsigned>(gz), static_cast<unsigned>(bx),
                          static_cast<unsigned>(by), static_cast<unsigned>(bz),
                          static_cast<unsigned>(smem), stream, attrs, n};
      if (int r = d.cuLaunchKernelEx(&config, function, params, extra)) {
        record(clustered ? "cuLaunchKernelEx (clustered launch)"
                         : "cuLaunchKernelEx (programmatic dependent launch)",
               r);
        return false;
      }
    } else if (int r = d.cuLaunchKernel(function, gx, gy, gz, bx, by, bz, smem, stream, params,
                                        extra)) {
      record("cuLaunchKernel", r);
      return false;
    }
    return true;
  };
  if (!(timed && launchProfile.on)) {
    launchOnce(true);
    return;
  }
  const bool repeated = launchProfile.repeat > 1 && launchProfile.selected(name);
  if (launchProfile.repeat > 1 && !repeated) {
    launchOnce(false); // not selected: launched, not listed
    return;
  }
  if (repeated && !launchOnce(false)) // the untimed warm-up
    return;
  std::vector<float> times;
  for (int i = 0; i < (repeated ? launchProfile.repeat : 1); ++i) {
    float ms = 0;
    d.cuEventRecord(launchProfile.start, stream);
    if (!launchOnce(false))
      return;
    d.cuEventRecord(launchProfile.stop, stream);
    d.cuEventSynchronize(launchProfile.stop);
    d.cuEventElapsedTime(&ms, launchProfile.start, launchProfile.stop);
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  std::string key = name ? name : "?";
  key += " <" + std::to_string(gx * gy * gz) + "x" + std::to_string(bx * by * bz) + ">";
  auto &row = launchProfile.rows[key];
  ++row.launches;
  row.ms += times[times.size() / 2];
}

/// The device address of the tensor map the launch code asks for (the
/// upstream wrapper's ABI), encoded once per distinct request and kept: a
/// launch asks for its maps every time (a cache hit), a CUDA graph captures
/// the address. Uploads run on a stream of their own (non-blocking: legal
/// while the runtime's stream is being captured). A failure is recorded
/// (naming what TMA refused) and returns null; the launches of that kernel
/// entry are then skipped.
__attribute__((visibility("default"))) void *
mgpuTensorMapEncodeTiledMemref(int64_t rank, void *descriptor, int64_t dataType, int64_t interleave,
                               int64_t swizzle, int64_t l2Promotion, int64_t oobFill,
                               int64_t *box) {
  TensorMapRequest req;
  if (std::string why = tensorMapRequest(rank, descriptor, dataType, interleave, swizzle,
                                         l2Promotion, oobFill, box, req);
      !why.empty()) {
    recordText("TMA tensor map refused: " + why);
    return nullptr;
  }
  if (!d.ready || !d.cuTensorMapEncodeTiled) {
    recordText("TMA tensor map: this CUDA driver has no cuTensorMapEncodeTiled (CUDA 12 or "
               "newer is needed for kernels built with K3C_WGMMA_TMA)");
    return nullptr;
  }
  std::lock_guard<std::mutex> g(tensorMaps.m);
  const std::string key = req.key();
  if (auto it = tensorMaps.byKey.find(key); it != tensorMaps.byKey.end())
    return reinterpret_cast<void *>(it->second);
  alignas(64) unsigned char map[TensorMaps::kMapBytes] = {};
  const uint32_t elementStrides[5] = {1, 1, 1, 1, 1};
  if (int r = d.cuTensorMapEncodeTiled(map, req.dataType, static_cast<unsigned>(req.rank),
                                       req.address, req.dims, req.strides, req.box,
                                       elementStrides, req.interleave, req.swizzle,
                                       req.l2Promotion, req.oobFill)) {
    record("cuTensorMapEncodeTiled", r);
    return nullptr;
  }
  if (!tensorMaps.block || tensorMaps.used + TensorMaps::kMapBytes > TensorMaps::kBlockBytes) {
    CUdeviceptr p = 0;
    if (int r = d.cuMemAlloc(&p, TensorMaps::kBlockBytes)) {
      record("cuMemAlloc (tensor maps)", r);
      return nullptr;
    }
    tensorMaps.block = p;
    tensorMaps.used = 0;
  }
  if (!d.mapStream) {
    if (int r = d.cuStreamCreate(&d.mapStream, /*CU_STREAM_NON_BLOCKING*/ 1)) {
      record("cuStreamCreate (tensor maps)", r);
      return nullptr;
    }
  }
  const CUdeviceptr at = tensorMaps.block + tensorMaps.used;
  if (int r = d.cuMemcpyHtoDAsync(at, map, sizeof(map), d.mapStream)) {
    record("cuMemcpyHtoDAsync (tensor map)", r);
    return nullptr;
  }
  if (int r = d.cuStreamSynchronize(d.mapStream)) {
    record("cuStreamSynchronize (tensor map)", r);
    return nullptr;
  }
  tensorMaps.used += TensorMaps::kMapBytes;
  tensorMaps.byKey.emplace(key, at);
  return reinterpret_cast<void *>(at);
}

__attribute__((visibility("default"))) void *mgpuStreamCreate() { return d.stream; }
__attribute__((visibility("default"))) void mgpuStreamDestroy(void *) {}
/// The generated launch code synchronizes after every launch (MLIR's
/// synchronous gpu.launch_func). K3C_ASYNC_LAUNCHES=1 (opt-in until timed
/// on the GPU) skips those waits: the runtime's one stream orders the
/// kernels, and every host read of device memory waits for the stream
/// itself (cuda::download); eager steps (prefill, EP decode) then keep the
/// GPU fed and programmatic dependent launch can overlap consecutive
/// kernels. A kernel's fault is then reported at the next read, without
/// the kernel's name.
static bool asyncLaunches() {
  static const bool on = k3c::envSwitch("K3C_ASYNC_LAUNCHES", false);
  return on;
}

__attribute__((visibility("default"))) void mgpuStreamSynchronize(void *stream) {
  if (d.capturing)
    return; // inside a CUDA graph capture: ordering comes from the stream
  if (asyncLaunches())
    return;
  if (int r = d.cuStreamSynchronize(stream))
    record("cuStreamSynchronize", r);
}

} // extern "C"
