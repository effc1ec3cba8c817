//===- GpuTarget.cpp - loop kernels -> sm_90a PTX + host launchers --------===//
//
// The same loop functions as the host target, for NVIDIA GPUs:
//   scf.parallel tiled into thread blocks (1 x 128 threads over the innermost
//   parallel dim) -> gpu.launch -> outlined gpu.func kernels -> NVVM ->
//   PTX for sm_90a through LLVM's NVPTX TargetMachine in-process
//   (gpu-module-to-binary, format isa). Math uses polynomial approximations
//   (no libdevice). The host side of every kernel (grid sizes from the memref
//   dims, launches) is compiled for x86-64 into kernels_cuda.so; it calls the
//   mgpu* launch ABI that the k3c runtime implements on the CUDA driver API.
// When ptxas is on PATH every module is assembled for sm_90a to validate it,
// and ptxas errors name the kernel.
//
//===----------------------------------------------------------------------===//

#include "lowering/KernelBuilder.h"
#include "lowering/Lowering.h"
#include "lowering/TargetInfo.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUCommon/GPUToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "llvm/ADT/StringMap.h"
#include "mlir/IR/Threading.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSet.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"

#include <mutex>
#include <thread>

using namespace mlir;

namespace k3c::lowering {

static void registerGpuPipelinePasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerTransformsPasses();
    registerSCFPasses();
    registerGPUPasses();
    registerConversionPasses();
    arith::registerArithPasses();
    math::registerMathPasses();
  });
}

