// The warpgroup tiles' operands by the TMA unit (K3C_WGMMA_TMA, docs/kernels.md).
// 1: thread 0 arms a ring slot's mbarrier (arrive.expect_tx of the stage's
// bytes) and issues 2-D tensor copies of the x and W tiles; the warpgroups
// wait on the slot's phase parity, then (as with cp.async) one block barrier
// a stage before the slot is refilled. 2: warp-specialized: a producer warp
// after the consumer warpgroups (288 threads for 128-row tiles) waits on a
// slot's `empty` mbarrier (one arrival a consumer warp, 8) and refills it;
// the consumers wait on the `full` barriers only. The tensor maps are made by
// the host side of the launch (nvgpu.tma.create.descriptor, a box of bm or
// bn rows x 64 columns, 128-byte swizzle, zero fill), before the launch. The
// default is 1 (lowering/tile/Gemm.cpp, kDefaultWgmmaTma: measured faster than cp.async on
// the H200, docs/perf.md); 0 keeps cp.async; the host target ignores the knob.
// RUN: env K3C_WGMMA_TMA=1 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=TMA
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=TMA
// RUN: env K3C_WGMMA_TMA=2 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=WS
// RUN: env K3C_WGMMA_TMA=0 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=CPASYNC
// RUN: env K3C_WGMMA_TMA=1 k3-opt %s --split-input-file --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST
// RUN: not env K3C_WGMMA_TMA=3 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: K3C_WGMMA_TMA must be 0, 1 or 2, got 3
// K3C_WGMMA_CLUSTER=2 (opt-in, session 58): the TMA tiles of a launch
// whose column tiles 2 divides (here the 128 x 64 tile: 2 column tiles) run
// as clusters of 2; each block copies its 64 of the x tile's 128 rows (a
// 64-row box) by multicast to both (mask 3), its own W tile as before, after
// a cluster barrier over the mbarriers' initialization; a stage's cluster
// wait replaces the block barrier before the refill, its arrive follows the
// step's wgmma wait, and a last wait follows the loop. K3C_WGMMA_CLUSTER
// sets the batched-decode tiles (the split-K tile too), the prefill tile
// keeps single blocks; K3C_WGMMA_CLUSTER_PREFILL=2 the prefill tile alone
// (where its column tiles allow: 28 for the 7168-wide split case).
// RUN: env K3C_WGMMA_CLUSTER=2 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=CL2
// RUN: env K3C_WGMMA_CLUSTER_PREFILL=2 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=CLP
// RUN: not env K3C_WGMMA_CLUSTER=3 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=CLBAD
// RUN: not env K3C_WGMMA_CLUSTER_PREFILL=8 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=CLPBAD
// CLBAD: K3C_WGMMA_CLUSTER must be 1, 2 or 4, got 3
// CLPBAD: K3C_WGMMA_CLUSTER_PREFILL must be 1, 2 or 4, got 8
// The PTX (NVPTX, no CUDA needed) of k3-tiny's warp-specialized tiles.
// RUN: env K3C_WGMMA_TMA=2 k3-compile %k3c_src/models/configs/k3-tiny.json --emit=ptx --quiet -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t.ptx
// PTX: // ===== kernel module k3_mlp_in_{{[0-9a-f]+}}_linear_glu_wgmma_128x256x64_s4_f1_tmaws
// PTX: .maxntid 288, 1, 1
// PTX: mbarrier.init.shared.b64
// PTX: fence.mbarrier_init.release.cluster;
// PTX: bar.sync 0;
// PTX: mbarrier.try_wait.parity.shared.b64
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// PTX: mbarrier.arrive.shared.b64
// PTX: mbarrier.arrive.expect_tx.shared.b64
// PTX-COUNT-3: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX: // ===== kernel module

