// --k3-lower-kernels on k3-tiny's routed experts (16 experts, top 4, latent
// 64, width 32, MXFP4 weights in the kernel layout with k_tile 64 / 32).
// sm_90a, bf16: the grouping block (pairs counted and placed by
// workgroup-memory atomics), then, chosen at run time by the pairs per expert
// (<= 32 on average: token tiles of 16 rows, else 64; with
// K3C_MOE_TILE128_FROM also 128 rows, two row warps sharing the decoded
// weights), the up and down grouped GEMMs
// on tensor cores: persistent blocks with dynamic shared memory, the gathered
// A rows, fragment runs and scales staged by cp.async, a warp vote choosing
// the folded or the exact scale path, A fragments by ldmatrix, the runs
// decoded to bf16x2 and scaled (mulf on vector<2xbf16>), nvvm.mma.sync. The f32 build keeps the exact FMA path: the
// gathered token tile staged in workgroup memory with 16-byte loads, the MXFP4
// payload read as fragment runs (vector loads of i8, bit-cast to i32 words),
// warp reductions, no tensor cores.
// RUN: env K3C_MOE_CHAIN=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GPU
// RUN: env K3C_MOE_CHAIN=0 K3C_MOE_TILE128_FROM=192 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=T128
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST
// Bad tuning switches are errors naming the kernel and the problem.
// RUN: not env K3C_MOE_CHAIN=0 K3C_MOE_STAGES_16=1 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not env K3C_MOE_CHAIN=0 K3C_MOE_CTAS_16=0 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=CTAS
// The grouping's prefix sums by every warp (a round of 1024 experts: each
// warp's 32, then warp 0 over the warps' totals in workgroup memory, two
// barriers); K3C_MOE_GROUP_SCAN=0: warp 0 alone in rounds of 32.
// RUN: env K3C_MOE_CHAIN=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GSCAN
// RUN: env K3C_MOE_CHAIN=0 K3C_MOE_GROUP_SCAN=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GWARP0
// GWARP0-LABEL: func.func @k3_moe_experts_13dd83a6(
// GWARP0-NOT: memref<9x32xi32, #gpu.address_space<workgroup>>
// GWARP0: scf.for {{.*}} = %c0{{[_0-9]*}} to %c16{{[_0-9]*}} step %c32{{[_0-9]*}} iter_args
// GWARP0: module(@k3_moe_experts_13dd83a6_experts_up_mxfp4_mma_16)
// GSCAN-LABEL: func.func @k3_moe_experts_13dd83a6(
// GSCAN: gpu.launch {{.*}} in ({{.*}} = %c1, {{.*}}) threads({{.*}}) in ({{.*}} = %c1024, {{.*}} workgroup({{.*}} : memref<9x32xi32, #gpu.address_space<workgroup>>, {{.*}} : memref<9x32xi32, #gpu.address_space<workgroup>>, {{.*}} : memref<9xi32, #gpu.address_space<workgroup>>)
// GSCAN: scf.for {{.*}} = %c0{{[_0-9]*}} to %c16{{[_0-9]*}} step %c1024{{[_0-9]*}} iter_args
// GSCAN: gpu.shuffle  up
// GSCAN: gpu.barrier
// GSCAN: gpu.shuffle  up
// GSCAN: gpu.barrier
// GSCAN: memref.store {{.*}} : memref<11x17xi32>
// GSCAN: gpu.barrier
// GSCAN: memref.store {{.*}}[%c9{{[_0-9]*}}, %c16{{[_0-9]*}}] : memref<11x17xi32>
// GSCAN: module(@k3_moe_experts_13dd83a6_experts_up_mxfp4_mma_16)
// STAGES: LLVM ERROR: k3c: bad expert GEMM experts_up_mxfp4_mma_16: stages must be 2..8, got 1
// CTAS: LLVM ERROR: k3c: bad expert GEMM experts_up_mxfp4_mma_16: blocks per SM (K3C_MOE_CTAS_*) must be >= 1

