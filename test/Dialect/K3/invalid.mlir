// One case per verifier message of the k3 dialect.
// RUN: k3-opt %s -split-input-file -verify-diagnostics

func.func @kda_bad_q_proj(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<9x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op operand 'q_proj' dim 0 is 9, expected 8 (num_heads * head_dim = 2 * 4)}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<9x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_bad_conv_rank(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op operand 'q_conv' must have rank 3, got rank 2}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_conv_width_zero(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x0xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op operand 'q_conv' kernel width must be >= 1, got 0}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x0xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_conv_width_mismatch(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x3xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op operand 'k_conv' dim 2 is 3, expected 4 (conv kernel width of 'q_conv' = 4)}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x3xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_bad_f_b(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x5xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op operand 'f_b_proj' dim 1 is 5, expected 4 (gate rank of 'f_a_proj' = 4)}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x5xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_bad_b_proj(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<3x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op operand 'b_proj' dim 0 is 3, expected 2 (num_heads = 2)}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<3x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_bad_o_norm(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<8xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op operand 'o_norm' dim 0 is 8, expected 4 (head_dim = 4)}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<8xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_short_a_log(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<1xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op operand 'a_log' has 1 entries, fewer than num_heads = 2}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<1xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_no_output_gate(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op needs exactly one output gate: 'g_proj' (full rank) or 'g_a_proj' + 'g_b_proj' (low rank)}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) 
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_two_output_gates(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op needs exactly one output gate}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg) low_rank_output_gate(%ga, %gb)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>, tensor<4x16xbf16>, tensor<8x4xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_bad_state(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x8x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op operand 'state' dim 2 is 8, expected 4 (d_v = head_dim = 4)}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x8x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x8x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_bad_conv_state(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x16xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op operand 'conv_state' dim 2 is 16, expected 24 (q, k and v channels = 3 * num_heads * head_dim = 2 * 4)}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x16xbf16>)
  return
}

// -----

