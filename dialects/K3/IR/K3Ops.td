//===- K3Ops.td - k3 dialect ops ----------------------------*- tablegen -*-===//
//
// Model-level ops (L0) first, then the core ops (L1) layers decompose into.
// Every op verifies its shapes against its attributes; messages name the
// operand, the dimension and both values (see test/Dialect/K3/invalid.mlir).
//
//===----------------------------------------------------------------------===//

#ifndef K3C_DIALECTS_K3_IR_K3OPS_TD
#define K3C_DIALECTS_K3_IR_K3OPS_TD

include "dialects/K3/IR/K3Dialect.td"
include "dialects/K3/IR/K3Types.td"
include "dialects/K3/IR/K3Enums.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def K3_Float : AnyTypeOf<[BF16, F16, F32]>;
def K3_FloatTensor : RankedTensorOf<[BF16, F16, F32]>;
def K3_F32Tensor : RankedTensorOf<[F32]>;
def K3_IndexTensor : RankedTensorOf<[I32, I64]>;
def K3_Weight : AnyTypeOf<[RankedTensorOf<[BF16, F16, F32]>, K3_MXFP4Type],
                          "float tensor or MXFP4 weight">;

// A 64-bit integer attribute read as a signed value, so the verifiers can
// reject negative sizes instead of seeing them wrap.
def K3_I64Attr : TypedSignlessIntegerAttrBase<I64, "int64_t",
                                              "64-bit signless integer attribute"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

