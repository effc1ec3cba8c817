// K3C_CONV_DECODE_GROUP=1 (GPU, opt-in until measured): KDA's three short
// convolutions (q, k, v: each the next's conv_state the previous one's new
// state, disjoint columns of one [N, 3, 3C] window tensor, the same
// seq_lens and types) take one decode launch, `short_conv_decode_g3`: its
// second grid dimension is the members' channel blocks one member after
// the other (block y / cBlocks picks the member, y mod cBlocks its block),
// and each member's code is its own as in its own launch (q and k normalize
// in their store into the L2 norms' f32 rows, v stores bf16; each its taps,
// inputs and window columns at its offset). Their prefill launches and
// window launches stay one a member, after the group's branch, in order.
// Without the setting, on the host, and where the convolutions do not
// thread one state or their columns overlap, every convolution keeps its
// own launches.
// RUN: env K3C_CONV_DECODE_GROUP=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GROUP
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOGROUP
// RUN: env K3C_CONV_DECODE_GROUP=1 k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST

// GROUP-LABEL: func.func @k3_conv_group_test(
// GROUP: arith.cmpi ule
// GROUP-NEXT: scf.if
// GROUP: arith.divui %c264, %{{.*}} : index
// GROUP: %[[GY:.*]] = arith.muli %[[CB:[0-9]+]], %c3{{.*}} : index
// GROUP: gpu.launch {{.*}}module(@k3_conv_group_test_short_conv_decode_g3)
// GROUP: %[[Y:.*]] = arith.remui %{{.*}}, %[[GY]] : index
// GROUP: %[[K:.*]] = arith.divui %[[Y]], %[[CB]] : index
// GROUP: arith.remui %[[Y]], %[[CB]] : index
// GROUP: arith.cmpi eq, %[[K]], %c0
// GROUP: vector.load %arg0[
// GROUP: vector.load %arg3[
// GROUP: vector.store %{{.*}}, %arg11[
// GROUP: } else {
// GROUP: arith.cmpi eq, %[[K]], %c1
// GROUP: vector.load %arg1[
// GROUP: vector.load %arg4[
// GROUP: vector.store %{{.*}}, %arg12[
// GROUP: } else {
// GROUP: vector.load %arg2[
// GROUP: vector.load %arg5[
// GROUP: vector.store %{{.*}}, %arg10[{{.*}} : memref<?x1024xbf16>, vector<4xbf16>
// GROUP-NOT: gpu.launch
// GROUP: } else {
// GROUP: module(@k3_conv_group_test_short_conv_staged)
// GROUP: module(@k3_conv_group_test_short_conv_staged)
// GROUP: module(@k3_conv_group_test_short_conv_staged)
// GROUP-NOT: short_conv_decode
// GROUP: module(@k3_conv_group_test_short_conv_window)
// GROUP: module(@k3_conv_group_test_short_conv_window)
// GROUP: module(@k3_conv_group_test_short_conv_window)
// GROUP: return
// No group: separate states; overlapping columns.
// GROUP-LABEL: func.func @k3_conv_nogroup_test(
// GROUP-NOT: _g2
// GROUP-COUNT-2: module(@k3_conv_nogroup_test_short_conv_decode)
// GROUP-NOT: _g2
// GROUP: return
// GROUP-LABEL: func.func @k3_conv_overlap_test(
// GROUP-NOT: _g2
// GROUP-COUNT-2: module(@k3_conv_overlap_test_short_conv_decode)
// GROUP-NOT: _g2
// GROUP: return

// NOGROUP-LABEL: func.func @k3_conv_group_test(
// NOGROUP-NOT: _g3
// NOGROUP-COUNT-3: module(@k3_conv_group_test_short_conv_decode)
// NOGROUP-NOT: _g3
// NOGROUP: return

// HOST-LABEL: func.func @k3_conv_group_test(
// HOST-NOT: gpu.launch
// HOST: return

