//===- KernelBuilderTest.cpp - KernelBuilder's shared-memory guard ---------===//
//
// A GPU kernel's dynamic shared memory is a one-byte symbol in the PTX that
// the kernel addresses past its end, over any static workgroup buffer of the
// same kernel (the chained expert launch's claim slots were overwritten this
// way, session 31). KernelBuilder refuses the mix, in either order, with a
// fatal error naming it; a kernel with only one kind builds and verifies.
//
//===----------------------------------------------------------------------===//

#include "lowering/KernelBuilder.h"
#include "lowering/Lowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <map>

using namespace mlir;

namespace {

/// A module with one function `k` and its builder, on `target`.
struct Kernel {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<OpBuilder> b;
  std::unique_ptr<k3c::lowering::KernelBuilder> kb;
  explicit Kernel(k3c::lowering::Target target) {
    ctx.loadDialect<func::FuncDialect, gpu::GPUDialect, memref::MemRefDialect, arith::ArithDialect,
                    scf::SCFDialect>();
    Location loc = UnknownLoc::get(&ctx);
    module = ModuleOp::create(loc);
    b = std::make_unique<OpBuilder>(&ctx);
    b->setInsertionPointToEnd(module->getBody());
    auto fn = func::FuncOp::create(*b, loc, "k", b->getFunctionType({}, {}));
    b->setInsertionPointToStart(fn.addEntryBlock());
    func::ReturnOp::create(*b, loc);
    b->setInsertionPointToStart(&fn.getBody().front());
    kb = std::make_unique<k3c::lowering::KernelBuilder>(*b, loc, target);
    kb->function = fn;
  }
};

using k3c::lowering::Target;
using k3c::lowering::ThreadBlock;

TEST(KernelBuilderDeath, WorkgroupBufferInAKernelWithDynamicSharedMemory) {
  EXPECT_DEATH(
      {
        Kernel k(Target::Gpu);
        k.kb->blocks({k.kb->idx(4)}, 128, [&](ValueRange, ThreadBlock &tb) {
          (void)k.kb->dynamicShared(tb, 0, {64}, k.b->getF32Type());
          (void)k.kb->shared(tb, {2}, k.b->getI32Type());
        }, /*dynamicSharedBytes=*/256, "mixed");
      },
      "a kernel with dynamic shared memory takes its workgroup buffers from it");
}

TEST(KernelBuilderDeath, DynamicSharedMemoryInAKernelWithWorkgroupBuffers) {
  EXPECT_DEATH(
      {
        Kernel k(Target::Gpu);
        k.kb->blocks({k.kb->idx(4)}, 128, [&](ValueRange, ThreadBlock &tb) {
          (void)k.kb->shared(tb, {2}, k.b->getI32Type());
          (void)k.kb->dynamicShared(tb, 0, {64}, k.b->getF32Type());
        }, /*dynamicSharedBytes=*/0, "mixed");
      },
      "a kernel with workgroup buffers \\(KernelBuilder::shared\\) takes no dynamic shared memory");
}

TEST(KernelBuilder, OneKindOfSharedMemoryBuilds) {
  for (bool dynamic : {false, true}) {
    Kernel k(Target::Gpu);
    k.kb->blocks({k.kb->idx(4)}, 128, [&](ValueRange, ThreadBlock &tb) {
      Value buf = dynamic ? k.kb->dynamicShared(tb, 0, {64}, k.b->getF32Type())
                          : k.kb->shared(tb, {64}, k.b->getF32Type());
      Value again = dynamic ? k.kb->dynamicShared(tb, 256, {2}, k.b->getI32Type())
                            : k.kb->shared(tb, {2}, k.b->getI32Type());
      k.kb->store(k.kb->f32(1.0), buf, {tb.tid});
      k.kb->store(k.kb->i32Const(3), again, {k.kb->idx(1)});
    }, dynamic ? 264 : 0, dynamic ? "dyn" : "static");
    EXPECT_TRUE(succeeded(verify(*k.module))) << (dynamic ? "dynamic" : "static");
    int launches = 0;
    k.module->walk([&](gpu::LaunchOp l) {
      ++launches;
      EXPECT_EQ(l.getWorkgroupAttributions().empty(), dynamic);
      EXPECT_EQ(static_cast<bool>(l.getDynamicSharedMemorySize()), dynamic);
    });
    EXPECT_EQ(launches, 1);
  }
}

// Two launches of one lowering under one name with different bodies (the q
// and k convolutions, whose norms differ in scale): the outliner names the
// second `<name>_0`; both keep the blocks an SM the lowering asked for
// (before session 34 the renamed one lost its .minnctapersm).
TEST(KernelBuilder, RenamedLaunchKeepsItsBlocksPerSm) {
  Kernel k(Target::Gpu);
  for (double v : {1.0, 2.0})
    k.kb->blocks({k.kb->idx(4)}, 128, [&](ValueRange, ThreadBlock &tb) {
      k.kb->minBlocksPerSm(tb, 3);
      Value buf = k.kb->shared(tb, {128}, k.b->getF32Type());
      k.kb->store(k.kb->f32(v), buf, {tb.tid});
    }, 0, "twin");
  std::string error;
  ASSERT_TRUE(succeeded(k3c::lowering::lowerLoopsToGpu(*k.module, error))) << error;
  std::map<std::string, int64_t> minBlocks;
  k.module->walk([&](Operation *op) {
    auto name = op->getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName());
    if (!name || !name.getValue().starts_with("k_twin")) // outlined as <function>_<name>
      return;
    if (auto n = op->getAttrOfType<IntegerAttr>("nvvm.minctasm"))
      minBlocks[name.str()] = n.getInt();
    else if (!isa<gpu::GPUModuleOp>(op))
      minBlocks[name.str()] = 0;
  });
  ASSERT_EQ(minBlocks.size(), 2u);
  EXPECT_EQ(minBlocks["k_twin"], 3);
  EXPECT_EQ(minBlocks["k_twin_0"], 3);
}

