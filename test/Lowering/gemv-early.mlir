// Decode GEMVs that start early (K3C_GEMV_EARLY=1, opt-in): the norm whose
// result the next linear reads executes griddepcontrol.launch_dependents in
// every block when it has one row, so the one-token GEMV is placed while the
// norm runs; the GEMV loads its first K step's weights (volatile loads: no
// pass sinks them) before its own grid wait, then reads x. The same sums in
// the same order. By default neither; another value is refused by name.
// RUN: env K3C_GEMV_EARLY=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=EARLY
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PLAIN
// RUN: env K3C_GEMV_EARLY=1 k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST
// RUN: not env K3C_GEMV_EARLY=2 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: K3C_GEMV_EARLY must be 0 or 1, got 2
// The PTX of k3-tiny: every kernel waits before its global accesses but the
// GEMVs' pinned weight loads; the norms trigger after their wait.
// RUN: env K3C_GEMV_EARLY=1 K3C_MLA_DECODE_EARLY_TILES=0 K3C_MLA_QABS_EARLY_W=0 K3C_MLA_COMBINE_STAGE_W=0 k3-compile %k3c_src/models/configs/k3-tiny.json --emit=ptx --quiet -o %t.ptx
// RUN: %python %S/Inputs/grid_chain.py %t.ptx --wait-only --own-wait gemv1 --trigger attn_res_rmsnorm --trigger attn_res_last_rmsnorm --trigger _kernel --trigger per_head | FileCheck %s --check-prefix=CHAIN
// CHAIN-NOT: kernel
// CHAIN: kernels {{[1-9][0-9]+}}, without the chain first 0
// RUN: %python %S/Inputs/grid_chain.py %t.ptx --wait-only | FileCheck %s --check-prefix=REPORTED
// REPORTED-DAG: kernel k3_mla_q_up_{{[0-9a-f]+}}_linear_gemv1: wait at {{[0-9]+}}, launch_dependents at -1, first global access ld.volatile.global
// REPORTED-DAG: kernel k3_kda_out_{{[0-9a-f]+}}_per_head: wait at {{[0-9]+}}, launch_dependents at {{[0-9]+}}
// REPORTED-DAG: kernel k3_mla_in_{{[0-9a-f]+}}_attn_res_rmsnorm: wait at {{[0-9]+}}, launch_dependents at {{[0-9]+}}

// EARLY-LABEL: func.func @k3_q_up_early(
// The norm's launch: the trigger at one row.
// EARLY: gpu.launch
// EARLY: %[[ROWS:.*]] = memref.dim
// EARLY: %[[ONE:.*]] = arith.cmpi eq, %[[ROWS]], %c1
// EARLY-NEXT: scf.if %[[ONE]] {
// EARLY-NEXT: nvvm.griddepcontrol  launch_dependents
// The GEMV: four rows' first 16-byte weight loads, then the wait.
// EARLY: module(@k3_q_up_early_linear_gemv1)
// EARLY-COUNT-4: llvm.load volatile
// EARLY-NOT: memref.load
// EARLY: nvvm.griddepcontrol  wait
// EARLY: module(@k3_q_up_early_linear_mma_32x64x64_s6)
// EARLY-NOT: nvvm.griddepcontrol
// EARLY: return
// PLAIN-LABEL: func.func @k3_q_up_early(
// PLAIN-NOT: nvvm.griddepcontrol
// PLAIN-NOT: llvm.load volatile
// PLAIN: return
// HOST-LABEL: func.func @k3_q_up_early(
// HOST-NOT: griddepcontrol
// HOST: return
func.func @q_up(%x: tensor<?x256xbf16>, %nw: tensor<256xbf16>, %w: tensor<512x256xbf16>) -> tensor<?x512xbf16> {
  %r = k3.kernel "k3_q_up_early" family "mla_q_up" (%x, %nw, %w) : (tensor<?x256xbf16>, tensor<256xbf16>, tensor<512x256xbf16>) -> tensor<?x512xbf16> {
  ^bb0(%a: tensor<?x256xbf16>, %n: tensor<256xbf16>, %q: tensor<512x256xbf16>):
    %0 = k3.rmsnorm %a, %n {eps = 1.0e-06 : f64} : (tensor<?x256xbf16>, tensor<256xbf16>) -> tensor<?x256xbf16>
    %1 = k3.linear %0, %q : (tensor<?x256xbf16>, tensor<512x256xbf16>) -> tensor<?x512xbf16>
    k3.yield %1 : tensor<?x512xbf16>
  }
  return %r : tensor<?x512xbf16>
}
