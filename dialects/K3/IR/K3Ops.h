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

#endif // K3C_DIALECTS_K3_IR_K3OPS_H