// The register-decode up and down GEMMs chained in one launch (the default;
// K3C_MOE_CHAIN=0 above: two launches): the grouping zeroes the sync row
// (row 10: a count per expert, column 16 the work queue); blocks claim items
// by a global atomic on the queue, one ahead, into two workgroup slots; an up
// item ends with a barrier, a gpu-scope fence and its expert's count; a down
// item waits (warp 0 polls the count by ld.acquire with nanosleep, a trap
// after ~2^22 polls; then a barrier) until its expert's up items are done.
// The claim slots come from the dynamic shared memory (after the rings). Not
// for the split tails.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=CHAIN
// RUN: not env K3C_MOE_CHAIN=2 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=CHAINBAD
// CHAINBAD: LLVM ERROR: k3c: K3C_MOE_CHAIN must be 0 or 1, got 2
// The 128-row tiles (two row warps sharing decoded fragments) chain too:
// 256 threads, the shared fragments and the claim slots after both rings.
// RUN: env K3C_MOE_TILE128_FROM=192 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=T128CHAIN
// T128CHAIN-LABEL: func.func @k3_moe_experts_13dd83a6(
// T128CHAIN: module(@k3_moe_experts_13dd83a6_experts_mxfp4_mma_64_chain)
// T128CHAIN: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c256, {{.*}}) dynamic_shared_memory_size %c107536_i32 module(@k3_moe_experts_13dd83a6_experts_mxfp4_mma_128_chain)
// T128CHAIN: memref.view {{.*}}[%c107520{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<3xi32, #gpu.address_space<workgroup>>
// T128CHAIN: memref<16x2x32x4xi32, #gpu.address_space<workgroup>>
// T128CHAIN: scf.while
// CHAIN-LABEL: func.func @k3_moe_experts_13dd83a6(
// CHAIN: memref.store %c0_i32, %arg10[%c10, %{{.*}}] : memref<11x17xi32>
// CHAIN-NOT: module(@k3_moe_experts_13dd83a6_experts_up_mxfp4_mma_16)
// CHAIN: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c128, {{.*}}) dynamic_shared_memory_size %c26640_i32 module(@k3_moe_experts_13dd83a6_experts_mxfp4_mma_16_chain)
// CHAIN-NOT: workgroup(
// CHAIN: %[[SLOTS:.*]] = memref.view {{.*}}[%c26624{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<3xi32, #gpu.address_space<workgroup>>
// CHAIN: %[[C:.*]] = memref.atomic_rmw addi %c1_i32, %arg10[%c10, %c16] : (i32, memref<11x17xi32>) -> i32
// CHAIN: memref.store %[[C]], %[[SLOTS]][%c0{{.*}}] : memref<3xi32, #gpu.address_space<workgroup>>
// CHAIN: gpu.barrier
// CHAIN: scf.while
// CHAIN: scf.condition
// CHAIN: memref.atomic_rmw addi %c1_i32, %arg10[%c10, %c16] : (i32, memref<11x17xi32>) -> i32
// CHAIN: nvvm.mma.sync
// CHAIN: gpu.barrier
// CHAIN: nvvm.memory.barrier <gpu>
// CHAIN: memref.atomic_rmw addi %c1_i32, %arg10[%c10, %{{.*}}] : (i32, memref<11x17xi32>) -> i32
// CHAIN: } else {
// CHAIN: scf.while
// CHAIN: llvm.load {{.*}} atomic syncscope("device") acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHAIN: nvvm.nanosleep
// CHAIN: llvm.intr.trap
// CHAIN: gpu.barrier
// CHAIN: nvvm.mma.sync
// CHAIN: module(@k3_moe_experts_13dd83a6_experts_mxfp4_mma_64_chain)
// CHAIN-NOT: experts_up_mxfp4_mma_64)
// CHAIN-LABEL: func.func @k3_moe_experts_wide(
// CHAIN: module(@k3_moe_experts_wide_experts_mxfp4_mma_16_chain)
// CHAIN: module(@k3_moe_experts_wide_experts_up_mxfp4_wgmma_128)
// CHAIN: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_16_tail)
// CHAIN: module(@k3_moe_experts_wide_experts_down_mxfp4_mma_16_tail)