// TMA-LABEL: func.func @k3_mlp_down_tma(
// The maps of x (128-row boxes) and W (64-row boxes of the 128 x 64 tile).
// TMA: nvgpu.tma.create.descriptor %{{.*}} box[%{{.*}}, %c64] : memref<*xbf16> -> <tensor = memref<128x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b, l2promo = l2promo_256b, oob = zero, interleave = none>
// TMA: nvgpu.tma.create.descriptor %{{.*}} box[%{{.*}}, %{{.*}}] : memref<*xbf16> -> <tensor = memref<64x64xbf16, #gpu.address_space<workgroup>>
// TMA: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c256{{.*}}) dynamic_shared_memory_size %c99360_i32 module(@k3_mlp_down_tma_linear_wgmma_128x64x64_s4_tma_st)
// TMA-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c1_i32{{.*}} : !llvm.ptr<3>, i32
// TMA: nvvm.fence.mbarrier.init
// TMA: gpu.barrier
// The prologue: (128 + 64) rows x 128 bytes a stage, two copies.
// TMA: nvvm.mbarrier.arrive.expect_tx %[[BAR:.*]], %c24576_i32
// TMA: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %[[BAR]], box[%{{.*}}, %{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// TMA: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %[[BAR]], box[%{{.*}}, %{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// TMA: scf.for
// TMA: nvvm.mbarrier.try_wait.parity
// TMA-NEXT: gpu.barrier
// TMA: nvvm.cp.async.bulk.tensor.shared.cluster.global
// TMA: nvvm.wgmma.mma_async
// TMA-NOT: nvgpu.device_async_copy
// TMA: nvvm.wgmma.wait.group.sync.aligned 0
// TMA-NOT: nvvm.cp.async.wait.group
// TMA: module(@k3_mlp_down_tma_linear_wgmma_128x256x64_s4_f1_tma_st)
// TMA: return
// WS-LABEL: func.func @k3_mlp_down_tma(
// WS: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c288{{.*}}) dynamic_shared_memory_size %c99392_i32 module(@k3_mlp_down_tma_linear_wgmma_128x64x64_s4_tmaws)
// WS: nvvm.mbarrier.init %{{.*}}, %c1_i32
// WS: nvvm.mbarrier.init %{{.*}}, %c8_i32
// WS: nvvm.fence.mbarrier.init
// WS: gpu.barrier
// The consumers (threads below 256): full barrier, MMAs, release.
// WS: arith.cmpi ult, %{{.*}}, %c256
// WS: scf.if
// WS: scf.for
// WS: nvvm.mbarrier.try_wait.parity
// WS-NOT: gpu.barrier
// WS: nvvm.wgmma.mma_async
// WS: nvvm.wgmma.wait.group.sync.aligned 1
// WS: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// WS: } else {
// The producer: thread 256 waits for a slot's release from its second use.
// WS: arith.cmpi eq, %{{.*}}, %c256
// WS: scf.for
// WS: nvvm.mbarrier.try_wait.parity
// WS: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c24576_i32
// WS-COUNT-2: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CL2-LABEL: func.func @k3_mlp_down_tma(
// CL2: nvgpu.tma.create.descriptor %{{.*}} box[%{{.*}}, %{{.*}}] : memref<*xbf16> -> <tensor = memref<64x64xbf16
// CL2: gpu.launch clusters({{.*}}) in ({{.*}} = %c2{{[_0-9]*}}, {{.*}}) blocks{{.*}} module(@k3_mlp_down_tma_linear_wgmma_128x64x64_s4_tma_st_c2)
// CL2: nvvm.fence.mbarrier.init
// CL2: gpu.barrier
// CL2-NEXT: nvvm.cluster.arrive {aligned}
// CL2-NEXT: nvvm.cluster.wait {aligned}
// CL2: nvvm.mbarrier.arrive.expect_tx %[[BAR:.*]], %c24576_i32
// CL2: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %[[BAR]], box[%{{.*}}, %{{.*}}] multicast_mask = %c3_i16
// CL2-NEXT: arith.index_cast
// CL2: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %[[BAR]], box[%{{.*}}, %{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// CL2: nvvm.cluster.arrive {aligned}
// CL2: scf.for
// CL2: nvvm.mbarrier.try_wait.parity
// CL2-NEXT: nvvm.cluster.wait {aligned}
// CL2: multicast_mask = %c3_i16
// CL2: nvvm.wgmma.mma_async
// CL2: nvvm.wgmma.wait.group.sync.aligned 0
// CL2-NEXT: nvvm.cluster.arrive {aligned}
// CL2: }
// CL2-NEXT: nvvm.cluster.wait {aligned}
// CL2: module(@k3_mlp_down_tma_linear_wgmma_128x256x64_s4_f1_tma_st)
// CPASYNC-LABEL: func.func @k3_mlp_down_tma(
// CPASYNC-NOT: nvgpu.tma.create.descriptor
// CPASYNC: module(@k3_mlp_down_tma_linear_wgmma_128x64x64_s4_st)
// CPASYNC-NOT: mbarrier
// CPASYNC: nvgpu.device_async_copy
// CPASYNC: return
// HOST-LABEL: func.func @k3_mlp_down_tma(
// HOST-NOT: nvgpu.tma
// HOST: return
func.func @mlp_down(%a0: tensor<?x576xbf16>, %a2: tensor<128x576xbf16>, %a3: tensor<?x128xbf16>) -> (tensor<?x128xbf16>) {
    %r = k3.kernel "k3_mlp_down_tma" family "mlp_down" (%a0, %a2, %a3) : (tensor<?x576xbf16>, tensor<128x576xbf16>, tensor<?x128xbf16>) -> tensor<?x128xbf16> {
    ^bb0(%x: tensor<?x576xbf16>, %w: tensor<128x576xbf16>, %res: tensor<?x128xbf16>):
      %0 = k3.linear %x, %w : (tensor<?x576xbf16>, tensor<128x576xbf16>) -> tensor<?x128xbf16>
      %1 = arith.addf %res, %0 : tensor<?x128xbf16>
      k3.yield %1 : tensor<?x128xbf16>
    }
  return %r : tensor<?x128xbf16>
}

