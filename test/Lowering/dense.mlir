// --k3-lower-kernels on one dense kernel (the MLP's GLU + down projection +
// residual add of k3-tiny). bf16 on sm_90a: the GEMM tile layer branches on
// the token count T between the GEMV (T = 1), two mma.sync tiles and the
// wgmma tile, each an outlined kernel named after its strategy and tile.
// RUN: env K3C_WGMMA_TMA=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GPU
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=F32
// RUN: env K3C_FUSE_RESIDUAL=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=UNFUSED
// RUN: env K3C_WGMMA_TMA=0 K3C_WGMMA_TILE=128,256,4,0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SERIAL
// RUN: env K3C_GEMV_FIT_THREADS=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=FIT0
// RUN: env K3C_WGMMA_TMA=0 K3C_WGMMA_MEDIUM_WIDE_FROM=1 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=WIDE
// Batched decode (65..256 tokens) takes the 128 x 256 tile too where the
// output has 256-column tiles for 2 blocks an SM (K3C_WGMMA_MEDIUM_WIDE_FROM,
// default 2 x 132: lm_head, mlp_in on K3's shapes); this 128-wide output has
// one, so only a threshold of 1 makes it wide. Wide outputs leave the 32-row
// mma.sync tile from 17 tokens; up to 256 tokens their 128 x 256 tile keeps
// no wgmma group in flight (three of its four stages' copies in flight:
// these launches stream weights), above it the prefill tile keeps one.
// WIDE: arith.cmpi ule, %{{.*}}, %c16
// WIDE-NEXT: scf.if
// WIDE: module(@k3_mlp_down_{{[0-9a-f]+}}_linear_mma_32x64x64_s6)
// WIDE: } else {
// WIDE-NOT: wgmma_128x64x64
// WIDE: module(@k3_mlp_down_{{[0-9a-f]+}}_linear_wgmma_128x256x64_s4_st)
// WIDE: nvvm.cp.async.wait.group 2
// WIDE: nvvm.wgmma.wait.group.sync.aligned 0
// WIDE: } else {
// WIDE: module(@k3_mlp_down_{{[0-9a-f]+}}_linear_wgmma_128x256x64_s4_f1_st)
// WIDE: nvvm.cp.async.wait.group 1
// WIDE: nvvm.wgmma.wait.group.sync.aligned 1
// WIDE-NOT: module(@k3_mlp_down_{{[0-9a-f]+}}_linear_wgmma
// WIDE: return
// FIT0: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c256{{.*}}) module(@k3_mlp_down_{{[0-9a-f]+}}_linear_gemv1) {{.*}} workgroup(%{{.*}} : memref<8x4xf32, #gpu.address_space<workgroup>>)

// The residual add is done in the linear's store: the linear's own result
// gets no buffer (arguments: GLU inputs, W, the residual, the GLU's scratch,
// the output), and no separate add launch follows the GEMM tiles.
// UNFUSED keeps the add as its own launch and the linear's result buffer.

// GPU-LABEL: func.func @k3_mlp_down_{{[0-9a-f]+}}(%arg0: memref<?x576xbf16>, %arg1: memref<?x576xbf16>, %arg2: memref<128x576xbf16>, %arg3: memref<?x128xbf16>, %arg4: memref<?x576xbf16>, %arg5: memref<?x128xbf16>)
// GPU-SAME: k3.family = "mlp_down"
// GPU: arith.cmpi ult, %[[T:.*]], %c2 : index
// The GEMV block has just enough warps for K = 576 (72 16-byte chunks: 3
// warps, not 8 with 5 idle); K3C_GEMV_FIT_THREADS=0 keeps 256 threads.
// GPU: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c96{{.*}}) module(@k3_mlp_down_{{[0-9a-f]+}}_linear_gemv1) {{.*}} workgroup(%{{.*}} : memref<3x4xf32, #gpu.address_space<workgroup>>)
// GPU: } else {
// The 32-row mma.sync tile up to 32 tokens, the 128-row wgmma tile above.
// GPU: arith.cmpi ule, %[[T]], %c32
// GPU: gpu.launch {{.*}} dynamic_shared_memory_size %c82944_i32 module(@k3_mlp_down_{{[0-9a-f]+}}_linear_mma_32x64x64_s6)
// GPU: gpu.dynamic_shared_memory
// GPU: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} {bypassL1} : memref<128x576xbf16> to memref<6x64x72xbf16, #gpu.address_space<workgroup>>
// GPU: nvvm.cp.async.wait.group 4
// GPU: gpu.barrier
// GPU: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<6x32x72xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// GPU: nvvm.mma.sync {{.*}}{layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>{{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>
// GPU: vector.store {{.*}} : memref<?x128xbf16>, vector<2xbf16>
// GPU: module(@k3_mlp_down_{{[0-9a-f]+}}_linear_wgmma_128x64x64_s4_st)
// GPU: module(@k3_mlp_down_{{[0-9a-f]+}}_linear_wgmma_128x256x64_s4_f1_st)
// GPU: memref.extract_aligned_pointer_as_index
// GPU: nvvm.cp.async.wait.group 1
// GPU: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// GPU: nvvm.wgmma.fence.aligned
// GPU: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// GPU: nvvm.wgmma.commit.group.sync.aligned
// One wgmma group stays in flight across the next stage's barrier; the last
// is waited for before the epilogue, which adds the residual (%arg3).
// GPU: nvvm.wgmma.wait.group.sync.aligned 1
// GPU: nvvm.wgmma.wait.group.sync.aligned 0
// GPU: memref.load {{.*}} : memref<?x128xbf16>
// GPU: arith.addf
// GPU: vector.store {{.*}} : memref<?x128xbf16>, vector<2xbf16>
// GPU-NOT: scf.parallel
// GPU: return

// UNFUSED-LABEL: func.func @k3_mlp_down_{{[0-9a-f]+}}(%arg0: memref<?x576xbf16>, %arg1: memref<?x576xbf16>, %arg2: memref<128x576xbf16>, %arg3: memref<?x128xbf16>, %arg4: memref<?x576xbf16>, %arg5: memref<?x128xbf16>, %arg6: memref<?x128xbf16>)
// UNFUSED: module(@k3_mlp_down_{{[0-9a-f]+}}_linear_wgmma_128x256x64_s4_f1_tma_st)
// UNFUSED: scf.parallel
// UNFUSED: arith.addf
// UNFUSED: return

