// --k3-lower-kernels on an MLA attention of 8 heads (latent 128 + rope 64,
// nope 16, v 16, bf16) for sm_90a: the split decode's core on warpgroup MMA
// (FlashMLA's form), a block of two warpgroups per (token, group of 64
// heads, split): q_abs of the 64 heads and a two-slot ring of 64-position
// cache tiles in 128-byte-swizzled shared memory (3 x 3 x 8 KB + 1 KB of
// alignment = 74752 bytes), each thread's cp.async copies at constant
// offsets (rows t / 8 + 32 n, chunks t % 8 + 8 m: unrolled, no loop).
//
// With K3C_MLA_DECODE_WGMMA=1 and K3C_MLA_DECODE_WG_FROM=1 (every round):
// per tile S = q_abs K^T as wgmma.m64n64k16 over 12 k steps in both
// warpgroups (both operands K-major), the online softmax (max.f32, an FMA
// an exponent), P packed by cvt.rn.bf16x2 and O += P V for the
// warpgroup's 64 of the 128 latent columns by the register-A wgmma (inline
// PTX, V the tile's columns as an MN-major B); the partials (O, M, L) as the
// mma.sync core writes them.
// RUN: env K3C_MLA_DECODE_WGMMA=1 K3C_MLA_DECODE_WG_FROM=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s
//
// K3C_MLA_DECODE_WGMMA=2 (the seesaw form, rounds of at least
// K3C_MLA_DECODE_WG_FROM = 2 tokens; the mma.sync core below): each warpgroup takes S for 32 of
// the tile's positions (wgmma.m64n32k16), the row maxima cross through
// shared memory (2 x 64 f32), P's halves go to a shared bf16 tile (8 KB
// more: 83456 bytes), fenced for the async proxy, O += own P V (register
// A) and, after the barrier, the other half's (two shared-memory-A
// wgmma.m64n64k16); L sums both warpgroups' row sums.
// RUN: env K3C_MLA_DECODE_WGMMA=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SS
// RUN: env K3C_MLA_DECODE_WGMMA=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=OFF
//
// K3C_MLA_DECODE_WGMMA=3 (opt-in): the seesaw with tile 0's S before the
// loop and, per tile, tile j + 1's S issued behind this tile's P V (under
// j + 1 < nT): wait for one group (P V), the barrier, tile j + 2's copies,
// then wait for S; the next tile's copies waited for before the P barrier.
// RUN: env K3C_MLA_DECODE_WGMMA=3 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PRE
//
// K3C_MLA_DECODE_TMA=1 (opt-in): the seesaw's cache tiles filled by the TMA
// unit: the cache's tensor map made on the host (boxes of 1 x 64 positions
// x 64 columns), two mbarriers after the P tile and the maxima (16 bytes
// more: 83472), thread 0 arming a slot with the tile's 3 x 8 KB and
// issuing its three tensor copies (tiles 0 and 1 before the loop, j + 2 at
// its end); per tile q_abs's cp.async group, the slot's parity wait, the
// rows past the split's end zeroed, the async-proxy fence and the barrier.
// No cp.async of the cache remains (q_abs's six copies a thread do).
// RUN: env K3C_MLA_DECODE_TMA=1 K3C_MLA_DECODE_WGMMA=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=TMA
// RUN: env K3C_MLA_DECODE_TMA=1 K3C_MLA_DECODE_WGMMA=3 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PRE
// RUN: env K3C_MLA_DECODE_TMA=2 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=TMA2
// RUN: env K3C_MLA_DECODE_WGMMA=5 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=MODE5
//
// K3C_MLA_DECODE_WGMMA=4 (the default): the transposed core, a block per
// (token, group of HG heads, split); here one group of the 8 heads. Shared
// memory: q_abs^T (3 x 8 rows x 128 bytes), the two-slot ring (2 x 3 x 8 KB),
// two P^T buffers (2 x 8 x 128), two alpha rows, the 4 warps' maxima, 4
// mbarriers and the alignment slack: 55520 bytes. Thread 0 initializes the
// full (1 arrival) and empty (8: every warp) mbarriers, all copy q_abs^T
// (cp.async), thread 0 issues tiles 0 and 1 (three tensor copies each).
// Warpgroup 0, per tile: the previous tile's wgmma groups waited for and
// its slot released (mbarrier.arrive), the slot's parity waited for, a
// partial tile's rows zeroed (fenced, named barrier 1 of its 128 threads),
// S^T = K q_abs^T (12 wgmma.m64n8k16, both operands K-major), each head's
// column maximum (shuffles 4, 8, 16 apart, then the 4 warps through shared
// memory at barrier 1), P^T into buffer j % 2 after warpgroup 1 freed it
// (barrier 2 or 3), the factors, the async-proxy fence, barrier 4 with
// warpgroup 1, then O^T += V^T P^T (4 wgmma.m64n8k16 with A MN-major, col).
// Warpgroup 1: barrier 4, the slot's full barrier (already complete), the
// factors, its 4 products, waited for, its
// slot release, barrier 2 / 3 arrivals, tile j + 2 by its first warp after
// the empty barrier's phase. The partials: with K3C_MLA_PARTIAL_BULK=0,
// 8-byte stores by warpgroup 0 after its last tile (WGTE); by default one
// bulk copy a block after both warpgroups' last tiles (WGTB).
// RUN: env K3C_MLA_DECODE_WGMMA=4 K3C_MLA_PARTIAL_BULK=0 K3C_MLA_DECODE_EARLY_TILES=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefixes=WGT,WGTE
// (the default since session 46)
// RUN: env K3C_MLA_DECODE_EARLY_TILES=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefixes=WGT,WGTB
//
// A wgmma chain's shared-memory descriptors (every wgmmaChain; here the
// transposed core's S chain): the low word (start address >> 4, leading
// offset 1 << 16) formed as an i32 and stepped by i32 adds (2 a k16 step
// inside a 64-column block), the high word (stride 1024 >> 4, 128-byte
// swizzle) a constant OR'd in.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=DESC32
// DESC32: module(@k3_mla_attn_0000beef_absorbed_split_wgt_h8_n64)
// DESC32: %[[A:.*]] = arith.trunci %{{.*}} : i64 to i32
// DESC32: %[[M:.*]] = arith.andi %[[A]], %c262143_i32 : i32
// DESC32: %[[S:.*]] = arith.shrui %[[M]], %{{.*}} : i32
// DESC32: %[[LO:.*]] = arith.ori %[[S]], %c65536_i32 : i32
// DESC32: %[[W0:.*]] = arith.extui %[[LO]] : i32 to i64
// DESC32: arith.ori %[[W0]], %c4611686293305294848_i64 : i64
// DESC32: %[[W1:.*]] = arith.addi %[[LO]], %c2_i32 : i32
// DESC32: %[[X1:.*]] = arith.extui %[[W1]] : i32 to i64
// DESC32: arith.ori %[[X1]], %c4611686293305294848_i64 : i64
// DESC32: nvvm.wgmma.mma_async
// RUN: env K3C_MLA_DECODE_WG_FROM=0 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=FROM0