void prepareGpuContext(MLIRContext &ctx) {
  DialectRegistry registry;
  // The to-LLVM interfaces convert-gpu-to-nvvm and gpu-to-llvm use (instead of
  // registerAllExtensions, which costs minutes of build time).
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  vector::registerConvertVectorToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  gpu::registerConvertGpuToLLVMInterface(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  registerNVVMDialectTranslation(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadDialect<gpu::GPUDialect, NVVM::NVVMDialect, LLVM::LLVMDialect, nvgpu::NVGPUDialect>();
}

// Device-side lowering, shared by --emit=ptx and the CUDA artifact: parallel
// loops to thread blocks, outlining, then (after the math rewrite below) NVVM.
// (Pipelines for a PassManager anchored on builtin.module: no outer wrapper.)
static std::string outlinePipeline() {
  return "func.func(scf-parallel-loop-tiling{parallel-loop-tile-sizes=1,128 "
         "no-min-max-bounds=true},gpu-map-parallel-loops,convert-parallel-loops-to-gpu),"
         "gpu-kernel-outlining,nvvm-attach-target{" +
         TargetInfo::get(Target::Gpu).nvvmAttachOptions() + "},gpu.module(math-expand-ops{ops=tanh})";
}
// bf16 conversions: arith-expand{include-bf16=true} rewrites every f32 <-> bf16
// truncf / extf into integer code (round to nearest even by hand: ~10 PTX
// instructions a value). sm_90 converts natively (cvt.rn.bf16.f32 /
// cvt.rn.bf16x2.f32, also round to nearest even: the same values, NaN
// payloads aside), which is the default since session 17: with the short
// convolution's unroll at 4 and its fast outputs (K3C_CONV_FAST) it took
// the q/k/v convolutions and the gate from 1.43 to 1.27 ms at 8192 tokens
// on the slice (docs/perf.md; at an
// unroll of 8 it had raised their registers 128 -> 164, one block an SM,
// and slowed them). K3C_BF16_NATIVE=0 keeps the integer code.
static std::string nvvmPipeline() {
  const bool native = intFromEnv("K3C_BF16_NATIVE", 1) != 0;
  return std::string("gpu.module(lower-affine,arith-expand{include-bf16=") +
         (native ? "false" : "true") +
         "},convert-scf-to-cf,"
         "convert-nvgpu-to-nvvm,convert-gpu-to-nvvm{index-bitwidth=64},convert-nvvm-to-llvm,"
         "canonicalize,cse,reconcile-unrealized-casts)";
}

/// exp, exp2, log1p and sqrt as single PTX instructions (ex2.approx.ftz,
/// lg2.approx.ftz, sqrt.rn; log1p near 0 as its series) through inline asm,
/// so no libdevice is needed and a machine without the CUDA toolkit still
/// produces PTX.
/// `exactExp` (the f32 build, whose checks hold it to 1e-5 of the reference's
/// libm): exp(x) without the rounding of x·log2(e), which ex2.approx of the
/// rounded product carries as a relative error of up to |x|·2^-24·ln 2
/// (1e-6 at |x| = 20, a softmax's or a sigmoid's range): t = rn(x·log2 e),
/// the product's rounding error e = fma(x, log2 e, −t) + x·lo (lo: the part
/// of log2 e below f32), p = ex2.approx(t), exp(x) = fma(p, e·ln 2, p), i.e.
/// p·2^e to first order; p itself where that is not finite or p is 0 (x =
/// ±inf, NaN, overflow, flushed underflow), so the special values stay
/// ex2's. ~2 ulp (ex2.approx's own) at every x; three more instructions.
/// That is K3C_F32_EXP=ex2; by default (K3C_F32_EXP=f64) the f32 build's exp
/// and exp2 are formed in fp64 instead (exactExpF64): ≤ 0.5 ulp + 2^-42, as
/// the host's libm, subnormal results rounded rather than flushed.
static Value exactExpF64(OpBuilder &b, Location loc, Value x, bool base2) {
  Type f64 = b.getF64Type(), i64 = b.getI64Type();
  auto d = [&](double v) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(f64, v)).getResult();
  };
  auto i = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(i64, v)).getResult();
  };
  // y = x log2 e (or x), clamped where every f32 result is 0 or inf (NaN
  // passes minnum / maxnum as the other operand: restored at the end).
  Value y = arith::ExtFOp::create(b, loc, f64, x);
  if (!base2)
    y = arith::MulFOp::create(b, loc, y, d(1.4426950408889634));
  y = arith::MaxNumFOp::create(b, loc, arith::MinNumFOp::create(b, loc, y, d(130.0)), d(-160.0));
  // n = rint(y) by the 1.5 * 2^52 shift (its low bits are n), r = y - n
  // (exact, |r| <= 1/2), 2^y = 2^n p(r), p the Taylor series of e^(r ln 2)
  // to r^11 (its remainder below 2^-42 relative), 2^n from n's bits.
  const double shift = 6755399441055744.0;
  Value ys = arith::AddFOp::create(b, loc, y, d(shift));
  Value r = arith::SubFOp::create(b, loc, y, arith::SubFOp::create(b, loc, ys, d(shift)));
  Value n = arith::SubIOp::create(b, loc, arith::BitcastOp::create(b, loc, i64, ys),
                                  i(0x4338000000000000LL));
  Value scale = arith::BitcastOp::create(
      b, loc, f64,
      arith::ShLIOp::create(b, loc, arith::AddIOp::create(b, loc, n, i(1023)), i(52)));
  double coef[12];
  coef[0] = 1.0;
  for (int k = 1; k < 12; ++k)
    coef[k] = coef[k - 1] * 0.6931471805599453094 / k;
  Value p = d(coef[11]);
  for (int k = 10; k >= 0; --k)
    p = LLVM::FMAOp::create(b, loc, p, r, d(coef[k]));
  Value res = arith::TruncFOp::create(b, loc, x.getType(), arith::MulFOp::create(b, loc, p, scale));
  Value nan = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
  return arith::SelectOp::create(b, loc, nan, x, res);
}

