// --k3-lower-kernels on an MLA attention (8 heads, latent 128 + rope 64,
// bf16) over a paged latent cache: a pool of 64-token pages
// (memref<?x64x192xbf16>) and the block table (memref<?x64xi32>, a row of
// page ids per sequence). Every cache access maps position s of sequence n
// to row s % 64 of page table[n][s / 64]: the appends' stores, the host
// loops' loads, the GPU cores' vector loads (grouped form) and each
// cp.async row of a 64-position tile (warpgroup and mma.sync split cores).
// The numbers are checked end to end in test/Runtime/mla-paged.test.
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST
// RUN: env K3C_MLA_DECODE_WGMMA=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GPU
// The default split core (the transposed one) boxes its tiles by the TMA unit, a box
// of 64 positions at row s % 64 of page table[n][s / 64].
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=WGT
// RUN: env K3C_MLA_DECODE_WGMMA=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=MMA
// The warpgroup core's TMA tiles (K3C_MLA_DECODE_TMA=1): a box of 64 positions
// at row s % 64 of page table[n][s / 64] (tiles start on page boundaries).
// RUN: env K3C_MLA_DECODE_TMA=1 K3C_MLA_DECODE_WGMMA=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=TMA

// HOST-LABEL: func.func @k3_mla_attn_0000beef(
// HOST-SAME: %[[POOL:[a-z0-9]+]]: memref<?x64x192xbf16>
// HOST-SAME: %[[TABLE:[a-z0-9]+]]: memref<?x64xi32>
// The append: the new token's page and row.
// HOST: %[[Q:.*]] = arith.divui %[[POS:[0-9]+]], %c64{{.*}} : index
// HOST: %[[PG:.*]] = memref.load %[[TABLE]][%{{.*}}, %[[Q]]] : memref<?x64xi32>
// HOST: %[[PGI:.*]] = arith.index_cast %[[PG]] : i32 to index
// HOST: %[[ROW:.*]] = arith.remui %[[POS]], %c64{{.*}} : index
// HOST: memref.store %{{.*}}, %[[POOL]][%[[PGI]], %[[ROW]], %{{.*}}] : memref<?x64x192xbf16>
// Attention: each visible position looked up once, then its row read.
// HOST: %[[Q2:.*]] = arith.divui %[[S:arg[0-9]+]], %c64{{.*}} : index
// HOST: %[[PG2:.*]] = memref.load %[[TABLE]][%{{.*}}, %[[Q2]]] : memref<?x64xi32>
// HOST: %[[PGI2:.*]] = arith.index_cast %[[PG2]] : i32 to index
// HOST: %[[ROW2:.*]] = arith.remui %[[S]], %c64{{.*}} : index
// HOST: memref.load %[[POOL]][%[[PGI2]], %[[ROW2]], %{{.*}}] : memref<?x64x192xbf16>

// GPU-LABEL: func.func @k3_mla_attn_0000beef(
// GPU: module(@k3_mla_attn_0000beef_append)
// GPU: memref.load %{{.*}} : memref<?x64xi32>
// GPU: memref.store %{{.*}} : memref<?x64x192xbf16>
// The grouped form (sequences that continue cached context): vector loads
// of looked-up rows.
// GPU: module(@k3_mla_attn_0000beef_absorbed_g8_cached)
// GPU: %[[GPG:.*]] = memref.load %{{.*}} : memref<?x64xi32>
// GPU: %[[GPGI:.*]] = arith.index_cast %[[GPG]] : i32 to index
// GPU: %[[GROW:.*]] = arith.remui
// GPU: vector.load %{{.*}}[%[[GPGI]], %[[GROW]], %{{.*}}] {{.*}} : memref<?x64x192xbf16>, vector<8xbf16>
// The split decode's warpgroup core: each tile row's page, then its
// cp.async chunks from that row.
// GPU: module(@k3_mla_attn_0000beef_absorbed_split_wgss_h64_n64)
// GPU: %[[WPG:.*]] = memref.load %{{.*}} : memref<?x64xi32>
// GPU: %[[WPGI:.*]] = arith.index_cast %[[WPG]] : i32 to index
// GPU: %[[WROW:.*]] = arith.remui
// GPU: nvgpu.device_async_copy %{{.*}}[%[[WPGI]], %[[WROW]], %{{.*}}], {{.*}} : memref<?x64x192xbf16> to memref<2x3x64x64xbf16, #gpu.address_space<workgroup>>
// GPU: module(@k3_mla_attn_0000beef_absorbed_split_mma_h16_n64)
// GPU: %[[MPG:.*]] = memref.load %{{.*}} : memref<?x64xi32>
// GPU: %[[MPGI:.*]] = arith.index_cast %[[MPG]] : i32 to index
// GPU: %[[MROW:.*]] = arith.remui
// GPU: nvgpu.device_async_copy %{{.*}}[%[[MPGI]], %[[MROW]], %{{.*}}], {{.*}} : memref<?x64x192xbf16> to