func.func @kda_bad_new_state(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op result 'new_state' type 'tensor<?x2x4x4xbf16>' must equal the type of 'state' 'tensor<?x2x4x4xf32>'}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xbf16>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_bad_result_dtype(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op result must have element type 'bf16', got 'f32'}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xf32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_positive_lower_bound(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op attribute 'gate_lower_bound' (g_min) must be <= 0 and finite, got 1.000000e+00}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = 1.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_bounded_without_bound(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op gate_form bounded_sigmoid requires 'gate_lower_bound'}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_softplus_with_bound(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op attribute 'gate_lower_bound' is only valid with gate_form bounded_sigmoid}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<softplus>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_zero_heads(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op attribute 'num_heads' must be positive, got 0}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 0 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_negative_head_dim(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>, %wq: tensor<8x16xbf16>, %wk: tensor<8x16xbf16>, %wv: tensor<8x16xbf16>, %cq: tensor<8x1x4xf32>, %ck: tensor<8x1x4xf32>, %cv: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>, %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %wg: tensor<8x16xbf16>, %ga: tensor<4x16xbf16>, %gb: tensor<8x4xbf16>) {
  // expected-error @below {{'k3.kda' op attribute 'head_dim' must be positive, got -4}}
  %y, %s, %c = k3.kda %x, %lens, %st, %cs
      weights(%wq, %wk, %wv, %cq, %ck, %cv, %fa, %fb, %dt, %al, %wb, %on, %wo) output_gate(%wg)
      {num_heads = 2 : i64, head_dim = -4 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, gate_lower_bound = -5.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_half_low_rank_gate(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %st: tensor<?x2x4x4xf32>, %cs: tensor<?x3x24xbf16>,
    %w: tensor<8x16xbf16>, %c: tensor<8x1x4xf32>, %fa: tensor<4x16xbf16>, %fb: tensor<8x4xbf16>,
    %dt: tensor<8xf32>, %al: tensor<2xf32>, %wb: tensor<2x16xbf16>, %on: tensor<4xf32>, %wo: tensor<16x8xbf16>, %ga: tensor<4x16xbf16>) {
  // expected-error @below {{'k3.kda' op low-rank output gate needs both 'g_a_proj' and 'g_b_proj'}}
  %y:3 = "k3.kda"(%x, %lens, %st, %cs, %w, %w, %w, %c, %c, %c, %fa, %fb, %dt, %al, %wb, %on, %wo, %ga)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0>,
        num_heads = 2 : i64, head_dim = 4 : i64, gate_form = #k3.gate_form<softplus>, norm_eps = 1.0e-05 : f64}>
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>,
         tensor<8x16xbf16>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<8x1x4xf32>, tensor<4x16xbf16>, tensor<8x4xbf16>,
         tensor<8xf32>, tensor<2xf32>, tensor<2x16xbf16>, tensor<4xf32>, tensor<16x8xbf16>, tensor<4x16xbf16>)
      -> (tensor<?x16xbf16>, tensor<?x2x4x4xf32>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @mla_bad_q_b(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %cache: tensor<?x32x10xbf16>, %cl: tensor<?xi32>, %qa: tensor<6x16xbf16>, %qan: tensor<6xbf16>, %qb: tensor<10x6xbf16>, %q: tensor<12x16xbf16>, %kva: tensor<10x16xbf16>, %kvan: tensor<8xbf16>, %kvb: tensor<16x8xbf16>, %g: tensor<8x16xbf16>, %o: tensor<16x8xbf16>) {
  // expected-error @below {{'k3.gated_mla' op operand 'q_b_proj' dim 0 is 10, expected 12 (num_heads * (qk_nope_head_dim + qk_rope_head_dim) = 2 * 6)}}
  %y, %c = k3.gated_mla %x, %lens, %cache, %cl q_lora(%qa, %qan, %qb) kv(%kva, %kvan, %kvb) output_gate(%g) out(%o)
      {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, qk_rope_head_dim = 2 : i64, v_head_dim = 4 : i64, kv_lora_rank = 8 : i64, softmax_scale = 0.408 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x32x10xbf16>, tensor<?xi32>, tensor<6x16xbf16>, tensor<6xbf16>, tensor<10x6xbf16>, tensor<10x16xbf16>, tensor<8xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>, tensor<16x8xbf16>) -> (tensor<?x16xbf16>, tensor<?x32x10xbf16>)
  return
}

// -----

func.func @mla_bad_kv_a(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %cache: tensor<?x32x10xbf16>, %cl: tensor<?xi32>, %qa: tensor<6x16xbf16>, %qan: tensor<6xbf16>, %qb: tensor<12x6xbf16>, %q: tensor<12x16xbf16>, %kva: tensor<8x16xbf16>, %kvan: tensor<8xbf16>, %kvb: tensor<16x8xbf16>, %g: tensor<8x16xbf16>, %o: tensor<16x8xbf16>) {
  // expected-error @below {{'k3.gated_mla' op operand 'kv_a_proj' dim 0 is 8, expected 10 (kv_lora_rank + qk_rope_head_dim = 8 + 2)}}
  %y, %c = k3.gated_mla %x, %lens, %cache, %cl q_lora(%qa, %qan, %qb) kv(%kva, %kvan, %kvb) output_gate(%g) out(%o)
      {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, qk_rope_head_dim = 2 : i64, v_head_dim = 4 : i64, kv_lora_rank = 8 : i64, softmax_scale = 0.408 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x32x10xbf16>, tensor<?xi32>, tensor<6x16xbf16>, tensor<6xbf16>, tensor<12x6xbf16>, tensor<8x16xbf16>, tensor<8xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>, tensor<16x8xbf16>) -> (tensor<?x16xbf16>, tensor<?x32x10xbf16>)
  return
}

// -----

func.func @mla_bad_kv_b(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %cache: tensor<?x32x10xbf16>, %cl: tensor<?xi32>, %qa: tensor<6x16xbf16>, %qan: tensor<6xbf16>, %qb: tensor<12x6xbf16>, %q: tensor<12x16xbf16>, %kva: tensor<10x16xbf16>, %kvan: tensor<8xbf16>, %kvb: tensor<12x8xbf16>, %g: tensor<8x16xbf16>, %o: tensor<16x8xbf16>) {
  // expected-error @below {{'k3.gated_mla' op operand 'kv_b_proj' dim 0 is 12, expected 16 (num_heads * (qk_nope_head_dim + v_head_dim) = 2 * 8)}}
  %y, %c = k3.gated_mla %x, %lens, %cache, %cl q_lora(%qa, %qan, %qb) kv(%kva, %kvan, %kvb) output_gate(%g) out(%o)
      {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, qk_rope_head_dim = 2 : i64, v_head_dim = 4 : i64, kv_lora_rank = 8 : i64, softmax_scale = 0.408 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x32x10xbf16>, tensor<?xi32>, tensor<6x16xbf16>, tensor<6xbf16>, tensor<12x6xbf16>, tensor<10x16xbf16>, tensor<8xbf16>, tensor<12x8xbf16>, tensor<8x16xbf16>, tensor<16x8xbf16>) -> (tensor<?x16xbf16>, tensor<?x32x10xbf16>)
  return
}

// -----

func.func @mla_bad_cache(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %cache: tensor<?x32x8xbf16>, %cl: tensor<?xi32>, %qa: tensor<6x16xbf16>, %qan: tensor<6xbf16>, %qb: tensor<12x6xbf16>, %q: tensor<12x16xbf16>, %kva: tensor<10x16xbf16>, %kvan: tensor<8xbf16>, %kvb: tensor<16x8xbf16>, %g: tensor<8x16xbf16>, %o: tensor<16x8xbf16>) {
  // expected-error @below {{'k3.gated_mla' op operand 'cache' dim 2 is 8, expected 10 (kv_lora_rank + qk_rope_head_dim = 8 + 2)}}
  %y, %c = k3.gated_mla %x, %lens, %cache, %cl q_lora(%qa, %qan, %qb) kv(%kva, %kvan, %kvb) output_gate(%g) out(%o)
      {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, qk_rope_head_dim = 2 : i64, v_head_dim = 4 : i64, kv_lora_rank = 8 : i64, softmax_scale = 0.408 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x32x8xbf16>, tensor<?xi32>, tensor<6x16xbf16>, tensor<6xbf16>, tensor<12x6xbf16>, tensor<10x16xbf16>, tensor<8xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>, tensor<16x8xbf16>) -> (tensor<?x16xbf16>, tensor<?x32x8xbf16>)
  return
}

// -----

func.func @mla_two_query_paths(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %cache: tensor<?x32x10xbf16>, %cl: tensor<?xi32>, %qa: tensor<6x16xbf16>, %qan: tensor<6xbf16>, %qb: tensor<12x6xbf16>, %q: tensor<12x16xbf16>, %kva: tensor<10x16xbf16>, %kvan: tensor<8xbf16>, %kvb: tensor<16x8xbf16>, %g: tensor<8x16xbf16>, %o: tensor<16x8xbf16>) {
  // expected-error @below {{'k3.gated_mla' op needs exactly one query path: q-LoRA ('q_a_proj', 'q_a_norm', 'q_b_proj') or a direct 'q_proj'}}
  %y, %c = k3.gated_mla %x, %lens, %cache, %cl q_lora(%qa, %qan, %qb) q(%q) kv(%kva, %kvan, %kvb) output_gate(%g) out(%o)
      {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, qk_rope_head_dim = 2 : i64, v_head_dim = 4 : i64, kv_lora_rank = 8 : i64, softmax_scale = 0.408 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x32x10xbf16>, tensor<?xi32>, tensor<6x16xbf16>, tensor<6xbf16>, tensor<12x6xbf16>, tensor<12x16xbf16>, tensor<10x16xbf16>, tensor<8xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>, tensor<16x8xbf16>) -> (tensor<?x16xbf16>, tensor<?x32x10xbf16>)
  return
}

// -----

func.func @mla_negative_rope(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %cache: tensor<?x32x10xbf16>, %cl: tensor<?xi32>, %qa: tensor<6x16xbf16>, %qan: tensor<6xbf16>, %qb: tensor<12x6xbf16>, %q: tensor<12x16xbf16>, %kva: tensor<10x16xbf16>, %kvan: tensor<8xbf16>, %kvb: tensor<16x8xbf16>, %g: tensor<8x16xbf16>, %o: tensor<16x8xbf16>) {
  // expected-error @below {{'k3.gated_mla' op attribute 'qk_rope_head_dim' must be >= 0, got -2}}
  %y, %c = k3.gated_mla %x, %lens, %cache, %cl q_lora(%qa, %qan, %qb) kv(%kva, %kvan, %kvb) output_gate(%g) out(%o)
      {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, qk_rope_head_dim = -2 : i64, v_head_dim = 4 : i64, kv_lora_rank = 8 : i64, softmax_scale = 0.408 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x32x10xbf16>, tensor<?xi32>, tensor<6x16xbf16>, tensor<6xbf16>, tensor<12x6xbf16>, tensor<10x16xbf16>, tensor<8xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>, tensor<16x8xbf16>) -> (tensor<?x16xbf16>, tensor<?x32x10xbf16>)
  return
}

// -----

func.func @mla_zero_scale(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %cache: tensor<?x32x10xbf16>, %cl: tensor<?xi32>, %qa: tensor<6x16xbf16>, %qan: tensor<6xbf16>, %qb: tensor<12x6xbf16>, %q: tensor<12x16xbf16>, %kva: tensor<10x16xbf16>, %kvan: tensor<8xbf16>, %kvb: tensor<16x8xbf16>, %g: tensor<8x16xbf16>, %o: tensor<16x8xbf16>) {
  // expected-error @below {{'k3.gated_mla' op attribute 'softmax_scale' must be positive and finite, got 0.000000e+00}}
  %y, %c = k3.gated_mla %x, %lens, %cache, %cl q_lora(%qa, %qan, %qb) kv(%kva, %kvan, %kvb) output_gate(%g) out(%o)
      {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, qk_rope_head_dim = 2 : i64, v_head_dim = 4 : i64, kv_lora_rank = 8 : i64, softmax_scale = 0.0 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x32x10xbf16>, tensor<?xi32>, tensor<6x16xbf16>, tensor<6xbf16>, tensor<12x6xbf16>, tensor<10x16xbf16>, tensor<8xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>, tensor<16x8xbf16>) -> (tensor<?x16xbf16>, tensor<?x32x10xbf16>)
  return
}

// -----

func.func @mla_partial_lora(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %cache: tensor<?x32x10xbf16>, %cl: tensor<?xi32>,
    %qa: tensor<6x16xbf16>, %kva: tensor<10x16xbf16>, %kvan: tensor<8xbf16>, %kvb: tensor<16x8xbf16>, %o: tensor<16x8xbf16>) {
  // expected-error @below {{'k3.gated_mla' op q-LoRA path needs all of 'q_a_proj', 'q_a_norm' and 'q_b_proj'}}
  %y:2 = "k3.gated_mla"(%x, %lens, %cache, %cl, %qa, %kva, %kvan, %kvb, %o)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1>,
        num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, qk_rope_head_dim = 2 : i64, v_head_dim = 4 : i64,
        kv_lora_rank = 8 : i64, softmax_scale = 0.408 : f64, norm_eps = 1.0e-06 : f64}>
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x32x10xbf16>, tensor<?xi32>, tensor<6x16xbf16>,
         tensor<10x16xbf16>, tensor<8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>)
      -> (tensor<?x16xbf16>, tensor<?x32x10xbf16>)
  return
}

// -----

func.func @attn_res_mixed_sources(%a: tensor<?x16xbf16>, %b: tensor<?x16xf32>, %n: tensor<16xbf16>, %p: tensor<1x16xbf16>) {
  // expected-error @below {{'k3.attn_res' op source #1 type 'tensor<?x16xf32>' must equal the type of source #0 'tensor<?x16xbf16>'}}
  %m = k3.attn_res(%a, %b) weights(%n, %p) {eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<?x16xf32>), tensor<16xbf16>, tensor<1x16xbf16> -> tensor<?x16xbf16>
  return
}

// -----

func.func @attn_res_bad_proj(%a: tensor<?x16xbf16>, %n: tensor<16xbf16>, %p: tensor<2x16xbf16>) {
  // expected-error @below {{'k3.attn_res' op operand 'proj_weight' dim 0 is 2, expected 1 (one pseudo-query)}}
  %m = k3.attn_res(%a) weights(%n, %p) {eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>), tensor<16xbf16>, tensor<2x16xbf16> -> tensor<?x16xbf16>
  return
}

// -----

func.func @attn_res_no_sources(%n: tensor<16xbf16>, %p: tensor<1x16xbf16>) {
  // expected-error @below {{'k3.attn_res' op needs at least one source}}
  %m = "k3.attn_res"(%n, %p) <{eps = 1.0e-05 : f64}> : (tensor<16xbf16>, tensor<1x16xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @attn_res_negative_eps(%a: tensor<?x16xbf16>, %n: tensor<16xbf16>, %p: tensor<1x16xbf16>) {
  // expected-error @below {{'k3.attn_res' op attribute 'eps' must be positive and finite, got -1.000000e+00}}
  %m = k3.attn_res(%a) weights(%n, %p) {eps = -1.0 : f64}
      : (tensor<?x16xbf16>), tensor<16xbf16>, tensor<1x16xbf16> -> tensor<?x16xbf16>
  return
}

// -----

func.func @moe_top_k_above_experts(%x: tensor<?x16xbf16>, %r: tensor<8x16xbf16>, %rb: tensor<8xf32>, %ld: tensor<64x16xbf16>, %ln: tensor<64xbf16>, %lu: tensor<16x64xbf16>, %w1: !k3.mxfp4<8x32x64>, %w3: !k3.mxfp4<8x32x64>, %w2: !k3.mxfp4<8x64x32>) {
  // expected-error @below {{'k3.latent_moe' op top_k = 9 exceeds the number of experts = 8}}
  %y = k3.latent_moe %x router(%r, %rb) latent(%ld, %ln, %lu) experts(%w1, %w3, %w2)
      {top_k = 9 : i64, score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 1.0 : f64, activation = #k3.activation<situ>, situ_beta = 4.0 : f64, situ_linear_beta = 25.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<8x16xbf16>, tensor<8xf32>, tensor<64x16xbf16>, tensor<64xbf16>, tensor<16x64xbf16>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x64x32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @moe_zero_top_k(%x: tensor<?x16xbf16>, %r: tensor<8x16xbf16>, %rb: tensor<8xf32>, %ld: tensor<64x16xbf16>, %ln: tensor<64xbf16>, %lu: tensor<16x64xbf16>, %w1: !k3.mxfp4<8x32x64>, %w3: !k3.mxfp4<8x32x64>, %w2: !k3.mxfp4<8x64x32>) {
  // expected-error @below {{'k3.latent_moe' op attribute 'top_k' must be positive, got 0}}
  %y = k3.latent_moe %x router(%r, %rb) latent(%ld, %ln, %lu) experts(%w1, %w3, %w2)
      {top_k = 0 : i64, score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 1.0 : f64, activation = #k3.activation<situ>, situ_beta = 4.0 : f64, situ_linear_beta = 25.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<8x16xbf16>, tensor<8xf32>, tensor<64x16xbf16>, tensor<64xbf16>, tensor<16x64xbf16>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x64x32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @moe_bad_w2(%x: tensor<?x16xbf16>, %r: tensor<8x16xbf16>, %rb: tensor<8xf32>, %ld: tensor<64x16xbf16>, %ln: tensor<64xbf16>, %lu: tensor<16x64xbf16>, %w1: !k3.mxfp4<8x32x64>, %w3: !k3.mxfp4<8x32x64>, %w2: !k3.mxfp4<8x96x32>) {
  // expected-error @below {{'k3.latent_moe' op operand 'w2' dim 1 is 96, expected 64 (expert input width = 64)}}
  %y = k3.latent_moe %x router(%r, %rb) latent(%ld, %ln, %lu) experts(%w1, %w3, %w2)
      {top_k = 2 : i64, score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 1.0 : f64, activation = #k3.activation<situ>, situ_beta = 4.0 : f64, situ_linear_beta = 25.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<8x16xbf16>, tensor<8xf32>, tensor<64x16xbf16>, tensor<64xbf16>, tensor<16x64xbf16>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x96x32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @moe_expert_width(%x: tensor<?x16xbf16>, %r: tensor<8x16xbf16>, %rb: tensor<8xf32>, %ld: tensor<64x16xbf16>, %ln: tensor<64xbf16>, %lu: tensor<16x64xbf16>, %w1: !k3.mxfp4<8x32x96>, %w3: !k3.mxfp4<8x32x64>, %w2: !k3.mxfp4<8x64x32>) {
  // expected-error @below {{'k3.latent_moe' op operand 'w1' dim 2 is 96, expected 64 (expert input width = 64)}}
  %y = k3.latent_moe %x router(%r, %rb) latent(%ld, %ln, %lu) experts(%w1, %w3, %w2)
      {top_k = 2 : i64, score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 1.0 : f64, activation = #k3.activation<situ>, situ_beta = 4.0 : f64, situ_linear_beta = 25.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<8x16xbf16>, tensor<8xf32>, tensor<64x16xbf16>, tensor<64xbf16>, tensor<16x64xbf16>, !k3.mxfp4<8x32x96>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x64x32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @moe_expert_count(%x: tensor<?x16xbf16>, %r: tensor<8x16xbf16>, %rb: tensor<8xf32>, %ld: tensor<64x16xbf16>, %ln: tensor<64xbf16>, %lu: tensor<16x64xbf16>, %w1: !k3.mxfp4<8x32x64>, %w3: !k3.mxfp4<4x32x64>, %w2: !k3.mxfp4<8x64x32>) {
  // expected-error @below {{'k3.latent_moe' op operand 'w3' dim 0 is 4, expected 8 (num_experts = 8)}}
  %y = k3.latent_moe %x router(%r, %rb) latent(%ld, %ln, %lu) experts(%w1, %w3, %w2)
      {top_k = 2 : i64, score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 1.0 : f64, activation = #k3.activation<situ>, situ_beta = 4.0 : f64, situ_linear_beta = 25.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<8x16xbf16>, tensor<8xf32>, tensor<64x16xbf16>, tensor<64xbf16>, tensor<16x64xbf16>, !k3.mxfp4<8x32x64>, !k3.mxfp4<4x32x64>, !k3.mxfp4<8x64x32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @moe_bad_bias(%x: tensor<?x16xbf16>, %r: tensor<8x16xbf16>, %rb: tensor<7xf32>, %ld: tensor<64x16xbf16>, %ln: tensor<64xbf16>, %lu: tensor<16x64xbf16>, %w1: !k3.mxfp4<8x32x64>, %w3: !k3.mxfp4<8x32x64>, %w2: !k3.mxfp4<8x64x32>) {
  // expected-error @below {{'k3.latent_moe' op operand 'router_bias' dim 0 is 7, expected 8 (num_experts of 'router' = 8)}}
  %y = k3.latent_moe %x router(%r, %rb) latent(%ld, %ln, %lu) experts(%w1, %w3, %w2)
      {top_k = 2 : i64, score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 1.0 : f64, activation = #k3.activation<situ>, situ_beta = 4.0 : f64, situ_linear_beta = 25.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<8x16xbf16>, tensor<7xf32>, tensor<64x16xbf16>, tensor<64xbf16>, tensor<16x64xbf16>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x64x32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @moe_situ_without_betas(%x: tensor<?x16xbf16>, %r: tensor<8x16xbf16>, %rb: tensor<8xf32>, %ld: tensor<64x16xbf16>, %ln: tensor<64xbf16>, %lu: tensor<16x64xbf16>, %w1: !k3.mxfp4<8x32x64>, %w3: !k3.mxfp4<8x32x64>, %w2: !k3.mxfp4<8x64x32>) {
  // expected-error @below {{'k3.latent_moe' op activation situ requires 'situ_beta' and 'situ_linear_beta'}}
  %y = k3.latent_moe %x router(%r, %rb) latent(%ld, %ln, %lu) experts(%w1, %w3, %w2)
      {top_k = 2 : i64, score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 1.0 : f64, activation = #k3.activation<situ>, situ_linear_beta = 25.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<8x16xbf16>, tensor<8xf32>, tensor<64x16xbf16>, tensor<64xbf16>, tensor<16x64xbf16>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x64x32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @moe_swiglu_with_betas(%x: tensor<?x16xbf16>, %r: tensor<8x16xbf16>, %rb: tensor<8xf32>, %ld: tensor<64x16xbf16>, %ln: tensor<64xbf16>, %lu: tensor<16x64xbf16>, %w1: !k3.mxfp4<8x32x64>, %w3: !k3.mxfp4<8x32x64>, %w2: !k3.mxfp4<8x64x32>) {
  // expected-error @below {{'k3.latent_moe' op activation swiglu takes no 'situ_beta'/'situ_linear_beta'}}
  %y = k3.latent_moe %x router(%r, %rb) latent(%ld, %ln, %lu) experts(%w1, %w3, %w2)
      {top_k = 2 : i64, score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 1.0 : f64, activation = #k3.activation<swiglu>, situ_beta = 4.0 : f64, situ_linear_beta = 25.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<8x16xbf16>, tensor<8xf32>, tensor<64x16xbf16>, tensor<64xbf16>, tensor<16x64xbf16>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x64x32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @moe_zero_scaling(%x: tensor<?x16xbf16>, %r: tensor<8x16xbf16>, %rb: tensor<8xf32>, %ld: tensor<64x16xbf16>, %ln: tensor<64xbf16>, %lu: tensor<16x64xbf16>, %w1: !k3.mxfp4<8x32x64>, %w3: !k3.mxfp4<8x32x64>, %w2: !k3.mxfp4<8x64x32>) {
  // expected-error @below {{'k3.latent_moe' op attribute 'routed_scaling_factor' must be positive and finite, got 0.000000e+00}}
  %y = k3.latent_moe %x router(%r, %rb) latent(%ld, %ln, %lu) experts(%w1, %w3, %w2)
      {top_k = 2 : i64, score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 0.0 : f64, activation = #k3.activation<situ>, situ_beta = 4.0 : f64, situ_linear_beta = 25.0 : f64, norm_eps = 1.0e-05 : f64}
      : (tensor<?x16xbf16>, tensor<8x16xbf16>, tensor<8xf32>, tensor<64x16xbf16>, tensor<64xbf16>, tensor<16x64xbf16>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x64x32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @moe_partial_latent(%x: tensor<?x16xbf16>, %r: tensor<8x16xbf16>, %ld: tensor<64x16xbf16>,
    %w1: !k3.mxfp4<8x32x64>, %w2: !k3.mxfp4<8x64x32>) {
  // expected-error @below {{'k3.latent_moe' op latent path needs all of 'latent_down', 'latent_norm' and 'latent_up'}}
  %y = "k3.latent_moe"(%x, %r, %ld, %w1, %w1, %w2)
      <{operandSegmentSizes = array<i32: 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0>, top_k = 2 : i64,
        score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 1.0 : f64,
        activation = #k3.activation<swiglu>, norm_eps = 1.0e-05 : f64}>
      : (tensor<?x16xbf16>, tensor<8x16xbf16>, tensor<64x16xbf16>, !k3.mxfp4<8x32x64>, !k3.mxfp4<8x32x64>,
         !k3.mxfp4<8x64x32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @moe_partial_shared(%x: tensor<?x16xbf16>, %r: tensor<8x16xbf16>, %w1: tensor<8x4x16xbf16>,
    %w2: tensor<8x16x4xbf16>, %sg: tensor<32x16xbf16>) {
  // expected-error @below {{'k3.latent_moe' op shared experts need all of 'shared_gate', 'shared_up' and 'shared_down'}}
  %y = "k3.latent_moe"(%x, %r, %w1, %w1, %w2, %sg)
      <{operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0>, top_k = 2 : i64,
        score = #k3.router_score<sigmoid>, renormalize = true, routed_scaling_factor = 1.0 : f64,
        activation = #k3.activation<swiglu>, norm_eps = 1.0e-05 : f64}>
      : (tensor<?x16xbf16>, tensor<8x16xbf16>, tensor<8x4x16xbf16>, tensor<8x4x16xbf16>,
         tensor<8x16x4xbf16>, tensor<32x16xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @short_conv_bad_state(%x: tensor<?x8xbf16>, %w: tensor<8x1x4xf32>, %s: tensor<?x4x8xbf16>, %l: tensor<?xi32>) {
  // expected-error @below {{'k3.short_conv' op operand 'conv_state' dim 1 is 4, expected 3 (kernel width - 1 = 3)}}
  %y, %ns = k3.short_conv %x, %w, %s, %l : (tensor<?x8xbf16>, tensor<8x1x4xf32>, tensor<?x4x8xbf16>, tensor<?xi32>) -> (tensor<?x8xbf16>, tensor<?x4x8xbf16>)
  return
}

// -----

func.func @short_conv_zero_width(%x: tensor<?x8xbf16>, %w: tensor<8x1x0xf32>, %s: tensor<?x0x8xbf16>, %l: tensor<?xi32>) {
  // expected-error @below {{'k3.short_conv' op operand 'weight' kernel width must be >= 1, got 0}}
  %y, %ns = k3.short_conv %x, %w, %s, %l : (tensor<?x8xbf16>, tensor<8x1x0xf32>, tensor<?x0x8xbf16>, tensor<?xi32>) -> (tensor<?x8xbf16>, tensor<?x0x8xbf16>)
  return
}

// -----

func.func @short_conv_offset_past_state(%x: tensor<?x8xbf16>, %w: tensor<8x1x4xf32>, %s: tensor<?x3x24xbf16>, %l: tensor<?xi32>) {
  // expected-error @below {{'k3.short_conv' op channels [20, 28) run past the 24 channels of 'conv_state'}}
  %y, %ns = k3.short_conv %x, %w, %s, %l {state_offset = 20 : i64} : (tensor<?x8xbf16>, tensor<8x1x4xf32>, tensor<?x3x24xbf16>, tensor<?xi32>) -> (tensor<?x8xbf16>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @short_conv_negative_offset(%x: tensor<?x8xbf16>, %w: tensor<8x1x4xf32>, %s: tensor<?x3x24xbf16>, %l: tensor<?xi32>) {
  // expected-error @below {{'k3.short_conv' op attribute 'state_offset' must be >= 0, got -8}}
  %y, %ns = k3.short_conv %x, %w, %s, %l {state_offset = -8 : i64} : (tensor<?x8xbf16>, tensor<8x1x4xf32>, tensor<?x3x24xbf16>, tensor<?xi32>) -> (tensor<?x8xbf16>, tensor<?x3x24xbf16>)
  return
}

// -----

func.func @kda_gate_indivisible(%z: tensor<?x10xbf16>, %a: tensor<3xf32>, %b: tensor<10xf32>) {
  // expected-error @below {{'k3.kda_gate' op operand 'logits' width 10 is not divisible by num_heads = 3}}
  %g = k3.kda_gate %z, %a, %b {num_heads = 3 : i64, gate_form = #k3.gate_form<softplus>}
      : (tensor<?x10xbf16>, tensor<3xf32>, tensor<10xf32>) -> tensor<?x10xf32>
  return
}

// -----

func.func @kda_gate_short_a_log(%z: tensor<?x8xbf16>, %a: tensor<1xf32>, %b: tensor<8xf32>) {
  // expected-error @below {{'k3.kda_gate' op operand 'a_log' has 1 entries, fewer than num_heads = 2}}
  %g = k3.kda_gate %z, %a, %b {num_heads = 2 : i64, gate_form = #k3.gate_form<bounded_sigmoid>, lower_bound = -5.0 : f64}
      : (tensor<?x8xbf16>, tensor<1xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @l2norm_zero_eps(%x: tensor<?x8xbf16>) {
  // expected-error @below {{'k3.l2norm' op attribute 'eps' must be positive and finite, got 0.000000e+00}}
  %y = k3.l2norm %x {head_dim = 4 : i64, eps = 0.0 : f64} : tensor<?x8xbf16> -> tensor<?x8xf32>
  return
}

// -----

func.func @l2norm_bad_result(%x: tensor<?x8xbf16>) {
  // expected-error @below {{'k3.l2norm' op result dim 1 is 4, expected 8 (width of 'input')}}
  %y = k3.l2norm %x {head_dim = 4 : i64, eps = 1.0e-06 : f64} : tensor<?x8xbf16> -> tensor<?x4xf32>
  return
}

// -----

func.func @l2norm_indivisible(%x: tensor<?x10xbf16>) {
  // expected-error @below {{'k3.l2norm' op operand 'input' width 10 is not divisible by head_dim = 4}}
  %y = k3.l2norm %x {head_dim = 4 : i64, eps = 1.0e-06 : f64} : tensor<?x10xbf16> -> tensor<?x10xf32>
  return
}

// -----

func.func @l2norm_bad_inv_heads(%x: tensor<?x8xbf16>, %r: tensor<?x3xf32>) {
  // expected-error @below {{'k3.l2norm' op operand 'inv_norm' dim 1 is 3, expected 2 (heads: width of 'input' / head_dim)}}
  %y = k3.l2norm %x, inv_norm %r {head_dim = 4 : i64, eps = 1.0e-06 : f64} : tensor<?x8xbf16>, tensor<?x3xf32> -> tensor<?x8xf32>
  return
}

// -----

func.func @l2norm_bad_inv_tokens(%x: tensor<5x8xbf16>, %r: tensor<4x2xf32>) {
  // expected-error @below {{'k3.l2norm' op operand 'inv_norm' dim 0 is 4, expected 5 (token count of 'input')}}
  %y = k3.l2norm %x, inv_norm %r {head_dim = 4 : i64, eps = 1.0e-06 : f64} : tensor<5x8xbf16>, tensor<4x2xf32> -> tensor<5x8xf32>
  return
}

// -----

func.func @l2norm_bad_inv_rank(%x: tensor<?x8xbf16>, %r: tensor<?xf32>) {
  // expected-error @below {{'k3.l2norm' op operand 'inv_norm' must have rank 2, got rank 1}}
  %y = k3.l2norm %x, inv_norm %r {head_dim = 4 : i64, eps = 1.0e-06 : f64} : tensor<?x8xbf16>, tensor<?xf32> -> tensor<?x8xf32>
  return
}

// -----

func.func @l2norm_inv_bf16(%x: tensor<?x8xbf16>, %r: tensor<?x2xbf16>) {
  // expected-error @below {{'k3.l2norm' op operand #1 must be ranked tensor of 32-bit float values}}
  %y = k3.l2norm %x, inv_norm %r {head_dim = 4 : i64, eps = 1.0e-06 : f64} : tensor<?x8xbf16>, tensor<?x2xbf16> -> tensor<?x8xf32>
  return
}

// -----

func.func @l2norm_inv_zero_eps(%x: tensor<?x8xbf16>) {
  // expected-error @below {{'k3.l2norm_inv' op attribute 'eps' must be positive and finite, got 0.000000e+00}}
  %r = k3.l2norm_inv %x {head_dim = 4 : i64, eps = 0.0 : f64} : tensor<?x8xbf16> -> tensor<?x2xf32>
  return
}

// -----

func.func @l2norm_inv_zero_head_dim(%x: tensor<?x8xbf16>) {
  // expected-error @below {{'k3.l2norm_inv' op attribute 'head_dim' must be positive, got 0}}
  %r = k3.l2norm_inv %x {head_dim = 0 : i64, eps = 1.0e-06 : f64} : tensor<?x8xbf16> -> tensor<?x2xf32>
  return
}

// -----

func.func @l2norm_inv_rank(%x: tensor<8xbf16>) {
  // expected-error @below {{'k3.l2norm_inv' op operand 'input' must have rank 2, got rank 1}}
  %r = k3.l2norm_inv %x {head_dim = 4 : i64, eps = 1.0e-06 : f64} : tensor<8xbf16> -> tensor<?x2xf32>
  return
}

// -----

func.func @l2norm_inv_indivisible(%x: tensor<?x10xbf16>) {
  // expected-error @below {{'k3.l2norm_inv' op operand 'input' width 10 is not divisible by head_dim = 4}}
  %r = k3.l2norm_inv %x {head_dim = 4 : i64, eps = 1.0e-06 : f64} : tensor<?x10xbf16> -> tensor<?x2xf32>
  return
}

// -----

func.func @l2norm_inv_bad_result(%x: tensor<?x8xbf16>) {
  // expected-error @below {{'k3.l2norm_inv' op result dim 1 is 8, expected 2 (heads: width of 'input' / head_dim)}}
  %r = k3.l2norm_inv %x {head_dim = 4 : i64, eps = 1.0e-06 : f64} : tensor<?x8xbf16> -> tensor<?x8xf32>
  return
}

// -----

func.func @l2norm_inv_bad_result_dynamic(%x: tensor<4x?xbf16>) {
  // expected-error @below {{'k3.l2norm_inv' op result dim 0 is 3, expected 4 (token count of 'input')}}
  %r = k3.l2norm_inv %x {head_dim = 4 : i64, eps = 1.0e-06 : f64} : tensor<4x?xbf16> -> tensor<3x2xf32>
  return
}

// -----

func.func @delta_rule_tile_without_chunk(%q: tensor<?x8xbf16>, %g: tensor<?x8xf32>, %b: tensor<?x2xbf16>, %s: tensor<?x2x4x4xf32>, %l: tensor<?xi32>) {
  // expected-error @below {{'k3.delta_rule' op attribute 'tile' requires 'chunk_size'}}
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 2 : i64, tile = 16 : i64}
      : (tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xf32>, tensor<?x2xbf16>, tensor<?x2x4x4xf32>, tensor<?xi32>)
      -> (tensor<?x8xbf16>, tensor<?x2x4x4xf32>)
  return
}

// -----

func.func @delta_rule_tile_not_dividing(%q: tensor<?x8xbf16>, %g: tensor<?x8xf32>, %b: tensor<?x2xbf16>, %s: tensor<?x2x4x4xf32>, %l: tensor<?xi32>) {
  // expected-error @below {{'k3.delta_rule' op attribute 'tile' = 12 does not divide chunk_size = 16}}
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 2 : i64, chunk_size = 16 : i64, tile = 12 : i64}
      : (tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xf32>, tensor<?x2xbf16>, tensor<?x2x4x4xf32>, tensor<?xi32>)
      -> (tensor<?x8xbf16>, tensor<?x2x4x4xf32>)
  return
}

// -----

func.func @delta_rule_zero_chunk(%q: tensor<?x8xbf16>, %g: tensor<?x8xf32>, %b: tensor<?x2xbf16>, %s: tensor<?x2x4x4xf32>, %l: tensor<?xi32>) {
  // expected-error @below {{'k3.delta_rule' op attribute 'chunk_size' must be positive, got 0}}
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 2 : i64, chunk_size = 0 : i64}
      : (tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xf32>, tensor<?x2xbf16>, tensor<?x2x4x4xf32>, tensor<?xi32>)
      -> (tensor<?x8xbf16>, tensor<?x2x4x4xf32>)
  return
}

// -----

func.func @delta_rule_gamma_type(%q: tensor<?x8xbf16>, %g: tensor<?x8xf32>, %b: tensor<?x2xbf16>, %s: tensor<?x2x4x4xf32>, %l: tensor<?xi32>) {
  // expected-error @below {{'k3.delta_rule' op attribute 'gamma_type' must be a float type, got 'i32'}}
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 2 : i64, chunk_size = 16 : i64, gamma_type = i32}
      : (tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xf32>, tensor<?x2xbf16>, tensor<?x2x4x4xf32>, tensor<?xi32>)
      -> (tensor<?x8xbf16>, tensor<?x2x4x4xf32>)
  return
}

// -----

func.func @delta_rule_path_without_chunk(%q: tensor<?x8xbf16>, %g: tensor<?x8xf32>, %b: tensor<?x2xbf16>, %s: tensor<?x2x4x4xf32>, %l: tensor<?xi32>) {
  // expected-error @below {{'k3.delta_rule' op attribute 'path' requires 'chunk_size'}}
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 2 : i64, path = #k3.chunk_path<pairwise>}
      : (tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xf32>, tensor<?x2xbf16>, tensor<?x2x4x4xf32>, tensor<?xi32>)
      -> (tensor<?x8xbf16>, tensor<?x2x4x4xf32>)
  return
}

// -----

func.func @delta_rule_bad_beta(%q: tensor<?x8xbf16>, %g: tensor<?x8xf32>, %b: tensor<?x3xbf16>, %s: tensor<?x2x4x4xf32>, %l: tensor<?xi32>) {
  // expected-error @below {{'k3.delta_rule' op operand 'beta' dim 1 is 3, expected 2 (num_heads = 2)}}
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 2 : i64}
      : (tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xf32>, tensor<?x3xbf16>, tensor<?x2x4x4xf32>, tensor<?xi32>)
      -> (tensor<?x8xbf16>, tensor<?x2x4x4xf32>)
  return
}

// -----

func.func @delta_rule_bad_heads(%q: tensor<?x8xbf16>, %g: tensor<?x8xf32>, %b: tensor<?x4xbf16>, %s: tensor<?x2x4x4xf32>, %l: tensor<?xi32>) {
  // expected-error @below {{'k3.delta_rule' op operand 'state' dim 1 is 2, expected 4 (num_heads = 4)}}
  %o, %ns = k3.delta_rule %q, %q, %q, %g, %b, %s, %l {num_heads = 4 : i64}
      : (tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xf32>, tensor<?x4xbf16>, tensor<?x2x4x4xf32>, tensor<?xi32>)
      -> (tensor<?x8xbf16>, tensor<?x2x4x4xf32>)
  return
}

// -----

func.func @gated_rmsnorm_bad_head(%x: tensor<?x10xbf16>, %w: tensor<4xf32>) {
  // expected-error @below {{'k3.gated_rmsnorm' op operand 'input' width 10 is not a multiple of the head dim 4 of 'weight'}}
  %y = k3.gated_rmsnorm %x, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x10xbf16>, tensor<?x10xbf16>, tensor<4xf32>) -> tensor<?x10xbf16>
  return
}

// -----

func.func @mla_core_nope_too_wide(%q: tensor<?x12xbf16>, %kv: tensor<?x10xbf16>, %kvn: tensor<8xbf16>, %c: tensor<?x32x10xbf16>, %l: tensor<?xi32>, %kvb: tensor<16x8xbf16>) {
  // expected-error @below {{'k3.mla_attention' op attribute 'qk_nope_head_dim' = 8 exceeds the query head width 6}}
  %o, %nc = k3.mla_attention %q, %kv, %kvn, %c, %l, %l, %kvb {num_heads = 2 : i64, qk_nope_head_dim = 8 : i64, v_head_dim = 4 : i64, softmax_scale = 0.4 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x12xbf16>, tensor<?x10xbf16>, tensor<8xbf16>, tensor<?x32x10xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<16x8xbf16>)
      -> (tensor<?x8xbf16>, tensor<?x32x10xbf16>)
  return
}

// -----

func.func @mla_core_bad_kv(%q: tensor<?x12xbf16>, %kv: tensor<?x9xbf16>, %kvn: tensor<8xbf16>, %c: tensor<?x32x10xbf16>, %l: tensor<?xi32>, %kvb: tensor<16x8xbf16>) {
  // expected-error @below {{'k3.mla_attention' op operand 'kv' dim 1 is 9, expected 10 (latent rank of 'kv_b_proj' + rope dims = 8 + 2)}}
  %o, %nc = k3.mla_attention %q, %kv, %kvn, %c, %l, %l, %kvb {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, v_head_dim = 4 : i64, softmax_scale = 0.4 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x12xbf16>, tensor<?x9xbf16>, tensor<8xbf16>, tensor<?x32x10xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<16x8xbf16>)
      -> (tensor<?x8xbf16>, tensor<?x32x10xbf16>)
  return
}

// -----

func.func @mla_core_paged_dynamic_page(%q: tensor<?x12xbf16>, %kv: tensor<?x10xbf16>, %kvn: tensor<8xbf16>, %c: tensor<?x?x10xbf16>, %l: tensor<?xi32>, %kvb: tensor<16x8xbf16>, %bt: tensor<?x4xi32>) {
  // expected-error @below {{'k3.mla_attention' op paged operand 'cache' needs a static page size (dim 1), got ?}}
  %o, %nc = k3.mla_attention %q, %kv, %kvn, %c, %l, %l, %kvb pages(%bt) {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, v_head_dim = 4 : i64, softmax_scale = 0.4 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x12xbf16>, tensor<?x10xbf16>, tensor<8xbf16>, tensor<?x?x10xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<16x8xbf16>, tensor<?x4xi32>)
      -> (tensor<?x8xbf16>, tensor<?x?x10xbf16>)
  return
}

// -----

func.func @mla_core_paged_table_seqs(%q: tensor<?x12xbf16>, %kv: tensor<?x10xbf16>, %kvn: tensor<8xbf16>, %c: tensor<9x16x10xbf16>, %l: tensor<3xi32>, %kvb: tensor<16x8xbf16>, %bt: tensor<2x4xi32>) {
  // expected-error @below {{'k3.mla_attention' op operand 'block_table' dim 0 is 2, expected 3 (sequence count of 'seq_lens' = 3)}}
  %o, %nc = k3.mla_attention %q, %kv, %kvn, %c, %l, %l, %kvb pages(%bt) {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, v_head_dim = 4 : i64, softmax_scale = 0.4 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x12xbf16>, tensor<?x10xbf16>, tensor<8xbf16>, tensor<9x16x10xbf16>, tensor<3xi32>, tensor<3xi32>, tensor<16x8xbf16>, tensor<2x4xi32>)
      -> (tensor<?x8xbf16>, tensor<9x16x10xbf16>)
  return
}

// -----

func.func @mla_core_paged_table_i64(%q: tensor<?x12xbf16>, %kv: tensor<?x10xbf16>, %kvn: tensor<8xbf16>, %c: tensor<?x16x10xbf16>, %l: tensor<?xi32>, %kvb: tensor<16x8xbf16>, %bt: tensor<?x4xi64>) {
  // expected-error @below {{'k3.mla_attention' op operand 'block_table' must have element type 'i32', got 'i64'}}
  %o, %nc = k3.mla_attention %q, %kv, %kvn, %c, %l, %l, %kvb pages(%bt) {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, v_head_dim = 4 : i64, softmax_scale = 0.4 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x12xbf16>, tensor<?x10xbf16>, tensor<8xbf16>, tensor<?x16x10xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<16x8xbf16>, tensor<?x4xi64>)
      -> (tensor<?x8xbf16>, tensor<?x16x10xbf16>)
  return
}

// -----

func.func @gated_mla_paged_rank(%x: tensor<?x16xbf16>, %lens: tensor<?xi32>, %cache: tensor<?x10xbf16>, %cl: tensor<?xi32>, %bt: tensor<?x4xi32>,
    %qa: tensor<6x16xbf16>, %qan: tensor<6xbf16>, %qb: tensor<12x6xbf16>, %kva: tensor<10x16xbf16>, %kvan: tensor<8xbf16>, %kvb: tensor<16x8xbf16>, %o: tensor<16x8xbf16>) {
  // expected-error @below {{'k3.gated_mla' op operand 'cache' must have rank 3, got rank 2}}
  %y, %c = k3.gated_mla %x, %lens, %cache, %cl pages(%bt) q_lora(%qa, %qan, %qb) kv(%kva, %kvan, %kvb) out(%o)
      {num_heads = 2 : i64, qk_nope_head_dim = 4 : i64, qk_rope_head_dim = 2 : i64, v_head_dim = 4 : i64,
       kv_lora_rank = 8 : i64, softmax_scale = 0.408 : f64, norm_eps = 1.0e-06 : f64}
      : (tensor<?x16xbf16>, tensor<?xi32>, tensor<?x10xbf16>, tensor<?xi32>, tensor<?x4xi32>, tensor<6x16xbf16>,
         tensor<6xbf16>, tensor<12x6xbf16>, tensor<10x16xbf16>, tensor<8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>)
      -> (tensor<?x16xbf16>, tensor<?x10xbf16>)
  return
}

// -----

func.func @kernel_bad_yield(%x: tensor<?x8xbf16>) {
  // expected-error @below {{'k3.kernel' op yields 1 values whose types do not match its 1 results}}
  %y = k3.kernel "k" family "f" (%x) : (tensor<?x8xbf16>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xbf16>):
    k3.yield %a : tensor<?x8xbf16>
  }
  return
}

// -----

func.func @kernel_bad_arg(%x: tensor<?x8xbf16>) {
  // expected-error @below {{'k3.kernel' op body argument #0 has type 'tensor<?x4xbf16>' but input #0 has type 'tensor<?x8xbf16>'}}
  %y = k3.kernel "k" family "f" (%x) : (tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  ^bb0(%a: tensor<?x4xbf16>):
    %c = k3.l2norm %a {head_dim = 4 : i64, eps = 1.0e-06 : f64} : tensor<?x4xbf16> -> tensor<?x4xbf16>
    k3.yield %c : tensor<?x4xbf16>
  }
  return
}

// -----

func.func @kernel_arg_count(%x: tensor<?x8xbf16>) {
  // expected-error @below {{'k3.kernel' op body has 0 arguments but the kernel has 1 inputs}}
  k3.kernel "k" family "f" (%x) : (tensor<?x8xbf16>) -> () {
    k3.yield
  }
  return
}

// -----

func.func @kernel_empty_name(%x: tensor<?x8xbf16>) {
  // expected-error @below {{'k3.kernel' op needs a non-empty kernel name}}
  k3.kernel "" family "f" (%x) : (tensor<?x8xbf16>) -> () {
  ^bb0(%a: tensor<?x8xbf16>):
    k3.yield
  }
  return
}

// -----

// expected-error @+1 {{mxfp4_layout k_tile must be 32, 64 or 128, got 48}}
func.func @mxfp4_layout_bad_tile(%w: !k3.mxfp4<8x96, #k3.mxfp4_layout<n_tile = 8, k_tile = 48>>) {
  return
}

// -----

// expected-error @+1 {{mxfp4_layout n_tile must be 8 (the N of mma.m16n8k16), got 16}}
func.func @mxfp4_layout_bad_ntile(%w: !k3.mxfp4<16x128, #k3.mxfp4_layout<n_tile = 16, k_tile = 128>>) {
  return
}

// -----

// expected-error @+1 {{MXFP4 weight rows 12 are not a multiple of the layout's n_tile 8}}
func.func @mxfp4_layout_rows(%w: !k3.mxfp4<12x128, #k3.mxfp4_layout<n_tile = 8, k_tile = 128>>) {
  return
}

// -----

// expected-error @+1 {{MXFP4 weight reduction dim 96 is not a multiple of the layout's k_tile 64}}
func.func @mxfp4_layout_k(%w: !k3.mxfp4<8x96, #k3.mxfp4_layout<n_tile = 8, k_tile = 64>>) {
  return
}

// -----

func.func @embedding_bad_result(%i: tensor<?xi32>, %t: tensor<64x16xbf16>) {
  // expected-error @below {{'k3.embedding' op result dim 1 is 32, expected 16 (hidden size of 'table')}}
  %h = k3.embedding %i, %t : (tensor<?xi32>, tensor<64x16xbf16>) -> tensor<?x32xbf16>
  return
}

// -----

func.func @embedding_token_count(%i: tensor<3xi32>, %t: tensor<64x16xbf16>) {
  // expected-error @below {{'k3.embedding' op result dim 0 is 4, expected 3 (token count of 'ids')}}
  %h = k3.embedding %i, %t : (tensor<3xi32>, tensor<64x16xbf16>) -> tensor<4x16xbf16>
  return
}

// -----

func.func @rmsnorm_bad_weight(%x: tensor<?x16xbf16>, %w: tensor<8xbf16>) {
  // expected-error @below {{'k3.rmsnorm' op operand 'weight' dim 0 is 8, expected 16 (last dim of 'input')}}
  %y = k3.rmsnorm %x, %w {eps = 1.0e-05 : f64} : (tensor<?x16xbf16>, tensor<8xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @rmsnorm_rank0(%x: tensor<bf16>, %w: tensor<8xbf16>) {
  // expected-error @below {{'k3.rmsnorm' op operand 'input' must have rank >= 1}}
  %y = k3.rmsnorm %x, %w {eps = 1.0e-05 : f64} : (tensor<bf16>, tensor<8xbf16>) -> tensor<bf16>
  return
}

// -----

func.func @rmsnorm_result_type(%x: tensor<?x16xbf16>, %w: tensor<16xbf16>) {
  // expected-error @below {{'k3.rmsnorm' op result type 'tensor<?x16xf32>' must equal the type of 'input' 'tensor<?x16xbf16>'}}
  %y = k3.rmsnorm %x, %w {eps = 1.0e-05 : f64} : (tensor<?x16xbf16>, tensor<16xbf16>) -> tensor<?x16xf32>
  return
}

// -----

func.func @mlp_bad_down(%x: tensor<?x16xbf16>, %g: tensor<32x16xbf16>, %d: tensor<16x16xbf16>) {
  // expected-error @below {{'k3.mlp' op operand 'down' dim 1 is 16, expected 32 (intermediate size of 'gate' = 32)}}
  %y = k3.mlp %x, %g, %g, %d {activation = #k3.activation<swiglu>}
      : (tensor<?x16xbf16>, tensor<32x16xbf16>, tensor<32x16xbf16>, tensor<16x16xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @last_tokens_rank(%x: tensor<?x16xbf16>, %l: tensor<2x2xi32>) {
  // expected-error @below {{'k3.last_tokens' op operand 'seq_lens' must have rank 1, got rank 2}}
  %y = k3.last_tokens %x, %l : (tensor<?x16xbf16>, tensor<2x2xi32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @lm_head_bad_vocab(%x: tensor<?x16xbf16>, %w: tensor<64x16xbf16>) {
  // expected-error @below {{'k3.lm_head' op result dim 1 is 100, expected 64 (vocab size of 'weight')}}
  %y = k3.lm_head %x, %w : (tensor<?x16xbf16>, tensor<64x16xbf16>) -> tensor<?x100xf32>
  return
}

// -----

func.func @linear_bad_k(%x: tensor<?x16xbf16>, %w: tensor<32x8xbf16>) {
  // expected-error @below {{'k3.linear' op operand 'weight' dim 1 is 8, expected 16 (input features of 'input')}}
  %y = k3.linear %x, %w : (tensor<?x16xbf16>, tensor<32x8xbf16>) -> tensor<?x32xbf16>
  return
}

// -----

func.func @glu_negative_beta(%a: tensor<?x16xbf16>) {
  // expected-error @below {{'k3.glu' op attribute 'situ_linear_beta' must be positive and finite, got -2.500000e+01}}
  %y = k3.glu %a, %a {activation = #k3.activation<situ>, situ_beta = 4.0 : f64, situ_linear_beta = -25.0 : f64} : tensor<?x16xbf16>
  return
}

// -----

func.func @router_top_k(%x: tensor<?x16xbf16>, %w: tensor<4x16xbf16>) {
  // expected-error @below {{'k3.moe_router' op top_k = 5 exceeds the number of experts = 4}}
  %i, %p = k3.moe_router %x, %w {top_k = 5 : i64, score = #k3.router_score<softmax>, renormalize = false, routed_scaling_factor = 1.0 : f64}
      : (tensor<?x16xbf16>, tensor<4x16xbf16>) -> (tensor<?x5xi32>, tensor<?x5xf32>)
  return
}

// -----

func.func @router_bad_weights(%x: tensor<?x16xbf16>, %w: tensor<4x16xbf16>) {
  // expected-error @below {{'k3.moe_router' op result 'weights' dim 1 is 3, expected 2 (top_k = 2)}}
  %i, %p = k3.moe_router %x, %w {top_k = 2 : i64, score = #k3.router_score<softmax>, renormalize = false, routed_scaling_factor = 1.0 : f64}
      : (tensor<?x16xbf16>, tensor<4x16xbf16>) -> (tensor<?x2xi32>, tensor<?x3xf32>)
  return
}

// -----

func.func @expert_mlp_bad_result(%z: tensor<?x32xbf16>, %i: tensor<?x2xi32>, %w1: !k3.mxfp4<8x4x32>, %w2: tensor<8x32x4xbf16>) {
  // expected-error @below {{'k3.expert_mlp' op result dim 1 is 3, expected 2 (slots of 'indices')}}
  %y = k3.expert_mlp %z, %i experts(%w1, %w1, %w2) {activation = #k3.activation<swiglu>}
      : (tensor<?x32xbf16>, tensor<?x2xi32>, !k3.mxfp4<8x4x32>, !k3.mxfp4<8x4x32>, tensor<8x32x4xbf16>) -> tensor<?x3x32xbf16>
  return
}

// -----

func.func @combine_bad_weights(%y: tensor<?x2x32xbf16>, %w: tensor<?x3xf32>) {
  // expected-error @below {{'k3.moe_combine' op operand 'weights' dim 1 is 3, expected 2 (slots of 'input')}}
  %u = k3.moe_combine %y, %w : (tensor<?x2x32xbf16>, tensor<?x3xf32>) -> tensor<?x32xbf16>
  return
}

// -----

func.func @mxfp4_pack_bad_scales(%p: tensor<8x64xf4E2M1FN>, %s: tensor<8x4xf8E8M0FNU>) {
  // expected-error @below {{'k3.mxfp4_pack' op operand 'scales' dim 1 is 4, expected 2 (reduction dim / 32 = 64 / 32)}}
  %w = k3.mxfp4_pack %p, %s : (tensor<8x64xf4E2M1FN>, tensor<8x4xf8E8M0FNU>) -> !k3.mxfp4<8x64>
  return
}

// -----

func.func @mxfp4_dequant_bad_shape(%w: !k3.mxfp4<8x64>) {
  // expected-error @below {{'k3.mxfp4_dequant' op result dim 0 is 4, expected 8 (logical shape of the input)}}
  %d = k3.mxfp4_dequant %w : (!k3.mxfp4<8x64>) -> tensor<4x64xbf16>
  return
}

// -----

// expected-error @+1 {{MXFP4 weight reduction dim (last) is 100, not a multiple of the block size 32}}
func.func @mxfp4_type_unaligned(%w: !k3.mxfp4<8x100>) {
  return
}

// -----

// expected-error @+1 {{MXFP4 weight must have rank >= 2 ([..., N, K]), got rank 1}}
func.func @mxfp4_type_rank(%w: !k3.mxfp4<64>) {
  return
}

// -----

// expected-error @+1 {{MXFP4 weight dim 0 must be positive, got 0}}
func.func @mxfp4_type_zero_dim(%w: !k3.mxfp4<0x64>) {
  return
}

// -----

// The cost estimates are i64 properties: one of another type is refused
// where it is parsed (it used to be dropped, leaving the property unset, and
// the printer and the lowering crashed on it; found by ir_mutate).
func.func @kernel_float_cost(%x: tensor<?x8xbf16>) {
  // expected-error @below {{k3.kernel's 'bytes_per_token' must be a 64-bit integer, got -0.000000e+00 : f64}}
  k3.kernel "k" family "f" (%x) {bytes_per_token = -0.0 : f64} : (tensor<?x8xbf16>) -> () {
  ^bb0(%a: tensor<?x8xbf16>):
    k3.yield
  }
  return
}

// -----

func.func @kernel_i32_cost(%x: tensor<?x8xbf16>) {
  // expected-error @below {{k3.kernel's 'weight_bytes' must be a 64-bit integer, got 3 : i32}}
  k3.kernel "k" family "f" (%x) {weight_bytes = 3 : i32} : (tensor<?x8xbf16>) -> () {
  ^bb0(%a: tensor<?x8xbf16>):
    k3.yield
  }
  return
}
