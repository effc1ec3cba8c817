//===- DialectTest.cpp - C++ API tests of the k3 dialect ------------------===//

#include "dialects/K3/IR/K3Ops.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

struct K3DialectTest : ::testing::Test {
  K3DialectTest() {
    ctx.loadDialect<k3::K3Dialect, func::FuncDialect>();
  }
  MLIRContext ctx;
};

TEST_F(K3DialectTest, MXFP4TypeShapes) {
  auto t = k3::MXFP4Type::get(&ctx, {896, 3072, 3584});
  EXPECT_EQ(t.getNumBlocks(), 112);
  EXPECT_EQ(t.getScaleShape(), (SmallVector<int64_t>{896, 3072, 112}));
  // 3072 * 3584 / 2 payload bytes + 3072 * 112 scale bytes per expert.
  EXPECT_EQ(t.getStorageBytes(), 896LL * (3072 * 1792 + 3072 * 112));
}

TEST_F(K3DialectTest, MXFP4TypeRejectsUnalignedK) {
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  auto bad = k3::MXFP4Type::getChecked(UnknownLoc::get(&ctx), &ctx,
                                       ArrayRef<int64_t>{64, 100}, k3::MXFP4LayoutAttr());
  EXPECT_FALSE(bad);
  EXPECT_NE(message.find("not a multiple of the block size 32"), std::string::npos)
      << message;
}

TEST_F(K3DialectTest, ParsesAndVerifiesRouter) {
  const char *src = R"mlir(
    func.func @f(%x: tensor<?x128xbf16>, %w: tensor<16x128xbf16>, %b: tensor<16xf32>)
        -> (tensor<?x4xi32>, tensor<?x4xf32>) {
      %i, %p = k3.moe_router %x, %w bias(%b) {top_k = 4 : i64,
          score = #k3.router_score<sigmoid>, renormalize = true,
          routed_scaling_factor = 1.0 : f64}
        : (tensor<?x128xbf16>, tensor<16x128xbf16>, tensor<16xf32>)
          -> (tensor<?x4xi32>, tensor<?x4xf32>)
      return %i, %p : tensor<?x4xi32>, tensor<?x4xf32>
    })mlir";
  OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(src, &ctx);
  ASSERT_TRUE(m);
  int routers = 0;
  m->walk([&](k3::MoeRouterOp op) {
    ++routers;
    EXPECT_EQ(op.getTopK(), 4);
    EXPECT_EQ(op.getScore(), k3::RouterScore::sigmoid);
    EXPECT_TRUE(op.getBias() != nullptr);
  });
  EXPECT_EQ(routers, 1);
}

TEST_F(K3DialectTest, VerifierRejectsTopKAboveExperts) {
  const char *src = R"mlir(
    func.func @f(%x: tensor<?x128xbf16>, %w: tensor<16x128xbf16>)
        -> (tensor<?x17xi32>, tensor<?x17xf32>) {
      %i, %p = k3.moe_router %x, %w {top_k = 17 : i64,
          score = #k3.router_score<sigmoid>, renormalize = true,
          routed_scaling_factor = 1.0 : f64}
        : (tensor<?x128xbf16>, tensor<16x128xbf16>) -> (tensor<?x17xi32>, tensor<?x17xf32>)
      return %i, %p : tensor<?x17xi32>, tensor<?x17xf32>
    })mlir";
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(src, &ctx);
  EXPECT_FALSE(m);
  EXPECT_NE(message.find("top_k = 17 exceeds the number of experts = 16"),
            std::string::npos)
      << message;
}

} // namespace
