// One-token GEMVs a warp per weight rows (K3C_GEMV_WARP=1, opt-in, GPU):
// short rows (K = 640 here: 80 16-byte chunks, three steps of a warp's 32
// lanes, the third past K in half the lanes) take a warp per
// K3C_GEMV_WARP_ROWS rows (2 by default), 8 warps a block: 520 rows in
// ceil(520 / 16) = 33 blocks of 256 threads, every step's weight loads
// issued before the products, the row sums by shuffles, no shared memory
// and no barrier. K3C_GEMV_WARP_ROWS=4: 17 blocks. Rows longer than
// K3C_GEMV_WARP_MAXK keep the block form; the host target ignores it. Bad
// settings are refused by name.
// RUN: env K3C_GEMV_WARP=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=WARP
// RUN: env K3C_GEMV_WARP=1 K3C_GEMV_WARP_ROWS=4 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ROWS4
// RUN: env K3C_GEMV_WARP=1 K3C_GEMV_WARP_MAXK=512 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=LONG
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=LONG
// RUN: env K3C_GEMV_WARP=1 k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST
// RUN: not env K3C_GEMV_WARP=2 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not env K3C_GEMV_WARP=1 K3C_GEMV_WARP_ROWS=9 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BADROWS
// RUN: not env K3C_GEMV_WARP=1 K3C_GEMV_WARP_MAXK=0 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BADK
// BAD: K3C_GEMV_WARP must be 0 or 1, got 2
// BADROWS: K3C_GEMV_WARP_ROWS must be 1..8, got 9
// BADK: K3C_GEMV_WARP_MAXK must be 1..4096, got 0

// WARP-LABEL: func.func @k3_q_up_warp(
// WARP: gpu.launch blocks({{.*}}) in ({{.*}} = %c33{{[_0-9]*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c256{{[_0-9]*}}, {{.*}}) module(@k3_q_up_warp_linear_gemvw1)
// WARP-NOT: gpu.barrier
// WARP-NOT: workgroup(
// WARP-COUNT-6: vector.load
// WARP: gpu.shuffle  xor
// WARP: gpu.terminator
// ROWS4: gpu.launch blocks({{.*}}) in ({{.*}} = %c17{{[_0-9]*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c256{{[_0-9]*}}, {{.*}}) module(@k3_q_up_warp_linear_gemvw1)
// LONG-LABEL: func.func @k3_q_up_warp(
// LONG-NOT: gemvw
// LONG: module(@k3_q_up_warp_linear_gemv1)
// HOST-LABEL: func.func @k3_q_up_warp(
// HOST-NOT: gemvw
// HOST: return
func.func @q_up(%x: tensor<?x640xbf16>, %w: tensor<520x640xbf16>) -> tensor<?x520xbf16> {
  %r = k3.kernel "k3_q_up_warp" family "mla_q_up" (%x, %w) : (tensor<?x640xbf16>, tensor<520x640xbf16>) -> tensor<?x520xbf16> {
  ^bb0(%a: tensor<?x640xbf16>, %q: tensor<520x640xbf16>):
    %1 = k3.linear %a, %q : (tensor<?x640xbf16>, tensor<520x640xbf16>) -> tensor<?x520xbf16>
    k3.yield %1 : tensor<?x520xbf16>
  }
  return %r : tensor<?x520xbf16>
}