// GPU-LABEL: func.func @k3_moe_experts_13dd83a6(
// GPU-SAME: k3.family = "moe_experts"
// GPU: gpu.launch {{.*}} in ({{.*}} = %c1, {{.*}}) threads({{.*}}) in ({{.*}} = %c1024,
// GPU: memref.atomic_rmw addi {{.*}} : (i32, memref<16xi32, #gpu.address_space<workgroup>>) -> i32
// GPU: memref.atomic_rmw addi {{.*}} : (i32, memref<16xi32, #gpu.address_space<workgroup>>) -> i32
// GPU: arith.cmpi ule, %{{.*}}, %c512 : index
// GPU: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c128, {{.*}}) dynamic_shared_memory_size {{.*}} module(@k3_moe_experts_13dd83a6_experts_up_mxfp4_mma_16)
// GPU: nvgpu.device_async_copy %arg0[{{.*}}], %view[{{.*}}], 8, {{.*}} : memref<?x64xbf16> to memref<4x16x72xbf16, #gpu.address_space<workgroup>>
// Lean copies (16-row tiles): the runs zero-filled by the source size, the
// warp's four scale blocks by one raw-pointer cp.async a lane.
// GPU: nvgpu.device_async_copy %arg2[{{.*}}], %view_{{[0-9]+}}[{{.*}}], 16, %{{.*}} {bypassL1} : memref<16384xi8> to memref<4x16x256xi8, #gpu.address_space<workgroup>>
// GPU: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %{{.*}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// GPU: nvgpu.device_async_create_group
// GPU: nvvm.vote.sync  any
// The four pairs of a run word (format 5, models/MXFP4Layout.h): pair 0
// w & 0x81C081C0, pair 1 rotated right by 4 (a funnel shift on the GPU) and
// masked, pair 2 (w << 6) & 0x81C081C0, pair 3 (w << 2) & 0x80C080C0 (m, e0,
// s) merged with (w >> 6) & 0x01000100 (e1).
// GPU: arith.andi %[[W:[0-9]+]], %c-2118090304_i32 : i32
// GPU: %[[L:.*]] = arith.shli %[[W]], %c28_i32 : i32
// GPU: %[[R:.*]] = arith.shrui %[[W]], %c4_i32 : i32
// GPU: %[[O:.*]] = arith.ori %[[R]], %[[L]] : i32
// GPU: arith.andi %[[O]], %c-2118090304_i32{{.*}} : i32
// GPU: %[[S6:.*]] = arith.shli %[[W]], %c6_i32 : i32
// GPU: arith.andi %[[S6]], %c-2118090304_i32{{.*}} : i32
// GPU: %[[S2:.*]] = arith.shli %[[W]], %c2_i32 : i32
// GPU: %[[P:.*]] = arith.andi %[[S2]], %c-2134867776_i32 : i32
// GPU: %[[S:.*]] = arith.shrui %[[W]], %c6_i32{{.*}} : i32
// GPU: %[[Q:.*]] = arith.andi %[[S]], %c16777472_i32 : i32
// GPU: arith.ori %[[P]], %[[Q]] : i32
// GPU: arith.mulf {{.*}} : vector<2xbf16>
// GPU: nvgpu.ldmatrix
// GPU: nvvm.mma.sync
// GPU: module(@k3_moe_experts_13dd83a6_experts_down_mxfp4_mma_16)
// GPU: nvvm.mma.sync
// GPU: module(@k3_moe_experts_13dd83a6_experts_up_mxfp4_mma_64)
// GPU: nvgpu.device_async_copy %arg0[{{.*}}], %view[{{.*}}], 8, {{.*}} : memref<?x64xbf16> to memref<4x64x72xbf16, #gpu.address_space<workgroup>>
// GPU: nvvm.mma.sync
// GPU: module(@k3_moe_experts_13dd83a6_experts_down_mxfp4_mma_64)
// GPU: nvvm.mma.sync
// GPU-NOT: mma_128
// GPU: return

// With K3C_MOE_TILE128_FROM: tiles of 128 rows from 192 pairs per expert
// (3072 pairs here): 256 threads, two row warps sharing the decoded weight
// fragments through workgroup memory.
// T128-LABEL: func.func @k3_moe_experts_13dd83a6(
// T128: arith.cmpi ult, %{{.*}}, %c3072 : index
// T128: module(@k3_moe_experts_13dd83a6_experts_up_mxfp4_mma_64)
// T128: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c256, {{.*}}) dynamic_shared_memory_size {{.*}} module(@k3_moe_experts_13dd83a6_experts_up_mxfp4_mma_128)
// T128: memref<16x2x32x4xi32, #gpu.address_space<workgroup>>
// T128: nvvm.vote.sync  any
// T128: vector.store {{.*}} : memref<16x2x32x4xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// T128: gpu.barrier
// T128: vector.load {{.*}} : memref<16x2x32x4xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// T128: nvvm.mma.sync
// T128: module(@k3_moe_experts_13dd83a6_experts_down_mxfp4_mma_128)