// -----

// The gate/up pair: by TMA the tile holds bn / 2 gate rows, then the same
// rows of up (two W boxes of bn / 2 rows, from two maps: three copies a
// stage), and the store pairs accumulator tile j with j + bn / 16.
// TMA-LABEL: func.func @k3_mlp_in_tma(
// TMA: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<128x64xbf16
// TMA: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<32x64xbf16
// TMA: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<32x64xbf16
// TMA: module(@k3_mlp_in_tma_linear_glu_wgmma_128x64x64_s4_tma)
// TMA: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c24576_i32
// TMA-COUNT-3: nvvm.cp.async.bulk.tensor.shared.cluster.global
// TMA: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<128x64xbf16
// TMA: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<128x64xbf16
// TMA: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<128x64xbf16
// TMA: module(@k3_mlp_in_tma_linear_glu_wgmma_128x256x64_s4_f1_tma)
// TMA: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c49152_i32
// TMA-COUNT-3: nvvm.cp.async.bulk.tensor.shared.cluster.global
// TMA: math.exp
// TMA: return
func.func @mlp_in_pair(%x: tensor<?x128xbf16>, %wg: tensor<576x128xbf16>, %wu: tensor<576x128xbf16>) -> tensor<?x576xbf16> {
  %r = k3.kernel "k3_mlp_in_tma" family "mlp_in" (%x, %wg, %wu) : (tensor<?x128xbf16>, tensor<576x128xbf16>, tensor<576x128xbf16>) -> tensor<?x576xbf16> {
  ^bb0(%a: tensor<?x128xbf16>, %g: tensor<576x128xbf16>, %u: tensor<576x128xbf16>):
    %0 = k3.linear %a, %g : (tensor<?x128xbf16>, tensor<576x128xbf16>) -> tensor<?x576xbf16>
    %1 = k3.linear %a, %u : (tensor<?x128xbf16>, tensor<576x128xbf16>) -> tensor<?x576xbf16>
    %2 = k3.glu %0, %1 {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} : tensor<?x576xbf16>
    k3.yield %2 : tensor<?x576xbf16>
  }
  return %r : tensor<?x576xbf16>
}

// -----