// SERIAL: module(@k3_mlp_down_{{[0-9a-f]+}}_linear_wgmma_128x256x64_s4_st)
// SERIAL-NOT: nvvm.wgmma.wait.group.sync.aligned 1
// SERIAL: nvvm.cp.async.wait.group 2
// SERIAL: nvvm.wgmma.wait.group.sync.aligned 0

// The host: one thread a block, no GPU or tensor-core operations.
// HOST-LABEL: func.func @k3_mlp_down_{{[0-9a-f]+}}(
// HOST-NOT: gpu.
// HOST-NOT: nvgpu.
// HOST-NOT: nvvm.
// HOST: scf.parallel
// HOST: return

func.func @mlp_down(%a0: tensor<?x576xbf16>, %a1: tensor<?x576xbf16>, %a2: tensor<128x576xbf16>, %a3: tensor<?x128xbf16>) -> (tensor<?x128xbf16>) {
    %r = k3.kernel "k3_mlp_down_50b9d2e9" family "mlp_down" (%a0, %a1, %a2, %a3) {bytes_per_token = 2816 : i64, flops_per_token = 154496 : i64, weight_bytes = 147456 : i64} : (tensor<?x576xbf16>, tensor<?x576xbf16>, tensor<128x576xbf16>, tensor<?x128xbf16>) -> tensor<?x128xbf16> {
    ^bb0(%arg401: tensor<?x576xbf16>, %arg402: tensor<?x576xbf16>, %arg403: tensor<128x576xbf16>, %arg404: tensor<?x128xbf16>):
      %116 = k3.glu %arg401, %arg402 {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} : tensor<?x576xbf16>
      %117 = k3.linear %116, %arg403 : (tensor<?x576xbf16>, tensor<128x576xbf16>) -> tensor<?x128xbf16>
      %118 = arith.addf %arg404, %117 : tensor<?x128xbf16>
      k3.yield %118 : tensor<?x128xbf16>
    }
  return %r : tensor<?x128xbf16>
}

// -----

// The f32 build of the same kernel stays on the exact FMA path on sm_90a.
// F32-LABEL: func.func @k3_mlp_down_{{[0-9a-f]+}}(%arg0: memref<?x576xf32>
// F32-NOT: nvgpu.
// F32-NOT: nvvm.mma
// F32-NOT: wgmma
// F32: module(@k3_mlp_down_{{[0-9a-f]+}}_linear_gemv1)
// F32: module(@k3_mlp_down_{{[0-9a-f]+}}_linear_fma)
// F32-NOT: nvgpu.
// F32-NOT: nvvm.mma
// F32-NOT: wgmma
// F32: return

func.func @mlp_down_f32(%a0: tensor<?x576xf32>, %a1: tensor<?x576xf32>, %a2: tensor<128x576xbf16>, %a3: tensor<?x128xf32>) -> (tensor<?x128xf32>) {
    %r = k3.kernel "k3_mlp_down_ae5b89ad" family "mlp_down" (%a0, %a1, %a2, %a3) {bytes_per_token = 5632 : i64, flops_per_token = 154496 : i64, weight_bytes = 147456 : i64} : (tensor<?x576xf32>, tensor<?x576xf32>, tensor<128x576xbf16>, tensor<?x128xf32>) -> tensor<?x128xf32> {
    ^bb0(%arg401: tensor<?x576xf32>, %arg402: tensor<?x576xf32>, %arg403: tensor<128x576xbf16>, %arg404: tensor<?x128xf32>):
      %116 = k3.glu %arg401, %arg402 {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} : tensor<?x576xf32>
      %117 = k3.linear %116, %arg403 : (tensor<?x576xf32>, tensor<128x576xbf16>) -> tensor<?x128xf32>
      %118 = arith.addf %arg404, %117 : tensor<?x128xf32>
      k3.yield %118 : tensor<?x128xf32>
    }
  return %r : tensor<?x128xf32>
}

// -----

// The gate/up pair with its activation (mlp_in after --k3-fuse-kernels
// fuse-glu): one GEMM whose tile rows alternate 8 gate and 8 up rows and
// whose store applies SiTU to the rounded pair. Only the activation is
// written: the GEMV, the mma.sync and the wgmma tiles are all `linear_glu_`
// launches, with no elementwise launch after them. The projections' buffers
// (%arg3, %arg4) stay for the paths that run them separately (the host, and
// K3C_GLU_PAIR=0: two linears, then the activation).
// The wgmma tiles here are cp.async's (K3C_WGMMA_TMA=0; the TMA form loads the gate and
// up halves as two boxes: test/Lowering/wgmma-tma.mlir).
// RUN: env K3C_WGMMA_TMA=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PAIR
// RUN: env K3C_GLU_PAIR=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOPAIR
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=host | FileCheck %s --check-prefix=PAIRHOST
// PAIR-LABEL: func.func @k3_mlp_in_pair(%arg0: memref<?x128xbf16>, %arg1: memref<576x128xbf16>, %arg2: memref<576x128xbf16>, %arg3: memref<?x576xbf16>, %arg4: memref<?x576xbf16>, %arg5: memref<?x576xbf16>)
// PAIR: arith.cmpi ult, %[[T:.*]], %c2 : index
// Grids cover both weights' rows: the GEMV 576 / 2 blocks (2 hidden columns
// a block), the tiles 2 x 576 / bn column tiles (18 of 64, 5 of 256).
// PAIR: gpu.launch blocks({{.*}}) in ({{.*}} = %c288,{{.*}}module(@k3_mlp_in_pair_linear_glu_gemv1)
// PAIR: arith.cmpi ule, %[[T]], %c32
// PAIR: arith.muli %{{.*}}, %c18 : index
// PAIR: module(@k3_mlp_in_pair_linear_glu_mma_32x64x64_s6)
// The B tile's rows come from the gate or the up weight by 8-row block.
// PAIR: arith.select %{{.*}}, %arg2, %arg1 : memref<576x128xbf16>
// PAIR: nvgpu.device_async_copy
// PAIR: nvvm.mma.sync
// PAIR: math.exp
// PAIR: vector.store {{.*}} : memref<?x576xbf16>, vector<2xbf16>
// PAIR: arith.muli %{{.*}}, %c18 : index
// PAIR: module(@k3_mlp_in_pair_linear_glu_wgmma_128x64x64_s4)
// PAIR: arith.muli %{{.*}}, %c5 : index
// PAIR: module(@k3_mlp_in_pair_linear_glu_wgmma_128x256x64_s4_f1)
// PAIR: arith.select %{{.*}}, %arg2, %arg1 : memref<576x128xbf16>
// PAIR: nvvm.wgmma.mma_async
// PAIR: nvvm.wgmma.wait.group.sync.aligned 0
// PAIR: math.exp
// PAIR: vector.store {{.*}} : memref<?x576xbf16>, vector<2xbf16>
// PAIR-NOT: scf.parallel
// PAIR: return
// NOPAIR-COUNT-2: module(@k3_mlp_in_pair_linear_wgmma_128x256x64_s4_f1_tma_st)
// NOPAIR: scf.parallel
// NOPAIR: math.exp
// NOPAIR-NOT: linear_glu
// PAIRHOST-LABEL: func.func @k3_mlp_in_pair(
// PAIRHOST-COUNT-2: memref.load %arg{{[12]}}
// PAIRHOST: math.exp
func.func @mlp_in_pair(%x: tensor<?x128xbf16>, %wg: tensor<576x128xbf16>, %wu: tensor<576x128xbf16>) -> tensor<?x576xbf16> {
  %r = k3.kernel "k3_mlp_in_pair" family "mlp_in" (%x, %wg, %wu) : (tensor<?x128xbf16>, tensor<576x128xbf16>, tensor<576x128xbf16>) -> tensor<?x576xbf16> {
  ^bb0(%a: tensor<?x128xbf16>, %g: tensor<576x128xbf16>, %u: tensor<576x128xbf16>):
    %0 = k3.linear %a, %g : (tensor<?x128xbf16>, tensor<576x128xbf16>) -> tensor<?x576xbf16>
    %1 = k3.linear %a, %u : (tensor<?x128xbf16>, tensor<576x128xbf16>) -> tensor<?x576xbf16>
    %2 = k3.glu %0, %1 {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} : tensor<?x576xbf16>
    k3.yield %2 : tensor<?x576xbf16>
  }
  return %r : tensor<?x576xbf16>
}