// GPU-LABEL: func.func @k3_moe_experts_f32(
// GPU-NOT: nvvm.mma.sync
// GPU: memref.atomic_rmw addi
// GPU: gpu.launch {{.*}} workgroup(%{{.*}} : memref<8x64xf32, #gpu.address_space<workgroup>>
// GPU: vector.load %arg0[{{.*}}] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
// GPU: vector.load %arg2[{{.*}}] {alignment = 8 : i64} : memref<16384xi8>, vector<8xi8>
// GPU: vector.bitcast {{.*}} : vector<8xi8> to vector<2xi32>
// GPU: gpu.shuffle  xor
// GPU: gpu.launch {{.*}} workgroup(%{{.*}} : memref<8x32xf32, #gpu.address_space<workgroup>>
// GPU-NOT: nvvm.mma.sync
// GPU: return

// HOST-LABEL: func.func @k3_moe_experts_13dd83a6(
// HOST-NOT: gpu.
// HOST: memref.atomic_rmw addi
// HOST: scf.parallel
// HOST-NOT: nvvm.
// HOST: return

func.func @moe_experts(%a0: tensor<?x64xbf16>, %a1: tensor<?x4xi32>, %a2: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %a3: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %a4: !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>) -> (tensor<?x4x64xbf16>) {
    %r = k3.kernel "k3_moe_experts_13dd83a6" family "moe_experts" (%a0, %a1, %a2, %a3, %a4) {bytes_per_token = 656 : i64, flops_per_token = 49152 : i64, weight_bytes = 52224 : i64} : (tensor<?x64xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>) -> tensor<?x4x64xbf16> {
    ^bb0(%arg401: tensor<?x64xbf16>, %arg402: tensor<?x4xi32>, %arg403: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %arg404: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %arg405: !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>):
      %116 = k3.expert_mlp %arg401, %arg402 experts(%arg403, %arg404, %arg405) {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} : (tensor<?x64xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>) -> tensor<?x4x64xbf16>
      k3.yield %116 : tensor<?x4x64xbf16>
    }
  return %r : tensor<?x4x64xbf16>
}

func.func @moe_experts_f32(%a0: tensor<?x64xf32>, %a1: tensor<?x4xi32>, %a2: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %a3: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %a4: !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>) -> (tensor<?x4x64xf32>) {
    %r = k3.kernel "k3_moe_experts_f32" family "moe_experts" (%a0, %a1, %a2, %a3, %a4) {bytes_per_token = 656 : i64, flops_per_token = 49152 : i64, weight_bytes = 52224 : i64} : (tensor<?x64xf32>, tensor<?x4xi32>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>) -> tensor<?x4x64xf32> {
    ^bb0(%arg401: tensor<?x64xf32>, %arg402: tensor<?x4xi32>, %arg403: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %arg404: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %arg405: !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>):
      %116 = k3.expert_mlp %arg401, %arg402 experts(%arg403, %arg404, %arg405) {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} : (tensor<?x64xf32>, tensor<?x4xi32>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>) -> tensor<?x4x64xf32>
      k3.yield %116 : tensor<?x4x64xf32>
    }
  return %r : tensor<?x4x64xf32>
}

