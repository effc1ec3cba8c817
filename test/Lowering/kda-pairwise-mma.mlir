// The pairwise path's prep (the softplus gate: Kimi Linear) with the
// tensor-core recurrence. By default (K3C_KDA_PAIR_MMA=1): phase B's pairs across 4-row
// blocks as 3xTF32 mma.sync m16n8k8 products (each exponent split at the row
// block's first row; one (block, column tile) a warp, L and M: 4 k steps x 2
// products x 3 MMAs for d_k = 32) from rows padded by 4 (a fragment's lanes
// in 32 distinct banks), the pairs inside a block exact on CUDA cores (two
// lanes a pair over alternate key columns, summed by one xor shuffle each).
// With K3C_KDA_PAIR_MMA=0 and in the f32 build: the exact loop over every
// pair, rows padded by 1.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PAIRMMA
// RUN: env K3C_KDA_PAIR_MMA=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PAIRMMA
// RUN: env K3C_KDA_PAIR_MMA=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PAIRLOOP
// RUN: env K3C_KDA_PAIR_MMA=1 k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST
// PAIRMMA-LABEL: func.func @k3_kda_chunk_pw(
// PAIRMMA: gpu.launch {{.*}} module(@k3_kda_chunk_pw_kda_prep) {{.*}}workgroup(%{{.*}} : memref<16x36xf32, #gpu.address_space<workgroup>>
// PAIRMMA-NOT: nvvm.mma.sync
// PAIRMMA: gpu.barrier
// PAIRMMA-COUNT-24: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>
// PAIRMMA-NOT: nvvm.mma.sync
// PAIRMMA: scf.for
// PAIRMMA: gpu.shuffle xor
// PAIRMMA: gpu.shuffle xor
// PAIRMMA-NOT: nvvm.mma.sync
// PAIRMMA: gpu.barrier
// PAIRMMA: gpu.terminator
// PAIRMMA: module(@k3_kda_chunk_pw_kda_chunk_tf32_bv32_ks2_do)
// PAIRMMA-LABEL: func.func @k3_kda_chunk_pw_f32(
// PAIRMMA: module(@k3_kda_chunk_pw_f32_kda_prep)
// PAIRMMA-NOT: nvvm.mma.sync
// PAIRMMA: module(@k3_kda_chunk_pw_f32_kda_chunk_fma)
// PAIRLOOP-LABEL: func.func @k3_kda_chunk_pw(
// PAIRLOOP: gpu.launch {{.*}} module(@k3_kda_chunk_pw_kda_prep) {{.*}}workgroup(%{{.*}} : memref<16x33xf32, #gpu.address_space<workgroup>>
// PAIRLOOP-NOT: nvvm.mma.sync
// PAIRLOOP: gpu.barrier
// PAIRLOOP-NOT: gpu.shuffle
// PAIRLOOP: scf.for
// PAIRLOOP-NOT: gpu.shuffle
// PAIRLOOP: gpu.barrier
// PAIRLOOP-NOT: nvvm.mma.sync
// PAIRLOOP: gpu.terminator
// PAIRLOOP: module(@k3_kda_chunk_pw_kda_chunk_tf32_bv32_ks2_do)
// HOST-LABEL: func.func @k3_kda_chunk_pw(
// HOST-NOT: nvvm.mma.sync
// HOST: return

func.func @kda_chunk_pw(%a0: tensor<?x128xf32>, %a1: tensor<?x128xf32>, %a2: tensor<?x128xbf16>, %a3: tensor<?x128xf32>, %a4: tensor<?x4xbf16>, %a5: tensor<?x4x32x32xf32>, %a6: tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    %r:2 = k3.kernel "k3_kda_chunk_pw" family "kda_chunk" (%a0, %a1, %a2, %a3, %a4, %a5, %a6) {bytes_per_token = 34828 : i64, flops_per_token = 28672 : i64} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    ^bb0(%arg401: tensor<?x128xf32>, %arg402: tensor<?x128xf32>, %arg403: tensor<?x128xbf16>, %arg404: tensor<?x128xf32>, %arg405: tensor<?x4xbf16>, %arg406: tensor<?x4x32x32xf32>, %arg407: tensor<?xi32>):
      %result, %new_state = k3.delta_rule %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 {chunk_size = 16 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<pairwise>, tile = 16 : i64, varlen_masked} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
      k3.yield %result, %new_state : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
    }
  return %r#0, %r#1 : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
}

func.func @kda_chunk_pw_f32(%a0: tensor<?x128xf32>, %a1: tensor<?x128xf32>, %a2: tensor<?x128xf32>, %a3: tensor<?x128xf32>, %a4: tensor<?x4xf32>, %a5: tensor<?x4x32x32xf32>, %a6: tensor<?xi32>) -> (tensor<?x128xf32>, tensor<?x4x32x32xf32>) {
    %r:2 = k3.kernel "k3_kda_chunk_pw_f32" family "kda_chunk" (%a0, %a1, %a2, %a3, %a4, %a5, %a6) {bytes_per_token = 34828 : i64, flops_per_token = 28672 : i64} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x4xf32>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xf32>, tensor<?x4x32x32xf32>) {
    ^bb0(%arg401: tensor<?x128xf32>, %arg402: tensor<?x128xf32>, %arg403: tensor<?x128xf32>, %arg404: tensor<?x128xf32>, %arg405: tensor<?x4xf32>, %arg406: tensor<?x4x32x32xf32>, %arg407: tensor<?xi32>):
      %result, %new_state = k3.delta_rule %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 {chunk_size = 16 : i64, gamma_type = f32, num_heads = 4 : i64, path = #k3.chunk_path<pairwise>, tile = 16 : i64, varlen_masked} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x4xf32>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xf32>, tensor<?x4x32x32xf32>)
      k3.yield %result, %new_state : tensor<?x128xf32>, tensor<?x4x32x32xf32>
    }
  return %r#0, %r#1 : tensor<?x128xf32>, tensor<?x4x32x32xf32>
}