// -----

// Three projections of one x (mla_in's q_a, kv_a and gate): at one token a
// single GEMV launch over their concatenated rows (96 + 16 + 2 blocks of 4
// rows; each block picks its projection's weight and output by its block
// index), above one token a single launch of each tile strategy over their
// concatenated column tiles (64-column mma.sync tiles: 6 + 1 + 1), no GEMV
// and no second tile launch; prefill tiles share the grid up to 1024 tokens
// and take a launch each above. K3C_GEMV_MULTI=0: a launch per projection.
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=MULTI
// RUN: env K3C_GEMV_MULTI=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SINGLE
// K3C_GEMV_ROWS=8: 8 weight rows a GEMV block (half the blocks, 8 partial
// sums a warp); an odd count is refused.
// RUN: env K3C_GEMV_ROWS=8 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ROWS8
// RUN: env K3C_GEMV_ROWS=3 not k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=ROWS3
// ROWS8: gpu.launch blocks({{.*}}) in ({{.*}} = %c57,{{.*}}module(@k3_mla_in_multi_linear_gemv1_x3) {{.*}} workgroup(%{{.*}} : memref<1x8xf32, #gpu.address_space<workgroup>>)
// ROWS3: K3C_GEMV_ROWS must be an even number in 2..16, got 3
// MULTI-LABEL: func.func @k3_mla_in_multi(
// MULTI: arith.cmpi eq, %{{.*}}, %c1 : index
// MULTI: gpu.launch blocks({{.*}}) in ({{.*}} = %c114,{{.*}}module(@k3_mla_in_multi_linear_gemv1_x3)
// MULTI: memref.cast %arg1 : memref<384x128xbf16> to memref<?x128xbf16>
// MULTI: arith.select {{.*}} : memref<?x128xbf16>
// MULTI: arith.select {{.*}} : memref<?x?xbf16>
// MULTI-NOT: linear_gemv1
// MULTI: arith.muli %{{.*}}, %c8 : index
// MULTI: module(@k3_mla_in_multi_linear_mma_32x64x64_s6)
// MULTI: arith.select {{.*}} : memref<?x128xbf16>
// MULTI: nvvm.mma.sync
// MULTI: vector.store {{.*}} : memref<?x?xbf16>, vector<2xbf16>
// MULTI-NOT: module(@k3_mla_in_multi_linear_mma_32x64x64_s6)
// MULTI: module(@k3_mla_in_multi_linear_wgmma_128x64x64_s4_tma_st)
// MULTI-NOT: module(@k3_mla_in_multi_linear_wgmma_128x64x64_s4_tma_st)
// MULTI: arith.cmpi ule, %{{.*}}, %c1024 : index
// MULTI: module(@k3_mla_in_multi_linear_wgmma_128x256x64_s4_f1_tma_st)
// MULTI: arith.select {{.*}} : memref<?x128xbf16>
// MULTI: } else {
// MULTI-COUNT-3: module(@k3_mla_in_multi_linear_wgmma_128x256x64_s4_f1_tma_st)
// MULTI-NOT: module(@
// MULTI: return
// SINGLE-COUNT-3: module(@k3_mla_in_multi_linear_gemv1)
// SINGLE-NOT: gemv1_x3
func.func @mla_in_multi(%x: tensor<?x128xbf16>, %wq: tensor<384x128xbf16>, %wkv: tensor<64x128xbf16>, %wg: tensor<8x128xbf16>) -> (tensor<?x384xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>) {
  %r:3 = k3.kernel "k3_mla_in_multi" family "mla_in" (%x, %wq, %wkv, %wg) : (tensor<?x128xbf16>, tensor<384x128xbf16>, tensor<64x128xbf16>, tensor<8x128xbf16>) -> (tensor<?x384xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>) {
  ^bb0(%a: tensor<?x128xbf16>, %q: tensor<384x128xbf16>, %kv: tensor<64x128xbf16>, %g: tensor<8x128xbf16>):
    %0 = k3.linear %a, %q : (tensor<?x128xbf16>, tensor<384x128xbf16>) -> tensor<?x384xbf16>
    %1 = k3.linear %a, %kv : (tensor<?x128xbf16>, tensor<64x128xbf16>) -> tensor<?x64xbf16>
    %2 = k3.linear %a, %g : (tensor<?x128xbf16>, tensor<8x128xbf16>) -> tensor<?x8xbf16>
    k3.yield %0, %1, %2 : tensor<?x384xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>
  }
  return %r#0, %r#1, %r#2 : tensor<?x384xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>
}

