// --k3-lower-kernels on k3-tiny's MLA attention (latent cache of 40 = 32 + 8,
// nope 16, v 16, 4 heads, bf16). sm_90a: phase 1 appends the latent; then a
// host-side branch on the launch's token count: from 64 tokens the
// up-projection (GEMM layer) and the flash prefill on warpgroup MMA (two
// warpgroups of 64 query rows a block; Q and a 4-deep cp.async K / V ring in
// 128-byte-swizzled shared memory, head dims padded 24 -> 64 and 16 -> 64:
// 16 + 4 x (8 + 8) KB + 1 KB of alignment): tile 0's S = Q K^T
// (wgmma.m64n64k16, both operands K-major) and softmax, then per step the
// next tile's S and this tile's O += P V (P in registers, packed by
// cvt.rn.bf16x2: the register-A wgmma, inline PTX; V a transposed B) in
// flight as two groups, the softmax (max.f32, an FMA an exponent) while
// P V runs, and the last tile's P V after the loop; K3C_MLA_FLASH_WGMMA=0 keeps
// the mma.sync flash kernel (ldmatrix, mma.sync for S = Q K^T and, with
// ldmatrix.trans of V, O += P V, head dims padded 24 -> 32 and 16), plus the absorbed kernel
// for cached sequences 16 tokens a block; decode and small launches take the
// split absorbed form in rounds of 64 tokens (a host-side loop): q_abs of
// the round (a block per head and 8 tokens, stored in bf16), the core on
// tensor cores per (token, group of 16 heads (4 real), split of the
// positions: q_abs and 64-position cache tiles by cp.async, cache columns
// padded 40 -> 48 with zeros, S = q_abs K^T and O = P V by mma.sync, two
// warps a head tile exchanging row maxima and P through workgroup memory),
// then the merge and W_UV projection. K3C_MLA_DECODE_MMA=0 keeps the FMA
// core (q_abs in workgroup memory, the cache read 16 bytes at a time,
// shuffles). The host has the absorbed form a block per (token, head) (its
// scratch arguments go unused).
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GPU
// RUN: env K3C_MLA_FLASH_WGMMA=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=FA2
// RUN: env K3C_MLA_FLASH_STAGES=2 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=STAGES2
// STAGES2: K3C_MLA_FLASH_STAGES must be 3 or 4, got 2
// RUN: env K3C_MLA_DECODE_MMA=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=FMA
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST

