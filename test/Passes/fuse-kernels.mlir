// RUN: k3-opt %s --k3-decompose-layers --k3-fuse-kernels | FileCheck %s
// RUN: k3-opt %s --k3-decompose-layers --k3-fuse-kernels=report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: k3-opt %s --k3-decompose-layers --k3-fuse-kernels | k3-opt -o /dev/null
// RUN: k3-opt %s --k3-decompose-layers --k3-fuse-kernels=fuse-glu=false | FileCheck %s --check-prefix=NOGLU
// RUN: k3-opt %s --k3-decompose-layers --k3-fuse-kernels=kda-norm-in-chunk=true | FileCheck %s --check-prefix=NORMCHUNK
// RUN: k3-opt %s --k3-decompose-layers --k3-fuse-kernels=kda-out-norm-in-chunk=true | FileCheck %s --check-prefix=OUTNORM
// RUN: k3-opt %s --k3-decompose-layers --k3-fuse-kernels=kda-gate-in-chunk=true | FileCheck %s --check-prefix=GATECHUNK

// Two identical pre-norm KDA layers with residual adds: four kernels per
// layer, and the second layer reuses the first layer's kernel names.
// CHECK-LABEL: func.func @two_kda_layers
// CHECK: %{{.*}}:6 = k3.kernel "[[IN:k3_kda_in_[0-9a-f]+]]" family "kda_in"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: k3.rmsnorm
// CHECK-COUNT-6: k3.linear
// CHECK-NEXT: k3.yield
// CHECK: k3.kernel "[[CONV:k3_kda_conv_gate_[0-9a-f]+]]" family "kda_conv_gate"
// CHECK-COUNT-3: k3.short_conv
// CHECK: k3.linear
// CHECK-NEXT: k3.kda_gate
// CHECK-NEXT: k3.l2norm
// CHECK-NEXT: k3.l2norm
// CHECK-NEXT: k3.yield
// CHECK: k3.kernel "[[CHUNK:k3_kda_chunk_[0-9a-f]+]]" family "kda_chunk"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: k3.delta_rule
// CHECK-NEXT: k3.yield
// CHECK: %[[H1:.*]] = k3.kernel "[[OUT:k3_kda_out_[0-9a-f]+]]" family "kda_out"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: k3.gated_rmsnorm
// CHECK-NEXT: k3.linear
// CHECK-NEXT: arith.addf
// CHECK-NEXT: k3.yield
// CHECK: k3.kernel "[[IN]]" family "kda_in" (%[[H1]],
// CHECK: k3.kernel "[[CONV]]" family "kda_conv_gate"
// CHECK: k3.kernel "[[CHUNK]]" family "kda_chunk"
// CHECK: %[[H2:.*]] = k3.kernel "[[OUT]]" family "kda_out"
// CHECK-NOT: k3.kernel
// CHECK: return %[[H2]]

// kda-norm-in-chunk: the q/k L2 norms move into the delta rule's kernel
// (the convolutions' rows cross in bf16; the rule normalizes them on load).
// NORMCHUNK-LABEL: func.func @two_kda_layers
// NORMCHUNK: k3.kernel "{{k3_kda_conv_gate_[0-9a-f]+}}" family "kda_conv_gate"
// NORMCHUNK-SAME: -> (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>,
// NORMCHUNK-NOT: k3.l2norm
// NORMCHUNK: k3.kernel "{{k3_kda_chunk_[0-9a-f]+}}" family "kda_chunk"
// NORMCHUNK-SAME: (tensor<?x128xbf16>, tensor<?x128xbf16>,
// NORMCHUNK-NEXT: ^bb0
// NORMCHUNK-NEXT: k3.l2norm
// NORMCHUNK-NEXT: k3.l2norm
// NORMCHUNK-NEXT: k3.delta_rule
// NORMCHUNK-NEXT: k3.yield

// kda-gate-in-chunk: the gate moves into the delta rule's kernel (f_b's
// bf16 logits cross; the rule forms the gate values on load); f_b stays with
// the convolutions.
// GATECHUNK-LABEL: func.func @two_kda_layers
// GATECHUNK: k3.kernel "{{k3_kda_conv_gate_[0-9a-f]+}}" family "kda_conv_gate"
// GATECHUNK-SAME: -> (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x128xf32>)
// GATECHUNK-NOT: k3.kda_gate
// GATECHUNK: k3.linear
// GATECHUNK-NOT: k3.kda_gate
// GATECHUNK: k3.kernel "{{k3_kda_chunk_[0-9a-f]+}}" family "kda_chunk"
// GATECHUNK-NEXT: ^bb0
// GATECHUNK-NEXT: k3.kda_gate
// GATECHUNK-NEXT: k3.delta_rule
// GATECHUNK-NEXT: k3.yield

