// A delta rule with its state in bf16 (k3-compile --kda-state-dtype=bf16),
// one head of 128 x 128, through --k3-lower-kernels. sm_90a: the register
// token kernel loads the state rows as bf16 vectors and rounds each row to
// bf16 after every token's update (where the staged form's shared-memory
// stores round it: the two forms stay bit-identical); the staged form
// copies 8-byte bf16 pieces by cp.async into a bf16 shared tile of the
// head's rows (128 x 128 x 2 = 32 KB, half the f32 form's); the chunked
// recurrence loads bf16 pairs. Host: the loops read and write bf16.
// k3-tiny's 32-column heads copy one column a lane (2 bytes, below
// cp.async's 4): no staged form there, only the register form.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GPU
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST
// GPU-LABEL: func.func @k3_kda_chunk_bf16s(
// GPU: module(@k3_kda_chunk_bf16s_kda_tokens)
// GPU: vector.load %arg5[{{.*}}] {alignment = 8 : i64} : memref<?x1x128x128xbf16>, vector<4xbf16>
// GPU: scf.for
// GPU: gpu.shuffle xor
// GPU: arith.truncf %{{.*}} : f32 to bf16
// GPU-NEXT: arith.extf %{{.*}} : bf16 to f32
// GPU: scf.yield
// GPU: dynamic_shared_memory_size %c32768_i32 module(@k3_kda_chunk_bf16s_kda_tokens_staged)
// GPU: nvgpu.device_async_copy %arg5[{{.*}}], %{{.*}}[{{.*}}], 4 : memref<?x1x128x128xbf16> to memref<128x128xbf16, #gpu.address_space<workgroup>>
// GPU-NOT: bypassL1
// GPU: nvvm.cp.async.wait.group 0
// GPU: vector.load %{{.*}} : memref<128x128xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// GPU: arith.truncf %{{.*}} : vector<4xf32> to vector<4xbf16>
// GPU-NEXT: vector.store %{{.*}} : memref<128x128xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// GPU: module(@k3_kda_chunk_bf16s_kda_chunk_tf32
// GPU: vector.load %arg5[{{.*}}] {alignment = 4 : i64} : memref<?x1x128x128xbf16>, vector<2xbf16>
// GPU-LABEL: func.func @k3_kda_chunk_tiny_bf16s(
// GPU: module(@k3_kda_chunk_tiny_bf16s_kda_tokens)
// GPU-NOT: kda_tokens_staged
// GPU: return
// HOST-LABEL: func.func @k3_kda_chunk_bf16s(
// HOST-NOT: gpu.
// HOST: memref.load %arg5[{{.*}}] : memref<?x1x128x128xbf16>
// HOST: arith.truncf %{{.*}} : f32 to bf16
// HOST: memref.store %{{.*}}, %arg5[{{.*}}] : memref<?x1x128x128xbf16>

func.func @kda_bf16_state(%a0: tensor<?x128xf32>, %a1: tensor<?x128xf32>, %a2: tensor<?x128xbf16>, %a3: tensor<?x128xf32>, %a4: tensor<?x1xbf16>, %a5: tensor<?x1x128x128xbf16>, %a6: tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x1x128x128xbf16>) {
    %r:2 = k3.kernel "k3_kda_chunk_bf16s" family "kda_chunk" (%a0, %a1, %a2, %a3, %a4, %a5, %a6) {bytes_per_token = 1 : i64, flops_per_token = 1 : i64} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x1xbf16>, tensor<?x1x128x128xbf16>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x1x128x128xbf16>) {
    ^bb0(%q: tensor<?x128xf32>, %k: tensor<?x128xf32>, %v: tensor<?x128xbf16>, %g: tensor<?x128xf32>, %b: tensor<?x1xbf16>, %s: tensor<?x1x128x128xbf16>, %l: tensor<?xi32>):
      %result, %new_state = k3.delta_rule %q, %k, %v, %g, %b, %s, %l {chunk_size = 16 : i64, gamma_type = bf16, num_heads = 1 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x1xbf16>, tensor<?x1x128x128xbf16>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x1x128x128xbf16>)
      k3.yield %result, %new_state : tensor<?x128xbf16>, tensor<?x1x128x128xbf16>
    }
  return %r#0, %r#1 : tensor<?x128xbf16>, tensor<?x1x128x128xbf16>
}

func.func @kda_tiny_bf16_state(%a0: tensor<?x128xf32>, %a1: tensor<?x128xf32>, %a2: tensor<?x128xbf16>, %a3: tensor<?x128xf32>, %a4: tensor<?x4xbf16>, %a5: tensor<?x4x32x32xbf16>, %a6: tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xbf16>) {
    %r:2 = k3.kernel "k3_kda_chunk_tiny_bf16s" family "kda_chunk" (%a0, %a1, %a2, %a3, %a4, %a5, %a6) {bytes_per_token = 1 : i64, flops_per_token = 1 : i64} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xbf16>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xbf16>) {
    ^bb0(%q: tensor<?x128xf32>, %k: tensor<?x128xf32>, %v: tensor<?x128xbf16>, %g: tensor<?x128xf32>, %b: tensor<?x4xbf16>, %s: tensor<?x4x32x32xbf16>, %l: tensor<?xi32>):
      %result, %new_state = k3.delta_rule %q, %k, %v, %g, %b, %s, %l {chunk_size = 16 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xbf16>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xbf16>)
      k3.yield %result, %new_state : tensor<?x128xbf16>, tensor<?x4x32x32xbf16>
    }
  return %r#0, %r#1 : tensor<?x128xbf16>, tensor<?x4x32x32xbf16>
}
