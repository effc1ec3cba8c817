//===- BuilderTest.cpp - whole-model k3 IR from configs -------------------===//

#include "dialects/K3/IR/K3Ops.h"
#include "models/Config.h"
#include "models/ModelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

std::string configPath(const std::string &name) {
  return std::string(K3C_SOURCE_DIR) + "/models/configs/" + name;
}

func::FuncOp entry(ModuleOp m, StringRef name) {
  return m.lookupSymbol<func::FuncOp>(name);
}

/// Spec §2's table of AttnRes source counts for full K3 (block size 12),
/// written out independently of the builder: before-attention blends for
/// layers 1..92, before-FFN blends for layers 0..92, then the final blend, in
/// program order.
std::vector<int64_t> k3AttnResSourcesFromSpec() {
  std::vector<int64_t> out;
  for (int64_t li = 0; li < 93; ++li) {
    if (li > 0) { // layer 0 has no blend before attention
      if (li <= 83)
        out.push_back(li % 12 == 0 ? li / 12 + 1 : li / 12 + 2);
      else if (li == 84)
        out.push_back(8);
      else
        out.push_back(9);
    }
    if (li == 0)
      out.push_back(2);
    else if (li <= 83)
      out.push_back(li / 12 + 2);
    else
      out.push_back(9);
  }
  out.push_back(9); // final, before model.norm
  return out;
}

TEST(Builder, FullK3Module) {
  MLIRContext ctx;
  k3c::ModelConfig c = k3c::loadConfig(configPath("k3.json"));
  OwningOpRef<ModuleOp> m = k3c::buildModel(ctx, c);
  ASSERT_TRUE(m);
  for (StringRef name : {"prefill", "decode"}) {
    func::FuncOp fn = entry(*m, name);
    ASSERT_TRUE(fn) << name.str();
    int kda = 0, mla = 0, dense = 0, moe = 0;
    std::vector<int64_t> sources;
    fn.walk([&](Operation *op) {
      if (auto k = dyn_cast<mlir::k3::KdaOp>(op)) {
        ++kda;
        EXPECT_EQ(k.getNumHeads(), 96);
        EXPECT_EQ(k.getHeadDim(), 128);
        EXPECT_EQ(k.getGateForm(), mlir::k3::GateForm::bounded_sigmoid);
        EXPECT_EQ(k.getGateLowerBound()->convertToDouble(), -5.0);
        EXPECT_TRUE(k.getGProj() != nullptr);
      } else if (auto g = dyn_cast<mlir::k3::GatedMlaOp>(op)) {
        ++mla;
        EXPECT_TRUE(g.getQAProj() != nullptr && g.getGProj() != nullptr);
        EXPECT_NEAR(g.getSoftmaxScale().convertToDouble(), 1.0 / std::sqrt(192.0), 1e-12);
      } else if (isa<mlir::k3::MlpOp>(op)) {
        ++dense;
      } else if (auto l = dyn_cast<mlir::k3::LatentMoeOp>(op)) {
        ++moe;
        EXPECT_TRUE(l.hasLatent());
        EXPECT_EQ(l.getTopK(), 16);
        EXPECT_EQ(l.getNumExperts(), 896);
        EXPECT_TRUE(isa<mlir::k3::MXFP4Type>(l.getW1().getType()));
      } else if (auto a = dyn_cast<mlir::k3::AttnResOp>(op)) {
        sources.push_back(a.getSources().size());
      }
    });
    EXPECT_EQ(kda, 69);
    EXPECT_EQ(mla, 24);
    EXPECT_EQ(dense, 1);
    EXPECT_EQ(moe, 92);
    EXPECT_EQ(sources, k3AttnResSourcesFromSpec());
    EXPECT_EQ(sources.size(), 186u);
  }
  // Weights are named arguments; the routed experts of a layer are one MXFP4 value.
  func::FuncOp fn = entry(*m, "prefill");
  int weights = 0;
  bool sawExperts = false;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto name = fn.getArgAttrOfType<StringAttr>(i, "k3.weight")) {
      ++weights;
      if (name.getValue() == "model.layers.12.block_sparse_moe.experts.w2") {
        sawExperts = true;
        EXPECT_EQ(cast<mlir::k3::MXFP4Type>(fn.getArgument(i).getType()).getShape(),
                  (ArrayRef<int64_t>{896, 3584, 3072}));
      }
    }
  EXPECT_TRUE(sawExperts);
  EXPECT_GT(weights, 2000);
}

TEST(Builder, KimiLinearModule) {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> m =
      k3c::buildModel(ctx, k3c::loadConfig(configPath("kimi-linear-48b-a3b.json")));
  ASSERT_TRUE(m);
  int attnRes = 0, kda = 0, moe = 0;
  entry(*m, "prefill").walk([&](Operation *op) {
    if (isa<mlir::k3::AttnResOp>(op))
      ++attnRes;
    if (auto k = dyn_cast<mlir::k3::KdaOp>(op)) {
      ++kda;
      EXPECT_EQ(k.getGateForm(), mlir::k3::GateForm::softplus);
      EXPECT_FALSE(k.getGateLowerBound().has_value());
      EXPECT_TRUE(k.getGAProj() != nullptr && k.getGProj() == nullptr);
    }
    if (auto g = dyn_cast<mlir::k3::GatedMlaOp>(op)) {
      EXPECT_TRUE(g.getQProj() != nullptr);
      EXPECT_TRUE(g.getGProj() == nullptr);
    }
    if (auto l = dyn_cast<mlir::k3::LatentMoeOp>(op)) {
      ++moe;
      EXPECT_FALSE(l.hasLatent());
      EXPECT_EQ(l.getRoutedScalingFactor().convertToDouble(), 2.446);
      EXPECT_EQ(l.getActivation(), mlir::k3::Activation::swiglu);
      EXPECT_TRUE(isa<RankedTensorType>(l.getW1().getType())); // bf16 experts
    }
  });
  EXPECT_EQ(attnRes, 0);
  EXPECT_EQ(kda, 20);
  EXPECT_EQ(moe, 26);
}

TEST(Builder, Deterministic) {
  std::string a, b;
  for (std::string *out : {&a, &b}) {
    MLIRContext ctx;
    OwningOpRef<ModuleOp> m = k3c::buildModel(ctx, k3c::loadConfig(configPath("k3-tiny.json")));
    ASSERT_TRUE(m);
    llvm::raw_string_ostream os(*out);
    m->print(os);
  }
  EXPECT_EQ(a, b);
  EXPECT_GT(a.size(), 1000u);
}

} // namespace