// A clustered launch (KernelBuilder::blocks with a cluster size: the MLA
// decode's transposed core, the clustered combine): MLIR 22's gpu.launch
// builder makes only the 12 block / thread region arguments, so blocks adds
// the cluster ids and sizes after them; the launch verifies, carries the
// cluster size, keeps a workgroup buffer after the 18 arguments, and lowers
// to a kernel launched with the cluster (gpu.launch_func clusters).
TEST(KernelBuilder, ClusteredLaunchBuildsAndLowers) {
  Kernel k(Target::Gpu);
  k.kb->blocks({k.kb->idx(8)}, 128, [&](ValueRange bid, ThreadBlock &tb) {
    Value buf = k.kb->shared(tb, {128}, k.b->getF32Type());
    k.kb->store(k.kb->f32(1.0), buf, {tb.tid});
    (void)bid;
  }, 0, "clustered", /*cluster=*/2);
  ASSERT_TRUE(succeeded(verify(*k.module)));
  int launches = 0;
  k.module->walk([&](gpu::LaunchOp l) {
    ++launches;
    EXPECT_TRUE(l.hasClusterSize());
    EXPECT_EQ(l.getBody().getNumArguments(), gpu::LaunchOp::kNumConfigRegionAttributes + 6 + 1);
    EXPECT_EQ(l.getWorkgroupAttributions().size(), 1u);
    ASSERT_TRUE(l.getClusterSizeOperandValues().has_value());
    auto cx = l.getClusterSizeOperandValues()->x.getDefiningOp<arith::ConstantIndexOp>();
    ASSERT_TRUE(cx);
    EXPECT_EQ(cx.value(), 2);
  });
  EXPECT_EQ(launches, 1);
  std::string error;
  ASSERT_TRUE(succeeded(k3c::lowering::lowerLoopsToGpu(*k.module, error))) << error;
  int clustered = 0;
  k.module->walk([&](gpu::LaunchFuncOp l) {
    if (l.hasClusterSize())
      ++clustered;
  });
  EXPECT_EQ(clustered, 1);
}

// ptxas's log on an accepted module: its performance advisories (C7514:
// wgmma serialized) and warnings are what k3-compile reports; statistics and
// compile-time info lines are not.
TEST(PtxasLog, AdvisoriesAreTheLossAndWarningLines) {
  const char *log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k'\n"
      "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to non wgmma instructions reading accumulator registers of  a wgmma "
      "between start and end of the pipeline stage in the function 'k'\n"
      "ptxas info    : Used 250 registers, used 5 barriers, 1 bytes smem\n"
      "ptxas warning : Registers are spilled to local memory in function 'k', 8 bytes spill "
      "stores, 8 bytes spill loads\n";
  std::vector<std::string> a = k3c::lowering::ptxasAdvisories(log);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0], "(C7514) Potential Performance Loss: wgmma.mma_async instructions are "
                  "serialized due to non wgmma instructions reading accumulator registers of a "
                  "wgmma between start and end of the pipeline stage in the function 'k'");
  EXPECT_EQ(a[1], "warning: Registers are spilled to local memory in function 'k', 8 bytes "
                  "spill stores, 8 bytes spill loads");
  EXPECT_TRUE(k3c::lowering::ptxasAdvisories("ptxas info    : 0 bytes gmem\n").empty());
  EXPECT_TRUE(k3c::lowering::ptxasAdvisories("").empty());
}

} // namespace
