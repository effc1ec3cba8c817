// --k3-lower-kernels on an MLA attention of 4 heads with 64-wide values
// (latent 64 + rope 16, nope 16, bf16) for sm_90a: the split decode's
// combine for rounds of at least 8 tokens merges 16 tokens a block and
// projects them by W_UV on tensor cores: o_lat as hi + lo bf16 parts in
// shared memory (16 x 72 each, rows padded by 16 bytes), ldmatrix A
// fragments, W_UV's B fragments as packed bf16 pairs from global memory, two
// mma.sync a k step. K3C_MLA_COMBINE_MMA=0 (with K3C_MLA_QABS_MMA=0 below)
// keeps the FMA projection (8 tokens a block, o_lat in fp32).
// Those rounds take q_abs on tensor cores too: a block per (head, 64 latent
// columns, 64 tokens), the tokens' q_nope rows and W_UK's column slice staged
// in workgroup memory by cp.async (rows padded by 16 bytes), A fragments by
// ldmatrix, B fragments by ldmatrix.trans (W_UK's rows are k), scale q_abs
// stored in bf16 pairs for the core. K3C_MLA_QABS_STAGED=0: 16 tokens a
// block, A fragments as pairs of adjacent q columns and B fragments as pairs
// of adjacent W_UK rows straight from global memory; K3C_MLA_QABS_MMA=0
// keeps the FMA q_abs for every round.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s
// The multi-token combine's merge: a round of one split a token (P = 1, the
// short contexts of large batches) takes one load set (CW = 4 columns, two
// 8-byte loads) an item, other rounds eight splits' sets at once.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=MERGE
// W_UV's B words from one 16-byte load a row and 32 columns (a permuted
// reduction order: the merge stores o_lat's columns permuted to match), no
// 4-byte pair loads in the projection; K3C_MLA_COMBINE_WIDE_W=0: the pairs.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=WIDEW
// RUN: env K3C_MLA_COMBINE_WIDE_W=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PAIRW
// PAIRW: function(@k3_mla_attn_0000c0de_absorbed_combine_mma_t16)
// PAIRW: gpu.barrier
// PAIRW: vector.load {{.*}} : memref<320x64xbf16>, vector<2xbf16>
// PAIRW: nvvm.mma.sync
// WIDEW: function(@k3_mla_attn_0000c0de_absorbed_combine_mma_t16)
// WIDEW: gpu.barrier
// WIDEW-NOT: memref<320x64xbf16>, vector<2xbf16>
// WIDEW: vector.load {{.*}} {alignment = 16 : i64} : memref<320x64xbf16>, vector<8xbf16>
// WIDEW-NEXT: vector.bitcast {{.*}} : vector<8xbf16> to vector<4xi32>
// WIDEW-NOT: memref<320x64xbf16>, vector<2xbf16>
// WIDEW: nvvm.mma.sync
// MERGE: function(@k3_mla_attn_0000c0de_absorbed_combine_mma_t16)
// MERGE: arith.cmpi eq, %{{.*}}, %c1{{[_0-9]*}} : index
// MERGE-NEXT: scf.if
// MERGE: scf.for {{.*}} step %c1{{[_0-9]*}} iter_args
// MERGE-COUNT-2: vector.load {{.*}} : memref<256x264xf32>, vector<2xf32>
// MERGE-NOT: vector.load {{.*}} : memref<256x264xf32>
// MERGE: } else {
// MERGE: scf.for {{.*}} step %c8{{[_0-9]*}} iter_args
// MERGE-COUNT-16: vector.load {{.*}} : memref<256x264xf32>, vector<2xf32>
// (the append in its own launch: K3C_MLA_FUSE_APPEND_STAGED=0; test/Lowering/mla-decode-wgt-knobs.mlir
// checks the staged launch with the append's blocks)
// RUN: env K3C_MLA_FUSE_APPEND_STAGED=0 K3C_MLA_QABS_EARLY_W=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=QABS
// RUN: env K3C_MLA_QABS_STAGED=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=QT16
// RUN: env K3C_MLA_QABS_MMA=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=QFMA
// QFMA: function(@k3_mla_attn_0000c0de_absorbed_qabs)
// QFMA-NOT: absorbed_qabs_mma
// Rounds of 8+ tokens on the tensor cores (K3C_MLA_QABS_WIDE_MAX, default
// 7: the wide form for 1..7 tokens; 8: also for 8; 0 or 9: an error).
// RUN: env K3C_MLA_QABS_WIDE_MAX=8 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=WMAX8
// WMAX8: arith.cmpi ult, %{{.*}}, %c9{{[_0-9]*}} :
// WMAX8-NEXT: scf.if
// WMAX8: function(@k3_mla_attn_0000c0de_absorbed_qabs_wide_t8
// RUN: env K3C_MLA_QABS_WIDE_MAX=9 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=WMAX9
// WMAX9: K3C_MLA_QABS_WIDE_MAX must be 1..8, got 9
// QABS: arith.cmpi ult, %[[TC:[0-9]+]], %c8 : index
// QABS-NEXT: scf.if
// QABS: arith.cmpi eq, %[[TC]], %c1{{[_0-9]*}} :
// QABS: function(@k3_mla_attn_0000c0de_absorbed_qabs)
// QABS: } else {
// QABS: threads({{.*}} = %c128{{[_0-9]*}}, {{.*}}) module(@k3_mla_attn_0000c0de_absorbed_qabs_mma_t64)
// QABS: nvgpu.device_async_copy {{.*}} : memref<?x128xbf16> to memref<64x24xbf16, #gpu.address_space<workgroup>>
// QABS: nvgpu.device_async_copy {{.*}} : memref<320x64xbf16> to memref<16x72xbf16, #gpu.address_space<workgroup>>
// QABS: nvvm.cp.async.wait.group 0
// QABS: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x24xbf16
// QABS: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<16x72xbf16
// QABS: nvvm.mma.sync
// QABS: vector.store {{.*}} : memref<512x80xbf16>, vector<2xbf16>
// QABS-NOT: absorbed_qabs_mma_t16
// The staged tiles' rope columns: by default the first column block's
// threads take every (token, rope column), a scalar load and store each;
// K3C_MLA_QABS_ROPE_SPREAD=1 spreads 8-column chunks over the column blocks
// (here one block, R = 64: both chunks of the 16 rope columns), a thread
// per (token, chunk), one 16-byte load and store.
// QABS-NOT: vector<8xbf16>
// QABS: } else {
// RUN: env K3C_MLA_FUSE_APPEND_STAGED=0 K3C_MLA_QABS_EARLY_W=0 K3C_MLA_QABS_ROPE_SPREAD=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ROPE
// ROPE: module(@k3_mla_attn_0000c0de_absorbed_qabs_mma_t64)
// ROPE: nvvm.mma.sync
// ROPE: arith.divui %{{.*}}, %c64{{[_0-9]*}} : index
// ROPE: scf.for
// ROPE: vector.load {{.*}} : memref<?x128xbf16>, vector<8xbf16>
// ROPE: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// ROPE-NEXT: vector.store {{.*}} : memref<512x80xbf16>, vector<8xbf16>
// ROPE: gpu.terminator
// QT16: function(@k3_mla_attn_0000c0de_absorbed_qabs_mma_t16)
// QT16: vector.load {{.*}} : memref<?x128xbf16>, vector<2xbf16>
// QT16: memref.load {{.*}} : memref<320x64xbf16>
// QT16: vector.from_elements {{.*}} : vector<2xbf16>
// QT16: nvvm.mma.sync
// QT16: memref.store {{.*}} : memref<512x80xbf16>
// QT16-NOT: absorbed_qabs_mma_t64
// Rounds of up to 8 tokens (decode of a few sequences) take q_abs in the
// wide form (one-token rounds their own kernel): a block per (head, 64
// latent columns, 8 tokens), 16 row groups
// x 8 16-byte column chunks a block, each thread's W_UK rows loaded at once,
// the row groups' sums added in order through workgroup memory (tokens x 16
// row groups x 66 words: column c at c + c / 32, so that a warp's 32 stores
// hit 32 banks; K3C_MLA_QABS_PAD=0 the unpadded 16 x tokens x 64);
// K3C_MLA_QABS_WIDE=0 keeps the FMA form there. The one-token rounds'
// combine takes a block per (head, 32 output rows), 8 lanes a W_UV row: the
// row's 16-byte loads (volatile: they stay) before the block's own wait for
// the grids ahead (the mma.sync core ahead marks its launch
// k3.early_dependents), then (with K3C_MLA_COMBINE_WEIGHTS=0, the online
// merge; the default since session 61 forms the split weights first:
// mla-decode-cluster.mlir, CW) every split's (M, L) and partial pair as
// 8-byte loads in rounds of 8 (online rescale), o_lat through workgroup
// [1, 64], the lanes' products summed by shuffles; rounds of 2-7 tokens keep
// the block a (token, head).
// RUN: env K3C_MLA_COMBINE_WEIGHTS=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=WIDE
// RUN: env K3C_MLA_QABS_PAD=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOPAD
// NOPAD: function(@k3_mla_attn_0000c0de_absorbed_qabs_wide_t1_append) workgroup(%{{.*}} : memref<1024xf32, #gpu.address_space<workgroup>>)
// NOPAD: function(@k3_mla_attn_0000c0de_absorbed_qabs_wide_t8_append) workgroup(%{{.*}} : memref<8192xf32, #gpu.address_space<workgroup>>)
// WIDE: arith.cmpi eq
// WIDE: threads({{.*}} = %c128{{[_0-9]*}}, {{.*}}) module(@k3_mla_attn_0000c0de_absorbed_qabs_wide_t1_append) function(@k3_mla_attn_0000c0de_absorbed_qabs_wide_t1_append) workgroup(%{{.*}} : memref<1056xf32, #gpu.address_space<workgroup>>)
// WIDE: } else {
// WIDE: arith.cmpi ule
// WIDE: threads({{.*}} = %c128{{[_0-9]*}}, {{.*}}) module(@k3_mla_attn_0000c0de_absorbed_qabs_wide_t8_append) function(@k3_mla_attn_0000c0de_absorbed_qabs_wide_t8_append) workgroup(%{{.*}} : memref<8448xf32, #gpu.address_space<workgroup>>)
// WIDE: vector.load {{.*}} : memref<320x64xbf16>, vector<8xbf16>
// WIDE: gpu.barrier
// WIDE: } else {
// WIDE: function(@k3_mla_attn_0000c0de_absorbed_qabs)
// WIDE: function(@k3_mla_attn_0000c0de_absorbed_split_mma_h16_n64)
// WIDE: } {k3.early_dependents
// WIDE: arith.cmpi eq, %{{.*}}, %c1{{[_0-9]*}} : index
// WIDE-NEXT: scf.if
// WIDE: function(@k3_mla_attn_0000c0de_absorbed_combine_rows32) workgroup(%{{.*}} : memref<1x64xf32, #gpu.address_space<workgroup>>)
// WIDE: llvm.load volatile {{.*}} : !llvm.ptr<1> -> vector<8xbf16>
// WIDE-NOT: vector.load
// WIDE: nvvm.griddepcontrol wait
// WIDE: scf.for
// WIDE-COUNT-16: vector.load {{.*}} : memref<256x264xf32>, vector<2xf32>
// WIDE: math.exp
// WIDE: gpu.barrier
// WIDE: gpu.shuffle xor
// WIDE: gpu.shuffle xor
// WIDE: gpu.shuffle xor
// WIDE-NOT: gpu.shuffle
// WIDE: memref.store {{.*}} : memref<?x256xbf16>
// WIDE: } {k3.min_blocks_per_sm = 3 : i32, k3.own_grid_wait}
// WIDE: } else {
// WIDE: function(@k3_mla_attn_0000c0de_absorbed_combine) workgroup(%{{.*}} : memref<1x64xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<3x32xf32, #gpu.address_space<workgroup>>)
// RUN: env K3C_MLA_COMBINE_EARLY=0 K3C_MLA_DECODE_EARLY_TILES=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=LATE
// LATE-NOT: k3.early_dependents
// LATE: function(@k3_mla_attn_0000c0de_absorbed_combine_rows32)
// LATE: } {k3.min_blocks_per_sm = 3 : i32, k3.own_grid_wait}
// K3C_MLA_COMBINE_ROWS=0 keeps the block a head: warp 0 forms the split
// weights (f, live, l f: workgroup [3, 32]) with a warp max, a thread per
// latent column merges, and the projection (K3C_MLA_COMBINE_ROW_SPLIT blocks
// a head, a divisor of dv / 32 = 2 here).
// RUN: env K3C_MLA_COMBINE_ROWS=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=HEADC
// HEADC-NOT: absorbed_combine_rows
// HEADC: function(@k3_mla_attn_0000c0de_absorbed_combine) workgroup(%{{.*}} : memref<1x64xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<3x32xf32, #gpu.address_space<workgroup>>)
// HEADC: gpu.shuffle xor
// HEADC: gpu.barrier
// HEADC: vector.load {{.*}} : memref<320x64xbf16>, vector<8xbf16>
// Decode launches of at most 7 tokens (K3C_MLA_QABS_WIDE_MAX; one round, q_abs in the wide form)
// append the new tokens' latents in extra blocks of that q_abs launch
// (blocks past the 4 heads, a warp a token: the RMSNorm's square root inside it);
// larger launches keep the append's own launch where the staged q_abs does
// not take it (here K3C_MLA_FUSE_APPEND_STAGED=0: every larger launch;
// K3C_MLA_FUSE_APPEND=0 keeps it for every launch).
// RUN: env K3C_MLA_FUSE_APPEND_STAGED=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=FUSE
// FUSE: arith.cmpi ult, %c7{{[_0-9]*}}, %dim
// FUSE-NEXT: scf.if
// FUSE: module(@k3_mla_attn_0000c0de_append)
// FUSE: module(@k3_mla_attn_0000c0de_absorbed_qabs_wide_t1_append)
// FUSE: math.sqrt
// FUSE: module(@k3_mla_attn_0000c0de_absorbed_qabs_wide_t8_append)
// FUSE: math.sqrt
// FUSE: module(@k3_mla_attn_0000c0de_absorbed_qabs)
// FUSE-NOT: math.sqrt
// FUSE: module(@k3_mla_attn_0000c0de_absorbed_split
// RUN: env K3C_MLA_FUSE_APPEND=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOFUSE
// NOFUSE-NOT: qabs_wide_t1_append
// NOFUSE: module(@k3_mla_attn_0000c0de_append)
// NOFUSE: module(@k3_mla_attn_0000c0de_absorbed_qabs_wide_t1)
// RUN: env K3C_MLA_QABS_WIDE=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOWIDE
// NOWIDE-NOT: absorbed_qabs_wide
// The split weights of the multi-token rounds: ceil(132 SMs / 8 tokens) =
// 17 splits at most ([16, 17 + 1] and [16, 17] above). K3C_MLA_DECODE_SPLITS
// (splits of a token's positions, 1..128, default 32) sizes the per-token
// combine's weights ([3, 66]: a lane for splits lane + 32 k).
// RUN: env K3C_MLA_COMBINE_ROWS=0 K3C_MLA_DECODE_SPLITS=66 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SPLITS
// SPLITS: function(@k3_mla_attn_0000c0de_absorbed_combine) workgroup(%{{.*}} : memref<1x64xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<3x66xf32, #gpu.address_space<workgroup>>)
// RUN: env K3C_MLA_DECODE_SPLITS=129 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=SPLITS129
// SPLITS129: K3C_MLA_DECODE_SPLITS must be 1..128, got 129
// RUN: env K3C_MLA_COMBINE_ROWS=0 K3C_MLA_COMBINE_ROW_SPLIT=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ROWS2
// ROWS2: function(@k3_mla_attn_0000c0de_absorbed_combine)
// RUN: env K3C_MLA_COMBINE_ROWS=0 K3C_MLA_COMBINE_ROW_SPLIT=3 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=ROWS3
// ROWS3: K3C_MLA_COMBINE_ROW_SPLIT must divide 2, got 3
// RUN: env K3C_MLA_COMBINE_MMA=0 K3C_MLA_QABS_MMA=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=FMA

