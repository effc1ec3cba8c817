//===- K3Enums.td - k3 dialect enums ------------------------*- tablegen -*-===//

#ifndef K3C_DIALECTS_K3_IR_K3ENUMS_TD
#define K3C_DIALECTS_K3_IR_K3ENUMS_TD

include "dialects/K3/IR/K3Dialect.td"

def K3_GateForm : I32EnumAttr<"GateForm", "KDA forget-gate form", [
    I32EnumAttrCase<"bounded_sigmoid", 0>, // K3: g = g_min * sigmoid(exp(A) * (z + dt_bias))
    I32EnumAttrCase<"softplus", 1>         // Kimi Linear: g = -exp(A) * softplus(z + dt_bias)
  ]> {
  let cppNamespace = "::mlir::k3";
  let genSpecializedAttr = 0;
}

def K3_Activation : I32EnumAttr<"Activation", "gated MLP activation", [
    I32EnumAttrCase<"situ", 0>,   // SiTU-GLU: b1*tanh(a/b1)*sigmoid(a) * b2*tanh(b/b2)
    I32EnumAttrCase<"swiglu", 1>  // silu(a) * b
  ]> {
  let cppNamespace = "::mlir::k3";
  let genSpecializedAttr = 0;
}

def K3_RouterScore : I32EnumAttr<"RouterScore", "MoE router score function", [
    I32EnumAttrCase<"sigmoid", 0>,
    I32EnumAttrCase<"softmax", 1>
  ]> {
  let cppNamespace = "::mlir::k3";
  let genSpecializedAttr = 0;
}

def K3_ChunkPath : I32EnumAttr<"ChunkPath", "KDA chunk-form numerics path", [
    I32EnumAttrCase<"factorized", 0>, // Kd = K*Γ, Ki = K/Γ: needs a bounded gate
    I32EnumAttrCase<"pairwise", 1>    // exp(G_i - G_j) inside a tile: any gate
  ]> {
  let cppNamespace = "::mlir::k3";
  let genSpecializedAttr = 0;
}

def K3_GateFormAttr : EnumAttr<K3_Dialect, K3_GateForm, "gate_form"> {
  let assemblyFormat = "`<` $value `>`";
}
def K3_ActivationAttr : EnumAttr<K3_Dialect, K3_Activation, "activation"> {
  let assemblyFormat = "`<` $value `>`";
}
def K3_RouterScoreAttr : EnumAttr<K3_Dialect, K3_RouterScore, "router_score"> {
  let assemblyFormat = "`<` $value `>`";
}

def K3_ChunkPathAttr : EnumAttr<K3_Dialect, K3_ChunkPath, "chunk_path"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // K3C_DIALECTS_K3_IR_K3ENUMS_TD
