// K3C_CONV_DECODE_MERGE=1 (GPU, opt-in until measured): KDA's three short
// convolutions (q, k, v: each the next's conv_state the previous one's new
// state, disjoint columns of one [N, 3, 3C] window tensor, the same
// seq_lens and types) take one decode launch, `short_conv_decode_m3`: its
// second grid dimension is the members' channel blocks one member after
// the other (block y / cBlocks picks the member, y mod cBlocks its block),
// and each member's code is its own as in its own launch (q and k normalize
// in their store into the L2 norms' f32 rows, v stores bf16; each its taps,
// inputs and window columns at its offset). Their prefill launches and
// window launches stay one a member, after the merged branch, in order.
// Without the setting, on the host, and where the convolutions do not
// thread one state or their columns overlap, every convolution keeps its
// own launches.
// RUN: env K3C_CONV_DECODE_MERGE=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=MERGE
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SEPARATE
// RUN: env K3C_CONV_DECODE_MERGE=1 k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST

// MERGE-LABEL: func.func @k3_conv_merge_test(
// MERGE: arith.cmpi ule
// MERGE-NEXT: scf.if
// MERGE: arith.divui %c264, %{{.*}} : index
// MERGE: %[[GY:.*]] = arith.muli %[[CB:[0-9]+]], %c3{{.*}} : index
// MERGE: gpu.launch {{.*}}module(@k3_conv_merge_test_short_conv_decode_m3)
// MERGE: %[[Y:.*]] = arith.remui %{{.*}}, %[[GY]] : index
// MERGE: %[[K:.*]] = arith.divui %[[Y]], %[[CB]] : index
// MERGE: arith.remui %[[Y]], %[[CB]] : index
// MERGE: arith.cmpi eq, %[[K]], %c0
// MERGE: vector.load %arg0[
// MERGE: vector.load %arg3[
// MERGE: vector.store %{{.*}}, %arg11[
// MERGE: } else {
// MERGE: arith.cmpi eq, %[[K]], %c1
// MERGE: vector.load %arg1[
// MERGE: vector.load %arg4[
// MERGE: vector.store %{{.*}}, %arg12[
// MERGE: } else {
// MERGE: vector.load %arg2[
// MERGE: vector.load %arg5[
// MERGE: vector.store %{{.*}}, %arg10[{{.*}} : memref<?x1024xbf16>, vector<4xbf16>
// MERGE-NOT: gpu.launch
// MERGE: } else {
// MERGE: module(@k3_conv_merge_test_short_conv_staged)
// MERGE: module(@k3_conv_merge_test_short_conv_staged)
// MERGE: module(@k3_conv_merge_test_short_conv_staged)
// MERGE-NOT: short_conv_decode
// MERGE: module(@k3_conv_merge_test_short_conv_window)
// MERGE: module(@k3_conv_merge_test_short_conv_window)
// MERGE: module(@k3_conv_merge_test_short_conv_window)
// MERGE: return
// No merge: separate states; overlapping columns.
// MERGE-LABEL: func.func @k3_conv_separate_test(
// MERGE-NOT: _m2
// MERGE-COUNT-2: module(@k3_conv_separate_test_short_conv_decode)
// MERGE-NOT: _m2
// MERGE: return
// MERGE-LABEL: func.func @k3_conv_overlap_test(
// MERGE-NOT: _m2
// MERGE-COUNT-2: module(@k3_conv_overlap_test_short_conv_decode)
// MERGE-NOT: _m2
// MERGE: return

// SEPARATE-LABEL: func.func @k3_conv_merge_test(
// SEPARATE-NOT: _m3
// SEPARATE-COUNT-3: module(@k3_conv_merge_test_short_conv_decode)
// SEPARATE-NOT: _m3
// SEPARATE: return

// HOST-LABEL: func.func @k3_conv_merge_test(
// HOST-NOT: gpu.launch
// HOST: return

func.func @conv_merge(%q: tensor<?x1024xbf16>, %k: tensor<?x1024xbf16>, %v: tensor<?x1024xbf16>, %wq: tensor<1024x1x4xf32>, %wk: tensor<1024x1x4xf32>, %wv: tensor<1024x1x4xf32>, %s: tensor<?x3x3072xbf16>, %lens: tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x3072xbf16>, tensor<?x1024xf32>, tensor<?x1024xf32>) {
  %r:4 = k3.kernel "k3_conv_merge_test" family "kda_conv_gate" (%q, %k, %v, %wq, %wk, %wv, %s, %lens) : (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<1024x1x4xf32>, tensor<1024x1x4xf32>, tensor<?x3x3072xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x3072xbf16>, tensor<?x1024xf32>, tensor<?x1024xf32>) {
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

func.func @conv_separate(%q: tensor<?x1024xbf16>, %k: tensor<?x1024xbf16>, %wq: tensor<1024x1x4xf32>, %wk: tensor<1024x1x4xf32>, %s: tensor<?x3x1024xbf16>, %t: tensor<?x3x1024xbf16>, %lens: tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?x3x1024xbf16>) {
  %r:4 = k3.kernel "k3_conv_separate_test" family "kda_conv_gate" (%q, %k, %wq, %wk, %s, %t, %lens) : (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<1024x1x4xf32>, tensor<?x3x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?x3x1024xbf16>) {
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