// -----

// A projection set whose outputs make about two full waves of 128 x 192
// tiles (KDA's widths: 4 x 12288 + 128 + 96, 258 tiles for 132 SMs) takes
// that tile at batched decode (33..256 tokens) instead of 128 x 64;
// K3C_WGMMA_SET_TILE192=0 keeps 128 x 64 (SET64).
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SET192
// RUN: env K3C_WGMMA_SET_TILE192=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SET64
// SET192-LABEL: func.func @k3_kda_in_set(
// SET192: module(@k3_kda_in_set_linear_wgmma_128x192x64_s4_f1_tma)
// SET192-NOT: module(@k3_kda_in_set_linear_wgmma_128x64x64
// SET192: return
// SET64-LABEL: func.func @k3_kda_in_set(
// SET64: module(@k3_kda_in_set_linear_wgmma_128x64x64_s4_tma_st)
// SET64-NOT: 128x192
// SET64: return
func.func @kda_in_set(%x: tensor<?x128xbf16>, %wq: tensor<12288x128xbf16>, %wk: tensor<12288x128xbf16>, %wv: tensor<12288x128xbf16>, %wa: tensor<128x128xbf16>, %wb: tensor<96x128xbf16>, %wg: tensor<12288x128xbf16>) -> (tensor<?x12288xbf16>, tensor<?x12288xbf16>, tensor<?x12288xbf16>, tensor<?x128xbf16>, tensor<?x96xbf16>, tensor<?x12288xbf16>) {
  %r:6 = k3.kernel "k3_kda_in_set" family "kda_in" (%x, %wq, %wk, %wv, %wa, %wb, %wg) : (tensor<?x128xbf16>, tensor<12288x128xbf16>, tensor<12288x128xbf16>, tensor<12288x128xbf16>, tensor<128x128xbf16>, tensor<96x128xbf16>, tensor<12288x128xbf16>) -> (tensor<?x12288xbf16>, tensor<?x12288xbf16>, tensor<?x12288xbf16>, tensor<?x128xbf16>, tensor<?x96xbf16>, tensor<?x12288xbf16>) {
  ^bb0(%a: tensor<?x128xbf16>, %q: tensor<12288x128xbf16>, %k: tensor<12288x128xbf16>, %v: tensor<12288x128xbf16>, %fa: tensor<128x128xbf16>, %b: tensor<96x128xbf16>, %g: tensor<12288x128xbf16>):
    %0 = k3.linear %a, %q : (tensor<?x128xbf16>, tensor<12288x128xbf16>) -> tensor<?x12288xbf16>
    %1 = k3.linear %a, %k : (tensor<?x128xbf16>, tensor<12288x128xbf16>) -> tensor<?x12288xbf16>
    %2 = k3.linear %a, %v : (tensor<?x128xbf16>, tensor<12288x128xbf16>) -> tensor<?x12288xbf16>
    %3 = k3.linear %a, %fa : (tensor<?x128xbf16>, tensor<128x128xbf16>) -> tensor<?x128xbf16>
    %4 = k3.linear %a, %b : (tensor<?x128xbf16>, tensor<96x128xbf16>) -> tensor<?x96xbf16>
    %5 = k3.linear %a, %g : (tensor<?x128xbf16>, tensor<12288x128xbf16>) -> tensor<?x12288xbf16>
    k3.yield %0, %1, %2, %3, %4, %5 : tensor<?x12288xbf16>, tensor<?x12288xbf16>, tensor<?x12288xbf16>, tensor<?x128xbf16>, tensor<?x96xbf16>, tensor<?x12288xbf16>
  }
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5 : tensor<?x12288xbf16>, tensor<?x12288xbf16>, tensor<?x12288xbf16>, tensor<?x128xbf16>, tensor<?x96xbf16>, tensor<?x12288xbf16>
}

// -----