// Warpgroup MMA (sm_90a) for routed experts whose K dims are multiples of 64
// with k_tile >= 64 (latent 128: k_tile 128; width 192: k_tile 64), above 16
// pairs per expert on average (256 pairs here, where the 16-row tiles end on
// sm_90a: no 64-row mma.sync launch; K3C_MOE_WGMMA_FROM=96 moves the 16-row
// tiles' end back to 32 pairs (512) and keeps 64-row tiles below 1536
// pairs): 128-row token tiles, two
// warpgroups; per 64-column stage the gathered A rows (16-byte cp.async into
// the 128-byte swizzle), each weight tile's half fragment runs (8-byte
// cp.async) and scales (16 bytes) into a ring; the block decodes the runs once
// (the vote for the exact scale path, bf16x2 pairs stored into a double-
// buffered swizzled B tile), fences the async proxy and issues
// wgmma.m64n256k16 from shared-memory descriptors, one group left in flight.
// RUN: env K3C_MOE_CHAIN=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=WG
// RUN: env K3C_MOE_CHAIN=0 K3C_MOE_WGMMA=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOWG
// RUN: env K3C_MOE_CHAIN=0 K3C_MOE_WGMMA_FROM=96 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=WG96
// RUN: not env K3C_MOE_CHAIN=0 K3C_MOE_WGMMA_STAGES=2 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=WGSTAGES
// RUN: not env K3C_MOE_CHAIN=0 K3C_MOE_WGMMA_BM=96 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=WGBM
// WGSTAGES: LLVM ERROR: k3c: bad expert GEMM experts_up_mxfp4_wgmma_128: stages must be 3..8, got 2
// WGBM: LLVM ERROR: k3c: bad expert GEMM experts_up_mxfp4_wgmma_96: token rows must be 64 or 128 (one or two warpgroups), got 96

// WG-LABEL: func.func @k3_moe_experts_wide(
// WG: arith.cmpi ule, %{{.*}}, %c256 : index
// WG: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_16)
// WG-NOT: mma_64)
// WG: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c256{{(_[0-9]+)?}}, {{.*}}) dynamic_shared_memory_size {{.*}} module(@k3_moe_experts_wide_experts_up_mxfp4_wgmma_128)
// WG: nvgpu.device_async_copy %arg0[{{.*}}], %view[{{.*}}], 8, {{.*}} {bypassL1} : memref<?x128xbf16> to memref<4x128x64xbf16, #gpu.address_space<workgroup>>
// WG: nvgpu.device_async_copy %arg2[{{.*}}], %view_{{[0-9]+}}[{{.*}}], 8 : memref<{{[0-9]+}}xi8> to memref<4x32x256xi8, #gpu.address_space<workgroup>>
// WG: nvgpu.device_async_copy %arg3[{{.*}}], %view_{{[0-9]+}}[{{.*}}], 16 {bypassL1} : memref<{{[0-9]+}}xi8> to memref<4x32x32xi8, #gpu.address_space<workgroup>>
// WG: nvvm.cp.async.commit.group
// WG: nvvm.cp.async.wait.group 1
// WG: nvvm.vote.sync  any
// WG: vector.store {{.*}} : memref<2x256x64xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// WG: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// WG: nvvm.wgmma.fence.aligned
// WG-COUNT-4: nvvm.wgmma.mma_async
// WG: nvvm.wgmma.commit.group.sync.aligned
// WG: nvvm.wgmma.wait.group.sync.aligned 1
// WG: nvvm.wgmma.wait.group.sync.aligned 0
// WG: module(@k3_moe_experts_wide_experts_down_mxfp4_wgmma_128)
// WG: nvvm.wgmma.mma_async
// WG: return

// WG96-LABEL: func.func @k3_moe_experts_wide(
// WG96: arith.cmpi ule, %{{.*}}, %c512 : index
// WG96: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_16)
// WG96: arith.cmpi ult, %{{.*}}, %c1536 : index
// WG96: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_64)
// WG96: module(@k3_moe_experts_wide_experts_up_mxfp4_wgmma_128)

// Without the warpgroup kernels the 16-row tiles serve up to 32 pairs (512),
// the 64-row tiles above.
// NOWG-LABEL: func.func @k3_moe_experts_wide(
// NOWG-NOT: wgmma
// NOWG: arith.cmpi ule, %{{.*}}, %c512 : index
// NOWG: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_16)
// NOWG-NOT: wgmma
// NOWG: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_64)
// NOWG-NOT: wgmma
// NOWG: return

