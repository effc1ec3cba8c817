// --k3-lower-kernels on an MLA attention of 16 heads with latent 256 (rope
// 64, nope 16, v 64, bf16) for sm_90a: the transposed decode core
// (absorbed_split_wgt_h16_n64), whose O^T = V^T P^T spans 4 latent tiles of
// 64 rows. By default warpgroup 0 (which also scores S^T and forms P^T)
// accumulates tiles 0-1 and warpgroup 1 tiles 2-3: two tiles of
// wgmma.m64n16k16 each (4 k steps a tile), 16 partial stores each (and the
// empty split's 16 a thread, one form for both); here with
// K3C_MLA_DECODE_STMATRIX=0, P^T by one 2-byte store an element, and
// K3C_MLA_PARTIAL_BULK=0, the partials by element stores.
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_STMATRIX=0 K3C_MLA_PARTIAL_BULK=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=HALF
//
// K3C_MLA_DECODE_WG0_TILES=1: warpgroup 0 one tile, warpgroup 1 three (its
// rescale and P V issue moved off the scoring warpgroup), each storing its
// own tiles' partials (8 and 24; the empty split's per warpgroup, 8 and
// 24; K3C_MLA_PARTIAL_BULK=0: the element stores, counted); values outside
// 0..3 are refused.
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_WG0_TILES=1 K3C_MLA_PARTIAL_BULK=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ONE
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_WG0_TILES=4 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BAD
//
// By default (K3C_MLA_DECODE_STMATRIX=1) the scoring warpgroup writes P^T
// (16 heads x 64 positions, bf16) by one transposed stmatrix.x4 a warp (four
// 8x8 matrices: 8 heads x 8 positions each) from cvt.rn.bf16x2 pairs
// instead of 8 two-byte stores a thread (=0, HALF above: no stmatrix);
// other values are refused.
// RUN: env K3C_MLA_DECODE_WG_FROM=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=STM
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_STMATRIX=2 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=STMBAD
//
// By default (K3C_MLA_FUSE_APPEND_STAGED=1) a decode launch of one round too
// long for the wide q_abs (7 < T <= 64 tokens) appends its tokens in extra
// blocks of the staged tensor-core q_abs launch (absorbed_qabs_mma_t64_append:
// blocks past the 16 heads, from the first column and token block, a warp
// a token), so the append's own launch runs only outside both fused ranges
// (7 < T and not 8 <= T <= 128, the round); with =0 that launch takes every T > 7 (no
// _append staged kernel). Other values are refused.
// RUN: env K3C_MLA_DECODE_WG_FROM=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=FA
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_FUSE_APPEND_STAGED=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=FA0
//
// K3C_MLA_QABS_EARLY_W=1 (the default since session 52): the staged q_abs tiles copy their W_UK
// slice (16 nope rows x 64 columns) before the kernel's own grid wait, the
// rows of q after it, one cp.async group; the append blocks wait first;
// other values are refused.
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_QABS_EARLY_W=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=QEW
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_QABS_EARLY_W=2 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=QEWBAD
//
// The partials by one bulk copy (the default since session 51;
// K3C_MLA_PARTIAL_BULK=0 the 4-byte stores): both warpgroups, past their
// last tile (named barrier 5), stage their partials in the ring as [16 heads,
// 256 + 2] fp32 (O, then M and L by warpgroup 0's first warp), and one thread
// writes the block's rows by one bulk copy after the async-proxy fence and a
// block barrier, waiting until the copy has read them; other values are
// refused.
// RUN: env K3C_MLA_DECODE_WG_FROM=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PB
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_PARTIAL_BULK=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PB0
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_PARTIAL_BULK=2 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=PBBAD
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_FUSE_APPEND_STAGED=2 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=FABAD
//
// By default (K3C_MLA_DECODE_EARLY_TILES=1, since session 52) the transposed
// core initializes its ring's mbarriers, issues tiles 0 and 1 (5 boxes each)
// where they hold only positions cached before the round, then waits for the
// grid ahead and copies q_abs^T; the tiles holding the round's rows go out
// after the wait. The one-token mma.sync core likewise copies its tile 0 (its
// own cp.async group) before its wait, q_abs and a fresh tile 0 after it. The
// q_abs launches ahead (wide and staged) trigger them early. With =0 (ET0,
// the combine's W_UV staging off too) neither: the core's wait is the one
// every kernel gets at its start. Other values are refused.
// RUN: env K3C_MLA_DECODE_WG_FROM=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ET
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_EARLY_TILES=0 K3C_MLA_COMBINE_STAGE_W=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ET0
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_EARLY_TILES=2 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=ETBAD
//
// Where the combine stages W_UV before its own wait (K3C_MLA_COMBINE_STAGE_W,
// 16 by default) the core triggers it right after its wait in launches of 8
// (K3C_MLA_COMBINE_TOKENS: the multi-token combine's first round) up to that
// many tokens (the rounds that take the staged combine), so those copies run
// beside the core; K3C_MLA_DECODE_EARLY_NEXT=0 keeps the trigger at the
// core's exit; other values are refused.
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_COMBINE_STAGE_W=16 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=EN
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_EARLY_NEXT=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=EN0
// With the transposed core for one-token rounds too
// (K3C_MLA_DECODE_WG_FROM=1), their row-sliced combine (W_UV loaded before
// its wait) is triggered early as well: one token, or 8..16 (the ENONE
// lines).
// RUN: env K3C_MLA_DECODE_WG_FROM=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ENONE
// K3C_MLA_DECODE_SPLIT_S=1 (opt-in): both warpgroups score, each S^T for
// half of the group's heads (here 16: two wgmma.m64n8k16 chains of 20 k
// steps in one code path, the heads' offset by warpgroup), its own maxima
// barrier (1 or 6), each P^T buffer rewritten after the other warpgroup's
// products (it arrives on 7 / 8 or 2 / 3, the writer syncs there), a
// partial tile zeroed by both (barrier 9), then every head's factors at
// barrier 4 and the latent half's O^T; the kernel's name ends in _ss.
// K3C_MLA_DECODE_SPLIT_S=2 with one-token rounds on this core
// (K3C_MLA_DECODE_WG_FROM=1; both the defaults since session 56): a
// host-side branch sends one-token rounds to the split-scoring kernel and
// the others to the unsplit one (the SPLIT2 lines). Other values are
// refused. (The lines above pin K3C_MLA_DECODE_WG_FROM=2: one-token rounds
// on the mma.sync core, as before session 56.)
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_SPLIT_S=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SPLIT
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SPLIT2
// RUN: env K3C_MLA_DECODE_SPLIT_S=3 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=SPLITBAD
// Without a staged combine (K3C_MLA_COMBINE_STAGE_W=0) no round triggers it
// early (the ENS0 lines); K3C_MLA_DECODE_EARLY_NEXT=1 then forces it in every round
// (the ENF lines: up to the 128 tokens a round holds).
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_COMBINE_STAGE_W=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ENS0
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_COMBINE_STAGE_W=0 K3C_MLA_DECODE_EARLY_NEXT=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ENF
// RUN: env K3C_MLA_DECODE_WG_FROM=2 K3C_MLA_DECODE_EARLY_NEXT=x not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=ENBAD
// K3C_MLA_PREFETCH_WUV (opt-in, session 61): the first token's core blocks
// ask the L2 for their share of W_UV (each head's 64 rows of 512 bytes: two
// 16 KB requests a head), =1 at the block's start, before its grid wait
// (PW1), =2 after it (PW2); by default none (PW0); other values are refused.
// RUN: env K3C_MLA_PREFETCH_WUV=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PW1
// RUN: env K3C_MLA_PREFETCH_WUV=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PW2
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PW0
// RUN: env K3C_MLA_PREFETCH_WUV=3 not k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=PWBAD

