//===- Lowering.h - fused kernels to loops, host code, the artifact -*- C++ -*-===//

#ifndef K3C_LOWERING_LOWERING_H
#define K3C_LOWERING_LOWERING_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace k3c::lowering {

/// What kernels are lowered for: the host (x86-64 loops, one thread per
/// block) or the GPU (gpu.launch thread blocks, sm_90a).
enum class Target { Host, Gpu };

/// The artifact's name of an element type: bf16, f16, f32, i8, i32, i64.
std::string dtypeName(mlir::Type t);

/// One argument of a lowered kernel function (memref calling convention).
struct KernelArg {
  enum class Kind { Input, Output, Scratch };
  Kind kind = Kind::Input;
  int64_t index = 0;     ///< kernel input / result index (scratch: its number)
  int component = -1;    ///< MXFP4 inputs: 0 = payload bytes, 1 = scale bytes
  std::string dtype;     ///< bf16, f16, f32, i32, i64, i8
  std::vector<int64_t> shape; ///< -1 for a dynamic dim
  /// For each dynamic dim: the argument position and dim it equals.
  std::vector<std::pair<int64_t, int64_t>> dynamicFrom;
  /// Scratch only the GPU kernels use: a CPU run allocates no storage for it.
  bool deviceOnly = false;
};

struct KernelInfo {
  std::string name, family;
  std::vector<KernelArg> args;
  /// Per kernel result: the input it aliases (state updated in place), or -1.
  std::vector<int64_t> resultAliases;
  int64_t flopsPerToken = 0, bytesPerToken = 0, weightBytes = 0;
};

/// Lowers every distinct k3.kernel of `fused` to a func.func over memrefs
/// (scf loops and, for the GPU, gpu.launch thread blocks; fp32 math,
/// explicit rounding). Returns the kernel module and fills `kernels` with
/// the calling convention of each (the same for both targets).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
lowerKernelsToLoops(mlir::ModuleOp fused, std::vector<KernelInfo> &kernels,
                    Target target = Target::Host);

/// Lowers the loop module to the LLVM dialect (host target) and compiles it
/// to a shared library at `soPath` (x86-64 object through LLVM's
/// TargetMachine, linked with the system C compiler). `llvmIR` receives the
/// LLVM IR text when non-null.
mlir::LogicalResult buildHostLibrary(mlir::ModuleOp loops, const std::vector<KernelInfo> &kernels,
                                     const std::string &soPath, std::string *llvmIR,
                                     std::string &error);

/// Lowers the loop module to the LLVM dialect for the host (used by
/// buildHostLibrary and --emit=llvm).
mlir::LogicalResult lowerLoopsToLLVMDialect(mlir::ModuleOp loops,
                                            const std::vector<KernelInfo> &kernels);

/// Registers what the GPU pipeline needs (NVVM target, translations).
void prepareGpuContext(mlir::MLIRContext &ctx);
/// Loop kernels -> gpu.launch -> outlined gpu.module kernels in NVVM (sm_90a).
/// `exactExp`: exp without the rounding of its argument's scaling (the f32
/// build; rewriteDeviceMath in GpuTarget.cpp).
mlir::LogicalResult lowerLoopsToGpu(mlir::ModuleOp loops, std::string &error,
                                    bool exactExp = false);
/// The f32 build's GPU exp and exp2 (fp64, <= 0.5 ulp; GpuTarget.cpp's
/// exactExpF64) in place of every f32 math.exp / math.exp2 under `root`.
/// (test/unit/ExpTest.cpp runs it on the CPU against long double.)
void rewriteExpF64(mlir::Operation *root);
/// PTX text of every gpu.module (NVPTX TargetMachine, in-process).
/// With `inPlace`, the gpu.modules become gpu.binary ops carrying that PTX
/// (what buildHostLibrary embeds); otherwise the module is left as is.
mlir::LogicalResult emitPtx(mlir::ModuleOp gpuLowered,
                            std::map<std::string, std::string> &ptxByKernel,
                            std::string &error, bool inPlace = false);
/// Assembles every PTX module with ptxas -arch=sm_90a (one process per core
/// at a time) when ptxas exists
/// (`ran` tells whether it did); cubins are left in `workDir`. With
/// `advisories`, ptxas's performance advisories and warnings on modules it
/// accepted are appended there as "<module>: <text>" (ptxasAdvisories).
mlir::LogicalResult validateWithPtxas(const std::map<std::string, std::string> &ptx,
                                      const std::string &workDir, std::string &error,
                                      bool &ran,
                                      std::vector<std::string> *advisories = nullptr);
/// The lines of a ptxas log that say the code it emitted is slower than the
/// PTX asks for or may be wrong: "Potential Performance Loss" (e.g. C7514,
/// wgmma serialized) and "ptxas warning" lines, their text after the
/// "ptxas info/warning :" prefix. Other info lines (statistics) are not.
std::vector<std::string> ptxasAdvisories(llvm::StringRef log);
/// Replaces the PTX of every gpu.binary (emitPtx in place) by the cubin
/// ptxas left in `workDir`, so the launch library loads machine code instead
/// of having the driver JIT-compile PTX at load time.
mlir::LogicalResult embedCubins(mlir::ModuleOp gpuLowered, const std::string &workDir,
                                std::string &error);

} // namespace k3c::lowering

#endif // K3C_LOWERING_LOWERING_H