// A narrow cache row (latent 32 + rope 8 = 40 columns, k3-tiny's: not whole
// 64-column blocks) takes the split core's generic copy: each 16-byte chunk's
// row looked up.
// GPU-LABEL: func.func @k3_mla_attn_0000cafe(
// GPU: module(@k3_mla_attn_0000cafe_absorbed_split_mma_h16_n64)
// GPU: %[[NPG:.*]] = memref.load %{{.*}} : memref<?x4xi32>
// GPU: %[[NPGI:.*]] = arith.index_cast %[[NPG]] : i32 to index
// GPU: %[[NROW:.*]] = arith.remui
// GPU: nvgpu.device_async_copy %{{.*}}[%[[NPGI]], %[[NROW]], %{{.*}}], {{.*}} : memref<?x64x40xbf16> to memref<2x64x56xbf16

// TMA-LABEL: func.func @k3_mla_attn_0000beef(
// TMA: nvgpu.tma.create.descriptor %{{.*}} box[%c1{{[_0-9]*}}, %c64{{[_0-9]*}}, %c64{{[_0-9]*}}]
// TMA: module(@k3_mla_attn_0000beef_absorbed_split_wgss_h64_n64_tma)
// TMA: nvvm.mbarrier.arrive.expect_tx
// TMA: %[[TPG:.*]] = memref.load %{{.*}} : memref<?x64xi32>
// TMA: %[[TPGI:.*]] = arith.index_cast %[[TPG]] : i32 to index
// TMA: %[[TROW:.*]] = arith.remui
// TMA: %[[TROW32:.*]] = arith.index_cast %[[TROW]] : index to i32
// TMA: %[[TPG32:.*]] = arith.index_cast %[[TPGI]] : index to i32
// TMA: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} box[%{{.*}}, %[[TROW32]], %[[TPG32]]]

// MMA-NOT: absorbed_split_wg
// MMA: module(@k3_mla_attn_0000beef_absorbed_split_mma_h16_n64)
// MMA: %[[PG:.*]] = memref.load %{{.*}} : memref<?x64xi32>
// MMA: %[[PGI:.*]] = arith.index_cast %[[PG]] : i32 to index
// MMA: %[[ROW:.*]] = arith.remui
// MMA: nvgpu.device_async_copy %{{.*}}[%[[PGI]], %[[ROW]], %{{.*}}], {{.*}} : memref<?x64x192xbf16> to

