// --k3-lower-kernels on an MLA attention of 32 heads (latent 64 + rope 16,
// nope 16, v 16, bf16) for sm_90a: the split decode's tensor-core core in two
// block sizes, chosen on the host per round of tokens: rounds whose blocks of
// 32 heads cannot fill the SMs at 32 splits (tokens x 2 groups x 32 < SMs)
// take 16-head blocks (K3C_MLA_DECODE_HEAD_TILES_SMALL, 4 warps: one head
// tile x 4 column quarters), the others 32-head blocks (two head tiles, 8
// warps). Shared memory: q_abs rows x 88 + 2 x 64 x 88 cache rows + P 16 x 72
// per head tile, x 2 bytes, and 4 x 16 fp32 maxima per head tile.
// K3C_MLA_DECODE_HEAD_TILES_SMALL=2 (the same size) builds one core.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s
// RUN: env K3C_MLA_DECODE_HEAD_TILES_SMALL=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ONE
// K3C_MLA_DECODE_S_CHAINS (1, 2 or 4; default 2 for the 16-head blocks, 1
// for the larger: the unrolled k steps of S = q_abs K^T alternate between
// that many accumulator sets, added after the k loop; cache rows of an odd
// number of 16-column steps, as here (80), keep one) and
// K3C_MLA_DECODE_S_UNROLL (2 or 4) are checked:
// RUN: env K3C_MLA_DECODE_S_CHAINS=3 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=CHAINS3
// CHAINS3: K3C_MLA_DECODE_S_CHAINS must be 1, 2 or 4, got 3
// RUN: env K3C_MLA_DECODE_S_UNROLL=3 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=UNROLL3
// UNROLL3: K3C_MLA_DECODE_S_UNROLL must be 2 or 4, got 3

// CHECK-LABEL: func.func @k3_mla_attn_0000abcd(
// CHECK-SAME: memref<4096x80xbf16>)
// CHECK: function(@k3_mla_attn_0000abcd_absorbed_qabs)
// CHECK: scf.if
// CHECK: threads(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}) in (%{{[a-z0-9]+}} = %c128{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}) dynamic_shared_memory_size %c27904_i32 module(@k3_mla_attn_0000abcd_absorbed_split_mma_h16_n64)
// CHECK: } else {
// CHECK: threads(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}) in (%{{[a-z0-9]+}} = %c256{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}) dynamic_shared_memory_size %c33280_i32 module(@k3_mla_attn_0000abcd_absorbed_split_mma_h32_n64)
// CHECK: function(@k3_mla_attn_0000abcd_absorbed_combine)

// ONE-NOT: absorbed_split_mma_h16
// ONE: module(@k3_mla_attn_0000abcd_absorbed_split_mma_h32_n64)
// ONE-NOT: absorbed_split_mma_h16

func.func @mla_attn(%a0: tensor<?x1024xbf16>, %a1: tensor<?x80xbf16>, %a2: tensor<64xbf16>, %a3: tensor<?x?x80xbf16>, %a4: tensor<?xi32>, %a5: tensor<?xi32>, %a6: tensor<1024x64xbf16>, %a7: tensor<?x512xbf16>) -> (tensor<?x512xbf16>, tensor<?x?x80xbf16>) {
    %r:2 = k3.kernel "k3_mla_attn_0000abcd" family "mla_attn" (%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7) {bytes_per_token = 696 : i64, flops_per_token = 8192 : i64, weight_bytes = 8256 : i64} : (tensor<?x1024xbf16>, tensor<?x80xbf16>, tensor<64xbf16>, tensor<?x?x80xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<1024x64xbf16>, tensor<?x512xbf16>) -> (tensor<?x512xbf16>, tensor<?x?x80xbf16>) {
    ^bb0(%arg401: tensor<?x1024xbf16>, %arg402: tensor<?x80xbf16>, %arg403: tensor<64xbf16>, %arg404: tensor<?x?x80xbf16>, %arg405: tensor<?xi32>, %arg406: tensor<?xi32>, %arg407: tensor<1024x64xbf16>, %arg408: tensor<?x512xbf16>):
      %result, %new_cache = k3.mla_attention %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 gate(%arg408) {norm_eps = 9.9999999999999995E-7 : f64, num_heads = 32 : i64, qk_nope_head_dim = 16 : i64, softmax_scale = 0.17677669529663687 : f64, v_head_dim = 16 : i64} : (tensor<?x1024xbf16>, tensor<?x80xbf16>, tensor<64xbf16>, tensor<?x?x80xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<1024x64xbf16>, tensor<?x512xbf16>) -> (tensor<?x512xbf16>, tensor<?x?x80xbf16>)
      k3.yield %result, %new_cache : tensor<?x512xbf16>, tensor<?x?x80xbf16>
    }
  return %r#0, %r#1 : tensor<?x512xbf16>, tensor<?x?x80xbf16>
}