void rewriteExpF64(Operation *root) {
  SmallVector<Operation *> ops;
  root->walk([&](Operation *op) {
    if (isa<math::ExpOp, math::Exp2Op>(op) && op->getResult(0).getType().isF32())
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    OpBuilder b(op);
    op->getResult(0).replaceAllUsesWith(
        exactExpF64(b, op->getLoc(), op->getOperand(0), isa<math::Exp2Op>(op)));
    op->erase();
  }
}

static void rewriteDeviceMath(ModuleOp m, bool exactExp) {
  std::string form = "f64";
  if (const char *env = std::getenv("K3C_F32_EXP"))
    form = env;
  if (form != "f64" && form != "ex2")
    llvm::report_fatal_error("k3c: K3C_F32_EXP must be f64 or ex2, got '" + llvm::Twine(form) +
                                 "'",
                             /*gen_crash_diag=*/false);
  const bool f64Exp = exactExp && form == "f64";
  m.walk([exactExp, f64Exp](gpu::GPUModuleOp gm) {
    // (the f32 build's exp and exp2 in fp64 first: the walk the unit test
    // runs; nothing below then sees them)
    if (f64Exp)
      rewriteExpF64(gm);
    SmallVector<Operation *> ops;
    gm.walk([&](Operation *op) {
      if (isa<math::ExpOp, math::Exp2Op, math::Log1pOp, math::SqrtOp>(op) &&
          op->getResult(0).getType().isF32())
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      Value x = op->getOperand(0);
      Type t = x.getType();
      auto c = [&](double v) {
        return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, v)).getResult();
      };
      auto ptx = [&](const char *text, Value in) -> Value {
        return LLVM::InlineAsmOp::create(b, loc, t, ValueRange{in}, text, "=f,f",
                                         /*has_side_effects=*/false, /*is_align_stack=*/false,
                                         LLVM::tailcallkind::TailCallKind::None,
                                         LLVM::AsmDialectAttr(), ArrayAttr())
            .getResult(0);
      };
      Value r;
      if (isa<math::ExpOp>(op) && exactExp) {
        const float l2eHi = 1.4426950408889634f;
        Value hi = c(l2eHi), lo = c(1.4426950408889634 - static_cast<double>(l2eHi));
        Value t = arith::MulFOp::create(b, loc, x, hi);
        Value e = arith::AddFOp::create(
            b, loc, LLVM::FMAOp::create(b, loc, x, hi, arith::NegFOp::create(b, loc, t)),
            arith::MulFOp::create(b, loc, x, lo));
        Value p = ptx("ex2.approx.ftz.f32 $0, $1;", t);
        Value corr = LLVM::FMAOp::create(b, loc, p,
                                         arith::MulFOp::create(b, loc, e, c(0.6931471805599453)), p);
        // corr - corr is 0 exactly when corr is finite (NaN for inf, NaN).
        Value finite = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                             arith::SubFOp::create(b, loc, corr, corr), c(0.0));
        Value nonzero = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ONE, p, c(0.0));
        r = arith::SelectOp::create(b, loc, arith::AndIOp::create(b, loc, finite, nonzero), corr,
                                    p);
      } else if (isa<math::ExpOp>(op))
        r = ptx("ex2.approx.ftz.f32 $0, $1;",
                arith::MulFOp::create(b, loc, x, c(1.4426950408889634)));
      else if (isa<math::Exp2Op>(op))
        r = ptx("ex2.approx.ftz.f32 $0, $1;", x);
      else if (isa<math::Log1pOp>(op)) {
        // |x| < 1/16: the series x - x^2/2 + ... - x^6/6 (Horner; its
        // truncation below 2^-24 / 7 relative), where lg2.approx(1 + x)
        // loses x's low bits to the rounding of 1 + x and carries its own
        // absolute error of ~2^-22 (relative to a log near 0: all of it);
        // else lg2.approx(1 + x) ln 2 (NaN, -1, inf and x < -1 as there).
        Value big = arith::MulFOp::create(
            b, loc, ptx("lg2.approx.ftz.f32 $0, $1;", arith::AddFOp::create(b, loc, x, c(1.0))),
            c(0.6931471805599453));
        Value poly = c(-1.0 / 6.0);
        for (double k : {1.0 / 5.0, -1.0 / 4.0, 1.0 / 3.0, -1.0 / 2.0, 1.0})
          poly = LLVM::FMAOp::create(b, loc, poly, x, c(k));
        poly = arith::MulFOp::create(b, loc, poly, x);
        Value small = arith::AndIOp::create(
            b, loc, arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, c(0.0625)),
            arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, c(-0.0625)));
        r = arith::SelectOp::create(b, loc, small, poly, big);
      }
      else
        r = ptx("sqrt.rn.f32 $0, $1;", x);
      op->getResult(0).replaceAllUsesWith(r);
      op->erase();
    }
  });
}

