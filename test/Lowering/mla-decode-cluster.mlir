// --k3-lower-kernels on an MLA attention of 96 heads (latent 128 + rope 64,
// nope 16, v 64, bf16) for sm_90a with the transposed decode core
// (K3C_MLA_DECODE_WGMMA=4, the default): two groups of 48 heads (no padded
// rows), with K3C_MLA_DECODE_CLUSTER=1 the two blocks of a (token, split) as
// one thread block cluster.
// Shared memory: q_abs^T (3 x 48 rows x 128 bytes), the two-slot ring
// (2 x 3 x 8 KB), two P^T buffers (2 x 48 x 128), two alpha rows (2 x 48
// f32), the 4 warps' maxima (4 x 48 f32), 4 mbarriers, the alignment slack:
// 82080 bytes.
//
// Clustered (K3C_MLA_DECODE_CLUSTER=1): the launch carries a cluster of 2 (the grid's
// head groups vary fastest), the empty mbarriers count the cluster's 16
// warps, a cluster barrier follows their initialization, each block issues
// its share of a tile's boxes (block g the boxes m with m % 2 = g) with TMA
// multicast to both (mask 3), each warp's release arrives on both blocks'
// empty barriers (mapa, cluster scope), and a cluster barrier ends the
// block. S^T is wgmma.m64n48k16 (12 k steps), O^T += V^T P^T two tiles of
// wgmma.m64n48k16 with A MN-major in each warpgroup.
// RUN: env K3C_MLA_DECODE_CLUSTER=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s
//
// By default (K3C_MLA_DECODE_CLUSTER=0): the same core without the cluster
// (each block copies the whole tile itself; a warp's release is one local
// arrival); other values are refused.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SOLO
// RUN: env K3C_MLA_DECODE_WGMMA=4 K3C_MLA_DECODE_CLUSTER=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SOLO
// RUN: env K3C_MLA_DECODE_WGMMA=4 K3C_MLA_DECODE_CLUSTER=2 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BAD
//
// K3C_MLA_COMBINE_CLUSTER=2 (opt-in): the multi-token combine (rounds of 8+
// tokens, tensor cores) as clusters of 2 blocks a (head, 16 tokens): block k
// merges latent columns [64 k, 64 k + 64) of the round's splits into o_lat
// (hi / lo bf16), projects them (one 64-column loop: 4 k steps of two
// mma.sync each, hi and lo) into its [16, 64] fp32 products, a cluster
// barrier, then sums the 2 blocks' products of its 32 output columns through
// distributed shared memory (mapa to block 0, then 1) and stores them gated;
// a cluster barrier ends the block. 4 would need latent 256; other values
// are refused.
// RUN: env K3C_MLA_COMBINE_CLUSTER=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=COMB
// RUN: env K3C_MLA_COMBINE_CLUSTER=4 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=COMB4
// RUN: env K3C_MLA_COMBINE_CLUSTER=3 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=COMBBAD
//
// K3C_MLA_COMBINE_ROWS_CLUSTER=1 (opt-in): the one-token (row-sliced)
// combine's 2 blocks of a head (32 of its 64 output rows each) as one
// cluster: block k merges latent columns [64 k, 64 k + 64) of the splits,
// 8 lanes a column pair (each a share of the splits, 4 a round; merged by
// xor shuffles 1, 2, 4), a cluster barrier, the other block's slice read
// through distributed shared memory, and a cluster barrier ends the block.
// Its rounds (K3C_MLA_COMBINE_ROWS_CLUSTER_ROUNDS) must be 1..8.
// RUN: env K3C_MLA_COMBINE_ROWS_CLUSTER=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ROWC
// RUN: env K3C_MLA_COMBINE_ROWS_CLUSTER=1 K3C_MLA_COMBINE_ROWS_CLUSTER_ROUNDS=9 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=ROWCBAD
//
// K3C_MLA_COMBINE_TRIM=1 (opt-in): before its grid wait (after its W_UV
// loads) the one-token combine finds its sequence (a warp scan of seq_lens,
// 32 at a time) and reads its cached length (step inputs no kernel writes);
// after the wait it merges only the splits that hold positions (the merge
// loop keeps its bound P, each round of 8 splits past that count skipped
// by a branch); without it the loop runs over all P splits straight after
// the wait (the NOTRIM lines: the online merge, K3C_MLA_COMBINE_WEIGHTS=0). Values
// other than 0 and 1 are refused.
// RUN: env K3C_MLA_COMBINE_TRIM=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=TRIM
// RUN: env K3C_MLA_COMBINE_WEIGHTS=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOTRIM
// RUN: env K3C_MLA_COMBINE_TRIM=2 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=TRIMBAD
// K3C_MLA_COMBINE_WEIGHTS (the default since session 61; =0 the online
// merge, the NOTRIM lines above): after the wait warp 0
// loads every split's (M, L) at once (4 a lane: up to 128 splits), takes
// their maximum and sum by shuffles and stores each split's weight
// e^(M_s - M) / L into shared memory, while each thread's first 12 partial
// pairs are in flight; after a barrier the pairs are summed with the
// weights, 12 splits' loads a round (K3C_MLA_COMBINE_WEIGHTS_ROUNDS, 1..32;
// other values refused).
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=CW
// RUN: env K3C_MLA_COMBINE_WEIGHTS_ROUNDS=33 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=CWBAD
// TRIM: module(@k3_mla_attn_0000cafe_absorbed_combine_rows32)
// TRIM: llvm.load volatile
// TRIM: scf.for {{.*}} step %c32{{[_0-9]*}} iter_args
// TRIM: memref.load {{.*}} : memref<?xi32>
// TRIM: arith.minui
// TRIM: nvvm.griddepcontrol  wait
// TRIM: scf.for {{.*}} step %c8{{[_0-9]*}} iter_args
// TRIM-NEXT: arith.cmpi ult
// TRIM-NEXT: scf.if %{{.*}} -> (f32, f32, f32, f32)
// NOTRIM: module(@k3_mla_attn_0000cafe_absorbed_combine_rows32)
// NOTRIM: nvvm.griddepcontrol  wait
// NOTRIM-NOT: step %c32{{[_0-9]*}} iter_args
// NOTRIM: scf.for {{.*}} step %c8{{[_0-9]*}} iter_args
// TRIMBAD: K3C_MLA_COMBINE_TRIM must be 0 or 1, got '2'
// CW: module(@k3_mla_attn_0000cafe_absorbed_combine_rows32)
// CW: nvvm.griddepcontrol  wait
// CW-COUNT-5: gpu.shuffle  xor
// CW-COUNT-4: math.exp
// CW-COUNT-5: gpu.shuffle  xor
// CW: memref.store {{.*}} : memref<128xf32, #gpu.address_space<workgroup>>
// CW: gpu.barrier
// CW: scf.for {{.*}} step %c12{{[_0-9]*}} iter_args({{.*}}) -> (f32, f32)
// CW: gpu.barrier
// CWBAD: k3c: K3C_MLA_COMBINE_WEIGHTS_ROUNDS must be 1..32, got 33
//
// K3C_MLA_COMBINE_STAGE_W=N (16 by default): rounds of 8..N tokens take the
// tensor-core combine whose blocks copy their head's W_UV rows ([64, 128]
// here, rows 160 elements apart) into dynamic shared memory by cp.async
// (4 copies a thread, one group) before their grid wait, wait for them
// after the merge, and read the projection's 16-byte B vectors there;
// larger rounds keep the unstaged kernel; 0 turns it off; values outside
// 0..64 are refused.
// RUN: env K3C_MLA_COMBINE_STAGE_W=16 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SW
// RUN: env K3C_MLA_COMBINE_STAGE_W=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SW0
// RUN: env K3C_MLA_COMBINE_STAGE_W=129 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=SWBAD
//
// K3C_MLA_ROUND_TOKENS (128 by default since session 60, 64 before): the
// split decode's host loop takes rounds of 128 tokens (one q_abs, core and
// combine launch for up to 128 sequences), its q_abs scratch 128 rows
// ([128, H cd] f32 and [128 H, cd] bf16), the append in the staged q_abs
// launch up to 128 tokens; =64 rounds of 64; values other than 64, 128 and
// 256 are refused.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ROUND
// RUN: env K3C_MLA_ROUND_TOKENS=64 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ROUND64
// RUN: env K3C_MLA_ROUND_TOKENS=96 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=ROUNDBAD
//
// The seesaw core (K3C_MLA_DECODE_WGMMA=2) computes 64-head groups: two
// groups of 64 rows for the 96 heads.
// RUN: env K3C_MLA_DECODE_WGMMA=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SS

