// RUN: k3-opt %s --k3-mxfp4-layout | FileCheck %s

// k_tile is the largest of 128, 64, 32 dividing K; dense tensors are untouched;
// uses see the new type.
// CHECK-LABEL: func.func @experts
// CHECK-SAME: %[[W1:[^:]*]]: !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>
// CHECK-SAME: %{{[^:]*}}: !k3.mxfp4<16x64x32, #k3.mxfp4_layout<n_tile = 8, k_tile = 32>>
// CHECK-SAME: %{{[^:]*}}: !k3.mxfp4<896x3072x3584, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>
// CHECK-SAME: %{{[^:]*}}: tensor<16x32x64xbf16>
// CHECK-SAME: %{{[^:]*}}: !k3.mxfp4<8x256, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>
// CHECK: k3.expert_mlp %{{.*}} experts(%[[W1]], %[[W1]], %{{.*}}) {{.*}} !k3.mxfp4<16x32x64, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>
func.func @experts(%w1: !k3.mxfp4<16x32x64>, %w2: !k3.mxfp4<16x64x32>,
                   %big: !k3.mxfp4<896x3072x3584>, %dense: tensor<16x32x64xbf16>,
                   %done: !k3.mxfp4<8x256, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>,
                   %z: tensor<?x64xbf16>, %i: tensor<?x4xi32>) -> tensor<?x4x64xbf16> {
  %y = k3.expert_mlp %z, %i experts(%w1, %w1, %w2) {activation = #k3.activation<swiglu>}
      : (tensor<?x64xbf16>, tensor<?x4xi32>, !k3.mxfp4<16x32x64>, !k3.mxfp4<16x32x64>,
         !k3.mxfp4<16x64x32>) -> tensor<?x4x64xbf16>
  return %y : tensor<?x4x64xbf16>
}
