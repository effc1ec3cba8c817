// --k3-lower-kernels on k3-tiny's chunked delta rule (C = 16 chunks from the
// tiling pass, 4 heads of 32). sm_90a: one block per (sequence, head), the
// chunk's buffers in workgroup memory, barriers between the chunk phases and
// warp-shuffle reductions; no tensor-core path yet. Host: plain loops.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GPU
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST

// GPU-LABEL: func.func @k3_kda_chunk_{{[0-9a-f]+}}(
// GPU-SAME: k3.family = "kda_chunk"
// GPU: gpu.launch {{.*}} in ({{.*}} = %c256, {{.*}}) workgroup(%{{.*}} : memref<16x32xf32, #gpu.address_space<workgroup>>
// GPU: gpu.barrier
// GPU: gpu.shuffle  xor
// GPU-NOT: nvgpu.
// GPU: return

// HOST-LABEL: func.func @k3_kda_chunk_{{[0-9a-f]+}}(
// HOST-NOT: gpu.
// HOST: memref.alloca() : memref<16x32xf32>
// HOST: scf.parallel
// HOST: return

func.func @kda_chunk(%a0: tensor<?x128xf32>, %a1: tensor<?x128xf32>, %a2: tensor<?x128xbf16>, %a3: tensor<?x128xf32>, %a4: tensor<?x4xbf16>, %a5: tensor<?x4x32x32xf32>, %a6: tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    %r:2 = k3.kernel "k3_kda_chunk_605990ac" family "kda_chunk" (%a0, %a1, %a2, %a3, %a4, %a5, %a6) {bytes_per_token = 34828 : i64, flops_per_token = 28672 : i64} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    ^bb0(%arg401: tensor<?x128xf32>, %arg402: tensor<?x128xf32>, %arg403: tensor<?x128xbf16>, %arg404: tensor<?x128xf32>, %arg405: tensor<?x4xbf16>, %arg406: tensor<?x4x32x32xf32>, %arg407: tensor<?xi32>):
      %result, %new_state = k3.delta_rule %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 {chunk_size = 16 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
      k3.yield %result, %new_state : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
    }
  return %r#0, %r#1 : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
}
