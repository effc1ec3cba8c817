//===- K3Ops.h - k3 dialect ops ---------------------------------*- C++ -*-===//
//
// Declares the ops of the k3 dialect (generated from K3Ops.td).
//
//===----------------------------------------------------------------------===//

#ifndef K3C_DIALECTS_K3_IR_K3OPS_H
#define K3C_DIALECTS_K3_IR_K3OPS_H

#include "dialects/K3/IR/K3Dialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/K3/IR/K3Ops.h.inc"

namespace mlir::k3 {
/// `v` with k3.kernel boundaries looked through: a kernel region's argument
/// is the kernel's operand, a kernel's result the value its body yields,
/// until neither applies. Passes and the lowering use it to find the op that
/// makes a value in fused IR, where producer and user sit in different
/// kernels.
Value throughKernels(Value v);
} // namespace mlir::k3

#endif // K3C_DIALECTS_K3_IR_K3OPS_H
