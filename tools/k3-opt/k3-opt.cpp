//===- k3-opt.cpp - k3c IR-level driver -----------------------------------===//
//
// MlirOptMain with the k3 dialect, the dialects k3 IR and the lowered
// kernels use (func, arith, tensor, scf, memref, math) and every k3c pass registered. All `--mlir-*` flags come with it.
//
//===----------------------------------------------------------------------===//

#include "dialects/K3/IR/K3Dialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"

int main(int argc, char **argv) {
  // The options registered so far are the linked LLVM libraries' static ones
  // (AMDGPU, AArch64, ... backend flags): hidden from --help (still
  // accepted; --help-hidden lists them). MLIR's and k3c's options are
  // registered below and by MlirOptMain, and stay visible.
  // (LLVM's own function: no categories given = all but the generic ones.)
  llvm::cl::HideUnrelatedOptions(llvm::ArrayRef<const llvm::cl::OptionCategory *>{});
  mlir::registerTransformsPasses();
  mlir::k3::registerK3Passes();
  mlir::k3::registerK3Pipelines();
  mlir::DialectRegistry registry;
  registry.insert<mlir::k3::K3Dialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect,
                  mlir::scf::SCFDialect, mlir::memref::MemRefDialect, mlir::math::MathDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "k3c IR driver: parse, verify, transform and print k3 IR\n",
      registry));
}