// Split tails (K3C_MOE_TAIL_UPTO, default 64): the grouping also writes the
// split-tail rows (head tiles ceil((n - tail) / 128), one 16- or 64-row tail
// tile, the tail start: i32 scratch [10, E + 1]); the warpgroup launches cover
// the heads and end at the tail start, then the register-decode mma.sync
// launches take the tails (16 rows, then 64); 16: only 16-row tails; 0: off.
// Out of range: an error naming the switch.
// RUN: env K3C_MOE_CHAIN=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=TAIL
// RUN: env K3C_MOE_CHAIN=0 K3C_MOE_TAIL_UPTO=16 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=TAIL16
// RUN: env K3C_MOE_CHAIN=0 K3C_MOE_TAIL_UPTO=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOTAIL
// TAIL16: module(@k3_moe_experts_wide_experts_down_mxfp4_mma_16_tail)
// TAIL16-NOT: mma_64_tail
// NOTAIL-NOT: _tail)
// Tails of 16, 32, 48 or 64 rows (K3C_MOE_TAIL_FINE=0: 16 and 64 only).
// RUN: env K3C_MOE_CHAIN=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=FINE
// RUN: env K3C_MOE_CHAIN=0 K3C_MOE_TAIL_FINE=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=COARSE
// COARSE: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_16_tail)
// COARSE-NOT: _32_tail
// COARSE-NOT: _48_tail
// COARSE: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_64_tail)
// FINE: module(@k3_moe_experts_wide_experts_down_mxfp4_wgmma_128)
// FINE: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_16_tail)
// FINE: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_32_tail)
// FINE: threads({{.*}}) in ({{.*}} = %c128, {{.*}}) dynamic_shared_memory_size {{.*}} module(@k3_moe_experts_wide_experts_up_mxfp4_mma_48_tail)
// FINE: nvvm.mma.sync
// FINE: module(@k3_moe_experts_wide_experts_down_mxfp4_mma_48_tail)
// FINE: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_64_tail)
// RUN: not env K3C_MOE_CHAIN=0 K3C_MOE_TAIL_UPTO=65 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=TAILBAD
// TAILBAD: LLVM ERROR: k3c: K3C_MOE_TAIL_UPTO must be in 0..64, got 65
// TAIL-LABEL: func.func @k3_moe_experts_wide(
// TAIL: arith.remui %{{.*}}, %c128{{[_0-9]*}} : index
// TAIL: memref.store %{{.*}}, %{{.*}}[%c9, %{{.*}}] : memref<11x17xi32>
// TAIL: module(@k3_moe_experts_wide_experts_up_mxfp4_wgmma_128)
// TAIL: module(@k3_moe_experts_wide_experts_down_mxfp4_wgmma_128)
// TAIL: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_16_tail)
// TAIL: nvvm.mma.sync
// TAIL: module(@k3_moe_experts_wide_experts_down_mxfp4_mma_16_tail)
// TAIL: module(@k3_moe_experts_wide_experts_up_mxfp4_mma_64_tail)
// TAIL: module(@k3_moe_experts_wide_experts_down_mxfp4_mma_64_tail)
// TAIL: return

func.func @moe_experts_wide(%a0: tensor<?x128xbf16>, %a1: tensor<?x4xi32>, %a2: !k3.mxfp4<16x192x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %a3: !k3.mxfp4<16x192x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %a4: !k3.mxfp4<16x128x192, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>) -> (tensor<?x4x128xbf16>) {
    %r = k3.kernel "k3_moe_experts_wide" family "moe_experts" (%a0, %a1, %a2, %a3, %a4) {bytes_per_token = 1280 : i64, flops_per_token = 1179648 : i64, weight_bytes = 1253376 : i64} : (tensor<?x128xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x192x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x192x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x128x192, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>) -> tensor<?x4x128xbf16> {
    ^bb0(%arg401: tensor<?x128xbf16>, %arg402: tensor<?x4xi32>, %arg403: !k3.mxfp4<16x192x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %arg404: !k3.mxfp4<16x192x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %arg405: !k3.mxfp4<16x128x192, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>):
      %116 = k3.expert_mlp %arg401, %arg402 experts(%arg403, %arg404, %arg405) {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} : (tensor<?x128xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x192x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x192x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x128x192, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>) -> tensor<?x4x128xbf16>
      k3.yield %116 : tensor<?x4x128xbf16>
    }
  return %r : tensor<?x4x128xbf16>
}

