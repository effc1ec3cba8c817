// --k3-lower-kernels on k3-tiny's routed experts (16 experts, MXFP4 weights in
// the kernel layout). sm_90a: the grouping block, then the grouped up and
// down GEMMs through the GEMM layer's FMA strategy: the gathered token tile
// staged in workgroup memory with 16-byte loads, the MXFP4 payload read as
// fragment runs (vector loads of i8, bit-cast to i32 words).
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GPU
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST

// GPU-LABEL: func.func @k3_moe_experts_{{[0-9a-f]+}}(
// GPU-SAME: k3.family = "moe_experts"
// GPU: gpu.launch {{.*}} in ({{.*}} = %c1, {{.*}}) threads
// GPU: gpu.launch {{.*}} workgroup(%{{.*}} : memref<8x64xbf16, #gpu.address_space<workgroup>>
// GPU: vector.load %arg0[{{.*}}] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
// GPU: vector.load %arg2[{{.*}}] {alignment = 8 : i64} : memref<16384xi8>, vector<8xi8>
// GPU: vector.bitcast {{.*}} : vector<8xi8> to vector<2xi32>
// GPU: gpu.shuffle  xor
// GPU: gpu.launch {{.*}} workgroup(%{{.*}} : memref<8x32xbf16, #gpu.address_space<workgroup>>
// GPU: return

// HOST-LABEL: func.func @k3_moe_experts_{{[0-9a-f]+}}(
// HOST-NOT: gpu.
// HOST: scf.parallel
// HOST: return

func.func @moe_experts(%a0: tensor<?x64xbf16>, %a1: tensor<?x4xi32>, %a2: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %a3: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %a4: !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>) -> (tensor<?x4x64xbf16>) {
    %r = k3.kernel "k3_moe_experts_13dd83a6" family "moe_experts" (%a0, %a1, %a2, %a3, %a4) {bytes_per_token = 656 : i64, flops_per_token = 49152 : i64, weight_bytes = 52224 : i64} : (tensor<?x64xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>) -> tensor<?x4x64xbf16> {
    ^bb0(%arg401: tensor<?x64xbf16>, %arg402: tensor<?x4xi32>, %arg403: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %arg404: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, %arg405: !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>):
      %116 = k3.expert_mlp %arg401, %arg402 experts(%arg403, %arg404, %arg405) {activation = #k3.activation<situ>, situ_beta = 4.000000e+00 : f64, situ_linear_beta = 2.500000e+01 : f64} : (tensor<?x64xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>, !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>) -> tensor<?x4x64xbf16>
      k3.yield %116 : tensor<?x4x64xbf16>
    }
  return %r : tensor<?x4x64xbf16>
}