// kda-out-norm-in-chunk: the gated output norm moves into the delta rule's
// kernel (which then returns the normalized rows); kda_out keeps the output
// projection and the residual add.
// OUTNORM-LABEL: func.func @two_kda_layers
// OUTNORM: k3.kernel "{{k3_kda_chunk_[0-9a-f]+}}" family "kda_chunk"
// OUTNORM-NEXT: ^bb0
// OUTNORM-NEXT: k3.delta_rule
// OUTNORM-NEXT: k3.gated_rmsnorm
// OUTNORM-NEXT: k3.yield
// OUTNORM: k3.kernel "{{k3_kda_out_[0-9a-f]+}}" family "kda_out"
// OUTNORM-NEXT: ^bb0
// OUTNORM-NEXT: k3.linear
// OUTNORM-NEXT: arith.addf
// OUTNORM-NEXT: k3.yield

// rmsnorm 512 + q,k,v,g 4 x 32768 + f_a 8192 + b 1024 FLOP per token; the
// q/k/v/g/f_a/b weights are 4 x 32 KiB + 8 KiB + 1 KiB.
// REPORT: remark: kernel [[IN:k3_kda_in_[0-9a-f]+]] (kda_in): 140800 FLOP/token, {{[0-9]+}} activation bytes/token, 140544 weight bytes
// REPORT: remark: kernel {{k3_kda_conv_gate_[0-9a-f]+}} (kda_conv_gate)
// REPORT: remark: kernel {{k3_kda_chunk_[0-9a-f]+}} (kda_chunk): 28672 FLOP/token
// REPORT: remark: kernel {{k3_kda_out_[0-9a-f]+}} (kda_out)
// REPORT: remark: kernel [[IN]] (kda_in)
func.func @two_kda_layers(%x: tensor<?x128xbf16>, %lens: tensor<?xi32>,
    %st0: tensor<?x4x32x32xf32>, %cs0: tensor<?x3x384xbf16>,
    %st1: tensor<?x4x32x32xf32>, %cs1: tensor<?x3x384xbf16>,
    %n0: tensor<128xbf16>, %n1: tensor<128xbf16>, %w0_q: tensor<128x128xbf16>, %w0_k: tensor<128x128xbf16>, %w0_v: tensor<128x128xbf16>, %w0_cq: tensor<128x1x4xf32>, %w0_ck: tensor<128x1x4xf32>, %w0_cv: tensor<128x1x4xf32>, %w0_fa: tensor<32x128xbf16>, %w0_fb: tensor<128x32xbf16>, %w0_dt: tensor<128xf32>, %w0_alog: tensor<4xf32>, %w0_b: tensor<4x128xbf16>, %w0_on: tensor<32xf32>, %w0_o: tensor<128x128xbf16>, %w0_g: tensor<128x128xbf16>, %w1_q: tensor<128x128xbf16>, %w1_k: tensor<128x128xbf16>, %w1_v: tensor<128x128xbf16>, %w1_cq: tensor<128x1x4xf32>, %w1_ck: tensor<128x1x4xf32>, %w1_cv: tensor<128x1x4xf32>, %w1_fa: tensor<32x128xbf16>, %w1_fb: tensor<128x32xbf16>, %w1_dt: tensor<128xf32>, %w1_alog: tensor<4xf32>, %w1_b: tensor<4x128xbf16>, %w1_on: tensor<32xf32>, %w1_o: tensor<128x128xbf16>, %w1_g: tensor<128x128xbf16>)
    -> tensor<?x128xbf16> {
  %xn0 = k3.rmsnorm %x, %n0 {eps = 1.0e-05 : f64} : (tensor<?x128xbf16>, tensor<128xbf16>) -> tensor<?x128xbf16>
  %a0, %s0, %c0 = k3.kda %xn0, %lens, %st0, %cs0
      weights(%w0_q, %w0_k, %w0_v, %w0_cq, %w0_ck, %w0_cv, %w0_fa, %w0_fb, %w0_dt, %w0_alog, %w0_b, %w0_on, %w0_o)
      output_gate(%w0_g)
      {num_heads = 4 : i64, head_dim = 32 : i64, gate_form = #k3.gate_form<bounded_sigmoid>,
       gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x128xbf16>, tensor<?xi32>, tensor<?x4x32x32xf32>, tensor<?x3x384xbf16>,
         tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>,
         tensor<128x1x4xf32>, tensor<128x1x4xf32>, tensor<128x1x4xf32>,
         tensor<32x128xbf16>, tensor<128x32xbf16>, tensor<128xf32>, tensor<4xf32>,
         tensor<4x128xbf16>, tensor<32xf32>, tensor<128x128xbf16>, tensor<128x128xbf16>)
      -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>, tensor<?x3x384xbf16>)
  %h1 = arith.addf %x, %a0 : tensor<?x128xbf16>
  %xn1 = k3.rmsnorm %h1, %n1 {eps = 1.0e-05 : f64} : (tensor<?x128xbf16>, tensor<128xbf16>) -> tensor<?x128xbf16>
  %a1, %s1, %c1 = k3.kda %xn1, %lens, %st1, %cs1
      weights(%w1_q, %w1_k, %w1_v, %w1_cq, %w1_ck, %w1_cv, %w1_fa, %w1_fb, %w1_dt, %w1_alog, %w1_b, %w1_on, %w1_o)
      output_gate(%w1_g)
      {num_heads = 4 : i64, head_dim = 32 : i64, gate_form = #k3.gate_form<bounded_sigmoid>,
       gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x128xbf16>, tensor<?xi32>, tensor<?x4x32x32xf32>, tensor<?x3x384xbf16>,
         tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>,
         tensor<128x1x4xf32>, tensor<128x1x4xf32>, tensor<128x1x4xf32>,
         tensor<32x128xbf16>, tensor<128x32xbf16>, tensor<128xf32>, tensor<4xf32>,
         tensor<4x128xbf16>, tensor<32xf32>, tensor<128x128xbf16>, tensor<128x128xbf16>)
      -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>, tensor<?x3x384xbf16>)
  %h2 = arith.addf %h1, %a1 : tensor<?x128xbf16>
  return %h2 : tensor<?x128xbf16>
}

