//===- TargetInfo.h - what a kernel target offers ---------------*- C++ -*-===//
//
// One description per target that kernel families and the GEMM tile layer
// ask instead of scattering constants: the chip and PTX features the NVVM
// pipeline attaches, shared memory per block (static and the dynamic opt-in
// maximum, which the runtime raises at launch), SM count, register budget
// and the matrix instructions available. The host target has one thread a
// block and no matrix units.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_LOWERING_TARGETINFO_H
#define K3C_LOWERING_TARGETINFO_H

#include "lowering/Lowering.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>

namespace k3c::lowering {

struct TargetInfo {
  Target kind = Target::Host;
  std::string chip;            ///< sm_90a; empty on the host
  std::string features;        ///< PTX ISA feature string (+ptx80)
  int ptxVersion = 0;          ///< 80 = PTX ISA 8.0
  int64_t smCount = 1;         ///< multiprocessors (H200: 132)
  int64_t warpSize = 1;        ///< lanes a warp (1 on the host)
  int64_t staticSharedPerBlock = 0;  ///< bytes without opt-in (48 KB)
  int64_t maxSharedPerBlock = 0;     ///< bytes with the dynamic opt-in (227 KB)
  int64_t sharedPerSM = 0;           ///< bytes an SM has for all its blocks
  int64_t registersPerSM = 0;        ///< 32-bit registers an SM has
  int64_t maxRegistersPerThread = 0; ///< 255 on sm_90
  bool mmaSync = false;        ///< mma.sync m16n8k16 bf16 -> f32, ldmatrix, cp.async
  bool wgmma = false;          ///< warpgroup MMA + TMA + mbarriers (sm_90a)
  /// griddepcontrol (programmatic dependent launch, sm_90): see
  /// gridDependencyMode.
  bool gridDependency = false;
  int64_t mmaM = 0, mmaN = 0, mmaK = 0; ///< the mma.sync shape used (16, 8, 16)

  static const TargetInfo &get(Target t);
  bool gpu() const { return kind == Target::Gpu; }
  /// The NVVM target options string (`chip=... features=... O=3`).
  std::string nvvmAttachOptions() const;
  /// Whether the device kernels carry griddepcontrol (GpuTarget's
  /// chainGrids) and the artifact says so (its runtime then launches them
  /// with programmatic stream serialization): 0 no; 1 every kernel waits for
  /// the grids ahead, then lets the next be scheduled at once
  /// (griddepcontrol.launch_dependents); 2 (the default) it waits, and the
  /// next is scheduled as its blocks exit. K3C_PDL at compile time; 0 where
  /// the target lacks it.
  int64_t gridDependencyMode() const;
  bool gridDependencyControl() const { return gridDependencyMode() != 0; }
};

// Compile-time tuning overrides (the K3C_* knobs of the kernel families and
// the GEMM layer; docs/user-guide.md).
/// An integer tuning override from the environment (compile time), else dflt
/// (unset or empty); a value that is not an integer is a fatal error naming
/// the variable.
int64_t intFromEnv(const char *var, int64_t dflt);
/// A comma-separated integer override from the environment: empty when
/// unset; a fatal error "k3c: VAR must be FORM" unless it is integers, as
/// many as one of `counts`.
llvm::SmallVector<int64_t> intsFromEnv(const char *var, llvm::ArrayRef<size_t> counts,
                                       const char *form);

} // namespace k3c::lowering

#endif // K3C_LOWERING_TARGETINFO_H
