// --k3-lower-kernels on k3-tiny's absorbed MLA attention (latent cache of
// 40 = 32 + 8, online softmax). sm_90a: a block per (token, head), the cache
// read 16 bytes at a time, q_abs / o_lat in workgroup memory, shuffles.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GPU
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST

// GPU-LABEL: func.func @k3_mla_attn_{{[0-9a-f]+}}(
// GPU-SAME: k3.family = "mla_attn"
// GPU: gpu.launch
// GPU: gpu.launch {{.*}} workgroup(%{{.*}} : memref<40xf32, #gpu.address_space<workgroup>>
// GPU: vector.load %{{.*}} {alignment = 16 : i64} : memref<?x?x40xbf16>, vector<8xbf16>
// GPU: gpu.shuffle  xor
// GPU: gpu.barrier
// GPU: return

// HOST-LABEL: func.func @k3_mla_attn_{{[0-9a-f]+}}(
// HOST-NOT: gpu.
// HOST-NOT: vector.load
// HOST: return

func.func @mla_attn(%a0: tensor<?x96xbf16>, %a1: tensor<?x40xbf16>, %a2: tensor<32xbf16>, %a3: tensor<?x?x40xbf16>, %a4: tensor<?xi32>, %a5: tensor<?xi32>, %a6: tensor<128x32xbf16>, %a7: tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x?x40xbf16>) {
    %r:2 = k3.kernel "k3_mla_attn_23a79545" family "mla_attn" (%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7) {bytes_per_token = 696 : i64, flops_per_token = 8192 : i64, weight_bytes = 8256 : i64} : (tensor<?x96xbf16>, tensor<?x40xbf16>, tensor<32xbf16>, tensor<?x?x40xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<128x32xbf16>, tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x?x40xbf16>) {
    ^bb0(%arg401: tensor<?x96xbf16>, %arg402: tensor<?x40xbf16>, %arg403: tensor<32xbf16>, %arg404: tensor<?x?x40xbf16>, %arg405: tensor<?xi32>, %arg406: tensor<?xi32>, %arg407: tensor<128x32xbf16>, %arg408: tensor<?x64xbf16>):
      %result, %new_cache = k3.mla_attention %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 gate(%arg408) {norm_eps = 9.9999999999999995E-7 : f64, num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, softmax_scale = 0.20412414523193154 : f64, v_head_dim = 16 : i64} : (tensor<?x96xbf16>, tensor<?x40xbf16>, tensor<32xbf16>, tensor<?x?x40xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<128x32xbf16>, tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x?x40xbf16>)
      k3.yield %result, %new_cache : tensor<?x64xbf16>, tensor<?x?x40xbf16>
    }
  return %r#0, %r#1 : tensor<?x64xbf16>, tensor<?x?x40xbf16>
}