// HALF: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// HALF-COUNT-20: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 16, k = 16>, D[<f32>, <{{zero|one}}>], A[<bf16>, <one>, <row>]
// HALF-NOT: nvvm.stmatrix
// HALF: memref.store {{.*}} : memref<2x16x64xbf16
// HALF-NOT: nvvm.stmatrix
// HALF: "barrier.sync 4, 256;"
// HALF-COUNT-8: nvvm.wgmma.mma_async {{.*}}A[<bf16>, <one>, <col>]
// HALF-NOT: nvvm.wgmma.mma_async
// HALF: nvvm.wgmma.wait.group.sync.aligned 0
// HALF-COUNT-16: memref.store {{.*}} : memref<256x4128xf32
// HALF-NOT: memref.store {{.*}} : memref<256x4128xf32
// HALF: "barrier.sync 4, 256;"
// HALF: nvvm.mbarrier.try_wait.parity
// HALF-COUNT-8: nvvm.wgmma.mma_async {{.*}}A[<bf16>, <one>, <col>]
// HALF-NOT: nvvm.wgmma.mma_async
// HALF: nvvm.wgmma.wait.group.sync.aligned 0
// HALF-COUNT-32: memref.store {{.*}} : memref<256x4128xf32
// HALF: gpu.terminator

