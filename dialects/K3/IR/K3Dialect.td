//===- K3Dialect.td - the k3 dialect ------------------------*- tablegen -*-===//
//
// The `k3` dialect: Kimi K3 / Kimi Linear ops at model level (L0) and the
// lower-level ops the decomposition produces (L1). See docs/dialect.md.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_DIALECTS_K3_IR_K3DIALECT_TD
#define K3C_DIALECTS_K3_IR_K3DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def K3_Dialect : Dialect {
  let name = "k3";
  let summary = "Ops of the Kimi K3 model family (KDA, gated MLA, AttnRes, LatentMoE).";
  let description = [{
    The `k3` dialect expresses Kimi K3 and Kimi Linear at two levels.

    Model level (L0): one op per model component (`k3.kda`, `k3.gated_mla`,
    `k3.attn_res`, `k3.latent_moe`, `k3.mlp`, `k3.rmsnorm`, `k3.embedding`,
    `k3.lm_head`). Weights are ordinary SSA values (function arguments), and
    every piece of per-sequence state (KDA recurrent state, short-conv window,
    MLA latent cache) is an explicit operand and result, so one op describes
    both prefill (many tokens per sequence) and decode (one token).

    Core level (L1): the ops a layer decomposes into (`k3.linear`,
    `k3.short_conv`, `k3.kda_gate`, `k3.l2norm`, `k3.delta_rule`,
    `k3.gated_rmsnorm`, `k3.mla_attention`, `k3.moe_router`,
    `k3.expert_mlp`, `k3.moe_combine`, `k3.glu`), each shaped so a tiled
    tensor-core kernel can be generated from it.

    Token dimensions are dynamic (`?`): a forward processes T tokens
    flattened over N sequences whose lengths travel in a `seq_lens`
    operand (`tensor<?xi32>`, one entry per sequence). Model dimensions are
    static and are checked by the verifiers.
  }];
  let cppNamespace = "::mlir::k3";
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerTypes();
  }];
}

class K3_Op<string mnemonic, list<Trait> traits = []>
    : Op<K3_Dialect, mnemonic, traits>;

#endif // K3C_DIALECTS_K3_IR_K3DIALECT_TD