/// Shared-memory buffers are read 16 bytes at a time: align them so.
static void alignSharedMemory(ModuleOp m) {
  m.walk([](gpu::GPUFuncOp fn) {
    auto align = StringAttr::get(fn.getContext(), LLVM::LLVMDialect::getAlignAttrName());
    for (unsigned i = 0; i < fn.getNumWorkgroupAttributions(); ++i)
      fn.setWorkgroupAttributionAttr(i, align,
                                     IntegerAttr::get(IntegerType::get(fn.getContext(), 64), 16));
  });
}

/// Identical device modules compiled once: kernels of different k3 kernels
/// often outline the same block program (the same GEMM tile over the same
/// shapes: kda_out's and mla_out's o projections, a layer kind's linears).
/// Modules that print the same with their own symbol (module and kernel
/// function) renamed are merged into the first in program order; launches
/// of the others are pointed at it. (Full K3: 258 outlined modules, 94
/// distinct.)
static void mergeIdenticalModules(ModuleOp m) {
  llvm::StringMap<gpu::GPUModuleOp> byText;
  DenseMap<StringAttr, StringAttr> replaced; // module name -> kept module name
  SmallVector<gpu::GPUModuleOp> dead;
  for (auto gm : m.getOps<gpu::GPUModuleOp>()) {
    // The canonical text: a clone whose module and functions carry
    // position-independent names.
    OwningOpRef<gpu::GPUModuleOp> clone = cast<gpu::GPUModuleOp>(gm->clone());
    const std::string own = gm.getName().str();
    clone->walk([&](Operation *op) {
      auto sym = op->getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName());
      if (sym && sym.strref().starts_with(own)) // other symbols must match as they are
        op->setAttr(SymbolTable::getSymbolAttrName(),
                    StringAttr::get(m.getContext(), "K" + sym.str().substr(own.size())));
    });
    std::string text;
    llvm::raw_string_ostream os(text);
    clone->print(os, OpPrintingFlags().printGenericOpForm().useLocalScope());
    auto [it, fresh] = byText.try_emplace(text, gm);
    if (fresh)
      continue;
    replaced[gm.getNameAttr()] = it->second.getNameAttr();
    dead.push_back(gm);
  }
  if (replaced.empty())
    return;
  m.walk([&](gpu::LaunchFuncOp launch) {
    SymbolRefAttr k = launch.getKernelAttr();
    auto it = replaced.find(k.getRootReference());
    if (it == replaced.end())
      return;
    // The kernel function keeps its suffix after the module's own name.
    std::string fn = k.getLeafReference().str();
    std::string from = k.getRootReference().str(), to = it->second.str();
    if (fn.rfind(from, 0) == 0)
      fn = to + fn.substr(from.size());
    launch.setKernelAttr(SymbolRefAttr::get(
        it->second, {FlatSymbolRefAttr::get(m.getContext(), fn)}));
  });
  for (gpu::GPUModuleOp gm : dead)
    gm->erase();
}

/// The minimum blocks an SM the lowering asked for
/// (KernelBuilder::minBlocksPerSm), by the name the launch's kernel will
/// have once outlined.
/// The name a kernel was requested under: `name` itself, or, where the
/// outliner had to rename a second launch of the same name (two launches of
/// one lowering with different bodies, e.g. the q and k convolutions, whose
/// norms differ in scale: `<name>_0`, `<name>_1`, ...), the name before the
/// suffix when only that one was requested. The requests (blocks an SM,
/// early dependents) belong to the lowering that made the launch, so the
/// renamed kernel keeps them (before: the second convolution ran at 124
/// registers, two blocks an SM, where the first got its three).
template <typename Map> static StringRef requestedName(StringRef name, const Map &requested) {
  if (requested.count(name))
    return name;
  size_t us = name.rfind('_');
  if (us == StringRef::npos || us + 1 == name.size())
    return name;
  StringRef digits = name.substr(us + 1);
  if (!llvm::all_of(digits, [](char c) { return c >= '0' && c <= '9'; }))
    return name;
  StringRef base = name.substr(0, us);
  return requested.count(base) ? base : name;
}

