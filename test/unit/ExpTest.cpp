//===- ExpTest.cpp - the f32 build's GPU exp sequence, run on the CPU -----===//
//
// rewriteExpF64 (lowering/GpuTarget.cpp) replaces f32 math.exp / math.exp2
// by the sequence the GPU's f32 build runs: fp64 range reduction, a Taylor
// series to r^11, one rounding to f32. Here the same IR is JIT-compiled for
// the host and checked element by element against expl / exp2l (long
// double): at most half an ulp (plus 1e-3 ulp for the reference's own error)
// on normal results, half the subnormal spacing below them, and the special
// values (NaN, infinities, overflow, underflow to 0, -0) as libm has them.
//
//===----------------------------------------------------------------------===//

#include "lowering/Lowering.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"

#include "llvm/Support/TargetSelect.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

using namespace mlir;

namespace {

const char *kSource = R"mlir(
func.func @k3_test_exp(%x: f32) -> f32 {
  %y = math.exp %x : f32
  return %y : f32
}
func.func @k3_test_exp2(%x: f32) -> f32 {
  %y = math.exp2 %x : f32
  return %y : f32
}
)mlir";

using Fn = float (*)(float);

/// The two functions with the GPU's f32 exp sequence, compiled for the host.
struct Jit {
  MLIRContext ctx;
  std::unique_ptr<ExecutionEngine> engine;
  Fn exp = nullptr, exp2 = nullptr;
  int mathLeft = -1; ///< math.exp / math.exp2 ops left after the rewrite

  Jit() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    ctx.loadDialect<func::FuncDialect, arith::ArithDialect, math::MathDialect,
                    LLVM::LLVMDialect>();
    registerBuiltinDialectTranslation(ctx);
    registerLLVMDialectTranslation(ctx);
    OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(kSource, &ctx);
    if (!m)
      return;
    k3c::lowering::rewriteExpF64(*m);
    mathLeft = 0;
    m->walk([&](Operation *op) { mathLeft += isa<math::ExpOp, math::Exp2Op>(op); });
    PassManager pm(&ctx);
    pm.addPass(createConvertMathToLLVMPass());
    pm.addPass(createArithToLLVMConversionPass());
    pm.addPass(createConvertFuncToLLVMPass());
    pm.addPass(createReconcileUnrealizedCastsPass());
    if (failed(pm.run(*m)))
      return;
    auto e = ExecutionEngine::create(*m);
    if (!e) {
      llvm::consumeError(e.takeError());
      return;
    }
    engine = std::move(*e);
    auto look = [&](const char *name) -> Fn {
      auto sym = engine->lookup(name);
      if (!sym) {
        llvm::consumeError(sym.takeError());
        return nullptr;
      }
      return reinterpret_cast<Fn>(*sym);
    };
    exp = look("k3_test_exp");
    exp2 = look("k3_test_exp2");
  }
};

Jit &jit() {
  static Jit j;
  return j;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// |got - ref| in units of the f32 spacing at ref (the subnormal spacing
/// below the normal range).
double ulpError(float got, long double ref) {
  const long double a = std::fabs(ref);
  const long double minNormal = std::numeric_limits<float>::min();
  long double ulp = a < minNormal ? std::ldexp(1.0L, -149)
                                  : std::ldexp(1.0L, std::ilogb(static_cast<float>(a)) - 23);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - ref) / ulp);
}

/// Max ulp error of `fn` against `ref` over `n` uniform samples of [lo, hi].
double maxUlp(Fn fn, long double (*ref)(long double), float lo, float hi, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    float x = u(rng);
    long double r = ref(static_cast<long double>(x));
    if (r > static_cast<long double>(std::numeric_limits<float>::max()))
      continue;
    worst = std::max(worst, ulpError(fn(x), r));
  }
  return worst;
}

long double expL(long double x) { return std::exp(x); }
long double exp2L(long double x) { return std::exp2(x); }

TEST(GpuF32Exp, Compiles) {
  EXPECT_EQ(jit().mathLeft, 0); // the sequence, not libm's expf, is what runs
  ASSERT_NE(jit().exp, nullptr);
  ASSERT_NE(jit().exp2, nullptr);
}

TEST(GpuF32Exp, HalfAnUlpOverTheNormalRange) {
  ASSERT_NE(jit().exp, nullptr);
  EXPECT_LE(maxUlp(jit().exp, expL, -87.0f, 88.7f, 200000, 1), 0.501);
  EXPECT_LE(maxUlp(jit().exp, expL, -1.0f, 1.0f, 100000, 2), 0.501); // softmax / sigmoid range
  EXPECT_LE(maxUlp(jit().exp2, exp2L, -126.0f, 127.9f, 200000, 3), 0.501);
  EXPECT_LE(maxUlp(jit().exp2, exp2L, -1.0f, 1.0f, 100000, 4), 0.501);
}

TEST(GpuF32Exp, SubnormalResultsRoundedNotFlushed) {
  ASSERT_NE(jit().exp, nullptr);
  EXPECT_LE(maxUlp(jit().exp, expL, -103.0f, -87.4f, 50000, 5), 0.501);
  EXPECT_LE(maxUlp(jit().exp2, exp2L, -149.0f, -126.0f, 50000, 6), 0.501);
  EXPECT_GT(jit().exp(-100.0f), 0.0f); // 3.7e-44: a subnormal, not 0
  EXPECT_EQ(jit().exp2(-149.0f), std::ldexp(1.0f, -149));
}

TEST(GpuF32Exp, SpecialValues) {
  ASSERT_NE(jit().exp, nullptr);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Fn fn : {jit().exp, jit().exp2}) {
    EXPECT_TRUE(std::isnan(fn(nan)));
    EXPECT_EQ(fn(inf), inf);
    EXPECT_EQ(bits(fn(-inf)), 0u);
    EXPECT_EQ(fn(0.0f), 1.0f);
    EXPECT_EQ(fn(-0.0f), 1.0f);
    EXPECT_EQ(fn(1000.0f), inf);
    EXPECT_EQ(bits(fn(-1000.0f)), 0u);
  }
  EXPECT_EQ(jit().exp(88.8f), inf);   // past FLT_MAX = e^88.72
  EXPECT_EQ(jit().exp2(128.0f), inf);
  EXPECT_EQ(jit().exp2(127.0f), std::ldexp(1.0f, 127));
  EXPECT_EQ(bits(jit().exp(-104.0f)), 0u); // below half the smallest subnormal
  EXPECT_EQ(jit().exp(1.0f), static_cast<float>(std::exp(1.0L)));
}

} // namespace