// ONE: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// ONE-COUNT-20: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 16, k = 16>, D[<f32>, <{{zero|one}}>], A[<bf16>, <one>, <row>]
// ONE: "barrier.sync 4, 256;"
// ONE-COUNT-4: nvvm.wgmma.mma_async {{.*}}A[<bf16>, <one>, <col>]
// ONE-NOT: nvvm.wgmma.mma_async
// ONE: nvvm.wgmma.wait.group.sync.aligned 0
// ONE-COUNT-8: memref.store {{.*}} : memref<256x4128xf32
// ONE-NOT: memref.store {{.*}} : memref<256x4128xf32
// ONE: "barrier.sync 4, 256;"
// ONE: nvvm.mbarrier.try_wait.parity
// ONE-COUNT-12: nvvm.wgmma.mma_async {{.*}}A[<bf16>, <one>, <col>]
// ONE-NOT: nvvm.wgmma.mma_async
// ONE: nvvm.wgmma.wait.group.sync.aligned 0
// ONE-COUNT-56: memref.store {{.*}} : memref<256x4128xf32
// ONE: gpu.terminator

// STM: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// STM: "barrier.sync 1, 128;"
// STM-COUNT-4: nvvm.convert.f32x2.to.bf16x2
// STM-NOT: memref.store {{.*}} : memref<2x16x64xbf16
// STM: nvvm.stmatrix {{.*}}layout = #nvvm.mma_layout<col>, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>} : !llvm.ptr<3>, i32, i32, i32, i32
// STM-NOT: nvvm.stmatrix
// STM: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// STM: "barrier.sync 4, 256;"
// STMBAD: K3C_MLA_DECODE_STMATRIX must be 0 or 1, got '2'

