// RUN: k3-opt %s -split-input-file -verify-diagnostics --k3-kda-tiling-legality | FileCheck %s
// RUN: k3-opt %s -split-input-file --k3-kda-tiling-legality="gamma-type=f32" 2>/dev/null | FileCheck %s --check-prefix=F32
// RUN: k3-opt %s -split-input-file --k3-kda-tiling-legality="chunk-size=64" 2>/dev/null | FileCheck %s --check-prefix=FORCED
// RUN: not k3-opt %s -split-input-file --k3-kda-tiling-legality="gamma-type=f16" 2>&1 | FileCheck %s --check-prefix=F16
// RUN: not k3-opt %s --k3-kda-tiling-legality="chunk-size=24" 2>&1 | FileCheck %s --check-prefix=NOT16
// RUN: not k3-opt %s --k3-kda-tiling-legality="chunk-size=128" 2>&1 | FileCheck %s --check-prefix=BIG

// K3's bound g >= -5 with Γ in bf16: a 16-token tile gives 16·5 = 80 <=
// 84.57. Chunks are 16 tokens by default (the tensor-core recurrence's);
// chunk-size forces 32 or 64, legal too: Γ⁻¹ never spans more than one tile
// (the intra-chunk products per 16-token sub-block).
// CHECK-LABEL: func.func @k3_bound
// CHECK: k3.delta_rule {{.*}} {chunk_size = 16 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked}
// F32-LABEL: func.func @k3_bound
// F32: chunk_size = 16 : i64, gamma_type = f32
// FORCED-LABEL: func.func @k3_bound
// FORCED: k3.delta_rule {{.*}} {chunk_size = 64 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked}
// F16: error: no legal chunk tiling for gate lower bound -5.000000e+00 with Γ held in 'f16': a 16-token tile gives T·|g_min| = 8.000000e+01 above the bound 6.931{{[0-9]+}}e+00 (exp(T·|g_min|) must stay finite and normal in 'f16' with a 2^4 margin); hold Γ in a wider type (gamma-type=f32)
// NOT16: error: --k3-kda-tiling-legality: chunk-size 24 is not 16, 32 or 64 (multiples of the tensor-core tile 16 whose chunk prep fits shared memory)
// BIG: error: --k3-kda-tiling-legality: chunk-size 128 is not 16, 32 or 64
func.func @k3_bound(%z: tensor<?x128xbf16>, %alog: tensor<4xf32>, %dt: tensor<128xf32>,
    %q: tensor<?x128xbf16>, %b: tensor<?x4xbf16>, %s: tensor<?x4x32x32xf32>, %l: tensor<?xi32>)
    -> tensor<?x128xbf16> {
  %g = k3.kda_gate %z, %alog, %dt {num_heads = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, lower_bound = -5.0 : f64}
      : (tensor<?x128xbf16>, tensor<4xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 4 : i64}
      : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xf32>,
         tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>)
      -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
  return %o : tensor<?x128xbf16>
}

// -----

// A milder bound: the same 16-token chunks by default, the forced size when
// forced.
// CHECK-LABEL: func.func @bound_2_5
// CHECK: chunk_size = 16 : i64
// FORCED-LABEL: func.func @bound_2_5
// FORCED: k3.delta_rule {{.*}}chunk_size = 64 : i64
func.func @bound_2_5(%z: tensor<?x128xbf16>, %alog: tensor<4xf32>, %dt: tensor<128xf32>,
    %q: tensor<?x128xbf16>, %b: tensor<?x4xbf16>, %s: tensor<?x4x32x32xf32>, %l: tensor<?xi32>)
    -> tensor<?x128xbf16> {
  %g = k3.kda_gate %z, %alog, %dt {num_heads = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, lower_bound = -2.5 : f64}
      : (tensor<?x128xbf16>, tensor<4xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 4 : i64}
      : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xf32>,
         tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>)
      -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
  return %o : tensor<?x128xbf16>
}

// -----

// CHECK-LABEL: func.func @bound_1
// CHECK: chunk_size = 16 : i64
// F16: error: no legal chunk tiling for gate lower bound -1.000000e+00 with Γ held in 'f16'
func.func @bound_1(%z: tensor<?x128xbf16>, %alog: tensor<4xf32>, %dt: tensor<128xf32>,
    %q: tensor<?x128xbf16>, %b: tensor<?x4xbf16>, %s: tensor<?x4x32x32xf32>, %l: tensor<?xi32>)
    -> tensor<?x128xbf16> {
  %g = k3.kda_gate %z, %alog, %dt {num_heads = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, lower_bound = -1.0 : f64}
      : (tensor<?x128xbf16>, tensor<4xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 4 : i64}
      : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xf32>,
         tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>)
      -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
  return %o : tensor<?x128xbf16>
}

