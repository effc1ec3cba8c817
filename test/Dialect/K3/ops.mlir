// Round trip of every k3 op and type, in custom and in generic form.
// RUN: k3-opt %s | k3-opt | FileCheck %s
// RUN: k3-opt %s --mlir-print-op-generic | k3-opt | FileCheck %s
// RUN: k3-opt %s --verify-roundtrip > /dev/null

// CHECK-LABEL: func.func @embedding_rmsnorm
func.func @embedding_rmsnorm(%ids: tensor<?xi32>, %table: tensor<512x128xbf16>,
                             %w: tensor<128xbf16>) -> tensor<?x128xbf16> {
  // CHECK: %[[H:.*]] = k3.embedding %{{.*}}, %{{.*}} : (tensor<?xi32>, tensor<512x128xbf16>) -> tensor<?x128xbf16>
  %h = k3.embedding %ids, %table : (tensor<?xi32>, tensor<512x128xbf16>) -> tensor<?x128xbf16>
  // CHECK: k3.rmsnorm %[[H]], %{{.*}} {eps = 1.000000e-05 : f64}
  %y = k3.rmsnorm %h, %w {eps = 1.0e-05 : f64} : (tensor<?x128xbf16>, tensor<128xbf16>) -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// CHECK-LABEL: func.func @kda_layer
func.func @kda_layer(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>,
    %state: tensor<?x4x32x32xf32>, %conv: tensor<?x3x384xbf16>,
    %wq: tensor<128x128xbf16>, %wk: tensor<128x128xbf16>, %wv: tensor<128x128xbf16>,
    %cq: tensor<128x1x4xf32>, %ck: tensor<128x1x4xf32>, %cv: tensor<128x1x4xf32>,
    %fa: tensor<32x128xbf16>, %fb: tensor<128x32xbf16>, %dt: tensor<128xf32>,
    %alog: tensor<128xf32>, %wb: tensor<4x128xbf16>, %wg: tensor<128x128xbf16>,
    %onorm: tensor<32xf32>, %wo: tensor<128x128xbf16>)
    -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>, tensor<?x3x384xbf16>) {
  // CHECK: = k3.kda %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} weights(
  // CHECK-SAME: output_gate(
  // CHECK-SAME: gate_form = #k3.gate_form<bounded_sigmoid>
  // CHECK-SAME: gate_lower_bound = -5.000000e+00 : f64
  // CHECK-SAME: head_dim = 32 : i64
  // CHECK-SAME: num_heads = 4 : i64
  %y, %s, %c = k3.kda %x, %lens, %state, %conv
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %alog, %wb, %onorm, %wo)
      output_gate(%wg)
      {num_heads = 4 : i64, head_dim = 32 : i64, gate_form = #k3.gate_form<bounded_sigmoid>,
       gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x128xbf16>, tensor<?xi32>, tensor<?x4x32x32xf32>, tensor<?x3x384xbf16>,
         tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>,
         tensor<128x1x4xf32>, tensor<128x1x4xf32>, tensor<128x1x4xf32>,
         tensor<32x128xbf16>, tensor<128x32xbf16>, tensor<128xf32>, tensor<128xf32>,
         tensor<4x128xbf16>, tensor<32xf32>, tensor<128x128xbf16>, tensor<128x128xbf16>)
      -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>, tensor<?x3x384xbf16>)
  return %y, %s, %c : tensor<?x128xbf16>, tensor<?x4x32x32xf32>, tensor<?x3x384xbf16>
}