func.func @conv_group(%q: tensor<?x1024xbf16>, %k: tensor<?x1024xbf16>, %v: tensor<?x1024xbf16>, %wq: tensor<1024x1x4xf32>, %wk: tensor<1024x1x4xf32>, %wv: tensor<1024x1x4xf32>, %s: tensor<?x3x3072xbf16>, %lens: tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x3072xbf16>, tensor<?x1024xf32>, tensor<?x1024xf32>) {
  %r:4 = k3.kernel "k3_conv_group_test" family "kda_conv_gate" (%q, %k, %v, %wq, %wk, %wv, %s, %lens) : (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<1024x1x4xf32>, tensor<1024x1x4xf32>, tensor<?x3x3072xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x3072xbf16>, tensor<?x1024xf32>, tensor<?x1024xf32>) {
  ^bb0(%aq: tensor<?x1024xbf16>, %ak: tensor<?x1024xbf16>, %av: tensor<?x1024xbf16>, %awq: tensor<1024x1x4xf32>, %awk: tensor<1024x1x4xf32>, %awv: tensor<1024x1x4xf32>, %as: tensor<?x3x3072xbf16>, %al: tensor<?xi32>):
    %yq, %s1 = k3.short_conv %aq, %awq, %as, %al : (tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<?x3x3072xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x3072xbf16>)
    %yk, %s2 = k3.short_conv %ak, %awk, %s1, %al {state_offset = 1024 : i64} : (tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<?x3x3072xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x3072xbf16>)
    %yv, %s3 = k3.short_conv %av, %awv, %s2, %al {state_offset = 2048 : i64} : (tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<?x3x3072xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x3072xbf16>)
    %nq = k3.l2norm %yq {eps = 1.0e-6 : f64, head_dim = 128 : i64, scale = 0.08838834764831843 : f64} : tensor<?x1024xbf16> -> tensor<?x1024xf32>
    %nk = k3.l2norm %yk {eps = 1.0e-6 : f64, head_dim = 128 : i64} : tensor<?x1024xbf16> -> tensor<?x1024xf32>
    k3.yield %yv, %s3, %nq, %nk : tensor<?x1024xbf16>, tensor<?x3x3072xbf16>, tensor<?x1024xf32>, tensor<?x1024xf32>
  }
  return %r#0, %r#1, %r#2, %r#3 : tensor<?x1024xbf16>, tensor<?x3x3072xbf16>, tensor<?x1024xf32>, tensor<?x1024xf32>
}

func.func @conv_nogroup(%q: tensor<?x1024xbf16>, %k: tensor<?x1024xbf16>, %wq: tensor<1024x1x4xf32>, %wk: tensor<1024x1x4xf32>, %s: tensor<?x3x1024xbf16>, %t: tensor<?x3x1024xbf16>, %lens: tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?x3x1024xbf16>) {
  %r:4 = k3.kernel "k3_conv_nogroup_test" family "kda_conv_gate" (%q, %k, %wq, %wk, %s, %t, %lens) : (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<1024x1x4xf32>, tensor<?x3x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?x3x1024xbf16>) {
  ^bb0(%aq: tensor<?x1024xbf16>, %ak: tensor<?x1024xbf16>, %awq: tensor<1024x1x4xf32>, %awk: tensor<1024x1x4xf32>, %as: tensor<?x3x1024xbf16>, %at: tensor<?x3x1024xbf16>, %al: tensor<?xi32>):
    %yq, %s1 = k3.short_conv %aq, %awq, %as, %al : (tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<?x3x1024xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x1024xbf16>)
    %yk, %s2 = k3.short_conv %ak, %awk, %at, %al : (tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<?x3x1024xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x1024xbf16>)
    k3.yield %yq, %yk, %s1, %s2 : tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?x3x1024xbf16>
  }
  return %r#0, %r#1, %r#2, %r#3 : tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?x3x1024xbf16>
}

func.func @conv_overlap(%q: tensor<?x1024xbf16>, %k: tensor<?x1024xbf16>, %wq: tensor<1024x1x4xf32>, %wk: tensor<1024x1x4xf32>, %s: tensor<?x3x2048xbf16>, %lens: tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x3x2048xbf16>) {
  %r:3 = k3.kernel "k3_conv_overlap_test" family "kda_conv_gate" (%q, %k, %wq, %wk, %s, %lens) : (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<1024x1x4xf32>, tensor<?x3x2048xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x3x2048xbf16>) {
  ^bb0(%aq: tensor<?x1024xbf16>, %ak: tensor<?x1024xbf16>, %awq: tensor<1024x1x4xf32>, %awk: tensor<1024x1x4xf32>, %as: tensor<?x3x2048xbf16>, %al: tensor<?xi32>):
    %yq, %s1 = k3.short_conv %aq, %awq, %as, %al {state_offset = 512 : i64} : (tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<?x3x2048xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x2048xbf16>)
    %yk, %s2 = k3.short_conv %ak, %awk, %s1, %al {state_offset = 1024 : i64} : (tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<?x3x2048xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x2048xbf16>)
    k3.yield %yq, %yk, %s2 : tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x3x2048xbf16>
  }
  return %r#0, %r#1, %r#2 : tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x3x2048xbf16>
}