static llvm::StringMap<int32_t> requestedMinBlocks(ModuleOp m) {
  llvm::StringMap<int32_t> want;
  m.walk([&](gpu::LaunchOp launch) {
    auto n = launch->getAttrOfType<IntegerAttr>(KernelBuilder::kMinBlocksAttr);
    if (n && launch.getFunction())
      want[*launch.getFunction()] = static_cast<int32_t>(n.getInt());
  });
  return want;
}

/// K3C_LAUNCH_BOUNDS="pattern=minBlocks[:maxRegs],..." (compile-time tuning,
/// for occupancy A/Bs): every kernel whose name contains `pattern` gets PTX's
/// .minnctapersm minBlocks (0: none, dropping one the lowering asked for)
/// and, with maxRegs, .maxnreg maxRegs (the
/// kernels already carry .maxntid, their block size). A malformed setting is
/// an error naming it. Before it, the kernels the lowering asked blocks for
/// (`requested`) get their .minnctapersm.
static LogicalResult applyLaunchBounds(ModuleOp m, const llvm::StringMap<int32_t> &requested,
                                       std::string &error) {
  Builder b(m.getContext());
  if (!requested.empty())
    m.walk([&](gpu::GPUFuncOp fn) {
      auto it = requested.find(requestedName(fn.getName(), requested));
      if (fn.isKernel() && it != requested.end())
        fn->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(), b.getI32IntegerAttr(it->second));
    });
  const char *env = std::getenv("K3C_LAUNCH_BOUNDS");
  if (!env || !*env)
    return success();
  struct Bound {
    std::string pattern;
    int64_t minBlocks = 0, maxRegs = 0;
  };
  SmallVector<Bound> bounds;
  SmallVector<StringRef> items;
  StringRef(env).split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [pattern, values] = item.trim().split('=');
    auto [minText, regText] = values.split(':');
    Bound bd;
    bd.pattern = pattern.str();
    bool ok = !pattern.empty() && !minText.getAsInteger(10, bd.minBlocks) && bd.minBlocks >= 0 &&
              bd.minBlocks <= 32 &&
              (regText.empty() ||
               (!regText.getAsInteger(10, bd.maxRegs) && bd.maxRegs >= 24 && bd.maxRegs <= 255));
    if (!ok) {
      error = "K3C_LAUNCH_BOUNDS: '" + item.str() +
              "' is not pattern=minBlocks[:maxRegs] (minBlocks 0..32, maxRegs 24..255)";
      return failure();
    }
    bounds.push_back(bd);
  }
  m.walk([&](gpu::GPUFuncOp fn) {
    if (!fn.isKernel())
      return;
    for (const Bound &bd : bounds) {
      if (!fn.getName().contains(bd.pattern))
        continue;
      if (bd.minBlocks)
        fn->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                    b.getI32IntegerAttr(static_cast<int32_t>(bd.minBlocks)));
      else // 0: none, also where the lowering asked for some
        fn->removeAttr(NVVM::NVVMDialect::getMinctasmAttrName());
      if (bd.maxRegs)
        fn->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(),
                    b.getI32IntegerAttr(static_cast<int32_t>(bd.maxRegs)));
    }
  });
  return success();
}

