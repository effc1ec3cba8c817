//===- K3Types.td - k3 dialect types ------------------------*- tablegen -*-===//

#ifndef K3C_DIALECTS_K3_IR_K3TYPES_TD
#define K3C_DIALECTS_K3_IR_K3TYPES_TD

include "dialects/K3/IR/K3Dialect.td"
include "dialects/K3/IR/K3Attrs.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

class K3_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<K3_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def K3_MXFP4Type : K3_Type<"MXFP4", "mxfp4"> {
  let summary = "an MXFP4 weight tensor (OCP MX v1.0: E2M1 payload, E8M0 scale per 32 along K)";
  let description = [{
    A weight tensor of logical shape `[..., N, K]` stored in MXFP4: every
    element is a 4-bit `f4E2M1FN` code, and every run of 32
    consecutive elements along the last (reduction) axis K shares one
    `f8E8M0FNU` power-of-two scale. The logical value is
    `E2M1[code] * 2^(scale - 127)`; the scale byte 0xFF is NaN.

    Leading dimensions stack independent matrices (for example the routed
    experts of one MoE layer: `!k3.mxfp4<896x3072x3584>`). The payload and
    scale tensors are available as `tensor<...xf4E2M1FN>` and
    `tensor<...x(K/32)xf8E8M0FNU>` through `k3.mxfp4_pack`.

    Without a layout the bytes are in the checkpoint layout (K3's
    compressed-tensors packing, spec §4.9); `--k3-mxfp4-layout` attaches
    the kernel layout:

    ```mlir
    !k3.mxfp4<896x3072x3584>
    !k3.mxfp4<896x3072x3584, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t", "logical shape">:$shape,
                        OptionalParameter<"::mlir::k3::MXFP4LayoutAttr", "kernel layout">:$layout);
  let builders = [
    TypeBuilder<(ins "::llvm::ArrayRef<int64_t>":$shape), [{
      return $_get($_ctxt, shape, ::mlir::k3::MXFP4LayoutAttr());
    }]>
  ];
  let skipDefaultBuilders = 0;
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Elements sharing one E8M0 scale (OCP MX v1.0 fixes it at 32).
    static constexpr int64_t kBlock = 32;
    static constexpr int64_t getBlock() { return kBlock; }
    /// Number of scale blocks along the reduction axis.
    int64_t getNumBlocks() const { return getShape().back() / getBlock(); }
    /// Shape of the `f4E2M1FN` payload tensor (equal to the logical shape).
    llvm::ArrayRef<int64_t> getPayloadShape() const { return getShape(); }
    /// Shape of the `f8E8M0FNU` scale tensor.
    llvm::SmallVector<int64_t> getScaleShape() const;
    /// Bytes occupied by payload and scales.
    int64_t getStorageBytes() const;
  }];
}

#endif // K3C_DIALECTS_K3_IR_K3TYPES_TD