// Scratch: the up-projection's c_n [T, 32] and k_nope | v [T, 4 x 32]; the
// split decode's q_abs [128, 4 x 40] and partials [256, 4 x (32 + 2)], and
// q_abs in bf16 for the tensor-core core [128 x 4, 40].
// GPU-LABEL: func.func @k3_mla_attn_{{[0-9a-f]+}}(
// GPU-SAME: %{{.*}}: memref<?x64xbf16>, %{{.*}}: memref<?x32xbf16>, %{{.*}}: memref<?x128xbf16>, %{{.*}}: memref<128x160xf32>, %{{.*}}: memref<256x136xf32>, %{{.*}}: memref<512x40xbf16>)
// GPU-SAME: k3.family = "mla_attn"
// GPU: gpu.launch
// GPU: scf.if
// GPU: function(@k3_mla_attn_{{[0-9a-f]+}}_linear_
// GPU: threads({{.*}} = %c256{{[_0-9]*}}, {{.*}}) dynamic_shared_memory_size %c82944_i32 module(@k3_mla_attn_{{[0-9a-f]+}}_mla_flash_wg_128x64_d24_16)
// GPU: nvgpu.device_async_copy
// GPU: nvvm.cp.async.commit.group
// GPU: nvvm.cp.async.commit.group
// GPU: nvvm.cp.async.commit.group
// GPU: nvvm.cp.async.wait.group 2
// GPU: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// GPU: gpu.barrier
// GPU: nvvm.wgmma.fence.aligned
// GPU: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// GPU: nvvm.wgmma.wait.group.sync.aligned 0
// GPU: llvm.intr.maxnum
// GPU: llvm.intr.fma
// GPU: math.exp2
// GPU: nvvm.convert.f32x2.to.bf16x2
// GPU: scf.for
// GPU: nvvm.cp.async.wait.group 1
// GPU: gpu.barrier
// GPU: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 64, k = 16>, D[<f32>, <zero>]
// GPU: nvvm.wgmma.commit.group.sync.aligned
// GPU: nvvm.wgmma.fence.aligned
// GPU: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// GPU: nvvm.wgmma.commit.group.sync.aligned
// GPU: nvvm.wgmma.wait.group.sync.aligned 1
// GPU: math.exp2
// GPU: nvvm.wgmma.wait.group.sync.aligned 0
// GPU: nvvm.convert.f32x2.to.bf16x2
// GPU: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k16
// GPU: nvvm.wgmma.wait.group.sync.aligned 0
// GPU: function(@k3_mla_attn_{{[0-9a-f]+}}_absorbed_g4_cached)
// FA2: dynamic_shared_memory_size %c{{[0-9]+}}_i32 module(@k3_mla_attn_{{[0-9a-f]+}}_mla_flash_128x64_d24_16)
// FA2: nvgpu.device_async_copy
// FA2: nvvm.cp.async.wait.group 0
// FA2: nvgpu.ldmatrix {{.*}}transpose = false
// FA2: scf.for
// FA2: nvvm.mma.sync
// FA2: math.exp2
// FA2: gpu.shuffle  xor
// FA2: nvgpu.ldmatrix {{.*}}transpose = true
// FA2: nvvm.mma.sync
// FA2: function(@k3_mla_attn_{{[0-9a-f]+}}_absorbed_g4_cached)
// GPU: } else {
// GPU: scf.for
// GPU: function(@k3_mla_attn_{{[0-9a-f]+}}_absorbed_qabs)
// GPU: memref.store {{.*}} : memref<512x40xbf16>
// The core: (q_abs 16 x 56 + cache 2 x 64 x 56 + P 16 x 72) x 2 bytes (rows
// padded by 16 bytes), maxima and sums 2 x 16 x 4 bytes; 64 threads.
// GPU: gpu.launch
// GPU-SAME: threads(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}) in (%{{[a-z0-9]+}} = %c64{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}, %{{[a-z0-9]+}} = %c1{{[_0-9]*}}) dynamic_shared_memory_size %c18560_i32 module(@k3_mla_attn_{{[0-9a-f]+}}_absorbed_split_mma_h16_n64)
// GPU: nvgpu.device_async_copy {{.*}} : memref<512x40xbf16> to memref<16x56xbf16, #gpu.address_space<workgroup>>
// GPU: nvgpu.device_async_copy {{.*}} : memref<?x?x40xbf16> to memref<2x64x56xbf16, #gpu.address_space<workgroup>>
// GPU: nvvm.cp.async.wait.group 0
// GPU: nvgpu.ldmatrix {{.*}}transpose = false
// GPU: nvvm.mma.sync
// GPU: gpu.shuffle  xor
// GPU: gpu.barrier
// GPU: math.exp2
// GPU: vector.store {{.*}} : memref<1x16x72xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// GPU: gpu.barrier
// GPU: nvgpu.ldmatrix {{.*}}transpose = true
// GPU: nvvm.mma.sync
// GPU: vector.store {{.*}} : memref<256x136xf32>, vector<2xf32>
// (the partials' pairs as 8-byte stores; K3C_MLA_PARTIAL_VEC=0: scalar)
// RUN: env K3C_MLA_PARTIAL_VEC=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SCALAR
// SCALAR-NOT: vector.store {{.*}} : memref<256x136xf32>
// SCALAR: memref.store {{.*}} : memref<256x136xf32>
// SCALAR-NOT: vector.store {{.*}} : memref<256x136xf32>
// GPU: function(@k3_mla_attn_{{[0-9a-f]+}}_absorbed_combine)
// Rounds of 8 tokens or more merge and project 8 tokens a block (W_UV read
// once for them): their o_lat, weights and live flags in shared memory
// (ceil(132 SMs / 8 tokens) = 17 splits at most).
// GPU: } else {
// GPU: function(@k3_mla_attn_{{[0-9a-f]+}}_absorbed_combine_t8) workgroup(%{{.*}} : memref<8x32xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<8x18xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<8x17xf32, #gpu.address_space<workgroup>>)
// GPU: return

