// The prefill GEMM tile for shallow products (lowering/tile/Gemm.cpp,
// linearPlan): K <= 128 with wide outputs (O >= 4096, 128 dividing every
// output width of the launch) takes 128 x 128 wgmma tiles, two stages, each
// group waited for (KDA's low-rank gate projection f_b); a deeper K, a
// narrower O or an O the tile does not divide keeps the 128 x 256 tile with
// four stages and a group in flight. K3C_WGMMA_TILE overrides both.
// RUN: k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s
// RUN: env K3C_WGMMA_TILE=128,256,4,1 k3-opt %s --split-input-file --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=OVERRIDE

// CHECK-LABEL: func.func @k3_shallow_wide(
// CHECK: module(@k3_shallow_wide_linear_wgmma_128x64x64_s4_tma_st)
// CHECK: module(@k3_shallow_wide_linear_wgmma_128x128x64_s2_tma_st)
// CHECK: nvvm.wgmma.mma_async
// CHECK-NOT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// OVERRIDE-LABEL: func.func @k3_shallow_wide(
// OVERRIDE-NOT: wgmma_128x128
// OVERRIDE: module(@k3_shallow_wide_linear_wgmma_128x256x64_s4_f1_tma_st)
func.func @shallow_wide(%x: tensor<?x128xbf16>, %w: tensor<4096x128xbf16>) -> tensor<?x4096xbf16> {
  %0 = k3.kernel "k3_shallow_wide" family "kda_conv_gate" (%x, %w) : (tensor<?x128xbf16>, tensor<4096x128xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x128xbf16>, %b: tensor<4096x128xbf16>):
    %y = k3.linear %a, %b : (tensor<?x128xbf16>, tensor<4096x128xbf16>) -> tensor<?x4096xbf16>
    k3.yield %y : tensor<?x4096xbf16>
  }
  return %0 : tensor<?x4096xbf16>
}

// -----

// CHECK-LABEL: func.func @k3_deeper(
// CHECK-NOT: wgmma_128x128
// CHECK: module(@k3_deeper_linear_wgmma_128x256x64_s4_f1_tma_st)
func.func @deeper(%x: tensor<?x192xbf16>, %w: tensor<4096x192xbf16>) -> tensor<?x4096xbf16> {
  %0 = k3.kernel "k3_deeper" family "kda_conv_gate" (%x, %w) : (tensor<?x192xbf16>, tensor<4096x192xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x192xbf16>, %b: tensor<4096x192xbf16>):
    %y = k3.linear %a, %b : (tensor<?x192xbf16>, tensor<4096x192xbf16>) -> tensor<?x4096xbf16>
    k3.yield %y : tensor<?x4096xbf16>
  }
  return %0 : tensor<?x4096xbf16>
}

// -----

// CHECK-LABEL: func.func @k3_narrow(
// CHECK-NOT: wgmma_128x128
// CHECK: module(@k3_narrow_linear_wgmma_128x256x64_s4_f1_tma_st)
func.func @narrow(%x: tensor<?x128xbf16>, %w: tensor<1024x128xbf16>) -> tensor<?x1024xbf16> {
  %0 = k3.kernel "k3_narrow" family "kda_conv_gate" (%x, %w) : (tensor<?x128xbf16>, tensor<1024x128xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x128xbf16>, %b: tensor<1024x128xbf16>):
    %y = k3.linear %a, %b : (tensor<?x128xbf16>, tensor<1024x128xbf16>) -> tensor<?x1024xbf16>
    k3.yield %y : tensor<?x1024xbf16>
  }
  return %0 : tensor<?x1024xbf16>
}

// -----

// CHECK-LABEL: func.func @k3_ragged(
// CHECK-NOT: wgmma_128x128
// CHECK: module(@k3_ragged_linear_wgmma_128x256x64_s4_f1_tma_st)
func.func @ragged(%x: tensor<?x128xbf16>, %w: tensor<4160x128xbf16>) -> tensor<?x4160xbf16> {
  %0 = k3.kernel "k3_ragged" family "kda_conv_gate" (%x, %w) : (tensor<?x128xbf16>, tensor<4160x128xbf16>) -> tensor<?x4160xbf16> {
  ^bb0(%a: tensor<?x128xbf16>, %b: tensor<4160x128xbf16>):
    %y = k3.linear %a, %b : (tensor<?x128xbf16>, tensor<4160x128xbf16>) -> tensor<?x4160xbf16>
    k3.yield %y : tensor<?x4160xbf16>
  }
  return %0 : tensor<?x4160xbf16>
}