class K3_PureOp<string mnemonic, list<Trait> traits = []>
    : K3_Op<mnemonic, !listconcat([Pure], traits)> {
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// L0: model-level ops
//===----------------------------------------------------------------------===//

def K3_EmbeddingOp : K3_PureOp<"embedding"> {
  let summary = "token embedding lookup";
  let description = [{
    Gathers rows of `table` ([vocab, D]) for each token id ([T]). No scaling;
    the result may have a wider float type than the table (f32 activations).

    ```mlir
    %h = k3.embedding %ids, %table : (tensor<?xi32>, tensor<512x128xbf16>) -> tensor<?x128xbf16>
    ```
  }];
  let arguments = (ins K3_IndexTensor:$ids, K3_FloatTensor:$table);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = "$ids `,` $table attr-dict `:` functional-type(operands, results)";
}

def K3_RMSNormOp : K3_PureOp<"rmsnorm"> {
  let summary = "RMSNorm over the last axis (KimiRMSNorm)";
  let description = [{
    `y = cast(x * rsqrt(mean(x^2) + eps)) * weight`, fp32 inside; the
    normalized value is rounded to the input dtype before the weight multiply
    (spec §4.1).

    ```mlir
    %y = k3.rmsnorm %x, %w {eps = 1.0e-05 : f64} : (tensor<?x128xbf16>, tensor<128xbf16>) -> tensor<?x128xbf16>
    ```
  }];
  let arguments = (ins K3_FloatTensor:$input, K3_FloatTensor:$weight,
                       F64Attr:$eps);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
}

def K3_KdaOp : K3_PureOp<"kda", [AttrSizedOperandSegments]> {
  let summary = "a whole Kimi Delta Attention layer";
  let description = [{
    One KDA attention sublayer (spec §4.3) over T tokens of N sequences:
    q/k/v projections, causal short conv + SiLU (carrying `conv_state`),
    the forget gate (`gate_form`: K3's bounded sigmoid with lower bound
    `gate_lower_bound`, or Kimi Linear's softplus), beta = sigmoid(b_proj x),
    L2-normalized q/k (q scaled by head_dim^-1/2), the gated delta rule
    (carrying `state`), the gated per-head RMSNorm (`o_norm`, gate from a
    full-rank `g_proj` or a low-rank `g_a`/`g_b` pair) and `o_proj`.

    Layouts: `state` is `[N, H, d_v, d_k]` (the transposed state of fla's
    `transpose_state_layout`), `conv_state` is `[N, W-1, 3*H*d]` holding the
    last W-1 pre-conv q, k, v inputs of each sequence. `a_log` holds H
    per-head values, optionally zero-padded (the K3 checkpoint stores 128).

    ```mlir
    %y, %s, %c = k3.kda %x, %lens, %state, %conv
        weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %alog, %wb, %onorm, %wo)
        output_gate(%wg)
        {num_heads = 4 : i64, head_dim = 32 : i64,
         gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64,
         norm_eps = 1.0e-05 : f64} : (...) -> (...)
    ```
  }];
  let arguments = (ins
    K3_FloatTensor:$input, K3_IndexTensor:$seq_lens,
    K3_FloatTensor:$state, K3_FloatTensor:$conv_state,
    K3_FloatTensor:$q_proj, K3_FloatTensor:$k_proj, K3_FloatTensor:$v_proj,
    K3_FloatTensor:$q_conv, K3_FloatTensor:$k_conv, K3_FloatTensor:$v_conv,
    K3_FloatTensor:$f_a_proj, K3_FloatTensor:$f_b_proj,
    K3_FloatTensor:$dt_bias, K3_FloatTensor:$a_log, K3_FloatTensor:$b_proj,
    K3_FloatTensor:$o_norm, K3_FloatTensor:$o_proj,
    Optional<K3_FloatTensor>:$g_proj,
    Optional<K3_FloatTensor>:$g_a_proj, Optional<K3_FloatTensor>:$g_b_proj,
    K3_I64Attr:$num_heads, K3_I64Attr:$head_dim,
    K3_GateFormAttr:$gate_form, OptionalAttr<F64Attr>:$gate_lower_bound,
    F64Attr:$norm_eps);
  let results = (outs K3_FloatTensor:$result, K3_FloatTensor:$new_state,
                      K3_FloatTensor:$new_conv_state);
  let assemblyFormat = [{
    $input `,` $seq_lens `,` $state `,` $conv_state
    `weights` `(` $q_proj `,` $k_proj `,` $v_proj `,` $q_conv `,` $k_conv `,`
      $v_conv `,` $f_a_proj `,` $f_b_proj `,` $dt_bias `,` $a_log `,` $b_proj
      `,` $o_norm `,` $o_proj `)`
    (`output_gate` `(` $g_proj^ `)`)?
    (`low_rank_output_gate` `(` $g_a_proj^ `,` $g_b_proj `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Channels of one of q, k, v: num_heads * head_dim.
    int64_t getProjDim() { return getNumHeads() * getHeadDim(); }
    /// Short-conv kernel width W, read from the conv weights.
    int64_t getConvKernel();
  }];
}

def K3_GatedMlaOp : K3_PureOp<"gated_mla", [AttrSizedOperandSegments]> {
  let summary = "a whole gated multi-head latent attention layer (NoPE)";
  let description = [{
    One MLA attention sublayer (spec §4.5): query path either q-LoRA
    (`q_a_proj` -> RMSNorm `q_a_norm` -> `q_b_proj`) or a direct `q_proj`;
    `kv_a_proj` gives the latent `c` (kv_lora_rank, RMSNorm'd by
    `kv_a_norm`) and the shared, never-rotated `k_pe` (qk_rope_head_dim);
    `kv_b_proj` expands the latent into per-head k_nope and v. Causal softmax
    attention with `softmax_scale` over the cache plus the new tokens, an
    optional sigmoid output gate `g_proj`, then `o_proj`.

    The latent cache is explicit: `cache` is `[N, S_max, kv_lora_rank +
    qk_rope_head_dim]` (normalized c followed by k_pe), `cache_lens` holds the
    number of valid cached tokens per sequence; the new tokens are written at
    `cache_lens[n] ...` in `new_cache`.

    Paged: with `pages(block_table)` (`[N, max_pages]` i32 page ids) `cache`
    is a pool `[pages, P, kv_lora_rank + qk_rope_head_dim]` of P-token pages
    shared by all sequences: sequence n's position s is row `s mod P` of page
    `block_table[n][s / P]`.
  }];
  let arguments = (ins
    K3_FloatTensor:$input, K3_IndexTensor:$seq_lens,
    K3_FloatTensor:$cache, K3_IndexTensor:$cache_lens,
    Optional<K3_IndexTensor>:$block_table,
    Optional<K3_FloatTensor>:$q_a_proj, Optional<K3_FloatTensor>:$q_a_norm,
    Optional<K3_FloatTensor>:$q_b_proj, Optional<K3_FloatTensor>:$q_proj,
    K3_FloatTensor:$kv_a_proj, K3_FloatTensor:$kv_a_norm,
    K3_FloatTensor:$kv_b_proj, Optional<K3_FloatTensor>:$g_proj,
    K3_FloatTensor:$o_proj,
    K3_I64Attr:$num_heads, K3_I64Attr:$qk_nope_head_dim, K3_I64Attr:$qk_rope_head_dim,
    K3_I64Attr:$v_head_dim, K3_I64Attr:$kv_lora_rank, F64Attr:$softmax_scale,
    F64Attr:$norm_eps);
  let results = (outs K3_FloatTensor:$result, K3_FloatTensor:$new_cache);
  let assemblyFormat = [{
    $input `,` $seq_lens `,` $cache `,` $cache_lens
    (`pages` `(` $block_table^ `)`)?
    (`q_lora` `(` $q_a_proj^ `,` $q_a_norm `,` $q_b_proj `)`)?
    (`q` `(` $q_proj^ `)`)?
    `kv` `(` $kv_a_proj `,` $kv_a_norm `,` $kv_b_proj `)`
    (`output_gate` `(` $g_proj^ `)`)?
    `out` `(` $o_proj `)`
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    int64_t getQkHeadDim() { return getQkNopeHeadDim() + getQkRopeHeadDim(); }
    int64_t getCacheDim() { return getKvLoraRank() + getQkRopeHeadDim(); }
  }];
}

def K3_AttnResOp : K3_PureOp<"attn_res"> {
  let summary = "Block Attention Residuals depth mix";
  let description = [{
    Mixes the depth sources of each token (spec §4.6): the completed block
    representations followed by the running intra-block sum (`sources`, all
    `[T, D]`). Per source, key = RMSNorm(source) without weight, score =
    key . (norm_weight * proj_weight), softmax over sources in fp32, output =
    sum of softmax weights times the raw sources, rounded once.

    ```mlir
    %m = k3.attn_res(%b0, %b1, %prefix) weights(%wn, %wp) {eps = 1.0e-05 : f64}
        : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>), tensor<128xbf16>, tensor<1x128xbf16> -> tensor<?x128xbf16>
    ```
  }];
  let arguments = (ins Variadic<K3_FloatTensor>:$sources,
                       K3_FloatTensor:$norm_weight, K3_FloatTensor:$proj_weight,
                       F64Attr:$eps);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = [{
    `(` $sources `)` `weights` `(` $norm_weight `,` $proj_weight `)` attr-dict
    `:` `(` type($sources) `)` `,` type($norm_weight) `,` type($proj_weight)
    `->` type($result)
  }];
}

def K3_LatentMoeOp : K3_PureOp<"latent_moe", [AttrSizedOperandSegments]> {
  let summary = "a whole (Stable Latent) mixture-of-experts FFN";
  let description = [{
    One MoE FFN sublayer (spec §4.7). Router: `router` ([E, D]) GEMM in fp32,
    score function `score`, top-`top_k` selection on score + `router_bias`
    (noaux_tc; the bias only selects), weights renormalized when
    `renormalize`, times `routed_scaling_factor`. With a latent
    (`latent_down`, `latent_norm`, `latent_up` all present) the routed
    experts run at latent width L on `x . latent_downᵀ`, their weighted sum is
    RMSNorm'd and projected back up; without one they run at full width D
    (Kimi Linear). Routed experts `w1` (gate) / `w3` (up) are `[E, I, L]` and
    `w2` is `[E, L, I]`, MXFP4 or dense. Optional shared experts (one fused MLP)
    read the full-width input and are added to the result.
  }];
  let arguments = (ins
    K3_FloatTensor:$input,
    K3_FloatTensor:$router, Optional<K3_F32Tensor>:$router_bias,
    Optional<K3_FloatTensor>:$latent_down, Optional<K3_FloatTensor>:$latent_norm,
    Optional<K3_FloatTensor>:$latent_up,
    K3_Weight:$w1, K3_Weight:$w3, K3_Weight:$w2,
    Optional<K3_FloatTensor>:$shared_gate, Optional<K3_FloatTensor>:$shared_up,
    Optional<K3_FloatTensor>:$shared_down,
    K3_I64Attr:$top_k, K3_RouterScoreAttr:$score, BoolAttr:$renormalize,
    F64Attr:$routed_scaling_factor, K3_ActivationAttr:$activation,
    OptionalAttr<F64Attr>:$situ_beta, OptionalAttr<F64Attr>:$situ_linear_beta,
    F64Attr:$norm_eps);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = [{
    $input `router` `(` $router (`,` $router_bias^)? `)`
    (`latent` `(` $latent_down^ `,` $latent_norm `,` $latent_up `)`)?
    `experts` `(` $w1 `,` $w3 `,` $w2 `)`
    (`shared` `(` $shared_gate^ `,` $shared_up `,` $shared_down `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    int64_t getNumExperts();
    bool hasLatent() { return getLatentDown() != nullptr; }
  }];
}

def K3_MlpOp : K3_PureOp<"mlp"> {
  let summary = "dense gated MLP (SiTU-GLU or SwiGLU)";
  let description = [{
    `y = act(x . gateᵀ, x . upᵀ) . downᵀ` with `gate`/`up` `[I, D]` and
    `down` `[D, I]`; `act` is SiTU (betas `situ_beta`, `situ_linear_beta`)
    or SwiGLU.
  }];
  let arguments = (ins K3_FloatTensor:$input, K3_FloatTensor:$gate,
                       K3_FloatTensor:$up, K3_FloatTensor:$down,
                       K3_ActivationAttr:$activation,
                       OptionalAttr<F64Attr>:$situ_beta,
                       OptionalAttr<F64Attr>:$situ_linear_beta);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gate `,` $up `,` $down attr-dict `:` functional-type(operands, results)
  }];
}

def K3_LastTokensOp : K3_PureOp<"last_tokens"> {
  let summary = "the last token of every sequence";
  let description = [{
    From `[T, D]` rows of N sequences laid out one after another (lengths in
    `seq_lens`), gathers the last row of each sequence: `[N, D]`.
  }];
  let arguments = (ins K3_FloatTensor:$input, K3_IndexTensor:$seq_lens);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = "$input `,` $seq_lens attr-dict `:` functional-type(operands, results)";
}

def K3_LmHeadOp : K3_PureOp<"lm_head"> {
  let summary = "final projection to vocabulary logits (fp32)";
  let arguments = (ins K3_FloatTensor:$input, K3_FloatTensor:$weight);
  let results = (outs K3_F32Tensor:$logits);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// L1: core ops
//===----------------------------------------------------------------------===//

def K3_LinearOp : K3_PureOp<"linear"> {
  let summary = "y = x . Wᵀ (fp32 accumulation)";
  let description = [{
    `x` `[T, K]`, `weight` `[N, K]` (PyTorch `nn.Linear` layout), result
    `[T, N]`; products accumulate in fp32 and round once to the result type.
  }];
  let arguments = (ins K3_FloatTensor:$input, K3_FloatTensor:$weight);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
}

def K3_GluOp : K3_PureOp<"glu", [SameOperandsAndResultType]> {
  let summary = "gated activation act(a, b): SiTU-GLU or SwiGLU, fp32 math";
  let arguments = (ins K3_FloatTensor:$gate, K3_FloatTensor:$up,
                       K3_ActivationAttr:$activation,
                       OptionalAttr<F64Attr>:$situ_beta,
                       OptionalAttr<F64Attr>:$situ_linear_beta);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def K3_ShortConvOp : K3_PureOp<"short_conv"> {
  let summary = "causal depthwise short convolution + SiLU, with its window state";
  let description = [{
    `input` `[T, C]`, `weight` `[C, 1, W]` (tap W-1 multiplies the current
    token). `conv_state` `[N, W-1, S]` holds the previous W-1 inputs of each
    sequence (zeros for a fresh one) in channels `[state_offset, state_offset
    + C)`; several convs (q, k, v of a KDA layer) share one state tensor at
    different offsets. Output `[T, C]` = SiLU(sum_j weight[c, 0, j] *
    x[t - W + 1 + j, c]) per sequence, and the state with this op's channels
    replaced by the new window (other channels unchanged).
  }];
  let arguments = (ins K3_FloatTensor:$input, K3_FloatTensor:$weight,
                       K3_FloatTensor:$conv_state, K3_IndexTensor:$seq_lens,
                       DefaultValuedAttr<K3_I64Attr, "0">:$state_offset);
  let results = (outs K3_FloatTensor:$result, K3_FloatTensor:$new_conv_state);
  let assemblyFormat = [{
    $input `,` $weight `,` $conv_state `,` $seq_lens attr-dict `:` functional-type(operands, results)
  }];
}

def K3_KdaGateOp : K3_PureOp<"kda_gate"> {
  let summary = "KDA forget gate g (log decay per key channel), fp32";
  let description = [{
    From logits `z` `[T, H*d]` (head-major channels): bounded form `g =
    lower_bound * sigmoid(exp(a_log[h]) * (z + dt_bias))`, softplus form
    `g = -exp(a_log[h]) * softplus(z + dt_bias)`. Result `[T, H*d]` f32.
  }];
  let arguments = (ins K3_FloatTensor:$logits, K3_F32Tensor:$a_log,
                       K3_F32Tensor:$dt_bias, K3_I64Attr:$num_heads,
                       K3_GateFormAttr:$gate_form,
                       OptionalAttr<F64Attr>:$lower_bound);
  let results = (outs K3_F32Tensor:$result);
  let assemblyFormat = [{
    $logits `,` $a_log `,` $dt_bias attr-dict `:` functional-type(operands, results)
  }];
}

def K3_L2NormOp : K3_PureOp<"l2norm"> {
  let summary = "per-head L2 normalization x / sqrt(sum x^2 + eps), then * scale";
  let description = [{
    `input` `[T, H*head_dim]`: each run of `head_dim` channels is divided by
    sqrt(sum of squares + eps) and multiplied by `scale`; fp32 math. The
    result (same shape) is usually f32: KDA normalizes q and k inside its
    kernel and never rounds them back to bf16. With `inv_norm` (`[T, H]`
    f32, from `k3.l2norm_inv` of the same input) the reduction is not done
    again: each element is `x * inv_norm[t, h] * scale`.
  }];
  let arguments = (ins K3_FloatTensor:$input, Optional<K3_F32Tensor>:$inv_norm,
                       K3_I64Attr:$head_dim, F64Attr:$eps,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`,` `inv_norm` $inv_norm^)? attr-dict `:` type($input) (`,` type($inv_norm)^)?
    `->` type($result)
  }];
}

def K3_L2NormInvOp : K3_PureOp<"l2norm_inv"> {
  let summary = "per-head inverse L2 norms 1 / sqrt(sum x^2 + eps), fp32";
  let description = [{
    The reduction half of `k3.l2norm`: `input` `[T, H*head_dim]`, result
    `[T, H]` f32 with `1 / sqrt(sum of squares + eps)` of each run of
    `head_dim` channels, the squares of the input as stored, summed in fp32.
    `k3.l2norm %x, inv_norm %r` is then `x * r * scale` per element: the same
    values as `k3.l2norm %x` (`--k3-split-l2norms` makes the pair, so the
    reduction can run in the producer's kernel and the scaling in the
    consumer's, with only the input and the inverse norms between them).
  }];
  let arguments = (ins K3_FloatTensor:$input, K3_I64Attr:$head_dim, F64Attr:$eps);
  let results = (outs K3_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def K3_DeltaRuleOp : K3_PureOp<"delta_rule"> {
  let summary = "gated delta rule over a varlen batch, chunked, with explicit state";
  let description = [{
    The KDA recurrence per head (spec §4.3 step 8) over N sequences:
    `S <- Diag(exp g_t) S; S <- S + beta_t k_t (v_t - Sᵀk_t)ᵀ; o_t = Sᵀ q_t`
    with `beta_t = sigmoid(beta logits)`. Token tensors are head-major and
    flat: `q`, `k`, `g` `[T, H*d_k]` (q, k already L2-normalized, q scaled;
    g f32), `v` `[T, H*d_v]`, `beta` `[T, H]` logits; `state` `[N, H, d_v,
    d_k]`. Result `[T, H*d_v]` and the new state.

    The tiling decision (set by `--k3-kda-tiling-legality`): `chunk_size` C
    tokens per chunk, `tile` the secondary (tensor-core M) tile, `gamma_type`
    the dtype Γ = exp(cumsum g) and Γ⁻¹ are held in, `path` factorized
    (Γ/Γ⁻¹ scaling, needs a bounded gate) or pairwise (exp(G_i - G_j)
    inside a tile, safe for any gate). `varlen_masked`: every sequence is
    chunked from its own first token and its last partial chunk is masked
    (k = 0, beta = 0, g = 0 past the end), so no chunk spans two sequences.
  }];
  let arguments = (ins K3_FloatTensor:$q, K3_FloatTensor:$k, K3_FloatTensor:$v,
                       K3_F32Tensor:$g, K3_FloatTensor:$beta,
                       K3_FloatTensor:$state, K3_IndexTensor:$seq_lens,
                       K3_I64Attr:$num_heads,
                       OptionalAttr<K3_I64Attr>:$chunk_size,
                       OptionalAttr<K3_I64Attr>:$tile,
                       OptionalAttr<TypeAttr>:$gamma_type,
                       OptionalAttr<K3_ChunkPathAttr>:$path,
                       UnitAttr:$varlen_masked);
  let results = (outs K3_FloatTensor:$result, K3_FloatTensor:$new_state);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $g `,` $beta `,` $state `,` $seq_lens attr-dict
    `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    int64_t getKeyDim() { return ::llvm::cast<::mlir::RankedTensorType>(getState().getType()).getDimSize(3); }
    int64_t getValueDim() { return ::llvm::cast<::mlir::RankedTensorType>(getState().getType()).getDimSize(2); }
  }];
}

def K3_GatedRMSNormOp : K3_PureOp<"gated_rmsnorm"> {
  let summary = "per-head RMSNorm times sigmoid(gate), fp32 inside";
  let description = [{
    `input` `[T, H*d]`, `gate` `[T, H*d]`, `weight` `[d]` shared by all
    heads; result `[T, H*d]` = RMSNorm over each head's d channels * weight
    * sigmoid(gate).
  }];
  let arguments = (ins K3_FloatTensor:$input, K3_FloatTensor:$gate,
                       K3_FloatTensor:$weight, F64Attr:$eps);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gate `,` $weight attr-dict `:` functional-type(operands, results)";
}

def K3_MlaAttentionOp : K3_PureOp<"mla_attention", [AttrSizedOperandSegments]> {
  let summary = "MLA attention core over the latent cache (absorbed form), optional output gate";
  let description = [{
    `q` `[T, H*(nope + rope)]` (head-major), `kv` `[T, R + rope]` the raw
    `kv_a` projection of the new tokens (latent c, then k_pe); `kv_norm`
    `[R]` RMSNorms c (eps `norm_eps`) before it is cached. `cache` `[N,
    S_max, R + rope]` with `cache_lens` valid rows, `kv_b_proj` `[H*(nope +
    v), R]`. Causal softmax attention over cache + new tokens with
    `softmax_scale`: per head `score = q_nope W_UK c + q_pe k_pe`, output
    `W_UV (sum p c)`. With `gate` `[T, H*v]` the output is multiplied by
    sigmoid(gate). Results: `[T, H*v]` and the cache with the new rows.
    With `pages` `(block_table)` `[N, max_pages]` the cache is a pool
    `[pages, P, R + rope]` (see `k3.gated_mla`): position s of sequence n is
    row `s mod P` of page `block_table[n][s / P]`.
  }];
  let arguments = (ins K3_FloatTensor:$q, K3_FloatTensor:$kv, K3_FloatTensor:$kv_norm,
                       K3_FloatTensor:$cache, K3_IndexTensor:$cache_lens,
                       K3_IndexTensor:$seq_lens, K3_FloatTensor:$kv_b_proj,
                       Optional<K3_FloatTensor>:$gate,
                       Optional<K3_IndexTensor>:$block_table,
                       K3_I64Attr:$num_heads, K3_I64Attr:$qk_nope_head_dim,
                       K3_I64Attr:$v_head_dim, F64Attr:$softmax_scale, F64Attr:$norm_eps);
  let results = (outs K3_FloatTensor:$result, K3_FloatTensor:$new_cache);
  let assemblyFormat = [{
    $q `,` $kv `,` $kv_norm `,` $cache `,` $cache_lens `,` $seq_lens `,` $kv_b_proj
    (`gate` `(` $gate^ `)`)? (`pages` `(` $block_table^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
}

def K3_MoeRouterOp : K3_PureOp<"moe_router"> {
  let summary = "router GEMM + score + top-k + renormalize";
  let arguments = (ins K3_FloatTensor:$input, K3_FloatTensor:$weight,
                       Optional<K3_F32Tensor>:$bias,
                       K3_I64Attr:$top_k, K3_RouterScoreAttr:$score,
                       BoolAttr:$renormalize, F64Attr:$routed_scaling_factor);
  let results = (outs K3_IndexTensor:$indices, K3_F32Tensor:$weights);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
}

def K3_ExpertMlpOp : K3_PureOp<"expert_mlp"> {
  let summary = "grouped routed-expert MLP: per (token, slot) act(z W1ᵀ, z W3ᵀ) W2ᵀ";
  let description = [{
    `input` `[T, L]`, `indices` `[T, k]` expert ids, `w1`/`w3` `[E, I, L]`,
    `w2` `[E, L, I]` (MXFP4 or dense). Result `[T, k, L]`: the output of the
    selected expert for every (token, slot); a kernel groups the rows by
    expert before its GEMMs.
  }];
  let arguments = (ins K3_FloatTensor:$input, K3_IndexTensor:$indices,
                       K3_Weight:$w1, K3_Weight:$w3, K3_Weight:$w2,
                       K3_ActivationAttr:$activation,
                       OptionalAttr<F64Attr>:$situ_beta,
                       OptionalAttr<F64Attr>:$situ_linear_beta);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `experts` `(` $w1 `,` $w3 `,` $w2 `)` attr-dict `:` functional-type(operands, results)
  }];
}

def K3_MoeCombineOp : K3_PureOp<"moe_combine"> {
  let summary = "weighted sum of expert outputs per token (fp32 accumulation)";
  let arguments = (ins K3_FloatTensor:$input, K3_F32Tensor:$weights);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weights attr-dict `:` functional-type(operands, results)";
}

def K3_MXFP4PackOp : K3_PureOp<"mxfp4_pack"> {
  let summary = "build an MXFP4 weight from its E2M1 payload and E8M0 scales";
  let arguments = (ins RankedTensorOf<[F4E2M1FN]>:$payload,
                       RankedTensorOf<[F8E8M0FNU]>:$scales);
  let results = (outs K3_MXFP4Type:$result);
  let assemblyFormat = "$payload `,` $scales attr-dict `:` functional-type(operands, results)";
}

def K3_MXFP4DequantOp : K3_PureOp<"mxfp4_dequant"> {
  let summary = "dequantize an MXFP4 weight to a float tensor";
  let arguments = (ins K3_MXFP4Type:$input);
  let results = (outs K3_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// L2: fused kernels
//===----------------------------------------------------------------------===//

def K3_KernelOp : K3_Op<"kernel", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">, RecursiveMemoryEffects]> {
  let summary = "a fused region that becomes one kernel launch";
  let description = [{
    Produced by `--k3-fuse-kernels`. The body's block arguments are the
    kernel's inputs (the operands, in order); `k3.yield` returns the values
    that leave the kernel. Intermediates inside the body never reach global
    memory. `sym_name` is the kernel's symbol: kernels with identical bodies
    (identical layers) share it. `family` names the kernel family the
    lowering picks; `bytes_per_token`/`flops_per_token` and
    `weight_bytes` are the fusion pass's estimates for the report.

    ```mlir
    %y = k3.kernel "k3_kda_out_8e4f2a1c" family "kda_out" (%o, %g, %w, %wo)
        : (...) -> tensor<?x128xbf16> {
    ^bb0(...):
      ...
      k3.yield %r : tensor<?x128xbf16>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$inputs, StrAttr:$sym_name, StrAttr:$family,
                       DefaultValuedAttr<K3_I64Attr, "0">:$weight_bytes,
                       DefaultValuedAttr<K3_I64Attr, "0">:$bytes_per_token,
                       DefaultValuedAttr<K3_I64Attr, "0">:$flops_per_token);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes, "::mlir::ValueRange":$inputs,
                   "::llvm::StringRef":$name, "::llvm::StringRef":$family)>
  ];
}

def K3_YieldOp : K3_Op<"yield", [Pure, HasParent<"KernelOp">, Terminator]> {
  let summary = "returns the values that leave a k3.kernel";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, ::mlir::ValueRange()); }]>];
}

#endif // K3C_DIALECTS_K3_IR_K3OPS_TD