// CHECK-LABEL: func.func @k3_mla_attn_0000c0de(
// CHECK: function(@k3_mla_attn_0000c0de_absorbed_combine_rows32)
// CHECK: } else {
// CHECK: function(@k3_mla_attn_0000c0de_absorbed_combine_mma_t16) workgroup(%{{.*}} : memref<16x72xbf16, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x72xbf16, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x18xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x17xf32, #gpu.address_space<workgroup>>)
// CHECK: gpu.barrier
// CHECK: vector.load {{.*}} : memref<320x64xbf16>, vector<8xbf16>
// CHECK: nvgpu.ldmatrix {{.*}}transpose = false
// CHECK: nvvm.mma.sync
// CHECK: nvvm.mma.sync
// CHECK: arith.negf
// CHECK: memref.store {{.*}} : memref<?x256xbf16>

// FMA-NOT: absorbed_qabs_mma
// FMA: function(@k3_mla_attn_0000c0de_absorbed_combine_t8) workgroup(%{{.*}} : memref<8x64xf32, #gpu.address_space<workgroup>>
// FMA-NOT: absorbed_combine_mma

func.func @mla_attn(%a0: tensor<?x128xbf16>, %a1: tensor<?x80xbf16>, %a2: tensor<64xbf16>, %a3: tensor<?x?x80xbf16>, %a4: tensor<?xi32>, %a5: tensor<?xi32>, %a6: tensor<320x64xbf16>, %a7: tensor<?x256xbf16>) -> (tensor<?x256xbf16>, tensor<?x?x80xbf16>) {
    %r:2 = k3.kernel "k3_mla_attn_0000c0de" family "mla_attn" (%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7) {bytes_per_token = 696 : i64, flops_per_token = 8192 : i64, weight_bytes = 40960 : i64} : (tensor<?x128xbf16>, tensor<?x80xbf16>, tensor<64xbf16>, tensor<?x?x80xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<320x64xbf16>, tensor<?x256xbf16>) -> (tensor<?x256xbf16>, tensor<?x?x80xbf16>) {
    ^bb0(%arg401: tensor<?x128xbf16>, %arg402: tensor<?x80xbf16>, %arg403: tensor<64xbf16>, %arg404: tensor<?x?x80xbf16>, %arg405: tensor<?xi32>, %arg406: tensor<?xi32>, %arg407: tensor<320x64xbf16>, %arg408: tensor<?x256xbf16>):
      %result, %new_cache = k3.mla_attention %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 gate(%arg408) {norm_eps = 9.9999999999999995E-7 : f64, num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, softmax_scale = 0.17677669529663687 : f64, v_head_dim = 64 : i64} : (tensor<?x128xbf16>, tensor<?x80xbf16>, tensor<64xbf16>, tensor<?x?x80xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<320x64xbf16>, tensor<?x256xbf16>) -> (tensor<?x256xbf16>, tensor<?x?x80xbf16>)
      k3.yield %result, %new_cache : tensor<?x256xbf16>, tensor<?x?x80xbf16>
    }
    return %r#0, %r#1 : tensor<?x256xbf16>, tensor<?x?x80xbf16>
}