// Decode at batch 1 with the norm in the GEMV (mla_in: AttnRes + RMSNorm,
// then two projections of the normed x; kda_out: the gated per-head norm,
// then o + residual). The row launches run only when T != 1; at T = 1 each
// GEMV block asks the L2 for its first weight rows, builds the normed row
// in shared memory (AttnRes into one shared row, RMSNorm into the next) and
// strides over the row groups (min(groups, 132 SMs x 4) persistent blocks:
// 96 + 16 groups here). Opt-in (K3C_GEMV_PROLOGUE=1); by default the row
// launches run at every T and the plain GEMV follows.
// RUN: env K3C_GEMV_PROLOGUE=1 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NORMED
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=UNNORMED
// K3C_GEMV_PROLOGUE=2: a GEMV block per row group as without a prologue
// (112 here, 32 threads for K = 128), each loading its first weights
// (volatile) before its grid wait, then building the normed row in shared
// memory itself; only norms (no AttnRes in the chain: mla_in's AttnRes keeps
// its launch) whose input rows are at most K3C_GEMV_PROLOGUE_BYTES (4096 by
// default; 256 leaves kda_out's two 512-byte rows to the norm's launch).
// RUN: env K3C_GEMV_PROLOGUE=2 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PERBLOCK
// RUN: env K3C_GEMV_PROLOGUE=2 K3C_GEMV_PROLOGUE_BYTES=256 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PERBLOCK256
// RUN: env K3C_GEMV_PROLOGUE=3 not k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=PROBAD
// PERBLOCK-LABEL: func.func @k3_mla_in_normed(
// PERBLOCK: gpu.launch {{.*}}workgroup(%{{.*}} : memref<32xf32, #gpu.address_space<workgroup>>)
// PERBLOCK: arith.cmpi ne, %{{.*}}, %c1{{.*}} : index
// PERBLOCK-NEXT: scf.if
// PERBLOCK: gpu.launch
// PERBLOCK: gpu.launch blocks({{.*}}) in ({{.*}} = %c112,{{.*}}threads({{.*}}) in ({{.*}} = %c32,{{.*}}module(@k3_mla_in_normed_linear_gemv1_x2_normedb) {{.*}}workgroup(%{{.*}} : memref<1x128xbf16, #gpu.address_space<workgroup>>
// PERBLOCK: llvm.load volatile
// PERBLOCK: nvvm.griddepcontrol  wait
// PERBLOCK: vector.store {{.*}} : memref<1x128xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// PERBLOCK: gpu.barrier
// PERBLOCK: vector.load {{.*}} : memref<1x128xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// PERBLOCK: gpu.terminator
// PERBLOCK-LABEL: func.func @k3_kda_out_normed(
// PERBLOCK: module(@k3_kda_out_normed_linear_gemv1_normedb) {{.*}}workgroup(%{{.*}} : memref<1x256xbf16, #gpu.address_space<workgroup>>
// PERBLOCK256: module(@k3_mla_in_normed_linear_gemv1_x2_normedb)
// PERBLOCK256: module(@k3_kda_out_normed_per_head)
// PERBLOCK256-NOT: _normedb
// PROBAD: K3C_GEMV_PROLOGUE must be 0, 1 or 2, got 3
// NORMED-LABEL: func.func @k3_mla_in_normed(
// NORMED: arith.cmpi ne, %{{.*}}, %c1{{.*}} : index
// NORMED-NEXT: scf.if
// NORMED: gpu.launch
// NORMED: arith.cmpi ne, %{{.*}}, %c1{{.*}} : index
// NORMED-NEXT: scf.if
// NORMED: gpu.launch
// NORMED: arith.cmpi eq, %{{.*}}, %c1{{.*}} : index
// NORMED: gpu.launch blocks({{.*}}) in ({{.*}} = %c112,{{.*}}module(@k3_mla_in_normed_linear_gemv1_x2_normed) {{.*}}workgroup(%{{.*}} : memref<1x128xbf16, #gpu.address_space<workgroup>>
// NORMED: nvvm.cp.async.bulk.prefetch %{{.*}}, %c256_i32 : <1>
// NORMED: vector.store {{.*}} : memref<1x128xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// NORMED: gpu.barrier
// NORMED: vector.store {{.*}} : memref<1x128xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// NORMED: gpu.barrier
// NORMED: scf.for %{{.*}} = %{{.*}} to %c112{{.*}} step %c112
// NORMED: vector.load {{.*}} : memref<1x128xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// NORMED: gpu.terminator
// NORMED-LABEL: func.func @k3_kda_out_normed(
// NORMED: arith.cmpi ne, %{{.*}}, %c1{{.*}} : index
// NORMED: module(@k3_kda_out_normed_per_head)
// NORMED: module(@k3_kda_out_normed_linear_gemv1_normed) {{.*}}workgroup(%{{.*}} : memref<1x256xbf16, #gpu.address_space<workgroup>>
// NORMED: math.exp
// NORMED: arith.addf
// UNNORMED-NOT: _normed)
// UNNORMED-NOT: arith.cmpi ne
// By default AttnRes and the RMSNorm that takes its rows (its result's only
// user) share one launch on the GPU (a block per row mixes the row into a
// shared row of the result's type, then normalizes it from there; no mixed
// rows in global memory). K3C_FUSE_ATTNRES_NORM=0 gives each its launch.
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=RESNORM
// RUN: env K3C_FUSE_ATTNRES_NORM=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=RESNORM2
// RESNORM-LABEL: func.func @k3_mla_in_normed(
// RESNORM: module(@k3_mla_in_normed_attn_res_rmsnorm) {{.*}}workgroup(%{{.*}} : memref<1x128xbf16, #gpu.address_space<workgroup>>
// RESNORM: vector.store {{.*}} : memref<1x128xbf16, #gpu.address_space<workgroup>>
// RESNORM: gpu.barrier
// RESNORM: vector.load {{.*}} : memref<1x128xbf16, #gpu.address_space<workgroup>>
// RESNORM: vector.store {{.*}} : memref<?x128xbf16>
// RESNORM: gpu.terminator
// RESNORM-NOT: gpu.launch {{.*}}module(@k3_mla_in_normed_kernel
// RESNORM: module(@k3_mla_in_normed_linear_gemv1_x2)
// RESNORM2-LABEL: func.func @k3_mla_in_normed(
// RESNORM2: gpu.launch {{.*}}workgroup(%{{.*}} : memref<32xf32, #gpu.address_space<workgroup>>)
// RESNORM2: gpu.launch {{.*}}workgroup(%{{.*}} : memref<8xf32, #gpu.address_space<workgroup>>)
// RESNORM2: module(@k3_mla_in_normed_linear_gemv1_x2)
func.func @mla_in_normed(%h: tensor<?x128xbf16>, %r: tensor<?x128xbf16>, %wn: tensor<128xbf16>, %wp: tensor<1x128xbf16>, %w: tensor<128xbf16>, %wq: tensor<384x128xbf16>, %wkv: tensor<64x128xbf16>) -> (tensor<?x384xbf16>, tensor<?x64xbf16>) {
  %o:2 = k3.kernel "k3_mla_in_normed" family "mla_in" (%h, %r, %wn, %wp, %w, %wq, %wkv) : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<128xbf16>, tensor<1x128xbf16>, tensor<128xbf16>, tensor<384x128xbf16>, tensor<64x128xbf16>) -> (tensor<?x384xbf16>, tensor<?x64xbf16>) {
  ^bb0(%a: tensor<?x128xbf16>, %b: tensor<?x128xbf16>, %n: tensor<128xbf16>, %p: tensor<1x128xbf16>, %nw: tensor<128xbf16>, %q: tensor<384x128xbf16>, %kv: tensor<64x128xbf16>):
    %0 = k3.attn_res(%a, %b) weights(%n, %p) {eps = 1.0e-05 : f64} : (tensor<?x128xbf16>, tensor<?x128xbf16>), tensor<128xbf16>, tensor<1x128xbf16> -> tensor<?x128xbf16>
    %1 = k3.rmsnorm %0, %nw {eps = 1.0e-05 : f64} : (tensor<?x128xbf16>, tensor<128xbf16>) -> tensor<?x128xbf16>
    %2 = k3.linear %1, %q : (tensor<?x128xbf16>, tensor<384x128xbf16>) -> tensor<?x384xbf16>
    %3 = k3.linear %1, %kv : (tensor<?x128xbf16>, tensor<64x128xbf16>) -> tensor<?x64xbf16>
    k3.yield %2, %3 : tensor<?x384xbf16>, tensor<?x64xbf16>
  }
  return %o#0, %o#1 : tensor<?x384xbf16>, tensor<?x64xbf16>
}
func.func @kda_out_normed(%x: tensor<?x256xbf16>, %g: tensor<?x256xbf16>, %w: tensor<128xf32>, %wo: tensor<128x256xbf16>, %res: tensor<?x128xbf16>) -> tensor<?x128xbf16> {
  %o = k3.kernel "k3_kda_out_normed" family "kda_out" (%x, %g, %w, %wo, %res) : (tensor<?x256xbf16>, tensor<?x256xbf16>, tensor<128xf32>, tensor<128x256xbf16>, tensor<?x128xbf16>) -> tensor<?x128xbf16> {
  ^bb0(%a: tensor<?x256xbf16>, %b: tensor<?x256xbf16>, %c: tensor<128xf32>, %d: tensor<128x256xbf16>, %e: tensor<?x128xbf16>):
    %0 = k3.gated_rmsnorm %a, %b, %c {eps = 1.0e-05 : f64} : (tensor<?x256xbf16>, tensor<?x256xbf16>, tensor<128xf32>) -> tensor<?x256xbf16>
    %1 = k3.linear %0, %d : (tensor<?x256xbf16>, tensor<128x256xbf16>) -> tensor<?x128xbf16>
    %2 = arith.addf %e, %1 : tensor<?x128xbf16>
    k3.yield %2 : tensor<?x128xbf16>
  }
  return %o : tensor<?x128xbf16>
}