// CHECK-LABEL: func.func @k3_mla_attn_0000cafe(
// CHECK: gpu.launch clusters({{.*}}) in ({{.*}} = %c2{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}}) blocks
// CHECK-SAME: dynamic_shared_memory_size %c82080_i32 module(@k3_mla_attn_0000cafe_absorbed_split_wgt_h48_n64_c2)
// CHECK-COUNT-2: nvvm.mbarrier.init {{.*}}, %c1_i32
// CHECK-COUNT-2: nvvm.mbarrier.init {{.*}}, %c16_i32
// CHECK: nvvm.fence.mbarrier.init
// CHECK: gpu.barrier
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK: nvvm.cluster.wait {aligned}
// CHECK: nvvm.mbarrier.arrive.expect_tx {{.*}}, %c24576_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask = %c3_i16
// CHECK: scf.for
// CHECK: nvvm.mapa {{.*}}, %c0_i32
// CHECK: nvvm.mbarrier.arrive {{.*}} {scope = #nvvm.mem_scope<cluster>} : !llvm.ptr<7>
// CHECK: nvvm.mapa {{.*}}, %c1_i32
// CHECK: nvvm.mbarrier.arrive {{.*}} {scope = #nvvm.mem_scope<cluster>} : !llvm.ptr<7>
// CHECK-COUNT-12: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 48, k = 16>, D[<f32>, <{{zero|one}}>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 48, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK: nvvm.cluster.wait {aligned}
// CHECK: function(@k3_mla_attn_0000cafe_absorbed_combine