// FA: arith.cmpi ule, %{{.*}}, %c7 : index
// FA: %[[HI:.*]] = arith.cmpi ule, %{{.*}}, %c128{{.*}} : index
// FA: %[[LO:.*]] = arith.cmpi ule, %c8, %{{.*}} : index
// FA: %[[S:.*]] = arith.andi %[[LO]], %[[HI]] : i1
// FA: %[[W:.*]] = arith.cmpi ult, %c7{{.*}}, %{{.*}} : index
// FA: %[[NS:.*]] = arith.xori %[[S]], %true : i1
// FA: %[[U:.*]] = arith.andi %[[W]], %[[NS]] : i1
// FA: scf.if %[[U]] {
// FA: module(@k3_mla_attn_0000f00d_append)
// FA: module(@k3_mla_attn_0000f00d_absorbed_qabs_mma_t64_append)
// FA: arith.cmpi ult, %{{.*}}, %c16
// FA: nvgpu.ldmatrix
// FA: arith.muli %{{.*}}, %c4
// FA: gpu.terminator
// QEW: module(@k3_mla_attn_0000f00d_absorbed_qabs_mma_t64_append)
// QEW: nvgpu.device_async_copy {{.*}} to memref<16x72xbf16, #gpu.address_space<workgroup>>
// QEW-NEXT: nvvm.griddepcontrol wait
// QEW: nvgpu.device_async_copy {{.*}} to memref<64x24xbf16, #gpu.address_space<workgroup>>
// QEW-NEXT: nvgpu.device_async_create_group
// QEW-NEXT: nvvm.cp.async.wait.group 0
// QEW: } else {
// QEW-NEXT: nvvm.griddepcontrol wait
// QEW: gpu.terminator
// QEWBAD: K3C_MLA_QABS_EARLY_W must be 0 or 1, got '2'
// FA0: module(@k3_mla_attn_0000f00d_absorbed_qabs_mma_t64)
// FA0-NOT: absorbed_qabs_mma_t64_append
// FABAD: K3C_MLA_FUSE_APPEND_STAGED must be 0 or 1, got '2'

// PB: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// PB: "barrier.sync 5, 256;"
// PB-COUNT-16: memref.store {{.*}} : memref<16x258xf32, #gpu.address_space<workgroup>>
// PB: memref.store {{.*}}, %c256{{[_0-9]*}}] : memref<16x258xf32
// PB: memref.store {{.*}}, %c257{{[_0-9]*}}] : memref<16x258xf32
// PB: "barrier.sync 5, 256;"
// PB-COUNT-16: memref.store {{.*}} : memref<16x258xf32, #gpu.address_space<workgroup>>
// PB: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// PB-NEXT: gpu.barrier
// PB: nvvm.cp.async.bulk.global.shared.cta
// PB-NEXT: nvvm.cp.async.bulk.commit.group
// PB-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// PB: gpu.terminator
// PB0: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// PB0-NOT: nvvm.cp.async.bulk.global.shared.cta
// PB0: gpu.terminator
// PBBAD: K3C_MLA_PARTIAL_BULK must be 0 or 1, got '2'

// ET: module(@k3_mla_attn_0000f00d_absorbed_qabs_wide_t1_append)
// ET: } {k3.early_dependents
// ET: module(@k3_mla_attn_0000f00d_absorbed_qabs_wide_t8_append)
// ET: } {k3.early_dependents
// ET: module(@k3_mla_attn_0000f00d_absorbed_qabs_mma_t64_append)
// ET: } {k3.early_dependents
// ET: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// ET: nvvm.fence.mbarrier.init
// ET: gpu.barrier
// ET-COUNT-10: nvvm.cp.async.bulk.tensor.shared.cluster.global
// ET-NOT: nvgpu.device_async_copy
// ET: nvvm.griddepcontrol wait
// ET: nvgpu.device_async_copy
// ET: nvvm.cp.async.bulk.tensor.shared.cluster.global
// ET: } {k3.own_grid_wait}
// ET: module(@k3_mla_attn_0000f00d_absorbed_split_mma_h16_n64)
// ET: nvgpu.device_async_create_group
// ET-NEXT: }
// ET-NEXT: nvvm.griddepcontrol wait
// ET: nvgpu.device_async_create_group
// ET: nvgpu.device_async_create_group
// ET: nvvm.cp.async.wait.group 0
// ET: } {k3.early_dependents, k3.own_grid_wait}
// ET0: module(@k3_mla_attn_0000f00d_absorbed_qabs_mma_t64_append)
// ET0-NOT: k3.early_dependents
// ET0: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// ET0-NOT: griddepcontrol
// ET0-NOT: k3.own_grid_wait
// ET0-NOT: k3.early_dependents
// ET0: module(@k3_mla_attn_0000f00d_absorbed_split_mma_h16_n64)
// ETBAD: K3C_MLA_DECODE_EARLY_TILES must be 0 or 1, got '2'