/// Programmatic dependent launch (TargetInfo::gridDependencyMode): every
/// outlined kernel, from KernelBuilder::blocks or from a parallel loop, first
/// waits until the grids ahead of it have completed and their writes are
/// visible (griddepcontrol.wait: nothing before it touches memory); in mode 1
/// it then lets the next grid be scheduled at once
/// (griddepcontrol.launch_dependents), in mode 2 the next is scheduled as its
/// blocks exit. The artifact's cuda_library then says grid_dependency, and
/// the runtime may start each kernel before the one ahead has completed
/// (docs/runtime.md).
///
/// Per kernel (KernelBuilder::gridWait / earlyDependents, read from the
/// launches before outlining: `chain`): a kernel that placed its own wait
/// gets none at its start (one that has none after all, e.g. a launch whose
/// name another took, gets it there as every kernel does); a kernel asking
/// for early dependents triggers them right after its wait in mode 2 too
/// (after each of its waits where its blocks wait in different branches).
struct GridChainRequests {
  llvm::StringSet<> ownWait, early;
};

static GridChainRequests requestedGridChain(ModuleOp m) {
  GridChainRequests r;
  m.walk([&](gpu::LaunchOp launch) {
    if (!launch.getFunction())
      return;
    if (launch->hasAttr(KernelBuilder::kOwnWaitAttr))
      r.ownWait.insert(*launch.getFunction());
    if (launch->hasAttr(KernelBuilder::kEarlyDependentsAttr))
      r.early.insert(*launch.getFunction());
  });
  return r;
}

static void chainGrids(ModuleOp m, const GridChainRequests &req) {
  const int64_t mode = TargetInfo::get(Target::Gpu).gridDependencyMode();
  if (!mode)
    return;
  m.walk([&](gpu::GPUFuncOp fn) {
    if (!fn.isKernel() || fn.getBody().empty())
      return;
    OpBuilder b(fn.getContext());
    // The kernel's own waits: one a branch where its blocks take different
    // paths (e.g. the staged q_abs's tiles and its append blocks); the
    // trigger, where asked for, follows each of them.
    SmallVector<NVVM::GriddepcontrolOp> ownWaits;
    if (req.ownWait.contains(requestedName(fn.getName(), req.ownWait)))
      fn.walk([&](NVVM::GriddepcontrolOp op) {
        if (op.getKind() == NVVM::GridDepActionKind::wait)
          ownWaits.push_back(op);
      });
    const bool trigger = mode == 1 || req.early.contains(requestedName(fn.getName(), req.early));
    if (ownWaits.empty()) {
      b.setInsertionPointToStart(&fn.getBody().front());
      NVVM::GriddepcontrolOp::create(b, fn.getLoc(), NVVM::GridDepActionKind::wait);
      if (trigger)
        NVVM::GriddepcontrolOp::create(b, fn.getLoc(),
                                       NVVM::GridDepActionKind::launch_dependents);
      return;
    }
    if (!trigger)
      return;
    for (NVVM::GriddepcontrolOp wait : ownWaits) {
      b.setInsertionPointAfter(wait);
      NVVM::GriddepcontrolOp::create(b, fn.getLoc(),
                                     NVVM::GridDepActionKind::launch_dependents);
    }
  });
}

LogicalResult lowerLoopsToGpu(ModuleOp loops, std::string &error, bool exactExp) {
  registerGpuPipelinePasses();
  prepareGpuContext(*loops.getContext());
  const llvm::StringMap<int32_t> requested = requestedMinBlocks(loops);
  const GridChainRequests chain = requestedGridChain(loops);
  const std::string pipelines[] = {outlinePipeline(), nvvmPipeline()};
  for (const std::string &pipeline : pipelines) {
    PassManager pm(loops.getContext());
    if (failed(parsePassPipeline(pipeline, pm))) {
      error = std::string("internal error: GPU pass pipeline does not parse: ") + pipeline;
      return failure();
    }
    if (failed(pm.run(loops))) {
      error = "lowering the kernels to NVVM failed";
      return failure();
    }
    if (&pipeline == &pipelines[0]) {
      mergeIdenticalModules(loops);
      chainGrids(loops, chain);
      rewriteDeviceMath(loops, exactExp);
      alignSharedMemory(loops);
      if (failed(applyLaunchBounds(loops, requested, error)))
        return failure();
    }
  }
  return success();
}

