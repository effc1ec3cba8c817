//===- K3Dialect.h - the k3 dialect -----------------------------*- C++ -*-===//
//
// Declares the k3 dialect, its types (MXFP4 weights) and enum attributes.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_DIALECTS_K3_IR_K3DIALECT_H
#define K3C_DIALECTS_K3_IR_K3DIALECT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialects/K3/IR/K3Dialect.h.inc"
#include "dialects/K3/IR/K3Enums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/K3/IR/K3Attrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/K3/IR/K3Types.h.inc"

#endif // K3C_DIALECTS_K3_IR_K3DIALECT_H
