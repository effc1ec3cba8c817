// --k3-lower-kernels on the MoE router. On the GPU the logits x W_rᵀ go through
// the GEMM layer into the fp32 scores scratch (the GEMV at one token, the
// tensor-core tiles of the bf16 build above; a block per token reading all
// of W_r kept the router on one SM), then `router_topk`: a warp per token
// with E / 32 scores a lane, the softmax (or sigmoid) by warp reductions and
// k rounds of a shuffle argmax of score + bias, ties to the lower expert.
// Host: a block per token, the logits, then one thread's serial top k.
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GPU
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST

// GPU-LABEL: func.func @k3_moe_router_sigmoid(
// GPU: arith.cmpi ult, %{{.*}}, %c2 : index
// GPU: module(@k3_moe_router_sigmoid_linear_gemv1)
// GPU: module(@k3_moe_router_sigmoid_linear_mma_32x64x64_s6)
// GPU: nvvm.mma.sync
// GPU: module(@k3_moe_router_sigmoid_linear_wgmma_128x64x64_s4_tma_st)
// GPU: nvvm.wgmma.mma_async
// GPU: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c256, {{.*}}) {{.*}}module(@k3_moe_router_sigmoid_router_topk)
// GPU: memref.load %{{.*}} : memref<?x16xf32>
// Sigmoid scores (no softmax reductions), the bias added, expert 0's score
// to every lane (a round with no candidate picks it, as the serial form
// does), then per slot a lane's first maximum and five butterfly steps over
// (value, expert, score).
// GPU-NOT: gpu.shuffle  xor
// GPU: gpu.shuffle  idx
// GPU-NOT: gpu.shuffle  xor
// GPU: arith.cmpf ogt
// GPU-COUNT-3: gpu.shuffle  xor
// GPU: arith.cmpi slt
// GPU: arith.cmpf oeq
// GPU: memref.store %{{.*}} : memref<?x4xi32>
// GPU: memref.store %{{.*}} : memref<?x4xf32>
// GPU: return

// HOST-LABEL: func.func @k3_moe_router_sigmoid(
// HOST-NOT: gpu.
// HOST-NOT: router_topk
// HOST: scf.parallel
// HOST: return

func.func @router_sigmoid(%a0: tensor<?x128xbf16>, %a1: tensor<16x128xbf16>, %a2: tensor<16xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>) {
  %r:2 = k3.kernel "k3_moe_router_sigmoid" family "moe_router" (%a0, %a1, %a2) {bytes_per_token = 288 : i64, flops_per_token = 4096 : i64, weight_bytes = 4160 : i64} : (tensor<?x128xbf16>, tensor<16x128xbf16>, tensor<16xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>) {
  ^bb0(%arg401: tensor<?x128xbf16>, %arg402: tensor<16x128xbf16>, %arg403: tensor<16xf32>):
    %indices, %weights = k3.moe_router %arg401, %arg402 bias(%arg403) {renormalize = true, routed_scaling_factor = 1.000000e+00 : f64, score = #k3.router_score<sigmoid>, top_k = 4 : i64} : (tensor<?x128xbf16>, tensor<16x128xbf16>, tensor<16xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
    k3.yield %indices, %weights : tensor<?x4xi32>, tensor<?x4xf32>
  }
  return %r#0, %r#1 : tensor<?x4xi32>, tensor<?x4xf32>
}

// -----

// Softmax over 72 experts (three scores a lane, the last partial), no bias,
// f32: the FMA tile above one token, no tensor cores.
// GPU-LABEL: func.func @k3_moe_router_softmax(
// GPU-NOT: nvvm.mma.sync
// GPU-NOT: wgmma
// GPU: module(@k3_moe_router_softmax_router_topk)
// GPU: arith.cmpi ult, %{{.*}}, %c72 : index
// GPU: arith.maximumf
// GPU-COUNT-5: gpu.shuffle  xor
// GPU: math.exp
// GPU: gpu.shuffle  xor
// GPU: arith.divf
// GPU: arith.cmpf ogt
// GPU: return

func.func @router_softmax(%a0: tensor<?x64xf32>, %a1: tensor<72x64xf32>) -> (tensor<?x6xi32>, tensor<?x6xf32>) {
  %r:2 = k3.kernel "k3_moe_router_softmax" family "moe_router" (%a0, %a1) {bytes_per_token = 288 : i64, flops_per_token = 4096 : i64, weight_bytes = 4160 : i64} : (tensor<?x64xf32>, tensor<72x64xf32>) -> (tensor<?x6xi32>, tensor<?x6xf32>) {
  ^bb0(%arg401: tensor<?x64xf32>, %arg402: tensor<72x64xf32>):
    %indices, %weights = k3.moe_router %arg401, %arg402 {renormalize = false, routed_scaling_factor = 2.500000e+00 : f64, score = #k3.router_score<softmax>, top_k = 6 : i64} : (tensor<?x64xf32>, tensor<72x64xf32>) -> (tensor<?x6xi32>, tensor<?x6xf32>)
    k3.yield %indices, %weights : tensor<?x6xi32>, tensor<?x6xf32>
  }
  return %r#0, %r#1 : tensor<?x6xi32>, tensor<?x6xf32>
}