LogicalResult emitPtx(ModuleOp gpuLowered, std::map<std::string, std::string> &ptxByKernel,
                      std::string &error, bool inPlace) {
  // gpu-module-to-binary with format isa leaves each module's PTX in a
  // gpu.binary: in place (the launch library then embeds this PTX without
  // generating it again) or on a clone so the caller keeps the NVVM form.
  OwningOpRef<ModuleOp> clone;
  ModuleOp target = gpuLowered;
  if (!inPlace) {
    clone = gpuLowered.clone();
    target = *clone;
  }
  llvm::InitializeAllTargets();
  llvm::InitializeAllTargetMCs();
  llvm::InitializeAllAsmPrinters();
  // What gpu-module-to-binary{format=isa} does, with the modules' NVPTX
  // code generation spread over the cores (full K3 has ~250 modules): each
  // gpu.module is isolated and serialized into its own LLVMContext.
  MLIRContext *ctx = target->getContext();
  SmallVector<gpu::GPUModuleOp> modules;
  target->walk([&](gpu::GPUModuleOp m) { modules.push_back(m); });
  SymbolTable symbols(target);
  gpu::TargetOptions options({}, {}, {}, {}, gpu::CompilationTarget::Assembly,
                             [&]() -> SymbolTable * { return &symbols; });
  std::vector<std::optional<SmallVector<char, 0>>> objects(modules.size());
  std::vector<Attribute> targets(modules.size());
  for (size_t i = 0; i < modules.size(); ++i) {
    ArrayAttr ts = modules[i].getTargetsAttr();
    if (!ts || ts.size() != 1) {
      error = "internal error: GPU module " + modules[i].getName().str() +
              " must have exactly one target";
      return failure();
    }
    targets[i] = ts[0];
  }
  std::mutex diagMutex;
  std::string diags;
  {
    // Serializing emits diagnostics through the context from several threads.
    ScopedDiagnosticHandler collect(ctx, [&](Diagnostic &d) {
      std::lock_guard<std::mutex> g(diagMutex);
      diags += (diags.empty() ? "" : "; ") + d.str();
      return success();
    });
    parallelFor(ctx, 0, modules.size(), [&](size_t i) {
      objects[i] = cast<gpu::TargetAttrInterface>(targets[i])
                       .serializeToObject(modules[i], options);
    });
  }
  for (size_t i = 0; i < modules.size(); ++i) {
    if (!objects[i]) {
      error = "PTX generation (NVPTX TargetMachine) failed for kernel module " +
              modules[i].getName().str() + (diags.empty() ? "" : ": " + diags);
      return failure();
    }
    Attribute object =
        cast<gpu::TargetAttrInterface>(targets[i]).createObject(modules[i], *objects[i], options);
    OpBuilder b(modules[i]);
    gpu::BinaryOp::create(b, modules[i].getLoc(), modules[i].getName(),
                          modules[i].getOffloadingHandlerAttr(), b.getArrayAttr({object}));
    modules[i]->erase();
  }
  target->walk([&](gpu::BinaryOp bin) {
    for (Attribute obj : bin.getObjects())
      if (auto o = dyn_cast<gpu::ObjectAttr>(obj))
        ptxByKernel[bin.getSymName().str()] = o.getObject().getValue().str();
  });
  return success();
}