// Two k chunks a barrier (every tile height by default, where the chunk count
// is even: latent 512 at k_tile 128, four chunks; K3C_MOE_PAIR=16 and
// K3C_MOE_LEAN=16: the 16-row tiles only; any other value an error): the prologue fills two ring
// slots, each step waits for every copy group, refills two slots and
// multiplies two chunks (2 x 32 mma.sync a warp). K3C_MOE_PAIR=0 and
// K3C_MOE_LEAN=0: a chunk a step, two groups left in flight, the four scale
// blocks copied through one branch each.
// RUN: env K3C_MOE_CHAIN=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PAIR
// RUN: env K3C_MOE_CHAIN=0 K3C_MOE_PAIR=0 K3C_MOE_LEAN=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOPAIR
// RUN: env K3C_MOE_CHAIN=0 K3C_MOE_PAIR=16 K3C_MOE_LEAN=16 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PAIR16
// RUN: not env K3C_MOE_CHAIN=0 K3C_MOE_PAIR=2 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=PAIRBAD
// PAIRBAD: LLVM ERROR: k3c: K3C_MOE_PAIR must be 0, 1 or 16, got 2
// PAIR16-LABEL: func.func @k3_moe_experts_pair(
// PAIR16: module(@k3_moe_experts_pair_experts_up_mxfp4_mma_16)
// PAIR16: nvvm.cp.async.wait.group 0
// PAIR16: module(@k3_moe_experts_pair_experts_up_mxfp4_mma_64_tail)
// PAIR16-NOT: nvvm.cp.async.shared.global
// PAIR16: nvvm.cp.async.wait.group 2
// PAIR16: module(@k3_moe_experts_pair_experts_down_mxfp4_mma_64_tail)
// PAIR-LABEL: func.func @k3_moe_experts_pair(
// PAIR: module(@k3_moe_experts_pair_experts_up_mxfp4_mma_16)
// PAIR-COUNT-2: nvgpu.device_async_create_group
// PAIR-NOT: nvgpu.device_async_create_group
// PAIR: scf.for {{.*}} = %c0{{[_0-9]*}} to %c2{{[_0-9]*}} step %c1{{[_0-9]*}} iter_args
// PAIR: nvvm.cp.async.wait.group 0
// PAIR-NEXT: gpu.barrier
// PAIR-COUNT-2: nvgpu.device_async_create_group
// PAIR-COUNT-64: nvvm.mma.sync
// PAIR-NOT: nvvm.mma.sync
// PAIR: scf.yield
// PAIR: module(@k3_moe_experts_pair_experts_up_mxfp4_wgmma_128)
// NOPAIR-LABEL: func.func @k3_moe_experts_pair(
// NOPAIR: module(@k3_moe_experts_pair_experts_up_mxfp4_mma_16)
// NOPAIR-NOT: nvvm.cp.async.shared.global
// NOPAIR-COUNT-3: nvgpu.device_async_create_group
// NOPAIR: scf.for {{.*}} = %c0{{[_0-9]*}} to %c4{{[_0-9]*}} step %c1{{[_0-9]*}} iter_args
// NOPAIR: nvvm.cp.async.wait.group 2
// NOPAIR-NEXT: gpu.barrier
// NOPAIR-COUNT-1: nvgpu.device_async_create_group
// NOPAIR-COUNT-32: nvvm.mma.sync
// NOPAIR-NOT: nvvm.mma.sync
// NOPAIR: scf.yield
// NOPAIR: module(@k3_moe_experts_pair_experts_up_mxfp4_wgmma_128)

func.func @moe_experts_pair(%a0: tensor<?x512xbf16>, %a1: tensor<?x4xi32>, %a2: !k3.mxfp4<16x128x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %a3: !k3.mxfp4<16x128x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %a4: !k3.mxfp4<16x512x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>) -> (tensor<?x4x512xbf16>) {
    %r = k3.kernel "k3_moe_experts_pair" family "moe_experts" (%a0, %a1, %a2, %a3, %a4) {bytes_per_token = 2560 : i64, flops_per_token = 3145728 : i64, weight_bytes = 3342336 : i64} : (tensor<?x512xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x128x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x128x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x512x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>) -> tensor<?x4x512xbf16> {
    ^bb0(%arg401: tensor<?x512xbf16>, %arg402: tensor<?x4xi32>, %arg403: !k3.mxfp4<16x128x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %arg404: !k3.mxfp4<16x128x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %arg405: !k3.mxfp4<16x512x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>):
      %116 = k3.expert_mlp %arg401, %arg402 experts(%arg403, %arg404, %arg405) {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} : (tensor<?x512xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x128x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x128x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x512x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>) -> tensor<?x4x512xbf16>
      k3.yield %116 : tensor<?x4x512xbf16>
    }
  return %r : tensor<?x4x512xbf16>
}

