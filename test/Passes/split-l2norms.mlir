// RUN: k3-opt %s --k3-split-l2norms | FileCheck %s
// RUN: k3-opt %s --k3-split-l2norms --k3-fuse-kernels | FileCheck %s --check-prefix=FUSED
// RUN: k3-opt %s --k3-split-l2norms | k3-opt --k3-split-l2norms | FileCheck %s --check-prefix=TWICE
// In the pipeline (k3-compile --kda-split-norms): before the fusion.
// RUN: k3-opt %s --k3-pipeline="split-l2norms=true" 2> /dev/null | FileCheck %s --check-prefix=PIPE
// RUN: k3-opt %s --k3-pipeline 2> /dev/null | FileCheck %s --check-prefix=NOPIPE
// PIPE-LABEL: func.func @kda_bf16
// PIPE: family "kda_conv_gate"
// PIPE-COUNT-2: k3.l2norm_inv
// PIPE: family "kda_chunk"
// PIPE-COUNT-2: k3.l2norm %{{.*}}, inv_norm
// NOPIPE-NOT: l2norm_inv

// bf16 rows normalized into f32 for a delta rule's q and k: each norm
// becomes its reduction (k3.l2norm_inv, [T, H] f32) and its scaling
// (k3.l2norm with inv_norm), attributes kept.
// CHECK-LABEL: func.func @kda_bf16
// CHECK: %[[C:.*]], %{{.*}} = k3.short_conv
// CHECK: %[[RQ:.*]] = k3.l2norm_inv %[[C]] {eps = 9.9999999999999995E-7 : f64, head_dim = 32 : i64} : tensor<?x128xbf16> -> tensor<?x4xf32>
// CHECK-NEXT: %[[Q:.*]] = k3.l2norm %[[C]], inv_norm %[[RQ]] {eps = 9.9999999999999995E-7 : f64, head_dim = 32 : i64, scale = 0.17677669529663687 : f64} : tensor<?x128xbf16>, tensor<?x4xf32> -> tensor<?x128xf32>
// CHECK: %[[RK:.*]] = k3.l2norm_inv %[[C]]
// CHECK-NEXT: %[[K:.*]] = k3.l2norm %[[C]], inv_norm %[[RK]]
// CHECK: k3.delta_rule %[[Q]], %[[K]],
// The fusion: the reductions with the convolution, the scaling with the
// rule; the rows and the inverse norms cross between the kernels.
// FUSED-LABEL: func.func @kda_bf16
// FUSED: k3.kernel "{{.*}}" family "kda_conv_gate"
// FUSED-SAME: -> (tensor<?x128xbf16>, tensor<?x4xf32>, tensor<?x4xf32>)
// FUSED: k3.short_conv
// FUSED-NEXT: k3.l2norm_inv
// FUSED-NEXT: k3.l2norm_inv
// FUSED-NEXT: k3.yield
// FUSED: k3.kernel "{{.*}}" family "kda_chunk"
// FUSED-NEXT: ^bb0
// FUSED-NEXT: k3.l2norm %{{.*}}, inv_norm
// FUSED-NEXT: k3.l2norm %{{.*}}, inv_norm
// FUSED-NEXT: k3.delta_rule
// A split norm is not split again.
// TWICE-LABEL: func.func @kda_bf16
// TWICE-COUNT-2: k3.l2norm_inv
// TWICE-NOT: k3.l2norm_inv
// TWICE: k3.delta_rule
func.func @kda_bf16(%x: tensor<?x128xbf16>, %w: tensor<128x1x4xf32>, %cs: tensor<?x3x384xbf16>,
                    %lens: tensor<?xi32>, %v: tensor<?x128xbf16>, %g: tensor<?x128xf32>,
                    %b: tensor<?x4xbf16>, %st: tensor<?x4x32x32xf32>)
    -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
  %c, %ns = k3.short_conv %x, %w, %cs, %lens {state_offset = 0 : i64}
      : (tensor<?x128xbf16>, tensor<128x1x4xf32>, tensor<?x3x384xbf16>, tensor<?xi32>)
      -> (tensor<?x128xbf16>, tensor<?x3x384xbf16>)
  %q = k3.l2norm %c {head_dim = 32 : i64, eps = 1.0e-06 : f64, scale = 0.17677669529663687 : f64} : tensor<?x128xbf16> -> tensor<?x128xf32>
  %k = k3.l2norm %c {head_dim = 32 : i64, eps = 1.0e-06 : f64} : tensor<?x128xbf16> -> tensor<?x128xf32>
  %o, %s2 = k3.delta_rule %q, %k, %v, %g, %b, %st, %lens {num_heads = 4 : i64}
      : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>,
         tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>)
      -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
  return %o, %s2 : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
}

// The exact f32 build: the rows are f32 already (nothing to save): left
// alone.
// CHECK-LABEL: func.func @kda_f32
// CHECK-NOT: k3.l2norm_inv
// CHECK-NOT: inv_norm
// CHECK: k3.delta_rule
func.func @kda_f32(%c: tensor<?x128xf32>, %lens: tensor<?xi32>, %v: tensor<?x128xf32>,
                   %g: tensor<?x128xf32>, %b: tensor<?x4xf32>, %st: tensor<?x4x32x32xf32>)
    -> (tensor<?x128xf32>, tensor<?x4x32x32xf32>) {
  %q = k3.l2norm %c {head_dim = 32 : i64, eps = 1.0e-06 : f64} : tensor<?x128xf32> -> tensor<?x128xf32>
  %o, %s2 = k3.delta_rule %q, %q, %v, %g, %b, %st, %lens {num_heads = 4 : i64}
      : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>,
         tensor<?x4xf32>, tensor<?x4x32x32xf32>, tensor<?xi32>)
      -> (tensor<?x128xf32>, tensor<?x4x32x32xf32>)
  return %o, %s2 : tensor<?x128xf32>, tensor<?x4x32x32xf32>
}

// A norm read by anything but a delta rule's q or k keeps its own form
// (whoever reads it gets the normalized rows).
// CHECK-LABEL: func.func @other_user
// CHECK-NOT: k3.l2norm_inv
// CHECK: return
func.func @other_user(%c: tensor<?x128xbf16>) -> tensor<?x128xf32> {
  %q = k3.l2norm %c {head_dim = 32 : i64, eps = 1.0e-06 : f64} : tensor<?x128xbf16> -> tensor<?x128xf32>
  return %q : tensor<?x128xf32>
}