// SOLO-LABEL: func.func @k3_mla_attn_0000cafe(
// SOLO-NOT: clusters(
// SOLO: module(@k3_mla_attn_0000cafe_absorbed_split_wgt_h48_n64)
// SOLO-COUNT-2: nvvm.mbarrier.init {{.*}}, %c8_i32
// SOLO-NOT: nvvm.cluster.arrive
// SOLO-NOT: multicast_mask
// SOLO-NOT: nvvm.mapa
// SOLO: function(@k3_mla_attn_0000cafe_absorbed_combine

// BAD: K3C_MLA_DECODE_CLUSTER must be 0 or 1, got '2'

// SS: module(@k3_mla_attn_0000cafe_absorbed_split_wgss_h64_n64)
// SS-NOT: _c2)
// SS: module(@k3_mla_attn_0000cafe_absorbed_combine_mma_t16)

// COMB: gpu.launch clusters({{.*}}) in ({{.*}} = %c2{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}}) blocks
// COMB-SAME: module(@k3_mla_attn_0000cafe_absorbed_combine_mma_t16_c2)
// COMB: scf.for {{.*}} step %c64
// COMB-COUNT-8: nvvm.mma.sync
// COMB: memref.store {{.*}} : memref<16x72xf32, #gpu.address_space<workgroup>>
// COMB: nvvm.cluster.arrive {aligned}
// COMB-NEXT: nvvm.cluster.wait {aligned}
// COMB: nvvm.mapa {{.*}}, %c0_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// COMB-NEXT: llvm.load {{.*}} : !llvm.ptr<7> -> f32
// COMB: nvvm.mapa {{.*}}, %c1_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// COMB-NEXT: llvm.load {{.*}} : !llvm.ptr<7> -> f32
// COMB: nvvm.cluster.arrive {aligned}
// COMB-NEXT: nvvm.cluster.wait {aligned}

// COMB4-NOT: absorbed_combine_mma_t16_c
// COMB4: module(@k3_mla_attn_0000cafe_absorbed_combine_mma_t16)

// COMBBAD: K3C_MLA_COMBINE_CLUSTER must be 0, 1, 2 or 4, got 3

// ROWC-LABEL: func.func @k3_mla_attn_0000cafe(
// ROWC: gpu.launch clusters({{.*}}) in ({{.*}} = %c2{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}}) blocks
// ROWC-SAME: module(@k3_mla_attn_0000cafe_absorbed_combine_rows32_c)
// ROWC: nvvm.griddepcontrol wait
// ROWC: gpu.shuffle xor {{.*}}, %c1_i32
// ROWC: gpu.shuffle xor {{.*}}, %c2_i32
// ROWC: gpu.shuffle xor {{.*}}, %c4_i32
// ROWC: nvvm.cluster.arrive {aligned}
// ROWC-NEXT: nvvm.cluster.wait {aligned}
// ROWC: nvvm.mapa {{.*}} : !llvm.ptr<3> -> !llvm.ptr<7>
// ROWC: llvm.load {{.*}} : !llvm.ptr<7> -> f32
// ROWC: nvvm.cluster.arrive {aligned}
// ROWC-NEXT: nvvm.cluster.wait {aligned}
// ROWC-NEXT: gpu.terminator
// ROWCBAD: K3C_MLA_COMBINE_ROWS_CLUSTER_ROUNDS must be 1..8, got 9