// -----

// Kimi Linear's unbounded softplus gate takes the pairwise path, with a remark.
// CHECK-LABEL: func.func @softplus
// CHECK: chunk_size = 16 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<pairwise>, tile = 16 : i64, varlen_masked
// FORCED-LABEL: func.func @softplus
// FORCED: chunk_size = 64 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<pairwise>
func.func @softplus(%z: tensor<?x128xbf16>, %alog: tensor<4xf32>, %dt: tensor<128xf32>,
    %q: tensor<?x128xbf16>, %b: tensor<?x4xbf16>, %s: tensor<?x4x32x32xf32>, %l: tensor<?xi32>)
    -> tensor<?x128xbf16> {
  %g = k3.kda_gate %z, %alog, %dt {num_heads = 4 : i64, gate_form = #k3.gate_form<softplus>}
      : (tensor<?x128xbf16>, tensor<4xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  // expected-remark @below {{KDA gate has no lower bound (softplus form): chunk size 16 uses the pairwise path (exp(G_i - G_j), no Γ⁻¹), since exp(C·|g|) is unbounded}}
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 4 : i64}
      : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xf32>,
         tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>)
      -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
  return %o : tensor<?x128xbf16>
}

// -----

// A gate the pass cannot see through (a function argument) is treated as
// unbounded: pairwise path.
// CHECK-LABEL: func.func @opaque_gate
// CHECK: path = #k3.chunk_path<pairwise>
func.func @opaque_gate(%g: tensor<?x128xf32>, %q: tensor<?x128xbf16>, %b: tensor<?x4xbf16>,
    %s: tensor<?x4x32x32xf32>, %l: tensor<?xi32>) -> tensor<?x128xbf16> {
  // expected-remark @below {{KDA gate has no lower bound}}
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 4 : i64}
      : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xf32>,
         tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>)
      -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
  return %o : tensor<?x128xbf16>
}

// -----

// Fused IR (k3-compile's .mlir input): the gate and the delta rule in
// different k3.kernel regions. The gate is found through the kernels'
// operands and yields, so the bounded gate keeps the factorized C = 16 (it
// read as an opaque, unbounded gate before: the pipeline on its own fused
// output switched KDA to the pairwise path).
// CHECK-LABEL: func.func @across_kernels
// CHECK: k3.delta_rule {{.*}} {chunk_size = 16 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked}
func.func @across_kernels(%z: tensor<?x128xbf16>, %alog: tensor<4xf32>, %dt: tensor<128xf32>,
    %q: tensor<?x128xbf16>, %b: tensor<?x4xbf16>, %s: tensor<?x4x32x32xf32>, %l: tensor<?xi32>)
    -> tensor<?x128xbf16> {
  %g = k3.kernel "k3_gate_0" family "kda_conv_gate" (%z, %alog, %dt)
      : (tensor<?x128xbf16>, tensor<4xf32>, tensor<128xf32>) -> tensor<?x128xf32> {
  ^bb0(%z1: tensor<?x128xbf16>, %a1: tensor<4xf32>, %d1: tensor<128xf32>):
    %g1 = k3.kda_gate %z1, %a1, %d1 {num_heads = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, lower_bound = -5.0 : f64}
        : (tensor<?x128xbf16>, tensor<4xf32>, tensor<128xf32>) -> tensor<?x128xf32>
    k3.yield %g1 : tensor<?x128xf32>
  }
  %o = k3.kernel "k3_chunk_0" family "kda_chunk" (%q, %g, %b, %s, %l)
      : (tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>)
      -> tensor<?x128xbf16> {
  ^bb0(%q2: tensor<?x128xbf16>, %g2: tensor<?x128xf32>, %b2: tensor<?x4xbf16>,
       %s2: tensor<?x4x32x32xf32>, %l2: tensor<?xi32>):
    %o2, %ns2 = k3.delta_rule %q2, %q2, %q2, %g2, %b2, %s2, %l2 {num_heads = 4 : i64}
        : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xf32>,
           tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>)
        -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
    k3.yield %o2 : tensor<?x128xbf16>
  }
  return %o : tensor<?x128xbf16>
}