// EN: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// EN: nvvm.griddepcontrol wait
// EN-NEXT: [[MAX:%.*]] = arith.constant 16
// EN-NEXT: [[LE:%.*]] = arith.cmpi ule, [[TC:%.*]], [[MAX]]
// EN-NEXT: [[MIN:%.*]] = arith.constant 8
// EN-NEXT: [[GE:%.*]] = arith.cmpi ule, [[MIN]], [[TC]]
// EN-NEXT: [[IN:%.*]] = arith.andi [[GE]], [[LE]]
// EN-NEXT: scf.if [[IN]]
// EN-NEXT: nvvm.griddepcontrol launch_dependents
// EN: } {k3.own_grid_wait}
// EN: module(@k3_mla_attn_0000f00d_absorbed_split_mma_h16_n64)
// EN: module(@k3_mla_attn_0000f00d_absorbed_combine_mma_t16_sw)
// EN0: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// EN0-NOT: launch_dependents
// EN0: module(@k3_mla_attn_0000f00d_absorbed_split_mma_h16_n64)
// EN0: module(@k3_mla_attn_0000f00d_absorbed_combine_mma_t16_sw)
// ENBAD: K3C_MLA_DECODE_EARLY_NEXT must be 0 or 1, got 'x'
// ENS0: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// ENS0-NOT: launch_dependents
// ENS0: module(@k3_mla_attn_0000f00d_absorbed_split_mma_h16_n64)
// ENF: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// ENF: nvvm.griddepcontrol wait
// ENF-NEXT: [[MAX:%.*]] = arith.constant 128
// ENF-NEXT: [[LE:%.*]] = arith.cmpi ule, {{%.*}}, [[MAX]]
// ENF-NEXT: scf.if [[LE]]
// ENF-NEXT: nvvm.griddepcontrol launch_dependents
// ENF: module(@k3_mla_attn_0000f00d_absorbed_split_mma_h16_n64)

// ENONE: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// ENONE: nvvm.griddepcontrol wait
// ENONE-NEXT: [[MAX:%.*]] = arith.constant 16
// ENONE-NEXT: [[LE:%.*]] = arith.cmpi ule, [[TC:%.*]], [[MAX]]
// ENONE-NEXT: [[MIN:%.*]] = arith.constant 8
// ENONE-NEXT: [[GE:%.*]] = arith.cmpi ule, [[MIN]], [[TC]]
// ENONE-NEXT: [[IN:%.*]] = arith.andi [[GE]], [[LE]]
// ENONE-NEXT: [[UNIT:%.*]] = arith.constant 1
// ENONE-NEXT: [[IS1:%.*]] = arith.cmpi eq, [[TC]], [[UNIT]]
// ENONE-NEXT: [[ANY:%.*]] = arith.ori [[IS1]], [[IN]]
// ENONE-NEXT: scf.if [[ANY]]
// ENONE-NEXT: nvvm.griddepcontrol launch_dependents
// SPLIT: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64_ss)
// SPLIT: "barrier.arrive 7, 256;"
// SPLIT: "barrier.arrive 2, 256;"
// SPLIT: "barrier.sync 9, 256;"
// SPLIT: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 8, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>]
// SPLIT-COUNT-19: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>]
// SPLIT-NOT: n = 16, k = 16
// SPLIT: "barrier.sync 1, 128;"
// SPLIT: "barrier.sync 6, 128;"
// SPLIT: "barrier.sync 2, 256;"
// SPLIT: "barrier.sync 7, 256;"
// SPLIT: nvvm.stmatrix
// SPLIT: "barrier.sync 4, 256;"
// SPLIT-COUNT-8: nvvm.wgmma.mma_async {{.*}}<m = 64, n = 16, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <col>]
// SPLIT: "barrier.sync 5, 256;"
// SPLIT: module(@k3_mla_attn_0000f00d_absorbed_split_mma_h16_n64)
// SPLIT2: arith.cmpi eq, %{{.*}}, %c1{{.*}} : index
// SPLIT2-NEXT: scf.if
// SPLIT2: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64_ss)
// SPLIT2: "barrier.sync 6, 128;"
// SPLIT2: } else {
// SPLIT2: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// SPLIT2-NOT: "barrier.sync 6, 128;"
// SPLIT2: gpu.terminator
// SPLITBAD: LLVM ERROR: k3c: K3C_MLA_DECODE_SPLIT_S must be 0, 1 or 2 (one-token rounds only), got 3