// SW: arith.cmpi ule, {{.*}}, %c16 : index
// SW: dynamic_shared_memory_size {{.*}} module(@k3_mla_attn_0000cafe_absorbed_combine_mma_t16_sw)
// SW-COUNT-4: nvgpu.device_async_copy {{.*}} to memref<64x160xbf16, #gpu.address_space<workgroup>>
// SW-NEXT: nvgpu.device_async_create_group
// SW-NEXT: nvvm.griddepcontrol wait
// SW: nvvm.cp.async.wait.group 0
// SW-NEXT: gpu.barrier
// SW: vector.load {{.*}} : memref<64x160xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// SW: nvvm.mma.sync
// SW: module(@k3_mla_attn_0000cafe_absorbed_combine_mma_t16)
// SW0-NOT: absorbed_combine_mma_t16_sw
// SWBAD: K3C_MLA_COMBINE_STAGE_W must be 0..128 (tokens), got 129
// ROUND: func.func @k3_mla_attn_0000cafe({{.*}} memref<128x18432xf32>, {{.*}} memref<12288x192xbf16>)
// ROUND: arith.cmpi ule, %dim{{[_0-9]*}}, %c128{{[_0-9]*}} : index
// ROUND: scf.for %{{.*}} = %c0{{[_0-9]*}} to %dim{{[_0-9]*}} step %c128{{[_0-9]*}} {
// ROUND64: func.func @k3_mla_attn_0000cafe({{.*}} memref<64x18432xf32>, {{.*}} memref<6144x192xbf16>)
// ROUND64: arith.cmpi ule, %dim{{[_0-9]*}}, %c64{{[_0-9]*}} : index
// ROUND64: scf.for %{{.*}} = %c0{{[_0-9]*}} to %dim{{[_0-9]*}} step %c64{{[_0-9]*}} {
// ROUNDBAD: K3C_MLA_ROUND_TOKENS must be 64, 128 or 256, got 96

func.func @mla_attn(%a0: tensor<?x7680xbf16>, %a1: tensor<?x192xbf16>, %a2: tensor<128xbf16>, %a3: tensor<?x?x192xbf16>, %a4: tensor<?xi32>, %a5: tensor<?xi32>, %a6: tensor<7680x128xbf16>, %a7: tensor<?x6144xbf16>) -> (tensor<?x6144xbf16>, tensor<?x?x192xbf16>) {
    %r:2 = k3.kernel "k3_mla_attn_0000cafe" family "mla_attn" (%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7) {bytes_per_token = 696 : i64, flops_per_token = 8192 : i64, weight_bytes = 786688 : i64} : (tensor<?x7680xbf16>, tensor<?x192xbf16>, tensor<128xbf16>, tensor<?x?x192xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<7680x128xbf16>, tensor<?x6144xbf16>) -> (tensor<?x6144xbf16>, tensor<?x?x192xbf16>) {
    ^bb0(%arg401: tensor<?x7680xbf16>, %arg402: tensor<?x192xbf16>, %arg403: tensor<128xbf16>, %arg404: tensor<?x?x192xbf16>, %arg405: tensor<?xi32>, %arg406: tensor<?xi32>, %arg407: tensor<7680x128xbf16>, %arg408: tensor<?x6144xbf16>):
      %result, %new_cache = k3.mla_attention %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 gate(%arg408) {norm_eps = 9.9999999999999995E-7 : f64, num_heads = 96 : i64, qk_nope_head_dim = 16 : i64, softmax_scale = 0.17677669529663687 : f64, v_head_dim = 64 : i64} : (tensor<?x7680xbf16>, tensor<?x192xbf16>, tensor<128xbf16>, tensor<?x?x192xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<7680x128xbf16>, tensor<?x6144xbf16>) -> (tensor<?x6144xbf16>, tensor<?x?x192xbf16>)
      k3.yield %result, %new_cache : tensor<?x6144xbf16>, tensor<?x?x192xbf16>
    }
    return %r#0, %r#1 : tensor<?x6144xbf16>, tensor<?x?x192xbf16>
}
