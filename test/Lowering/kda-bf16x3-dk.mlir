// K3C_KDA_BF16X3=1 takes the recurrence's products as bf16 m16n8k16 MMAs,
// 16 key columns a k step: a d_k (per key-split warp) that is not a multiple
// of 16 is refused by name. Here d_k = 24: the key split falls back to one
// warp a row block (24 is not a multiple of 16 either), so the error names 24.
// Without the switch the same kernel lowers (tf32 m16n8k8, 8 columns a step).
// RUN: not env K3C_KDA_BF16X3=1 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=TF32
// BAD: LLVM ERROR: k3c: bad KDA chunk recurrence: K3C_KDA_BF16X3=1 needs d_k / key split a multiple of 16, got 24
// TF32: module(@k3_kda_chunk_dk24_kda_chunk_tf32_bv32)
// TF32: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>
func.func @kda_chunk_dk24(%a0: tensor<?x96xf32>, %a1: tensor<?x96xf32>, %a2: tensor<?x128xbf16>, %a3: tensor<?x96xf32>, %a4: tensor<?x4xbf16>, %a5: tensor<?x4x32x24xf32>, %a6: tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x24xf32>) {
    %r:2 = k3.kernel "k3_kda_chunk_dk24" family "kda_chunk" (%a0, %a1, %a2, %a3, %a4, %a5, %a6) : (tensor<?x96xf32>, tensor<?x96xf32>, tensor<?x128xbf16>, tensor<?x96xf32>, tensor<?x4xbf16>, tensor<?x4x32x24xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x24xf32>) {
    ^bb0(%q: tensor<?x96xf32>, %k: tensor<?x96xf32>, %v: tensor<?x128xbf16>, %g: tensor<?x96xf32>, %beta: tensor<?x4xbf16>, %s: tensor<?x4x32x24xf32>, %lens: tensor<?xi32>):
      %result, %new_state = k3.delta_rule %q, %k, %v, %g, %beta, %s, %lens {chunk_size = 16 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked} : (tensor<?x96xf32>, tensor<?x96xf32>, tensor<?x128xbf16>, tensor<?x96xf32>, tensor<?x4xbf16>, tensor<?x4x32x24xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x24xf32>)
      k3.yield %result, %new_state : tensor<?x128xbf16>, tensor<?x4x32x24xf32>
    }
  return %r#0, %r#1 : tensor<?x128xbf16>, tensor<?x4x32x24xf32>
}
