// --k3-lower-kernels on an MLA attention of 32 heads (latent 128 + rope 64,
// nope 16, v 16, bf16) for sm_90a: the split decode's small core (16-head
// blocks, one-token rounds too few to fill the SMs) takes 8 warps a head
// tile with K3C_MLA_DECODE_WARPS_SMALL=8 (opt-in until measured; default 4): each warp scores 8 of a
// tile's 64 positions, one ldmatrix.x4 giving both unrolled k steps' B
// fragments (cd 192: 12 k steps, even), and accumulates O for 16 of the 128
// latent columns. Shared memory: q_abs 16 x 200 + 2 x 64 x 200 cache rows +
// P 16 x 72, x 2 bytes, and 8 x 16 fp32 maxima: 60416 bytes (60160 with 4
// warps). The 32-head core keeps 4 warps a head tile (K3C_MLA_DECODE_WARPS).
// (K3C_MLA_DECODE_WG_FROM=2: one-token rounds on the mma.sync cores; by
// default the transposed warpgroup core takes every round.)
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_WARPS_SMALL=8 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s
// RUN: env K3C_MLA_DECODE_WG_FROM=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=W4
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_WARPS_SMALL=3 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=W3

// CHECK-LABEL: func.func @k3_mla_attn_0000abce(
// CHECK: threads(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}) in (%{{[a-z0-9]+}} = %c256{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}) dynamic_shared_memory_size %c60416_i32 module(@k3_mla_attn_0000abce_absorbed_split_mma_h16_n64)
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: nvvm.mma.sync
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: nvvm.mma.sync
// CHECK: } else {
// CHECK: threads(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}) in (%{{[a-z0-9]+}} = %c256{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}) dynamic_shared_memory_size %c{{[0-9]+}}_i32 module(@k3_mla_attn_0000abce_absorbed_split_mma_h32_n64)

// W4: threads(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}) in (%{{[a-z0-9]+}} = %c128{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}) dynamic_shared_memory_size %c60160_i32 module(@k3_mla_attn_0000abce_absorbed_split_mma_h16_n64)

// (3 warps is no plan: the small core is off, every round takes 32-head blocks)
// W3-NOT: absorbed_split_mma_h16
// W3: module(@k3_mla_attn_0000abce_absorbed_split_mma_h32_n64)
// W3-NOT: absorbed_split_mma_h16

func.func @mla_attn(%a0: tensor<?x2560xbf16>, %a1: tensor<?x192xbf16>, %a2: tensor<128xbf16>, %a3: tensor<?x?x192xbf16>, %a4: tensor<?xi32>, %a5: tensor<?xi32>, %a6: tensor<1024x128xbf16>, %a7: tensor<?x512xbf16>) -> (tensor<?x512xbf16>, tensor<?x?x192xbf16>) {
    %r:2 = k3.kernel "k3_mla_attn_0000abce" family "mla_attn" (%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7) {bytes_per_token = 1000 : i64, flops_per_token = 8192 : i64, weight_bytes = 8256 : i64} : (tensor<?x2560xbf16>, tensor<?x192xbf16>, tensor<128xbf16>, tensor<?x?x192xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<1024x128xbf16>, tensor<?x512xbf16>) -> (tensor<?x512xbf16>, tensor<?x?x192xbf16>) {
    ^bb0(%arg401: tensor<?x2560xbf16>, %arg402: tensor<?x192xbf16>, %arg403: tensor<128xbf16>, %arg404: tensor<?x?x192xbf16>, %arg405: tensor<?xi32>, %arg406: tensor<?xi32>, %arg407: tensor<1024x128xbf16>, %arg408: tensor<?x512xbf16>):
      %result, %new_cache = k3.mla_attention %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 gate(%arg408) {norm_eps = 9.9999999999999995E-7 : f64, num_heads = 32 : i64, qk_nope_head_dim = 16 : i64, softmax_scale = 0.17677669529663687 : f64, v_head_dim = 16 : i64} : (tensor<?x2560xbf16>, tensor<?x192xbf16>, tensor<128xbf16>, tensor<?x?x192xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<1024x128xbf16>, tensor<?x512xbf16>) -> (tensor<?x512xbf16>, tensor<?x?x192xbf16>)
      k3.yield %result, %new_cache : tensor<?x512xbf16>, tensor<?x?x192xbf16>
    }
    return %r#0, %r#1 : tensor<?x512xbf16>, tensor<?x?x192xbf16>
}