// FMA-LABEL: func.func @k3_mla_attn_{{[0-9a-f]+}}(
// FMA-SAME: %{{.*}}: memref<128x160xf32>, %{{.*}}: memref<256x136xf32>)
// FMA-NOT: absorbed_split_mma
// FMA: function(@k3_mla_attn_{{[0-9a-f]+}}_absorbed_qabs)
// FMA: memref.store {{.*}} : memref<128x160xf32>
// FMA: function(@k3_mla_attn_{{[0-9a-f]+}}_absorbed_split_g4) workgroup(%{{.*}} : memref<4x40xf32, #gpu.address_space<workgroup>>
// FMA: vector.load %{{.*}} {alignment = 16 : i64} : memref<?x?x40xbf16>, vector<8xbf16>
// FMA: gpu.shuffle  xor
// FMA: gpu.shuffle  idx
// FMA: gpu.barrier
// FMA: memref.store {{.*}} : memref<256x136xf32>
// FMA: function(@k3_mla_attn_{{[0-9a-f]+}}_absorbed_combine)
// FMA-NOT: absorbed_split_mma
// FMA: return

// (The host gets the scratch arguments too: one calling convention.)
// HOST-LABEL: func.func @k3_mla_attn_{{[0-9a-f]+}}(
// HOST-SAME: %{{.*}}: memref<?x64xbf16>, %{{.*}}: memref<?x32xbf16>, %{{.*}}: memref<?x128xbf16>, %{{.*}}: memref<128x160xf32>, %{{.*}}: memref<256x136xf32>, %{{.*}}: memref<512x40xbf16>)
// HOST-NOT: gpu.
// HOST-NOT: vector.load
// HOST-NOT: mma
// HOST: return

func.func @mla_attn(%a0: tensor<?x96xbf16>, %a1: tensor<?x40xbf16>, %a2: tensor<32xbf16>, %a3: tensor<?x?x40xbf16>, %a4: tensor<?xi32>, %a5: tensor<?xi32>, %a6: tensor<128x32xbf16>, %a7: tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x?x40xbf16>) {
    %r:2 = k3.kernel "k3_mla_attn_23a79545" family "mla_attn" (%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7) {bytes_per_token = 696 : i64, flops_per_token = 8192 : i64, weight_bytes = 8256 : i64} : (tensor<?x96xbf16>, tensor<?x40xbf16>, tensor<32xbf16>, tensor<?x?x40xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<128x32xbf16>, tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x?x40xbf16>) {
    ^bb0(%arg401: tensor<?x96xbf16>, %arg402: tensor<?x40xbf16>, %arg403: tensor<32xbf16>, %arg404: tensor<?x?x40xbf16>, %arg405: tensor<?xi32>, %arg406: tensor<?xi32>, %arg407: tensor<128x32xbf16>, %arg408: tensor<?x64xbf16>):
      %result, %new_cache = k3.mla_attention %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 gate(%arg408) {norm_eps = 9.9999999999999995E-7 : f64, num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, softmax_scale = 0.20412414523193154 : f64, v_head_dim = 16 : i64} : (tensor<?x96xbf16>, tensor<?x40xbf16>, tensor<32xbf16>, tensor<?x?x40xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<128x32xbf16>, tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x?x40xbf16>)
      k3.yield %result, %new_cache : tensor<?x64xbf16>, tensor<?x?x40xbf16>
    }
  return %r#0, %r#1 : tensor<?x64xbf16>, tensor<?x?x40xbf16>
}