// Several projections in one launch: a map a weight, the tile's picked by
// its column tile like the weight itself.
// TMA-LABEL: func.func @k3_mla_in_tma(
// TMA-COUNT-4: nvgpu.tma.create.descriptor
// TMA: module(@k3_mla_in_tma_linear_wgmma_128x64x64_s4_tma_st)
// TMA: arith.select %{{.*}}, %{{.*}}, %{{.*}} : !llvm.ptr
// TMA: arith.select %{{.*}}, %{{.*}}, %{{.*}} : !llvm.ptr
func.func @mla_in_multi(%x: tensor<?x128xbf16>, %wq: tensor<384x128xbf16>, %wkv: tensor<64x128xbf16>, %wg: tensor<8x128xbf16>) -> (tensor<?x384xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>) {
  %r:3 = k3.kernel "k3_mla_in_tma" family "mla_in" (%x, %wq, %wkv, %wg) : (tensor<?x128xbf16>, tensor<384x128xbf16>, tensor<64x128xbf16>, tensor<8x128xbf16>) -> (tensor<?x384xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>) {
  ^bb0(%a: tensor<?x128xbf16>, %q: tensor<384x128xbf16>, %kv: tensor<64x128xbf16>, %g: tensor<8x128xbf16>):
    %0 = k3.linear %a, %q : (tensor<?x128xbf16>, tensor<384x128xbf16>) -> tensor<?x384xbf16>
    %1 = k3.linear %a, %kv : (tensor<?x128xbf16>, tensor<64x128xbf16>) -> tensor<?x64xbf16>
    %2 = k3.linear %a, %g : (tensor<?x128xbf16>, tensor<8x128xbf16>) -> tensor<?x8xbf16>
    k3.yield %0, %1, %2 : tensor<?x384xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>
  }
  return %r#0, %r#1, %r#2 : tensor<?x384xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>
}

// -----

// Split-K (batched decode of a deep, narrow output): the wide split tile's
// K range per block, by TMA with a producer warp (K3C_WGMMA_TMA=2), its
// partial tile into the workspace as before; the prefill tile too.
// CL2-LABEL: func.func @k3_split_tma(
// CL2: module(@k3_split_tma_linear_wgmma_128x256x64_s4_tma_splitk4_c2)
// CL2: module(@k3_split_tma_linear_wgmma_128x64x64_s4_tma_st_c2)
// CL2: module(@k3_split_tma_linear_wgmma_128x256x64_s4_f1_tma_st)
// CLP-LABEL: func.func @k3_split_tma(
// CLP: module(@k3_split_tma_linear_wgmma_128x256x64_s4_tma_splitk4)
// CLP: module(@k3_split_tma_linear_wgmma_128x64x64_s4_tma_st)
// CLP: gpu.launch clusters({{.*}}) in ({{.*}} = %c2{{[_0-9]*}}, {{.*}} module(@k3_split_tma_linear_wgmma_128x256x64_s4_f1_tma_st_c2)
// CLP: multicast_mask = %c3_i16
// WS-LABEL: func.func @k3_split_tma(
// WS: arith.cmpi ule, %{{.*}}, %c128
// WS-NEXT: scf.if
// WS: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<128x64xbf16
// WS: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<256x64xbf16
// WS: threads({{.*}}) in ({{.*}} = %c288{{.*}}) dynamic_shared_memory_size %c197696_i32 module(@k3_split_tma_linear_wgmma_128x256x64_s4_tmaws_splitk4)
// The consumers' partial tile into the workspace, then the producer.
// WS: memref.store {{.*}} : memref<512x7168xf32>
// WS: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c49152_i32
// WS: module(@k3_split_tma_linear_splitk_sum)
// WS: } else {
// WS: module(@k3_split_tma_linear_wgmma_128x64x64_s4_tmaws)
func.func @split_wide(%a0: tensor<?x4096xbf16>, %a1: tensor<7168x4096xbf16>, %a2: tensor<?x7168xbf16>) -> (tensor<?x7168xbf16>) {
    %r = k3.kernel "k3_split_tma" family "mlp_down" (%a0, %a1, %a2) : (tensor<?x4096xbf16>, tensor<7168x4096xbf16>, tensor<?x7168xbf16>) -> tensor<?x7168xbf16> {
    ^bb0(%x: tensor<?x4096xbf16>, %w: tensor<7168x4096xbf16>, %res: tensor<?x7168xbf16>):
      %l = k3.linear %x, %w : (tensor<?x4096xbf16>, tensor<7168x4096xbf16>) -> tensor<?x7168xbf16>
      %s = arith.addf %res, %l : tensor<?x7168xbf16>
      k3.yield %s : tensor<?x7168xbf16>
    }
  return %r : tensor<?x7168xbf16>
}