// CHECK-LABEL: func.func @k3_mla_attn_0000beef(
// CHECK-NOT: absorbed_split_mma_h
// CHECK: threads({{.*}} = %c256{{[_0-9]*}}, {{.*}}) dynamic_shared_memory_size %c74752_i32 module(@k3_mla_attn_0000beef_absorbed_split_wg_h64_n64)
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-12: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 64, k = 16>
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: llvm.intr.maxnum
// CHECK: llvm.intr.fma
// CHECK: nvvm.convert.f32x2.to.bf16x2
// CHECK: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: gpu.shuffle xor
// CHECK: vector.store {{.*}} : memref<256x1040xf32>, vector<2xf32>
// CHECK: function(@k3_mla_attn_0000beef_absorbed_combine)

// OFF-NOT: absorbed_split_wg
// OFF: absorbed_split_mma_h
// OFF-NOT: absorbed_split_wg

// SS-LABEL: func.func @k3_mla_attn_0000beef(
// SS: threads({{.*}} = %c256{{[_0-9]*}}, {{.*}}) dynamic_shared_memory_size %c83456_i32 module(@k3_mla_attn_0000beef_absorbed_split_wgss_h64_n64)
// SS-COUNT-6: nvgpu.device_async_copy {{.*}} : memref<?x?x192xbf16> to memref<2x3x64x64xbf16
// SS: nvvm.cp.async.commit.group
// SS: scf.for
// SS: nvvm.cp.async.wait.group 1
// SS: gpu.barrier
// SS: nvvm.wgmma.fence.aligned
// SS-COUNT-12: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 32, k = 16>
// SS: nvvm.wgmma.wait.group.sync.aligned 0
// SS: llvm.intr.maxnum
// SS: memref.store {{.*}} : memref<2x64xf32, #gpu.address_space<workgroup>>
// SS: gpu.barrier
// SS: memref.load {{.*}} : memref<2x64xf32, #gpu.address_space<workgroup>>
// SS: math.exp2
// SS: vector.store {{.*}} : memref<1x64x64xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// SS: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// SS: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// SS: nvvm.wgmma.commit.group.sync.aligned
// SS-NEXT: gpu.barrier
// SS-COUNT-2: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 64, k = 16>
// SS: nvvm.wgmma.wait.group.sync.aligned 0
// SS-NEXT: gpu.barrier
// SS: nvvm.cp.async.commit.group
// SS: nvvm.cp.async.wait.group 0
// SS: gpu.barrier
// SS: vector.store {{.*}} : memref<256x1040xf32>, vector<2xf32>
// SS: } else {
// SS: module(@k3_mla_attn_0000beef_absorbed_split_mma_h16_n64)
// SS: function(@k3_mla_attn_0000beef_absorbed_combine)

