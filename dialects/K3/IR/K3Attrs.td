//===- K3Attrs.td - k3 dialect attributes -------------------*- tablegen -*-===//

#ifndef K3C_DIALECTS_K3_IR_K3ATTRS_TD
#define K3C_DIALECTS_K3_IR_K3ATTRS_TD

include "dialects/K3/IR/K3Dialect.td"

def K3_MXFP4LayoutAttr : AttrDef<K3_Dialect, "MXFP4Layout"> {
  let mnemonic = "mxfp4_layout";
  let summary = "the kernel layout of an MXFP4 weight (see docs/mxfp4-layout.md)";
  let description = [{
    Tiles of `n_tile` (8, the N of mma.m16n8k16) rows by `k_tile` (32, 64 or
    128) reduction columns, tiles ordered row-tile-major then k-tile. Inside
    a tile, thread t = 4 * r + c (row r = t / 4, c = t % 4) owns k_tile / 4
    consecutive nibbles: for each 16-wide k step s, the columns 16s + 2c +
    {0, 1, 8, 9} of its row — exactly its mma.m16n8k16 B-fragment elements —
    so with k_tile = 128 one 16-byte load feeds eight MMAs. Scales: per tile,
    [row][block] bytes. The byte permutation is defined once, in
    models/MXFP4Layout.h, and used by the compiler and the runtime repacker.
  }];
  let parameters = (ins "int64_t":$n_tile, "int64_t":$k_tile);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // K3C_DIALECTS_K3_IR_K3ATTRS_TD