// Split-K in the chained decode launch (K3C_MOE_SPLITK_BELOW=4; default 0:
// off, measured no faster on the H200, and the partials scratch one item):
// where both GEMMs' chunk counts halve into whole steps (latent and width 512
// at k_tile 128: four chunks each), a launch with at most min(4 x 528 blocks,
// 2048) base items runs each as two halves of its k chunks, adjacent in the
// queue; a half stores its valid rows' fp32 accumulators to the partials
// scratch [2048, 2, 16, 128], fences and counts itself in [2048] i32; the
// second to finish fences, resets the count, adds the other's partials
// (volatile loads) and runs the epilogue. k3-tiny's one-chunk GEMMs above do
// not split (no _splitk kernel).
// RUN: env K3C_MOE_SPLITK_BELOW=4 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SPLIT
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SPLITOFF
// RUN: not env K3C_MOE_SPLITK_BELOW=-1 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=SPLITBAD
// SPLITBAD: LLVM ERROR: k3c: K3C_MOE_SPLITK_BELOW must be >= 0, got -1
// SPLIT-NOT: _splitk
// SPLIT-LABEL: func.func @k3_moe_experts_split(
// SPLIT-SAME: %arg12: memref<2048x2x16x128xf32>, %arg13: memref<2048xi32>)
// SPLIT: module(@k3_moe_experts_split_experts_mxfp4_mma_16_chain_splitk)
// SPLIT: %[[ON:.*]] = arith.cmpi ule, %{{.*}}, %c2048 : index
// SPLIT: arith.select %[[ON]], %c2, %c1{{.*}} : index
// SPLIT: scf.while
// SPLIT: arith.divui %{{.*}}, %c2
// SPLIT: arith.remui %{{.*}}, %c2
// SPLIT: nvvm.mma.sync
// SPLIT-COUNT-16: memref.store %{{.*}}, %arg12[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<2048x2x16x128xf32>
// SPLIT: gpu.barrier
// SPLIT: nvvm.memory.barrier <gpu>
// SPLIT: memref.atomic_rmw addi %c1_i32, %arg13[%{{.*}}] : (i32, memref<2048xi32>) -> i32
// SPLIT: nvvm.memory.barrier <gpu>
// SPLIT: gpu.barrier
// SPLIT: memref.store %c0_i32, %arg13[%{{.*}}] : memref<2048xi32>
// SPLIT: llvm.load volatile %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// SPLIT: arith.addf
// SPLITOFF-LABEL: func.func @k3_moe_experts_split(
// SPLITOFF-SAME: %arg12: memref<1x2x16x128xf32>, %arg13: memref<1xi32>)
// SPLITOFF: module(@k3_moe_experts_split_experts_mxfp4_mma_16_chain)
// SPLITOFF-NOT: %arg12[
// SPLITOFF-NOT: _splitk

func.func @moe_experts_split(%a0: tensor<?x512xbf16>, %a1: tensor<?x4xi32>, %a2: !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %a3: !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %a4: !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>) -> (tensor<?x4x512xbf16>) {
    %r = k3.kernel "k3_moe_experts_split" family "moe_experts" (%a0, %a1, %a2, %a3, %a4) {bytes_per_token = 2560 : i64, flops_per_token = 12582912 : i64, weight_bytes = 6488064 : i64} : (tensor<?x512xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>) -> tensor<?x4x512xbf16> {
    ^bb0(%arg401: tensor<?x512xbf16>, %arg402: tensor<?x4xi32>, %arg403: !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %arg404: !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, %arg405: !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>):
      %116 = k3.expert_mlp %arg401, %arg402 experts(%arg403, %arg404, %arg405) {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} : (tensor<?x512xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>, !k3.mxfp4<16x512x512, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>) -> tensor<?x4x512xbf16>
      k3.yield %116 : tensor<?x4x512xbf16>
    }
  return %r : tensor<?x4x512xbf16>
}