// Kimi Linear form: softplus gate, low-rank output gate.
// CHECK-LABEL: func.func @kda_layer_kimi_linear
func.func @kda_layer_kimi_linear(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>,
    %state: tensor<?x4x32x32xf32>, %conv: tensor<?x3x384xbf16>,
    %wq: tensor<128x128xbf16>, %wk: tensor<128x128xbf16>, %wv: tensor<128x128xbf16>,
    %cq: tensor<128x1x4xf32>, %ck: tensor<128x1x4xf32>, %cv: tensor<128x1x4xf32>,
    %fa: tensor<32x128xbf16>, %fb: tensor<128x32xbf16>, %dt: tensor<128xf32>,
    %alog: tensor<4xf32>, %wb: tensor<4x128xbf16>, %ga: tensor<32x128xbf16>,
    %gb: tensor<128x32xbf16>, %onorm: tensor<32xf32>, %wo: tensor<128x128xbf16>)
    -> tensor<?x128xbf16> {
  // CHECK: k3.kda
  // CHECK-SAME: low_rank_output_gate(
  // CHECK-SAME: gate_form = #k3.gate_form<softplus>
  %y, %s, %c = k3.kda %x, %lens, %state, %conv
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %alog, %wb, %onorm, %wo)
      low_rank_output_gate(%ga, %gb)
      {num_heads = 4 : i64, head_dim = 32 : i64, gate_form = #k3.gate_form<softplus>,
       norm_eps = 1.0e-05 : f64}
      : (tensor<?x128xbf16>, tensor<?xi32>, tensor<?x4x32x32xf32>, tensor<?x3x384xbf16>,
         tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>,
         tensor<128x1x4xf32>, tensor<128x1x4xf32>, tensor<128x1x4xf32>,
         tensor<32x128xbf16>, tensor<128x32xbf16>, tensor<128xf32>, tensor<4xf32>,
         tensor<4x128xbf16>, tensor<32xf32>, tensor<128x128xbf16>, tensor<32x128xbf16>,
         tensor<128x32xbf16>)
      -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>, tensor<?x3x384xbf16>)
  return %y : tensor<?x128xbf16>
}

// CHECK-LABEL: func.func @gated_mla
func.func @gated_mla(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>,
    %cache: tensor<?x4096x40xbf16>, %clens: tensor<?xi32>,
    %qa: tensor<64x128xbf16>, %qan: tensor<64xbf16>, %qb: tensor<96x64xbf16>,
    %kva: tensor<40x128xbf16>, %kvan: tensor<32xbf16>, %kvb: tensor<128x32xbf16>,
    %g: tensor<64x128xbf16>, %o: tensor<128x64xbf16>)
    -> (tensor<?x128xbf16>, tensor<?x4096x40xbf16>) {
  // CHECK: k3.gated_mla %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} q_lora(
  // CHECK-SAME: kv(
  // CHECK-SAME: output_gate(
  // CHECK-SAME: out(
  %y, %c = k3.gated_mla %x, %lens, %cache, %clens q_lora(%qa, %qan, %qb)
      kv(%kva, %kvan, %kvb) output_gate(%g) out(%o)
      {num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, qk_rope_head_dim = 8 : i64,
       v_head_dim = 16 : i64, kv_lora_rank = 32 : i64, softmax_scale = 0.2041241452319315 : f64,
       norm_eps = 1.0e-06 : f64}
      : (tensor<?x128xbf16>, tensor<?xi32>, tensor<?x4096x40xbf16>, tensor<?xi32>,
         tensor<64x128xbf16>, tensor<64xbf16>, tensor<96x64xbf16>, tensor<40x128xbf16>,
         tensor<32xbf16>, tensor<128x32xbf16>, tensor<64x128xbf16>, tensor<128x64xbf16>)
      -> (tensor<?x128xbf16>, tensor<?x4096x40xbf16>)
  return %y, %c : tensor<?x128xbf16>, tensor<?x4096x40xbf16>
}

