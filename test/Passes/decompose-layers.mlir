// RUN: k3-opt %s -split-input-file --k3-decompose-layers | FileCheck %s --implicit-check-not=k3.kda --implicit-check-not=k3.gated_mla --implicit-check-not=k3.latent_moe --implicit-check-not=k3.mlp --implicit-check-not=k3.lm_head

// K3 KDA layer: projections, three convs chained through one state at
// offsets 0, P, 2P, bounded gate, L2 norms (q scaled by d^-1/2), delta rule,
// gated norm, output projection.
// CHECK-LABEL: func.func @kda
// CHECK-SAME: (%[[X:[^:]*]]: tensor<?x128xbf16>, %[[LENS:[^:]*]]: tensor<?xi32>, %[[ST:[^:]*]]: tensor<?x4x32x32xf32>, %[[CS:[^:]*]]: tensor<?x3x384xbf16>
// CHECK-DAG: %[[Q:.*]] = k3.linear %[[X]], %{{.*}} : (tensor<?x128xbf16>, tensor<128x128xbf16>) -> tensor<?x128xbf16>
// CHECK: %[[QC:.*]], %[[S1:.*]] = k3.short_conv %[[Q]], %{{.*}}, %[[CS]], %[[LENS]] :
// CHECK: %[[KC:.*]], %[[S2:.*]] = k3.short_conv %{{.*}}, %{{.*}}, %[[S1]], %[[LENS]] {state_offset = 128 : i64}
// CHECK: %[[VC:.*]], %[[S3:.*]] = k3.short_conv %{{.*}}, %{{.*}}, %[[S2]], %[[LENS]] {state_offset = 256 : i64}
// CHECK: %[[FA:.*]] = k3.linear %[[X]], %{{.*}} : (tensor<?x128xbf16>, tensor<32x128xbf16>) -> tensor<?x32xbf16>
// CHECK: %[[Z:.*]] = k3.linear %[[FA]], %{{.*}} : (tensor<?x32xbf16>, tensor<128x32xbf16>) -> tensor<?x128xbf16>
// CHECK: %[[G:.*]] = k3.kda_gate %[[Z]], %{{.*}}, %{{.*}} {gate_form = #k3.gate_form<bounded_sigmoid>, lower_bound = -5.000000e+00 : f64, num_heads = 4 : i64} {{.*}} -> tensor<?x128xf32>
// CHECK: %[[B:.*]] = k3.linear %[[X]], %{{.*}} : (tensor<?x128xbf16>, tensor<4x128xbf16>) -> tensor<?x4xbf16>
// CHECK: %[[QN:.*]] = k3.l2norm %[[QC]] {eps = 9.9999999999999995E-7 : f64, head_dim = 32 : i64, scale = 0.17677669529663687 : f64} : tensor<?x128xbf16> -> tensor<?x128xf32>
// CHECK: %[[KN:.*]] = k3.l2norm %[[KC]] {eps = 9.9999999999999995E-7 : f64, head_dim = 32 : i64} :
// CHECK: %[[O:.*]], %[[NS:.*]] = k3.delta_rule %[[QN]], %[[KN]], %[[VC]], %[[G]], %[[B]], %[[ST]], %[[LENS]] {num_heads = 4 : i64}
// CHECK: %[[GT:.*]] = k3.linear %[[X]], %{{.*}} : (tensor<?x128xbf16>, tensor<128x128xbf16>)
// CHECK: %[[ON:.*]] = k3.gated_rmsnorm %[[O]], %[[GT]], %{{.*}} {eps = 1.000000e-05 : f64}
// CHECK: %[[Y:.*]] = k3.linear %[[ON]], %{{.*}}
// CHECK: return %[[Y]], %[[NS]], %[[S3]]
func.func @kda(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>,
    %state: tensor<?x4x32x32xf32>, %conv: tensor<?x3x384xbf16>,
    %wq: tensor<128x128xbf16>, %wk: tensor<128x128xbf16>, %wv: tensor<128x128xbf16>,
    %cq: tensor<128x1x4xf32>, %ck: tensor<128x1x4xf32>, %cv: tensor<128x1x4xf32>,
    %fa: tensor<32x128xbf16>, %fb: tensor<128x32xbf16>, %dt: tensor<128xf32>,
    %alog: tensor<128xf32>, %wb: tensor<4x128xbf16>, %wg: tensor<128x128xbf16>,
    %onorm: tensor<32xf32>, %wo: tensor<128x128xbf16>)
    -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>, tensor<?x3x384xbf16>) {
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

// -----

// Kimi Linear KDA: softplus gate, low-rank output gate.
// CHECK-LABEL: func.func @kda_kimi_linear
// CHECK: k3.kda_gate {{.*}}gate_form = #k3.gate_form<softplus>
// CHECK-NOT: lower_bound
// CHECK: %[[GA:.*]] = k3.linear %{{.*}} -> tensor<?x32xbf16>
// CHECK: %[[GB:.*]] = k3.linear %[[GA]], %{{.*}} -> tensor<?x128xbf16>
// CHECK: k3.gated_rmsnorm %{{.*}}, %[[GB]]
func.func @kda_kimi_linear(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>,
    %state: tensor<?x4x32x32xf32>, %conv: tensor<?x3x384xbf16>,
    %wq: tensor<128x128xbf16>, %wk: tensor<128x128xbf16>, %wv: tensor<128x128xbf16>,
    %cq: tensor<128x1x4xf32>, %ck: tensor<128x1x4xf32>, %cv: tensor<128x1x4xf32>,
    %fa: tensor<32x128xbf16>, %fb: tensor<128x32xbf16>, %dt: tensor<128xf32>,
    %alog: tensor<4xf32>, %wb: tensor<4x128xbf16>, %ga: tensor<32x128xbf16>,
    %gb: tensor<128x32xbf16>, %onorm: tensor<32xf32>, %wo: tensor<128x128xbf16>)
    -> tensor<?x128xbf16> {
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

// -----

// Gated MLA with q-LoRA: q_a -> RMSNorm(1e-6) -> q_b; kv_a; gate; attention
// core (latent norm inside); o_proj.
// CHECK-LABEL: func.func @mla
// CHECK-SAME: (%[[X:[^:]*]]: tensor<?x128xbf16>
// CHECK: %[[QA:.*]] = k3.linear %[[X]], %{{.*}} -> tensor<?x64xbf16>
// CHECK: %[[QAN:.*]] = k3.rmsnorm %[[QA]], %{{.*}} {eps = 9.9999999999999995E-7 : f64}
// CHECK: %[[Q:.*]] = k3.linear %[[QAN]], %{{.*}} -> tensor<?x96xbf16>
// CHECK: %[[KV:.*]] = k3.linear %[[X]], %{{.*}} -> tensor<?x40xbf16>
// CHECK: %[[G:.*]] = k3.linear %[[X]], %{{.*}} -> tensor<?x64xbf16>
// CHECK: %[[A:.*]], %[[C:.*]] = k3.mla_attention %[[Q]], %[[KV]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} gate(%[[G]]) {norm_eps = 9.9999999999999995E-7 : f64, num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, softmax_scale = 0.20412414523193151 : f64, v_head_dim = 16 : i64}
// CHECK: %[[Y:.*]] = k3.linear %[[A]], %{{.*}} -> tensor<?x128xbf16>
// CHECK: return %[[Y]], %[[C]]
func.func @mla(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>,
    %cache: tensor<?x4096x40xbf16>, %clens: tensor<?xi32>,
    %qa: tensor<64x128xbf16>, %qan: tensor<64xbf16>, %qb: tensor<96x64xbf16>,
    %kva: tensor<40x128xbf16>, %kvan: tensor<32xbf16>, %kvb: tensor<128x32xbf16>,
    %g: tensor<64x128xbf16>, %o: tensor<128x64xbf16>)
    -> (tensor<?x128xbf16>, tensor<?x4096x40xbf16>) {
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

// -----

// A paged cache: the pool and the block table go to the attention core.
// CHECK-LABEL: func.func @mla_paged
// CHECK-SAME: %[[POOL:[^:]*]]: tensor<?x16x40xbf16>
// CHECK-SAME: %[[TABLE:[^:]*]]: tensor<?x256xi32>
// CHECK: k3.mla_attention %{{.*}}, %{{.*}}, %{{.*}}, %[[POOL]], %{{.*}}, %{{.*}}, %{{.*}} pages(%[[TABLE]])
// CHECK-SAME: -> (tensor<?x64xbf16>, tensor<?x16x40xbf16>)
func.func @mla_paged(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>,
    %pool: tensor<?x16x40xbf16>, %clens: tensor<?xi32>, %table: tensor<?x256xi32>,
    %q: tensor<96x128xbf16>, %kva: tensor<40x128xbf16>, %kvan: tensor<32xbf16>,
    %kvb: tensor<128x32xbf16>, %o: tensor<128x64xbf16>)
    -> (tensor<?x128xbf16>, tensor<?x16x40xbf16>) {
  %y, %c = k3.gated_mla %x, %lens, %pool, %clens pages(%table) q(%q) kv(%kva, %kvan, %kvb) out(%o)
      {num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, qk_rope_head_dim = 8 : i64,
       v_head_dim = 16 : i64, kv_lora_rank = 32 : i64, softmax_scale = 0.2041241452319315 : f64,
       norm_eps = 1.0e-06 : f64}
      : (tensor<?x128xbf16>, tensor<?xi32>, tensor<?x16x40xbf16>, tensor<?xi32>, tensor<?x256xi32>,
         tensor<96x128xbf16>, tensor<40x128xbf16>, tensor<32xbf16>, tensor<128x32xbf16>,
         tensor<128x64xbf16>)
      -> (tensor<?x128xbf16>, tensor<?x16x40xbf16>)
  return %y, %c : tensor<?x128xbf16>, tensor<?x16x40xbf16>
}

// -----

// Stable LatentMoE: router, latent down, experts, combine, latent norm + up,
// shared experts added.
// CHECK-LABEL: func.func @latent_moe
// CHECK-SAME: (%[[X:[^:]*]]: tensor<?x128xbf16>
// CHECK: %[[IDX:.*]], %[[W:.*]] = k3.moe_router %[[X]], %{{.*}} bias(%{{.*}}) {renormalize = true, routed_scaling_factor = 1.000000e+00 : f64, score = #k3.router_score<sigmoid>, top_k = 4 : i64} {{.*}} -> (tensor<?x4xi32>, tensor<?x4xf32>)
// CHECK: %[[Z:.*]] = k3.linear %[[X]], %{{.*}} -> tensor<?x64xbf16>
// CHECK: %[[E:.*]] = k3.expert_mlp %[[Z]], %[[IDX]] experts({{.*}}) {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} {{.*}} -> tensor<?x4x64xbf16>
// CHECK: %[[U:.*]] = k3.moe_combine %[[E]], %[[W]]
// CHECK: %[[UN:.*]] = k3.rmsnorm %[[U]]
// CHECK: %[[R:.*]] = k3.linear %[[UN]], %{{.*}} -> tensor<?x128xbf16>
// CHECK: %[[SG:.*]] = k3.linear %[[X]]
// CHECK: %[[SU:.*]] = k3.linear %[[X]]
// CHECK: %[[H:.*]] = k3.glu %[[SG]], %[[SU]]
// CHECK: %[[SD:.*]] = k3.linear %[[H]]
// CHECK: %[[OUT:.*]] = arith.addf %[[R]], %[[SD]]
// CHECK: return %[[OUT]]
func.func @latent_moe(%x: tensor<?x128xbf16>, %r: tensor<16x128xbf16>, %rb: tensor<16xf32>,
    %ld: tensor<64x128xbf16>, %ln: tensor<64xbf16>, %lu: tensor<128x64xbf16>,
    %w1: !k3.mxfp4<16x32x64>, %w3: !k3.mxfp4<16x32x64>, %w2: !k3.mxfp4<16x64x32>,
    %sg: tensor<64x128xbf16>, %su: tensor<64x128xbf16>, %sd: tensor<128x64xbf16>)
    -> tensor<?x128xbf16> {
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

// -----

// Kimi Linear MoE (full width, no latent, no shared), dense MLP, LM head.
// CHECK-LABEL: func.func @kimi_linear_moe_mlp_head
// CHECK: %[[IDX:.*]], %[[W:.*]] = k3.moe_router
// CHECK-SAME: routed_scaling_factor = 2.446
// CHECK: %[[E:.*]] = k3.expert_mlp %{{.*}}, %[[IDX]]
// CHECK: %[[U:.*]] = k3.moe_combine %[[E]], %[[W]]
// CHECK: %[[A:.*]] = k3.linear %[[U]], %{{.*}} -> tensor<?x576xbf16>
// CHECK: %[[B:.*]] = k3.linear %[[U]], %{{.*}} -> tensor<?x576xbf16>
// CHECK: %[[H:.*]] = k3.glu %[[A]], %[[B]] {activation = #k3.activation<swiglu>}
// CHECK: %[[M:.*]] = k3.linear %[[H]], %{{.*}} -> tensor<?x128xbf16>
// CHECK: %[[L:.*]] = k3.linear %[[M]], %{{.*}} : (tensor<?x128xbf16>, tensor<512x128xbf16>) -> tensor<?x512xf32>
// CHECK: return %[[L]]
func.func @kimi_linear_moe_mlp_head(%x: tensor<?x128xbf16>, %r: tensor<16x128xbf16>,
    %w1: tensor<16x32x128xbf16>, %w3: tensor<16x32x128xbf16>, %w2: tensor<16x128x32xbf16>,
    %g: tensor<576x128xbf16>, %u: tensor<576x128xbf16>, %d: tensor<128x576xbf16>,
    %lm: tensor<512x128xbf16>) -> tensor<?x512xf32> {
  %y = k3.latent_moe %x router(%r) experts(%w1, %w3, %w2)
      {top_k = 8 : i64, score = #k3.router_score<sigmoid>, renormalize = true,
       routed_scaling_factor = 2.446 : f64, activation = #k3.activation<swiglu>,
       norm_eps = 1.0e-05 : f64}
      : (tensor<?x128xbf16>, tensor<16x128xbf16>, tensor<16x32x128xbf16>,
         tensor<16x32x128xbf16>, tensor<16x128x32xbf16>) -> tensor<?x128xbf16>
  %m = k3.mlp %y, %g, %u, %d {activation = #k3.activation<swiglu>}
      : (tensor<?x128xbf16>, tensor<576x128xbf16>, tensor<576x128xbf16>, tensor<128x576xbf16>)
      -> tensor<?x128xbf16>
  %logits = k3.lm_head %m, %lm : (tensor<?x128xbf16>, tensor<512x128xbf16>) -> tensor<?x512xf32>
  return %logits : tensor<?x512xf32>
}
