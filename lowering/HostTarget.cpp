//===- HostTarget.cpp - loop kernels -> x86-64 shared library -------------===//
//
// scf/memref/arith/math -> LLVM dialect -> LLVM IR (O3) -> object through the
// host TargetMachine -> a shared library linked by the system C compiler.
// Each kernel gets an entry `k3k_<name>(void **args)` taking pointers to the
// memref descriptors of its arguments, in KernelInfo order; the runtime calls
// only these.
//
//===----------------------------------------------------------------------===//

#include "lowering/Artifact.h"
#include "lowering/Lowering.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;

namespace k3c::lowering {

LogicalResult lowerLoopsToLLVMDialect(ModuleOp loops, const std::vector<KernelInfo> &kernels) {
  MLIRContext *ctx = loops.getContext();
  ctx->loadDialect<LLVM::LLVMDialect, vector::VectorDialect>();
  bool gpu = false;
  loops.walk([&](Operation *op) {
    if (isa<gpu::GPUModuleOp, gpu::BinaryOp>(op))
      gpu = true;
  });
  PassManager pm(ctx);
  if (gpu) {
    // Kernels already in NVVM: embed their PTX (gpu.binary) and lower the
    // host side's launches to the mgpu* runtime ABI.
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    GpuModuleToBinaryPassOptions bin;
    bin.compilationTarget = "isa"; // PTX; the driver JITs it for the device
    pm.addPass(createGpuModuleToBinaryPass(bin));
    pm.addNestedPass<func::FuncOp>(createLowerAffinePass());
    // TMA tensor maps made before a launch (nvgpu.tma.create.descriptor):
    // calls of the runtime's mgpuTensorMapEncodeTiledMemref.
    pm.addPass(createConvertNVGPUToNVVMPass());
  }
  // bf16 <-> f32 as integer ops (round to nearest even): no libgcc/compiler-rt
  // helper (__truncsfbf2) is needed at load time.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  if (gpu)
    pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(loops)))
    return failure();
  // x86 has no bf16 arithmetic: LLVM legalizes a (vectorized) select of bf16
  // values through the __truncsfbf2 libcall, which older libgcc lacks. The
  // library carries its own (round to nearest even, quiet NaN).
  if (!loops.lookupSymbol("__truncsfbf2")) {
    OpBuilder b = OpBuilder::atBlockEnd(loops.getBody());
    Location loc = loops.getLoc();
    Type f32 = b.getF32Type(), i32 = b.getI32Type();
    auto fn = LLVM::LLVMFuncOp::create(b, loc, "__truncsfbf2",
                                       LLVM::LLVMFunctionType::get(b.getBF16Type(), {f32}));
    Block *entry = fn.addEntryBlock(b);
    OpBuilder fb = OpBuilder::atBlockEnd(entry);
    auto c = [&](int32_t v) { return LLVM::ConstantOp::create(fb, loc, i32, v).getResult(); };
    Value x = entry->getArgument(0);
    Value bits = LLVM::BitcastOp::create(fb, loc, i32, x);
    Value lsb = LLVM::AndOp::create(fb, loc, LLVM::LShrOp::create(fb, loc, bits, c(16)), c(1));
    Value r = LLVM::LShrOp::create(
        fb, loc, LLVM::AddOp::create(fb, loc, LLVM::AddOp::create(fb, loc, bits, c(0x7FFF)), lsb),
        c(16));
    Value nan = LLVM::FCmpOp::create(fb, loc, LLVM::FCmpPredicate::uno, x, x);
    Value sel = LLVM::SelectOp::create(fb, loc, nan, c(0x7FC0), r);
    Value h = LLVM::TruncOp::create(fb, loc, fb.getI16Type(), sel);
    LLVM::ReturnOp::create(fb, loc, LLVM::BitcastOp::create(fb, loc, fb.getBF16Type(), h).getResult());
  }
  // Uniform entry points: k3k_<name>(void **args) -> _mlir_ciface_<name>(args[0], ...).
  OpBuilder b = OpBuilder::atBlockEnd(loops.getBody());
  Location loc = loops.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  for (const KernelInfo &k : kernels) {
    auto fnType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr});
    auto fn = LLVM::LLVMFuncOp::create(b, loc, "k3k_" + k.name, fnType);
    Block *entry = fn.addEntryBlock(b);
    OpBuilder fb = OpBuilder::atBlockEnd(entry);
    SmallVector<Value> args;
    for (size_t i = 0; i < k.args.size(); ++i) {
      Value slot = LLVM::GEPOp::create(fb, loc, ptr, ptr, entry->getArgument(0),
                                       ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
      args.push_back(LLVM::LoadOp::create(fb, loc, ptr, slot));
    }
    LLVM::CallOp::create(fb, loc, TypeRange{}, "_mlir_ciface_" + k.name, args);
    LLVM::ReturnOp::create(fb, loc, ValueRange{});
    // k3k_<name>_sig: the calling convention the entry point was built for,
    // NUL-terminated; the runtime checks it against manifest.json.
    std::string sig = kernelSignatureOf(k);
    sig.push_back('\0');
    auto arrayType = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), sig.size());
    LLVM::GlobalOp::create(b, loc, arrayType, /*isConstant=*/true, LLVM::Linkage::External,
                           "k3k_" + k.name + "_sig", b.getStringAttr(sig));
  }
  return success();
}

