//===- K3Dialect.cpp - k3 dialect, types and attributes -------------------===//
//
// Dialect registration, the MXFP4 weight type (parser, printer, verifier) and
// the generated enum attributes.
//
//===----------------------------------------------------------------------===//

#include "dialects/K3/IR/K3Dialect.h"
#include "dialects/K3/IR/K3Ops.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::k3;

#include "dialects/K3/IR/K3Dialect.cpp.inc"
#include "dialects/K3/IR/K3Enums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/K3/IR/K3Attrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/K3/IR/K3Types.cpp.inc"

void K3Dialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/K3/IR/K3Ops.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/K3/IR/K3Attrs.cpp.inc"
      >();
  registerTypes();
}

void K3Dialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/K3/IR/K3Types.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// MXFP4Type
//===----------------------------------------------------------------------===//

// Syntax: !k3.mxfp4<896x3072x3584> or
//         !k3.mxfp4<896x3072x3584, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>
Type MXFP4Type::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  MXFP4LayoutAttr layout;
  if (parser.parseLess() ||
      parser.parseDimensionList(shape, /*allowDynamic=*/false,
                                /*withTrailingX=*/false))
    return {};
  if (succeeded(parser.parseOptionalComma()) && parser.parseAttribute(layout))
    return {};
  if (parser.parseGreater())
    return {};
  return parser.getChecked<MXFP4Type>(parser.getContext(), shape, layout);
}

void MXFP4Type::print(AsmPrinter &printer) const {
  printer << "<";
  llvm::interleave(getShape(), printer.getStream(), "x");
  if (getLayout()) {
    printer << ", ";
    printer.printAttribute(getLayout());
  }
  printer << ">";
}

LogicalResult MXFP4LayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      int64_t nTile, int64_t kTile) {
  if (nTile != 8)
    return emitError() << "mxfp4_layout n_tile must be 8 (the N of mma.m16n8k16), got "
                       << nTile;
  if (kTile != 32 && kTile != 64 && kTile != 128)
    return emitError() << "mxfp4_layout k_tile must be 32, 64 or 128, got " << kTile;
  return success();
}

LogicalResult
MXFP4Type::verify(function_ref<InFlightDiagnostic()> emitError,
                  ArrayRef<int64_t> shape, MXFP4LayoutAttr layout) {
  if (shape.size() < 2)
    return emitError() << "MXFP4 weight must have rank >= 2 ([..., N, K]), got rank "
                       << shape.size();
  for (auto [i, d] : llvm::enumerate(shape))
    if (d <= 0)
      return emitError() << "MXFP4 weight dim " << i << " must be positive, got " << d;
  if (shape.back() % kBlock != 0)
    return emitError() << "MXFP4 weight reduction dim (last) is " << shape.back()
                       << ", not a multiple of the block size " << kBlock;
  if (layout) {
    int64_t n = shape[shape.size() - 2], k = shape.back();
    if (n % layout.getNTile() != 0)
      return emitError() << "MXFP4 weight rows " << n << " are not a multiple of the layout's n_tile "
                         << layout.getNTile();
    if (k % layout.getKTile() != 0)
      return emitError() << "MXFP4 weight reduction dim " << k
                         << " is not a multiple of the layout's k_tile " << layout.getKTile();
  }
  return success();
}

SmallVector<int64_t> MXFP4Type::getScaleShape() const {
  SmallVector<int64_t> s(getShape());
  s.back() /= kBlock;
  return s;
}

int64_t MXFP4Type::getStorageBytes() const {
  int64_t n = 1;
  for (int64_t d : getShape())
    n *= d;
  return n / 2 + n / kBlock;
}