// Paged latent cache: a pool of 64-token pages and a block table.
// CHECK-LABEL: func.func @gated_mla_paged
func.func @gated_mla_paged(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>,
    %pool: tensor<?x64x40xbf16>, %clens: tensor<?xi32>, %table: tensor<?x64xi32>,
    %q: tensor<96x128xbf16>, %kva: tensor<40x128xbf16>, %kvan: tensor<32xbf16>,
    %kvb: tensor<128x32xbf16>, %o: tensor<128x64xbf16>) -> tensor<?x64x40xbf16> {
  // CHECK: k3.gated_mla %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} pages(%{{.*}}) q(
  %y, %c = k3.gated_mla %x, %lens, %pool, %clens pages(%table) q(%q) kv(%kva, %kvan, %kvb) out(%o)
      {num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, qk_rope_head_dim = 8 : i64,
       v_head_dim = 16 : i64, kv_lora_rank = 32 : i64, softmax_scale = 0.2041241452319315 : f64,
       norm_eps = 1.0e-06 : f64}
      : (tensor<?x128xbf16>, tensor<?xi32>, tensor<?x64x40xbf16>, tensor<?xi32>, tensor<?x64xi32>,
         tensor<96x128xbf16>, tensor<40x128xbf16>, tensor<32xbf16>, tensor<128x32xbf16>,
         tensor<128x64xbf16>)
      -> (tensor<?x128xbf16>, tensor<?x64x40xbf16>)
  return %c : tensor<?x64x40xbf16>
}

// Kimi Linear form: direct q projection, no output gate.
// CHECK-LABEL: func.func @mla_no_lora
func.func @mla_no_lora(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>,
    %cache: tensor<?x64x40xbf16>, %clens: tensor<?xi32>, %q: tensor<96x128xbf16>,
    %kva: tensor<40x128xbf16>, %kvan: tensor<32xbf16>, %kvb: tensor<128x32xbf16>,
    %o: tensor<128x64xbf16>) -> tensor<?x128xbf16> {
  // CHECK: k3.gated_mla
  // CHECK-SAME: q(
  // CHECK-NOT: output_gate
  %y, %c = k3.gated_mla %x, %lens, %cache, %clens q(%q) kv(%kva, %kvan, %kvb) out(%o)
      {num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, qk_rope_head_dim = 8 : i64,
       v_head_dim = 16 : i64, kv_lora_rank = 32 : i64, softmax_scale = 0.2041241452319315 : f64,
       norm_eps = 1.0e-06 : f64}
      : (tensor<?x128xbf16>, tensor<?xi32>, tensor<?x64x40xbf16>, tensor<?xi32>,
         tensor<96x128xbf16>, tensor<40x128xbf16>, tensor<32xbf16>, tensor<128x32xbf16>,
         tensor<128x64xbf16>) -> (tensor<?x128xbf16>, tensor<?x64x40xbf16>)
  return %y : tensor<?x128xbf16>
}

// CHECK-LABEL: func.func @attn_res
func.func @attn_res(%b0: tensor<?x128xbf16>, %b1: tensor<?x128xbf16>, %p: tensor<?x128xbf16>,
                    %wn: tensor<128xbf16>, %wp: tensor<1x128xbf16>) -> tensor<?x128xbf16> {
  // CHECK: k3.attn_res(%{{.*}}, %{{.*}}, %{{.*}}) weights(%{{.*}}, %{{.*}}) {eps = 1.000000e-05 : f64}
  %m = k3.attn_res(%b0, %b1, %p) weights(%wn, %wp) {eps = 1.0e-05 : f64}
      : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>), tensor<128xbf16>,
        tensor<1x128xbf16> -> tensor<?x128xbf16>
  return %m : tensor<?x128xbf16>
}