// -----

// Split-K (bf16, K >= 4096, O <= 16384, lowered on its own): the kernel
// gets a [4 x 128, O] f32 workspace (device-only; K3C_SPLITK_WAYS, default
// 4, sizes it) and batched decode of up to 128 tokens, whose 64-column tiles
// alone would leave SMs idle, splits the K tiles over blocks per output tile
// (each writing its fp32 partial), then one launch sums the slices in order
// and adds the residual; above 128 tokens the same tile without the split.
// Where 128 x 256 tiles split 4 ways give at least 3/4 of the SMs a block
// (O = 7168: 28 x 4 = 112 of 132; SPLITWIDE) they serve, else (O = 512: 8) the
// 128 x 64 tile split 2 ways.
// K3C_SPLITK=0: no workspace, no split.
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SPLITWIDE
// RUN: not env K3C_SPLITK_WAYS=1 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=WAYSBAD
// WAYSBAD: LLVM ERROR: k3c: K3C_SPLITK_WAYS must be in 2..8, got 1
// SPLITWIDE-LABEL: func.func @k3_split_wide(%arg0: memref<?x4096xbf16>, %arg1: memref<7168x4096xbf16>, %arg2: memref<?x7168xbf16>, %arg3: memref<512x7168xf32>, %arg4: memref<?x7168xbf16>)
// SPLITWIDE: arith.cmpi ule, %{{.*}}, %c128
// SPLITWIDE-NEXT: scf.if
// SPLITWIDE: dynamic_shared_memory_size %c197664_i32 module(@k3_split_wide_linear_wgmma_128x256x64_s4_tma_splitk4)
// SPLITWIDE: module(@k3_split_wide_linear_splitk_sum)
// SPLITWIDE-COUNT-4: vector.load %arg3{{.*}} : memref<512x7168xf32>, vector<2xf32>
// SPLITWIDE: } else {
// SPLITWIDE: module(@k3_split_wide_linear_wgmma_128x64x64_s4_tma_st)
// K3C_SPLITK_FILL=1: the split tile's width from the outputs, the multiple
// of 32 in 128..256 dividing O whose tiles x 4 ways fill the most SMs in one
// wave (7168: 224 columns, 32 x 4 = 128 blocks of 132; 512: 8 tiles of 256
// at most, still the narrow tile).
// RUN: env K3C_SPLITK_FILL=1 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=FILL
// FILL-LABEL: func.func @k3_split_test(
// FILL: module(@k3_split_test_linear_wgmma_128x64x64_s4_tma_splitk2)
// FILL-LABEL: func.func @k3_split_wide(
// FILL: module(@k3_split_wide_linear_wgmma_128x224x64_s4_tma_splitk4)
// FILL: } else {
// FILL: module(@k3_split_wide_linear_wgmma_128x64x64_s4_tma_st)
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SPLIT
// RUN: env K3C_SPLITK=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOSPLIT
// K3C_SPLITK_MIN_K moves the depth bound (8192: this K = 4096 is too shallow).
// RUN: env K3C_SPLITK_MIN_K=8192 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOSPLIT
// SPLIT-LABEL: func.func @k3_split_test(%arg0: memref<?x4096xbf16>, %arg1: memref<512x4096xbf16>, %arg2: memref<?x512xbf16>, %arg3: memref<512x512xf32>, %arg4: memref<?x512xbf16>)
// SPLIT: arith.cmpi ule, %{{.*}}, %c128
// SPLIT-NEXT: scf.if
// SPLIT: module(@k3_split_test_linear_wgmma_128x64x64_s4_tma_splitk2)
// SPLIT: nvvm.wgmma.mma_async
// SPLIT: memref.store {{.*}} : memref<512x512xf32>
// SPLIT: module(@k3_split_test_linear_splitk_sum)
// SPLIT-COUNT-2: vector.load %arg3{{.*}} : memref<512x512xf32>, vector<2xf32>
// SPLIT-NOT: vector.load %arg3
// SPLIT: memref.load %arg2
// SPLIT: vector.store {{.*}} : memref<?x512xbf16>, vector<2xbf16>
// SPLIT: } else {
// SPLIT: module(@k3_split_test_linear_wgmma_128x64x64_s4_tma_st)
// NOSPLIT-LABEL: func.func @k3_split_test(%arg0: memref<?x4096xbf16>, %arg1: memref<512x4096xbf16>, %arg2: memref<?x512xbf16>, %arg3: memref<?x512xbf16>)
// NOSPLIT-NOT: splitk