// A dense MLP: the gated activation joins its gate/up projections (mlp_in
// holds the norm, both linears and the SiTU; only the activation leaves it),
// the down projection keeps the residual add. fuse-glu=false leaves the
// activation with the down projection.
// CHECK-LABEL: func.func @dense_mlp
// CHECK: %[[HID:.*]] = k3.kernel "{{k3_mlp_in_[0-9a-f]+}}" family "mlp_in"
// CHECK: k3.rmsnorm
// CHECK-NEXT: k3.linear
// CHECK-NEXT: k3.linear
// CHECK-NEXT: k3.glu
// CHECK-NEXT: k3.yield
// CHECK: k3.kernel "{{k3_mlp_down_[0-9a-f]+}}" family "mlp_down" (%[[HID]],
// CHECK-NEXT: ^bb0
// CHECK-NEXT: k3.linear
// CHECK-NEXT: arith.addf
// CHECK-NEXT: k3.yield
// NOGLU-LABEL: func.func @dense_mlp
// NOGLU: k3.kernel "{{k3_mlp_in_[0-9a-f]+}}" family "mlp_in"
// NOGLU-NOT: k3.glu
// NOGLU: k3.kernel "{{k3_mlp_down_[0-9a-f]+}}" family "mlp_down"
// NOGLU-NEXT: ^bb0
// NOGLU-NEXT: k3.glu
// NOGLU-NEXT: k3.linear
// NOGLU-NEXT: arith.addf
func.func @dense_mlp(%x: tensor<?x128xbf16>, %n: tensor<128xbf16>, %wg: tensor<576x128xbf16>,
    %wu: tensor<576x128xbf16>, %wd: tensor<128x576xbf16>) -> tensor<?x128xbf16> {
  %xn = k3.rmsnorm %x, %n {eps = 1.0e-05 : f64} : (tensor<?x128xbf16>, tensor<128xbf16>) -> tensor<?x128xbf16>
  %g = k3.linear %xn, %wg : (tensor<?x128xbf16>, tensor<576x128xbf16>) -> tensor<?x576xbf16>
  %u = k3.linear %xn, %wu : (tensor<?x128xbf16>, tensor<576x128xbf16>) -> tensor<?x576xbf16>
  %h = k3.glu %g, %u {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} : tensor<?x576xbf16>
  %d = k3.linear %h, %wd : (tensor<?x576xbf16>, tensor<128x576xbf16>) -> tensor<?x128xbf16>
  %y = arith.addf %x, %d : tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}