// PRE-LABEL: func.func @k3_mla_attn_0000beef(
// PRE: module(@k3_mla_attn_0000beef_absorbed_split_wgss_h64_n64)
// PRE: nvvm.cp.async.wait.group 1
// PRE: gpu.barrier
// PRE-COUNT-12: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 32, k = 16>
// PRE: nvvm.wgmma.wait.group.sync.aligned 0
// PRE: scf.for {{.*}} -> (!llvm.struct<({{.*}})>, f32, f32, f32, f32, !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>)
// PRE-NOT: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 32, k = 16>
// PRE: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PRE: nvvm.cp.async.wait.group 0
// PRE-NEXT: nvvm.fence.proxy
// PRE-NEXT: gpu.barrier
// PRE-COUNT-2: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 64, k = 16>
// PRE: scf.if {{.*}} -> (!llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>)
// PRE-COUNT-12: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 32, k = 16>
// PRE: nvvm.wgmma.wait.group.sync.aligned 1
// PRE-NEXT: gpu.barrier
// PRE: nvvm.cp.async.commit.group
// PRE-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// PRE: } else {
// PRE-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// PRE-NEXT: gpu.barrier
// PRE: nvvm.cp.async.commit.group
// PRE: llvm.mlir.undef
// PRE: vector.store {{.*}} : memref<256x1040xf32>, vector<2xf32>

// TMA-LABEL: func.func @k3_mla_attn_0000beef(
// TMA: nvgpu.tma.create.descriptor %{{.*}} box[%c1{{[_0-9]*}}, %c64{{[_0-9]*}}, %c64{{[_0-9]*}}] : memref<*xbf16> -> <tensor = memref<1x64x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// TMA: dynamic_shared_memory_size %c83472_i32 module(@k3_mla_attn_0000beef_absorbed_split_wgss_h64_n64_tma)
// TMA-COUNT-2: nvvm.mbarrier.init
// TMA-NEXT: nvvm.fence.mbarrier.init
// TMA: gpu.barrier
// TMA-COUNT-6: nvgpu.device_async_copy {{.*}} : memref<1024x192xbf16> to memref<3x64x64xbf16
// TMA-NOT: nvgpu.device_async_copy
// TMA: nvvm.cp.async.commit.group
// TMA: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c24576_i32
// TMA-COUNT-3: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} box[{{.*}}, {{.*}}, {{.*}}]
// TMA: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c24576_i32
// TMA-COUNT-3: nvvm.cp.async.bulk.tensor.shared.cluster.global
// TMA: scf.for
// TMA: nvvm.cp.async.wait.group 0
// TMA: nvvm.mbarrier.try_wait.parity
// TMA: scf.if
// TMA: vector.store {{.*}} : memref<2x3x64x64xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// TMA: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// TMA-NEXT: gpu.barrier
// TMA-COUNT-12: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 32, k = 16>
// TMA: nvvm.wgmma.wait.group.sync.aligned 0
// TMA: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// TMA: nvvm.wgmma.commit.group.sync.aligned
// TMA-NEXT: gpu.barrier
// TMA-COUNT-2: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 64, k = 16>
// TMA: nvvm.wgmma.wait.group.sync.aligned 0
// TMA-NEXT: gpu.barrier
// TMA: nvvm.mbarrier.arrive.expect_tx
// TMA-COUNT-3: nvvm.cp.async.bulk.tensor.shared.cluster.global
// TMA-NOT: nvgpu.device_async_copy
// TMA: vector.store {{.*}} : memref<256x1040xf32>, vector<2xf32>
// TMA: } else {
// TMA: module(@k3_mla_attn_0000beef_absorbed_split_mma_h16_n64)

// TMA2: K3C_MLA_DECODE_TMA must be 0 or 1, got '2'
// MODE5: K3C_MLA_DECODE_WGMMA must be 0, 1, 2, 3 or 4, got 5

