// --k3-lower-kernels: every distinct k3.kernel becomes a loop function for the
// chosen target and the module holds only those afterwards; kernels shared by
// several call sites are lowered once. Errors name the problem.
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GPU
// RUN: not k3-opt %s --k3-lower-kernels=target=sm_80 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not k3-opt %S/Inputs/no-kernels.mlir --k3-lower-kernels=target=host 2>&1 | FileCheck %s --check-prefix=NOKERNEL

// CHECK-NOT: func.func @two_calls
// CHECK-LABEL: func.func @k3_linear_test(%arg0: memref<?x64xbf16>, %arg1: memref<32x64xbf16>, %arg2: memref<?x32xbf16>)
// CHECK-SAME: k3.family = "mlp_down"
// CHECK: scf.parallel
// CHECK-NOT: func.func @k3_linear_test
// GPU-LABEL: func.func @k3_linear_test(
// GPU: module(@k3_linear_test_linear_gemv1)
// GPU: module(@k3_linear_test_linear_mma_32x64x64_s6)
// GPU: module(@k3_linear_test_linear_wgmma_128x64x64_s4_tma_st)
// GPU: module(@k3_linear_test_linear_wgmma_128x256x64_s4_f1_tma_st)
// RUN: not env K3C_WGMMA_TILE=64,512,2 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BADTILE
// RUN: not env K3C_WGMMA_TILE=128,256,2,1 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BADINFLIGHT
// BADINFLIGHT: LLVM ERROR: k3c: bad wgmma tile wgmma_128x256x64_s2_f1: needs inflight 0 or 1 and stages >= 2 + inflight
// BADTILE: LLVM ERROR: k3c: bad wgmma tile wgmma_64x512x64_s2_f1: needs bm in {64, 128, 192, 256}, bn a multiple of 16 up to 256, stages >= 2
// NOKERNEL: error: --k3-lower-kernels: the module holds no k3.kernel (run --k3-pipeline or --k3-fuse-kernels first)
// TARGET: error: --k3-lower-kernels: unknown target 'sm_80' (expected host or sm_90a)
func.func @two_calls(%x: tensor<?x64xbf16>, %w: tensor<32x64xbf16>) -> (tensor<?x32xbf16>, tensor<?x32xbf16>) {
  %0 = k3.kernel "k3_linear_test" family "mlp_down" (%x, %w) : (tensor<?x64xbf16>, tensor<32x64xbf16>) -> tensor<?x32xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<32x64xbf16>):
    %y = k3.linear %a, %b : (tensor<?x64xbf16>, tensor<32x64xbf16>) -> tensor<?x32xbf16>
    k3.yield %y : tensor<?x32xbf16>
  }
  %1 = k3.kernel "k3_linear_test" family "mlp_down" (%x, %w) : (tensor<?x64xbf16>, tensor<32x64xbf16>) -> tensor<?x32xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<32x64xbf16>):
    %y = k3.linear %a, %b : (tensor<?x64xbf16>, tensor<32x64xbf16>) -> tensor<?x32xbf16>
    k3.yield %y : tensor<?x32xbf16>
  }
  return %0, %1 : tensor<?x32xbf16>, tensor<?x32xbf16>
}