func.func @mla_attn(%a0: tensor<?x640xbf16>, %a1: tensor<?x192xbf16>, %a2: tensor<128xbf16>, %a3: tensor<?x64x192xbf16>, %a4: tensor<?xi32>, %a5: tensor<?xi32>, %a6: tensor<256x128xbf16>, %a7: tensor<?x128xbf16>, %a8: tensor<?x64xi32>) -> (tensor<?x128xbf16>, tensor<?x64x192xbf16>) {
    %r:2 = k3.kernel "k3_mla_attn_0000beef" family "mla_attn" (%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7, %a8) {bytes_per_token = 696 : i64, flops_per_token = 8192 : i64, weight_bytes = 65792 : i64} : (tensor<?x640xbf16>, tensor<?x192xbf16>, tensor<128xbf16>, tensor<?x64x192xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<256x128xbf16>, tensor<?x128xbf16>, tensor<?x64xi32>) -> (tensor<?x128xbf16>, tensor<?x64x192xbf16>) {
    ^bb0(%arg401: tensor<?x640xbf16>, %arg402: tensor<?x192xbf16>, %arg403: tensor<128xbf16>, %arg404: tensor<?x64x192xbf16>, %arg405: tensor<?xi32>, %arg406: tensor<?xi32>, %arg407: tensor<256x128xbf16>, %arg408: tensor<?x128xbf16>, %arg409: tensor<?x64xi32>):
      %result, %new_cache = k3.mla_attention %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 gate(%arg408) pages(%arg409) {norm_eps = 9.9999999999999995E-7 : f64, num_heads = 8 : i64, qk_nope_head_dim = 16 : i64, softmax_scale = 0.17677669529663687 : f64, v_head_dim = 16 : i64} : (tensor<?x640xbf16>, tensor<?x192xbf16>, tensor<128xbf16>, tensor<?x64x192xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<256x128xbf16>, tensor<?x128xbf16>, tensor<?x64xi32>) -> (tensor<?x128xbf16>, tensor<?x64x192xbf16>)
      k3.yield %result, %new_cache : tensor<?x128xbf16>, tensor<?x64x192xbf16>
    }
    return %r#0, %r#1 : tensor<?x128xbf16>, tensor<?x64x192xbf16>
}
func.func @mla_attn_narrow(%a0: tensor<?x96xbf16>, %a1: tensor<?x40xbf16>, %a2: tensor<32xbf16>, %a3: tensor<?x64x40xbf16>, %a4: tensor<?xi32>, %a5: tensor<?xi32>, %a6: tensor<128x32xbf16>, %a7: tensor<?x64xbf16>, %a8: tensor<?x4xi32>) -> (tensor<?x64xbf16>, tensor<?x64x40xbf16>) {
    %r:2 = k3.kernel "k3_mla_attn_0000cafe" family "mla_attn" (%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7, %a8) {bytes_per_token = 696 : i64, flops_per_token = 8192 : i64, weight_bytes = 8192 : i64} : (tensor<?x96xbf16>, tensor<?x40xbf16>, tensor<32xbf16>, tensor<?x64x40xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<128x32xbf16>, tensor<?x64xbf16>, tensor<?x4xi32>) -> (tensor<?x64xbf16>, tensor<?x64x40xbf16>) {
    ^bb0(%arg401: tensor<?x96xbf16>, %arg402: tensor<?x40xbf16>, %arg403: tensor<32xbf16>, %arg404: tensor<?x64x40xbf16>, %arg405: tensor<?xi32>, %arg406: tensor<?xi32>, %arg407: tensor<128x32xbf16>, %arg408: tensor<?x64xbf16>, %arg409: tensor<?x4xi32>):
      %result, %new_cache = k3.mla_attention %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 gate(%arg408) pages(%arg409) {norm_eps = 9.9999999999999995E-7 : f64, num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, softmax_scale = 0.2 : f64, v_head_dim = 16 : i64} : (tensor<?x96xbf16>, tensor<?x40xbf16>, tensor<32xbf16>, tensor<?x64x40xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<128x32xbf16>, tensor<?x64xbf16>, tensor<?x4xi32>) -> (tensor<?x64xbf16>, tensor<?x64x40xbf16>)
      k3.yield %result, %new_cache : tensor<?x64xbf16>, tensor<?x64x40xbf16>
    }
    return %r#0, %r#1 : tensor<?x64xbf16>, tensor<?x64x40xbf16>
}

// WGT-LABEL: func.func @k3_mla_attn_0000beef(
// WGT: nvgpu.tma.create.descriptor %{{.*}} box[%c1{{[_0-9]*}}, %c64{{[_0-9]*}}, %c64{{[_0-9]*}}]
// WGT: module(@k3_mla_attn_0000beef_absorbed_split_wgt_h8_n64)
// WGT: %[[TPG:.*]] = memref.load %{{.*}} : memref<?x64xi32>
// WGT: %[[TPGI:.*]] = arith.index_cast %[[TPG]] : i32 to index
// WGT: arith.remui
// WGT: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} box[