LogicalResult buildHostLibrary(ModuleOp loops, const std::vector<KernelInfo> &kernels,
                               const std::string &soPath, std::string *llvmIR,
                               std::string &error) {
  if (failed(lowerLoopsToLLVMDialect(loops, kernels))) {
    error = "lowering the kernels to the LLVM dialect failed";
    return failure();
  }
  registerBuiltinDialectTranslation(*loops.getContext());
  registerLLVMDialectTranslation(*loops.getContext());
  registerGPUDialectTranslation(*loops.getContext());
  llvm::LLVMContext llvmCtx;
  std::unique_ptr<llvm::Module> mod = translateModuleToLLVMIR(loops, llvmCtx, "k3c_kernels");
  if (!mod) {
    error = "translating the kernels to LLVM IR failed";
    return failure();
  }
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string err;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target) {
    error = "no LLVM target for " + triple.str() + ": " + err;
    return failure();
  }
  llvm::TargetOptions opts;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, "x86-64-v2", "", opts, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  mod->setTargetTriple(triple);
  mod->setDataLayout(tm->createDataLayout());
  if (auto e = makeOptimizingTransformer(3, 0, tm.get())(mod.get())) {
    error = "LLVM optimization failed: " + llvm::toString(std::move(e));
    return failure();
  }
  if (llvmIR) {
    llvm::raw_string_ostream os(*llvmIR);
    mod->print(os, nullptr);
  }
  std::string objPath = soPath + ".o";
  {
    std::error_code ec;
    llvm::raw_fd_ostream obj(objPath, ec, llvm::sys::fs::OF_None);
    if (ec) {
      error = "cannot write " + objPath + ": " + ec.message();
      return failure();
    }
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, obj, nullptr, llvm::CodeGenFileType::ObjectFile)) {
      error = "the host target cannot emit object files";
      return failure();
    }
    pm.run(*mod);
  }
  // Link: the system C compiler driver (cc) turns the object into a .so.
  auto cc = llvm::sys::findProgramByName("cc");
  if (!cc) {
    error = "no C compiler ('cc') on PATH to link the host kernel library";
    return failure();
  }
  std::string ccPath = *cc;
  SmallVector<StringRef> argv = {ccPath, "-shared", "-o", soPath, objPath, "-lm"};
  std::string msg;
  int rc = llvm::sys::ExecuteAndWait(ccPath, argv, std::nullopt, {}, 0, 0, &msg);
  llvm::sys::fs::remove(objPath);
  if (rc != 0) {
    error = "linking " + soPath + " failed (" + std::to_string(rc) + "): " + msg;
    return failure();
  }
  return success();
}

} // namespace k3c::lowering