func.func @split(%a0: tensor<?x4096xbf16>, %a1: tensor<512x4096xbf16>, %a2: tensor<?x512xbf16>) -> (tensor<?x512xbf16>) {
    %r = k3.kernel "k3_split_test" family "mlp_down" (%a0, %a1, %a2) : (tensor<?x4096xbf16>, tensor<512x4096xbf16>, tensor<?x512xbf16>) -> tensor<?x512xbf16> {
    ^bb0(%x: tensor<?x4096xbf16>, %w: tensor<512x4096xbf16>, %res: tensor<?x512xbf16>):
      %l = k3.linear %x, %w : (tensor<?x4096xbf16>, tensor<512x4096xbf16>) -> tensor<?x512xbf16>
      %s = arith.addf %res, %l : tensor<?x512xbf16>
      k3.yield %s : tensor<?x512xbf16>
    }
  return %r : tensor<?x512xbf16>
}

// -----

func.func @split_wide(%a0: tensor<?x4096xbf16>, %a1: tensor<7168x4096xbf16>, %a2: tensor<?x7168xbf16>) -> (tensor<?x7168xbf16>) {
    %r = k3.kernel "k3_split_wide" family "mlp_down" (%a0, %a1, %a2) : (tensor<?x4096xbf16>, tensor<7168x4096xbf16>, tensor<?x7168xbf16>) -> tensor<?x7168xbf16> {
    ^bb0(%x: tensor<?x4096xbf16>, %w: tensor<7168x4096xbf16>, %res: tensor<?x7168xbf16>):
      %l = k3.linear %x, %w : (tensor<?x4096xbf16>, tensor<7168x4096xbf16>) -> tensor<?x7168xbf16>
      %s = arith.addf %res, %l : tensor<?x7168xbf16>
      k3.yield %s : tensor<?x7168xbf16>
    }
  return %r : tensor<?x7168xbf16>
}

// -----

// A projection set (mla_in's shape class: 1536 + 576 + 12288 outputs of one x,
// K = 7168): its first linear holds a [4 x 128, 14400] f32 workspace for all
// of the set's columns, and batched decode up to 128 tokens splits the set's
// 57 tiles of 128 x 256 two ways (114 blocks): each partial goes to its
// projection's columns of the workspace, one launch sums the slices and
// stores each column pair into its projection's output. Opt-in
// (K3C_SPLITK_SETS=1); by default the set's own tile and no workspace.
// RUN: env K3C_SPLITK_SETS=1 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SETSPLIT
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SETNOSPLIT
// SETSPLIT-LABEL: func.func @k3_set_split(%arg0: memref<?x7168xbf16>, %arg1: memref<1536x7168xbf16>, %arg2: memref<576x7168xbf16>, %arg3: memref<12288x7168xbf16>, %arg4: memref<?x1536xbf16>, %arg5: memref<512x14400xf32>, %arg6: memref<?x576xbf16>, %arg7: memref<?x12288xbf16>)
// SETSPLIT: arith.cmpi ule, %{{.*}}, %c128
// SETSPLIT-NEXT: scf.if
// SETSPLIT: gpu.launch blocks({{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads({{.*}}) in (%{{.*}} = %c256{{.*}}module(@k3_set_split_linear_wgmma_128x256x64_s4_tma_splitk2)
// SETSPLIT: nvvm.wgmma.mma_async
// SETSPLIT: memref.store {{.*}} : memref<512x14400xf32>
// SETSPLIT: module(@k3_set_split_linear_splitk_sum)
// SETSPLIT: arith.cmpi ult, %{{.*}}, %c7200 : index
// SETSPLIT-COUNT-2: vector.load %arg5{{.*}} : memref<512x14400xf32>, vector<2xf32>
// SETSPLIT: arith.cmpi ule, %c1536{{.*}}, %{{.*}} : index
// SETSPLIT: arith.cmpi ule, %c2112, %{{.*}} : index
// SETSPLIT: } else {
// SETSPLIT: module(@k3_set_split_linear_wgmma_128x64x64_s4_tma_st)
// RUN: not env K3C_SPLITK_SETS=3 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=SETSBAD
// SETSBAD: LLVM ERROR: k3c: K3C_SPLITK_SETS must be 0, 1 or 2, got 3
// SETNOSPLIT-LABEL: func.func @k3_set_split(
// SETNOSPLIT-NOT: 14400
// SETNOSPLIT-NOT: splitk

func.func @set_split(%a0: tensor<?x7168xbf16>, %a1: tensor<1536x7168xbf16>, %a2: tensor<576x7168xbf16>, %a3: tensor<12288x7168xbf16>) -> (tensor<?x1536xbf16>, tensor<?x576xbf16>, tensor<?x12288xbf16>) {
    %r:3 = k3.kernel "k3_set_split" family "mla_in" (%a0, %a1, %a2, %a3) : (tensor<?x7168xbf16>, tensor<1536x7168xbf16>, tensor<576x7168xbf16>, tensor<12288x7168xbf16>) -> (tensor<?x1536xbf16>, tensor<?x576xbf16>, tensor<?x12288xbf16>) {
    ^bb0(%x: tensor<?x7168xbf16>, %w0: tensor<1536x7168xbf16>, %w1: tensor<576x7168xbf16>, %w2: tensor<12288x7168xbf16>):
      %0 = k3.linear %x, %w0 : (tensor<?x7168xbf16>, tensor<1536x7168xbf16>) -> tensor<?x1536xbf16>
      %1 = k3.linear %x, %w1 : (tensor<?x7168xbf16>, tensor<576x7168xbf16>) -> tensor<?x576xbf16>
      %2 = k3.linear %x, %w2 : (tensor<?x7168xbf16>, tensor<12288x7168xbf16>) -> tensor<?x12288xbf16>
      k3.yield %0, %1, %2 : tensor<?x1536xbf16>, tensor<?x576xbf16>, tensor<?x12288xbf16>
    }
  return %r#0, %r#1, %r#2 : tensor<?x1536xbf16>, tensor<?x576xbf16>, tensor<?x12288xbf16>
}

// -----