std::vector<std::string> ptxasAdvisories(llvm::StringRef log) {
  std::vector<std::string> out;
  SmallVector<StringRef> lines;
  log.split(lines, '\n', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (StringRef line : lines) {
    line = line.trim();
    const bool warning = line.starts_with("ptxas warning");
    if (!warning && !line.contains("Potential Performance Loss"))
      continue;
    // "ptxas info    : (C7514) ..." / "ptxas warning : ..."
    size_t colon = line.find(" : ");
    StringRef text = colon == StringRef::npos ? line : line.drop_front(colon + 3).trim();
    // (ptxas writes two spaces in some messages: one kept)
    std::string t;
    for (char c : text)
      if (!(c == ' ' && !t.empty() && t.back() == ' '))
        t += c;
    out.push_back((warning ? "warning: " : "") + t);
  }
  return out;
}

LogicalResult validateWithPtxas(const std::map<std::string, std::string> &ptx,
                                const std::string &workDir, std::string &error,
                                bool &ran, std::vector<std::string> *advisories) {
  ran = false;
  auto ptxas = llvm::sys::findProgramByName("ptxas");
  if (!ptxas) {
    auto local = llvm::sys::findProgramByName("ptxas", {"/usr/local/cuda/bin"});
    if (!local)
      return success(); // no CUDA toolkit: the artifact carries PTX only
    ptxas = local;
  }
  ran = true;
  // Up to one ptxas per core at a time.
  struct Job {
    std::string name, in, log;
    llvm::sys::ProcessInfo pi;
  };
  unsigned width = std::max(1u, std::thread::hardware_concurrency());
  std::vector<Job> running;
  std::string rejected;
  auto finish = [&](Job &j) {
    std::string msg;
    llvm::sys::ProcessInfo done = llvm::sys::Wait(j.pi, std::nullopt, &msg);
    if (done.ReturnCode != 0 && rejected.empty()) {
      auto buf = llvm::MemoryBuffer::getFile(j.log);
      rejected = "ptxas rejected kernel module " + j.name + ": " +
                (buf ? (*buf)->getBuffer().str() : msg.empty() ? std::string("(no log)") : msg);
      return;
    }
    if (advisories)
      if (auto buf = llvm::MemoryBuffer::getFile(j.log))
        for (std::string &a : ptxasAdvisories((*buf)->getBuffer()))
          advisories->push_back(j.name + ": " + a);
    llvm::sys::fs::remove(j.log);
    llvm::sys::fs::remove(j.in);
  };
  for (const auto &[name, text] : ptx) {
    std::string in = workDir + "/" + name + ".ptx", out = workDir + "/" + name + ".cubin";
    {
      std::error_code ec;
      llvm::raw_fd_ostream os(in, ec);
      if (ec) {
        error = "cannot write " + in;
        return failure();
      }
      os << text;
    }
    if (running.size() >= width) {
      finish(running.front());
      running.erase(running.begin());
    }
    Job j{name, in, workDir + "/" + name + ".ptxas.log", {}};
    std::optional<StringRef> redirects[] = {std::nullopt, StringRef(j.log), StringRef(j.log)};
    std::string arch = "-arch=" + TargetInfo::get(Target::Gpu).chip;
    // (--warn-on-spills: a spill is an advisory too, ptxasAdvisories)
    SmallVector<StringRef> argv = {*ptxas, arch, "-O3", "--warn-on-spills", in, "-o", out};
    std::string msg;
    bool execFailed = false;
    j.pi = llvm::sys::ExecuteNoWait(*ptxas, argv, std::nullopt, redirects, 0, &msg, &execFailed);
    if (execFailed) {
      error = "cannot run ptxas: " + msg;
      return failure();
    }
    running.push_back(std::move(j));
  }
  for (Job &j : running)
    finish(j);
  if (!rejected.empty()) {
    error = rejected;
    return failure();
  }
  return success();
}

LogicalResult embedCubins(ModuleOp gpuLowered, const std::string &workDir, std::string &error) {
  WalkResult r = gpuLowered->walk([&](gpu::BinaryOp bin) {
    std::string path = workDir + "/" + bin.getSymName().str() + ".cubin";
    auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
    if (!buf) {
      error = "cannot read the cubin " + path + ": " + buf.getError().message();
      return WalkResult::interrupt();
    }
    SmallVector<Attribute> objects;
    for (Attribute a : bin.getObjects()) {
      auto o = cast<gpu::ObjectAttr>(a);
      objects.push_back(gpu::ObjectAttr::get(
          bin.getContext(), o.getTarget(), gpu::CompilationTarget::Binary,
          StringAttr::get(bin.getContext(), (*buf)->getBuffer()), o.getProperties(),
          o.getKernels()));
    }
    bin.setObjectsAttr(ArrayAttr::get(bin.getContext(), objects));
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

} // namespace k3c::lowering