// CHECK-LABEL: func.func @latent_moe
func.func @latent_moe(%x: tensor<?x128xbf16>, %r: tensor<16x128xbf16>, %rb: tensor<16xf32>,
    %ld: tensor<64x128xbf16>, %ln: tensor<64xbf16>, %lu: tensor<128x64xbf16>,
    %w1: !k3.mxfp4<16x32x64>, %w3: !k3.mxfp4<16x32x64>, %w2: !k3.mxfp4<16x64x32>,
    %sg: tensor<64x128xbf16>, %su: tensor<64x128xbf16>, %sd: tensor<128x64xbf16>)
    -> tensor<?x128xbf16> {
  // CHECK: k3.latent_moe %{{.*}} router(%{{.*}}, %{{.*}}) latent(
  // CHECK-SAME: experts(
  // CHECK-SAME: shared(
  // CHECK-SAME: !k3.mxfp4<16x32x64>, !k3.mxfp4<16x32x64>, !k3.mxfp4<16x64x32>
  %y = k3.latent_moe %x router(%r, %rb) latent(%ld, %ln, %lu) experts(%w1, %w3, %w2)
      shared(%sg, %su, %sd)
      {top_k = 4 : i64, score = #k3.router_score<sigmoid>, renormalize = true,
       routed_scaling_factor = 1.0 : f64, activation = #k3.activation<situ>,
       situ_beta = 4.0 : f64, situ_linear_beta = 25.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x128xbf16>, tensor<16x128xbf16>, tensor<16xf32>, tensor<64x128xbf16>,
         tensor<64xbf16>, tensor<128x64xbf16>, !k3.mxfp4<16x32x64>, !k3.mxfp4<16x32x64>,
         !k3.mxfp4<16x64x32>, tensor<64x128xbf16>, tensor<64x128xbf16>, tensor<128x64xbf16>)
      -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// Kimi Linear form: full-width bf16 experts, no latent, SwiGLU.
// CHECK-LABEL: func.func @moe_full_width
func.func @moe_full_width(%x: tensor<?x128xbf16>, %r: tensor<16x128xbf16>,
    %w1: tensor<16x32x128xbf16>, %w3: tensor<16x32x128xbf16>, %w2: tensor<16x128x32xbf16>)
    -> tensor<?x128xbf16> {
  // CHECK: k3.latent_moe %{{.*}} router(%{{.*}}) experts(
  // CHECK-SAME: activation = #k3.activation<swiglu>
  %y = k3.latent_moe %x router(%r) experts(%w1, %w3, %w2)
      {top_k = 8 : i64, score = #k3.router_score<sigmoid>, renormalize = true,
       routed_scaling_factor = 2.446 : f64, activation = #k3.activation<swiglu>,
       norm_eps = 1.0e-05 : f64}
      : (tensor<?x128xbf16>, tensor<16x128xbf16>, tensor<16x32x128xbf16>,
         tensor<16x32x128xbf16>, tensor<16x128x32xbf16>) -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// CHECK-LABEL: func.func @mlp_head
func.func @mlp_head(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>, %g: tensor<576x128xbf16>,
    %u: tensor<576x128xbf16>, %d: tensor<128x576xbf16>, %lm: tensor<512x128xbf16>)
    -> tensor<?x512xf32> {
  // CHECK: k3.mlp
  // CHECK: k3.last_tokens
  // CHECK: k3.lm_head
  %m = k3.mlp %x, %g, %u, %d {activation = #k3.activation<situ>, situ_beta = 4.0 : f64,
      situ_linear_beta = 25.0 : f64}
      : (tensor<?x128xbf16>, tensor<576x128xbf16>, tensor<576x128xbf16>, tensor<128x576xbf16>)
      -> tensor<?x128xbf16>
  %l = k3.last_tokens %m, %lens : (tensor<?x128xbf16>, tensor<?xi32>) -> tensor<?x128xbf16>
  %logits = k3.lm_head %l, %lm : (tensor<?x128xbf16>, tensor<512x128xbf16>) -> tensor<?x512xf32>
  return %logits : tensor<?x512xf32>
}

// The core (L1) ops of one KDA layer (flat head-major token tensors).
// CHECK-LABEL: func.func @kda_core
func.func @kda_core(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>, %w: tensor<128x128xbf16>,
    %cw: tensor<128x1x4xf32>, %cs: tensor<?x3x384xbf16>, %alog: tensor<4xf32>,
    %dt: tensor<128xf32>, %b: tensor<?x4xbf16>,
    %state: tensor<?x4x32x32xf32>, %onorm: tensor<32xf32>) -> tensor<?x128xbf16> {
  // CHECK: k3.linear
  %p = k3.linear %x, %w : (tensor<?x128xbf16>, tensor<128x128xbf16>) -> tensor<?x128xbf16>
  // CHECK: k3.short_conv
  // CHECK-SAME: state_offset = 128 : i64
  %c, %ns = k3.short_conv %p, %cw, %cs, %lens {state_offset = 128 : i64}
      : (tensor<?x128xbf16>, tensor<128x1x4xf32>, tensor<?x3x384xbf16>, tensor<?xi32>)
      -> (tensor<?x128xbf16>, tensor<?x3x384xbf16>)
  // CHECK: k3.kda_gate
  // CHECK-SAME: lower_bound = -5.000000e+00 : f64
  %g = k3.kda_gate %p, %alog, %dt {num_heads = 4 : i64,
      gate_form = #k3.gate_form<bounded_sigmoid>, lower_bound = -5.0 : f64}
      : (tensor<?x128xbf16>, tensor<4xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  // CHECK: k3.l2norm
  %qn = k3.l2norm %c {head_dim = 32 : i64, eps = 1.0e-06 : f64, scale = 0.17677669529663687 : f64} : tensor<?x128xbf16> -> tensor<?x128xf32>
  // A split norm (k3-split-l2norms): the inverse norms, then the scaling.
  // CHECK: %[[INV:.*]] = k3.l2norm_inv %{{.*}} {eps = 9.9999999999999995E-7 : f64, head_dim = 32 : i64} : tensor<?x128xbf16> -> tensor<?x4xf32>
  %inv = k3.l2norm_inv %c {head_dim = 32 : i64, eps = 1.0e-06 : f64} : tensor<?x128xbf16> -> tensor<?x4xf32>
  // CHECK: k3.l2norm %{{.*}}, inv_norm %[[INV]] {{{.*}}} : tensor<?x128xbf16>, tensor<?x4xf32> -> tensor<?x128xf32>
  %kn = k3.l2norm %c, inv_norm %inv {head_dim = 32 : i64, eps = 1.0e-06 : f64} : tensor<?x128xbf16>, tensor<?x4xf32> -> tensor<?x128xf32>
  // CHECK: k3.delta_rule
  // CHECK-SAME: chunk_size = 16 : i64
  // CHECK-SAME: gamma_type = bf16
  // CHECK-SAME: path = #k3.chunk_path<factorized>
  // CHECK-SAME: tile = 16 : i64
  // CHECK-SAME: varlen_masked
  %o, %s2 = k3.delta_rule %qn, %kn, %c, %g, %b, %state, %lens
      {num_heads = 4 : i64, chunk_size = 16 : i64, tile = 16 : i64, gamma_type = bf16,
       path = #k3.chunk_path<factorized>, varlen_masked}
      : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>,
         tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>)
      -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
  // CHECK: k3.gated_rmsnorm
  %y = k3.gated_rmsnorm %o, %p, %onorm {eps = 1.0e-05 : f64}
      : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<32xf32>) -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// CHECK-LABEL: func.func @mla_core_paged
func.func @mla_core_paged(%q: tensor<?x96xbf16>, %kv: tensor<?x40xbf16>, %kvn: tensor<32xbf16>,
    %pool: tensor<?x16x40xbf16>, %clens: tensor<?xi32>, %lens: tensor<?xi32>,
    %kvb: tensor<128x32xbf16>, %table: tensor<?x8xi32>) -> tensor<?x16x40xbf16> {
  // CHECK: k3.mla_attention {{.*}} pages(%{{.*}}) {
  // CHECK-NOT: operandSegmentSizes
  %o, %c = k3.mla_attention %q, %kv, %kvn, %pool, %clens, %lens, %kvb pages(%table)
      {num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, v_head_dim = 16 : i64,
       softmax_scale = 0.2041241452319315 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x96xbf16>, tensor<?x40xbf16>, tensor<32xbf16>, tensor<?x16x40xbf16>, tensor<?xi32>,
         tensor<?xi32>, tensor<128x32xbf16>, tensor<?x8xi32>)
      -> (tensor<?x64xbf16>, tensor<?x16x40xbf16>)
  return %c : tensor<?x16x40xbf16>
}

// CHECK-LABEL: func.func @mla_core
func.func @mla_core(%q: tensor<?x96xbf16>, %kv: tensor<?x40xbf16>, %kvn: tensor<32xbf16>,
    %cache: tensor<?x64x40xbf16>, %clens: tensor<?xi32>, %lens: tensor<?xi32>,
    %kvb: tensor<128x32xbf16>, %gate: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  // CHECK: k3.mla_attention
  // CHECK-SAME: gate(
  %o, %c = k3.mla_attention %q, %kv, %kvn, %cache, %clens, %lens, %kvb gate(%gate)
      {num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, v_head_dim = 16 : i64,
       softmax_scale = 0.2041241452319315 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x96xbf16>, tensor<?x40xbf16>, tensor<32xbf16>, tensor<?x64x40xbf16>, tensor<?xi32>,
         tensor<?xi32>, tensor<128x32xbf16>, tensor<?x64xbf16>)
      -> (tensor<?x64xbf16>, tensor<?x64x40xbf16>)
  return %o : tensor<?x64xbf16>
}

// A fused kernel region and an MXFP4 weight in the kernel layout.
// CHECK-LABEL: func.func @kernel
func.func @kernel(%x: tensor<?x128xbf16>, %w: tensor<64x128xbf16>,
    %e: !k3.mxfp4<16x32x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>) -> tensor<?x64xbf16> {
  // CHECK: k3.kernel "k3_proj_0" family "linear" (%{{.*}}, %{{.*}}) {flops_per_token = 16384 : i64}
  // CHECK-SAME: : (tensor<?x128xbf16>, tensor<64x128xbf16>) -> tensor<?x64xbf16> {
  // CHECK: ^bb0(%[[A:.*]]: tensor<?x128xbf16>, %[[B:.*]]: tensor<64x128xbf16>):
  // CHECK: %[[Y:.*]] = k3.linear %[[A]], %[[B]]
  // CHECK: k3.yield %[[Y]] : tensor<?x64xbf16>
  %y = k3.kernel "k3_proj_0" family "linear" (%x, %w) {flops_per_token = 16384 : i64}
      : (tensor<?x128xbf16>, tensor<64x128xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x128xbf16>, %b: tensor<64x128xbf16>):
    %r = k3.linear %a, %b : (tensor<?x128xbf16>, tensor<64x128xbf16>) -> tensor<?x64xbf16>
    k3.yield %r : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// CHECK-LABEL: func.func @moe_core
func.func @moe_core(%x: tensor<?x128xbf16>, %z: tensor<?x64xbf16>, %r: tensor<16x128xbf16>,
    %rb: tensor<16xf32>, %p1: tensor<16x32x64xf4E2M1FN>, %s1: tensor<16x32x2xf8E8M0FNU>,
    %w2: !k3.mxfp4<16x64x32>, %a: tensor<?x32xbf16>) -> tensor<?x64xbf16> {
  // CHECK: k3.moe_router
  %idx, %wts = k3.moe_router %x, %r bias(%rb) {top_k = 4 : i64,
      score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 1.0 : f64}
      : (tensor<?x128xbf16>, tensor<16x128xbf16>, tensor<16xf32>)
      -> (tensor<?x4xi32>, tensor<?x4xf32>)
  // CHECK: k3.mxfp4_pack
  %w1 = k3.mxfp4_pack %p1, %s1 : (tensor<16x32x64xf4E2M1FN>, tensor<16x32x2xf8E8M0FNU>)
      -> !k3.mxfp4<16x32x64>
  // CHECK: k3.mxfp4_dequant
  %d = k3.mxfp4_dequant %w2 : (!k3.mxfp4<16x64x32>) -> tensor<16x64x32xbf16>
  // CHECK: k3.expert_mlp
  %y = k3.expert_mlp %z, %idx experts(%w1, %w1, %w2) {activation = #k3.activation<situ>,
      situ_beta = 4.0 : f64, situ_linear_beta = 25.0 : f64}
      : (tensor<?x64xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x32x64>, !k3.mxfp4<16x32x64>,
         !k3.mxfp4<16x64x32>) -> tensor<?x4x64xbf16>
  // CHECK: k3.moe_combine
  %u = k3.moe_combine %y, %wts : (tensor<?x4x64xbf16>, tensor<?x4xf32>) -> tensor<?x64xbf16>
  // CHECK: k3.glu
  %h = k3.glu %a, %a {activation = #k3.activation<swiglu>} : tensor<?x32xbf16>
  return %u : tensor<?x64xbf16>
}