// The model's head (AttnRes, last_tokens, RMSNorm, then lm_head): by
// default (since session 60) one launch on the GPU, a block
// per sequence, finds its last row (a warp's prefix over the round's
// lengths: shuffles), mixes that row alone into a shared row and normalizes
// it from there; no launch of its own for the mix or the gather. With it
// and K3C_FUSE_ATTNRES_NORM=0: three launches, the mix of every row, the
// gather (a block per sequence, `last_tokens`) and the norm. With
// K3C_FUSE_HEAD=0 the GPU gathers a thread an element (HEAD0). The host gathers a block per
// sequence, one thread a block. K3C_FUSE_HEAD takes 0 or 1.
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=HEAD
// RUN: env K3C_FUSE_ATTNRES_NORM=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=HEAD3
// RUN: env K3C_FUSE_HEAD=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=HEAD0
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HEADHOST
// RUN: env K3C_FUSE_HEAD=2 not k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=HEADBAD
// HEAD-LABEL: func.func @k3_head(
// HEAD-NOT: module(@k3_head_last_tokens)
// HEAD: gpu.launch blocks({{.*}}) in ({{.*}} = %dim{{[_0-9]*}},{{.*}}module(@k3_head_attn_res_last_rmsnorm) {{.*}}workgroup(%{{.*}} : memref<1x256xbf16, #gpu.address_space<workgroup>>
// HEAD: memref.load {{.*}} : memref<?xi32>
// HEAD: gpu.shuffle
// HEAD: vector.store {{.*}} : memref<1x256xbf16, #gpu.address_space<workgroup>>
// HEAD: gpu.barrier
// HEAD: gpu.terminator
// HEAD-NOT: module(@k3_head_last_tokens)
// HEAD: module(@k3_head_linear_gemv1)
// HEAD3-LABEL: func.func @k3_head(
// HEAD3: gpu.launch
// HEAD3: module(@k3_head_last_tokens)
// HEAD3: gpu.shuffle
// HEAD3: gpu.terminator
// HEAD3: gpu.launch
// HEAD3-NOT: attn_res_last_rmsnorm
// HEAD0-LABEL: func.func @k3_head(
// HEAD0-NOT: attn_res_last_rmsnorm
// HEAD0-NOT: module(@k3_head_last_tokens)
// HEAD0: module(@k3_head_linear_gemv1)
// HEADBAD: K3C_FUSE_HEAD must be 0 or 1, got '2'
// HEADHOST-LABEL: func.func @k3_head(
// HEADHOST: memref.load {{.*}} : memref<?xi32>
// HEADHOST-NOT: gpu.
func.func @head(%h: tensor<?x256xbf16>, %r: tensor<?x256xbf16>, %wn: tensor<256xbf16>, %wp: tensor<1x256xbf16>, %lens: tensor<?xi32>, %w: tensor<256xbf16>, %wo: tensor<512x256xbf16>) -> tensor<?x512xf32> {
  %o = k3.kernel "k3_head" family "lm_head" (%h, %r, %wn, %wp, %lens, %w, %wo) : (tensor<?x256xbf16>, tensor<?x256xbf16>, tensor<256xbf16>, tensor<1x256xbf16>, tensor<?xi32>, tensor<256xbf16>, tensor<512x256xbf16>) -> tensor<?x512xf32> {
  ^bb0(%a: tensor<?x256xbf16>, %b: tensor<?x256xbf16>, %n: tensor<256xbf16>, %p: tensor<1x256xbf16>, %l: tensor<?xi32>, %nw: tensor<256xbf16>, %q: tensor<512x256xbf16>):
    %0 = k3.attn_res(%a, %b) weights(%n, %p) {eps = 1.0e-05 : f64} : (tensor<?x256xbf16>, tensor<?x256xbf16>), tensor<256xbf16>, tensor<1x256xbf16> -> tensor<?x256xbf16>
    %1 = k3.last_tokens %0, %l : (tensor<?x256xbf16>, tensor<?xi32>) -> tensor<?x256xbf16>
    %2 = k3.rmsnorm %1, %nw {eps = 1.0e-05 : f64} : (tensor<?x256xbf16>, tensor<256xbf16>) -> tensor<?x256xbf16>
    %3 = k3.linear %2, %q : (tensor<?x256xbf16>, tensor<512x256xbf16>) -> tensor<?x512xf32>
    k3.yield %3 : tensor<?x512xf32>
  }
  return %o : tensor<?x512xf32>
}

// -----

// The embedding gather: by default (since session 60) a block a token on
// the GPU, its id read once, the row copied in 16-byte vectors
// (`embed_rows`); K3C_EMBED_ROWS=0 a thread an element (a parallel loop,
// outlined later as a `kernel` launch); the host keeps its loop.
// K3C_EMBED_ROWS takes 0 or 1.
// RUN: env K3C_EMBED_ROWS=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=EMB
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=EMBROWS
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=host | FileCheck %s --check-prefix=EMBHOST
// RUN: env K3C_EMBED_ROWS=2 not k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=EMBBAD
// EMB-LABEL: func.func @k3_embed(
// EMB-NOT: embed_rows
// EMB: scf.parallel
// EMBROWS-LABEL: func.func @k3_embed(
// EMBROWS: gpu.launch blocks({{.*}}) in ({{.*}} = %dim{{[_0-9]*}},{{.*}}module(@k3_embed_embed_rows)
// EMBROWS: memref.load {{.*}} : memref<?xi32>
// EMBROWS: scf.for
// EMBROWS: vector.load {{.*}} : memref<512x256xbf16>, vector<8xbf16>
// EMBROWS: vector.store {{.*}} : memref<?x256xbf16>, vector<8xbf16>
// EMBROWS-NOT: scf.parallel
// EMBHOST-LABEL: func.func @k3_embed(
// EMBHOST-NOT: embed_rows
// EMBHOST-NOT: gpu.launch
// EMBBAD: K3C_EMBED_ROWS must be 0 or 1, got '2'
func.func @embed(%ids: tensor<?xi32>, %t: tensor<512x256xbf16>) -> tensor<?x256xbf16> {
  %o = k3.kernel "k3_embed" family "embed" (%ids, %t) : (tensor<?xi32>, tensor<512x256xbf16>) -> tensor<?x256xbf16> {
  ^bb0(%i: tensor<?xi32>, %w: tensor<512x256xbf16>):
    %0 = k3.embedding %i, %w : (tensor<?xi32>, tensor<512x256xbf16>) -> tensor<?x256xbf16>
    k3.yield %0 : tensor<?x256xbf16>
  }
  return %o : tensor<?x256xbf16>
}