// BAD: K3C_MLA_DECODE_WG0_TILES must be 0 (half) or 1..3 (of the 4 latent tiles), got 4

func.func @mla_attn(%a0: tensor<?x1280xbf16>, %a1: tensor<?x320xbf16>, %a2: tensor<256xbf16>, %a3: tensor<?x?x320xbf16>, %a4: tensor<?xi32>, %a5: tensor<?xi32>, %a6: tensor<1280x256xbf16>, %a7: tensor<?x1024xbf16>) -> (tensor<?x1024xbf16>, tensor<?x?x320xbf16>) {
    %r:2 = k3.kernel "k3_mla_attn_0000f00d" family "mla_attn" (%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7) {bytes_per_token = 696 : i64, flops_per_token = 8192 : i64, weight_bytes = 786688 : i64} : (tensor<?x1280xbf16>, tensor<?x320xbf16>, tensor<256xbf16>, tensor<?x?x320xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<1280x256xbf16>, tensor<?x1024xbf16>) -> (tensor<?x1024xbf16>, tensor<?x?x320xbf16>) {
    ^bb0(%arg401: tensor<?x1280xbf16>, %arg402: tensor<?x320xbf16>, %arg403: tensor<256xbf16>, %arg404: tensor<?x?x320xbf16>, %arg405: tensor<?xi32>, %arg406: tensor<?xi32>, %arg407: tensor<1280x256xbf16>, %arg408: tensor<?x1024xbf16>):
      %result, %new_cache = k3.mla_attention %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 gate(%arg408) {norm_eps = 9.9999999999999995E-7 : f64, num_heads = 16 : i64, qk_nope_head_dim = 16 : i64, softmax_scale = 0.17677669529663687 : f64, v_head_dim = 64 : i64} : (tensor<?x1280xbf16>, tensor<?x320xbf16>, tensor<256xbf16>, tensor<?x?x320xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<1280x256xbf16>, tensor<?x1024xbf16>) -> (tensor<?x1024xbf16>, tensor<?x?x320xbf16>)
      k3.yield %result, %new_cache : tensor<?x1024xbf16>, tensor<?x?x320xbf16>
    }
    return %r#0, %r#1 : tensor<?x1024xbf16>, tensor<?x?x320xbf16>
}

// PW1: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64_ss)
// PW1: nvvm.cp.async.bulk.prefetch %{{.*}}, %c16384_i32
// PW1: nvvm.griddepcontrol wait
// PW1: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)
// PW1: nvvm.cp.async.bulk.prefetch %{{.*}}, %c16384_i32
// PW1: nvvm.griddepcontrol wait
// PW1: module(@k3_mla_attn_0000f00d_absorbed_combine_rows32)

// PW2: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64_ss)
// PW2-NOT: nvvm.cp.async.bulk.prefetch
// PW2: nvvm.griddepcontrol wait
// PW2: nvvm.griddepcontrol launch_dependents
// PW2: nvvm.cp.async.bulk.prefetch %{{.*}}, %c16384_i32
// PW2: module(@k3_mla_attn_0000f00d_absorbed_split_wgt_h16_n64)

// PW0-NOT: nvvm.cp.async.bulk.prefetch

// PWBAD: k3c: K3C_MLA_PREFETCH_WUV must be 0 (off), 1 (at the core block's start) or 2 (after its grid wait), got 3