// WGT-LABEL: func.func @k3_mla_attn_0000beef(
// WGT: dynamic_shared_memory_size %c55520_i32 module(@k3_mla_attn_0000beef_absorbed_split_wgt_h8_n64)
// WGT-COUNT-2: nvvm.mbarrier.init {{.*}}, %c1_i32
// WGT-COUNT-2: nvvm.mbarrier.init {{.*}}, %c8_i32
// WGT: nvvm.fence.mbarrier.init
// WGT: nvgpu.device_async_copy
// WGT: nvvm.cp.async.commit.group
// WGT: gpu.barrier
// WGT: nvvm.mbarrier.arrive.expect_tx {{.*}}, %c24576_i32
// WGT-COUNT-3: nvvm.cp.async.bulk.tensor.shared.cluster.global
// WGT: nvvm.mbarrier.arrive.expect_tx {{.*}}, %c24576_i32
// WGT-COUNT-3: nvvm.cp.async.bulk.tensor.shared.cluster.global
// WGT: nvvm.cp.async.wait.group 0
// WGT: gpu.barrier
// WGT: scf.for
// WGT: nvvm.wgmma.wait.group.sync.aligned 0
// WGT: nvvm.mbarrier.arrive
// WGT: nvvm.mbarrier.try_wait.parity
// WGT: "barrier.sync 1, 128;"
// WGT-COUNT-12: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 8, k = 16>, D[<f32>, <{{zero|one}}>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// WGT: nvvm.wgmma.wait.group.sync.aligned 0
// WGT: gpu.shuffle  xor {{.*}}, %c4_i32
// WGT: gpu.shuffle  xor {{.*}}, %c8_i32
// WGT: gpu.shuffle  xor {{.*}}, %c16_i32
// WGT: "barrier.sync 1, 128;"
// WGT: "barrier.sync 2, 256;"
// WGT: "barrier.sync 3, 256;"
// WGT: nvvm.convert.f32x2.to.bf16x2
// WGT: nvvm.stmatrix {{.*}}layout = #nvvm.mma_layout<col>
// WGT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// WGT: "barrier.sync 4, 256;"
// WGT-COUNT-4: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <col>]
// WGT: nvvm.wgmma.wait.group.sync.aligned 0
// WGT: "barrier.sync 1, 128;"
// WGTE: vector.store {{.*}} : memref<256x1040xf32>, vector<2xf32>
// WGTB-NOT: vector.store {{.*}} : memref<256x1040xf32>
// WGT: "barrier.sync 4, 256;"
// WGT: nvvm.mbarrier.try_wait.parity
// WGT-COUNT-4: nvvm.wgmma.mma_async {{.*}}A[<bf16>, <one>, <col>]
// WGT: nvvm.wgmma.wait.group.sync.aligned 0
// WGT: nvvm.mbarrier.arrive
// WGT: "barrier.arrive 2, 256;"
// WGT: "barrier.arrive 3, 256;"
// WGT: nvvm.mbarrier.try_wait.parity
// WGT: nvvm.mbarrier.arrive.expect_tx {{.*}}, %c24576_i32
// WGTB: nvvm.cp.async.bulk.global.shared.cta
// WGT: function(@k3_mla_attn_0000beef_absorbed_combine
// FROM0: K3C_MLA_DECODE_WG_FROM must be >= 1, got 0

func.func @mla_attn(%a0: tensor<?x640xbf16>, %a1: tensor<?x192xbf16>, %a2: tensor<128xbf16>, %a3: tensor<?x?x192xbf16>, %a4: tensor<?xi32>, %a5: tensor<?xi32>, %a6: tensor<256x128xbf16>, %a7: tensor<?x128xbf16>) -> (tensor<?x128xbf16>, tensor<?x?x192xbf16>) {
    %r:2 = k3.kernel "k3_mla_attn_0000beef" family "mla_attn" (%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7) {bytes_per_token = 696 : i64, flops_per_token = 8192 : i64, weight_bytes = 65792 : i64} : (tensor<?x640xbf16>, tensor<?x192xbf16>, tensor<128xbf16>, tensor<?x?x192xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<256x128xbf16>, tensor<?x128xbf16>) -> (tensor<?x128xbf16>, tensor<?x?x192xbf16>) {
    ^bb0(%arg401: tensor<?x640xbf16>, %arg402: tensor<?x192xbf16>, %arg403: tensor<128xbf16>, %arg404: tensor<?x?x192xbf16>, %arg405: tensor<?xi32>, %arg406: tensor<?xi32>, %arg407: tensor<256x128xbf16>, %arg408: tensor<?x128xbf16>):
      %result, %new_cache = k3.mla_attention %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 gate(%arg408) {norm_eps = 9.9999999999999995E-7 : f64, num_heads = 8 : i64, qk_nope_head_dim = 16 : i64, softmax_scale = 0.17677669529663687 : f64, v_head_dim = 16 : i64} : (tensor<?x640xbf16>, tensor<?x192xbf16>, tensor<128xbf16>, tensor<?x?x192xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<256x128xbf16>, tensor<?x128xbf16>) -> (tensor<?x128xbf16>, tensor<?x?x192xbf16>)
      k3.yield %result, %new_cache : tensor<?x128xbf16>, tensor<?x?x192xbf16>
    }
    return %r#0, %r#1 : tensor<?x128xbf16>, tensor<?x?x192xbf16>
}
