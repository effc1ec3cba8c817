// --k3-lower-kernels on k3-tiny's chunked delta rule (C = 16 chunks from the
// tiling pass, 4 heads of 32). sm_90a, bf16 build: a host-side branch on the
// token count picks the token recurrence (decode: a warp per state row,
// shuffle reductions) or the chunked form: the prep launch (a block per
// chunk and head, shared chunk buffers, barriers) and the recurrence on
// tensor cores (cp.async double buffering, tf32 operands split hi + lo by
// masking the low 13 mantissa bits, mma.sync m16n8k8, a warp barrier around
// the transposed U tile). The f32 build keeps the
// exact FMA recurrence. Host: plain loops.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GPU
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOST
// The prep's forward substitution takes a thread's columns in one unrolled
// body (no loop over columns after the barrier); K3C_KDA_PREP_UNROLL=0 keeps
// the loop.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=UNROLL
// RUN: env K3C_KDA_PREP_UNROLL=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=LOOP
// UNROLL: module(@k3_kda_chunk_605990ac_kda_prep)
// UNROLL-COUNT-2: gpu.barrier
// UNROLL-NOT: scf.for
// UNROLL: gpu.terminator
// LOOP: module(@k3_kda_chunk_605990ac_kda_prep)
// LOOP-COUNT-2: gpu.barrier
// LOOP: scf.for
// LOOP: gpu.terminator
// A state row's key columns over two warps by default (4 warps a block of
// 32 value rows), their partial X and O summed through a shared
// [warps, 16, 32] tile behind a second barrier a chunk; K3C_KDA_KEY_SPLIT=1:
// one warp a row block. (K3C_KDA_DEFER_O=0 here: the pair sums X and O
// before the barrier.)
// RUN: env K3C_KDA_DEFER_O=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=KS2
// RUN: env K3C_KDA_KEY_SPLIT=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=KS1
// RUN: not env K3C_KDA_KEY_SPLIT=4 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BADKS
// KS2: gpu.launch {{.*}} = %c128{{.*}} module(@k3_kda_chunk_605990ac_kda_chunk_tf32_bv32_ks2) {{.*}}memref<4x16x32xf32, #gpu.address_space<workgroup>>
// KS2: nvvm.cp.async.wait.group 0
// KS2-NEXT: gpu.barrier
// KS2: nvvm.mma.sync
// KS2: gpu.barrier
// KS2: nvvm.bar.warp.sync
// KS2: gpu.terminator
// KS1: gpu.launch {{.*}} = %c64{{.*}} module(@k3_kda_chunk_605990ac_kda_chunk_tf32_bv32) {{.*}}workgroup(
// KS1-NOT: memref<4x16x32xf32
// KS1: nvvm.mma.sync
// KS1: gpu.terminator
// By default with the key split (K3C_KDA_DEFER_O=1): only X's partials before the pair's barrier (8 stores
// a lane, not 16); O = Qd S^T after U's warp barrier; the 4 O partials the
// partner needs are stored after the state update and added at the next
// chunk's barrier (the loop carries the warp's own 4 sums; one more barrier
// after the loop for the last chunk). It needs the key split.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=DEFERO
// RUN: not env K3C_KDA_DEFER_O=1 K3C_KDA_KEY_SPLIT=1 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BADDO
// DEFERO: module(@k3_kda_chunk_605990ac_kda_chunk_tf32_bv32_ks2_do)
// DEFERO: scf.for {{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// DEFERO-NEXT: nvvm.cp.async.wait.group 0
// DEFERO-NEXT: gpu.barrier
// DEFERO: arith.cmpi ult, %{{.*}}, %{{.*}} : index
// DEFERO-NEXT: scf.if
// DEFERO: memref.load {{.*}} : memref<4x16x32xf32, #gpu.address_space<workgroup>>
// DEFERO-COUNT-8: memref.store {{.*}} : memref<4x16x32xf32, #gpu.address_space<workgroup>>
// DEFERO-NEXT: gpu.barrier
// DEFERO: nvvm.bar.warp.sync
// DEFERO: nvvm.mma.sync
// DEFERO-COUNT-4: memref.store {{.*}} : memref<4x16x32xf32, #gpu.address_space<workgroup>>
// DEFERO-NEXT: scf.yield
// DEFERO: gpu.barrier
// DEFERO: gpu.terminator
// BADDO: LLVM ERROR: k3c: bad KDA chunk recurrence: K3C_KDA_DEFER_O=1 needs K3C_KDA_KEY_SPLIT=2
// K3C_KDA_BV=16: blocks of 16 value rows (two warps with the key split).
// RUN: env K3C_KDA_BV=16 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=BV16
// RUN: not env K3C_KDA_BV=48 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BADBV
// BV16: gpu.launch {{.*}} = %c64{{.*}} module(@k3_kda_chunk_605990ac_kda_chunk_tf32_bv16_ks2_do)
// BADBV: LLVM ERROR: k3c: bad KDA chunk recurrence: K3C_KDA_BV must be 16, 32, 64 or 128 and divide d_v = 32, got 48
// BADKS: LLVM ERROR: k3c: bad KDA chunk recurrence: K3C_KDA_KEY_SPLIT must be 1 or 2, got 4
// K3C_KDA_TF32_RNA=1: the hi halves rounded to nearest (cvt.rna.tf32).
// RUN: env K3C_KDA_TF32_RNA=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=RNA
// RNA: module(@k3_kda_chunk_605990ac_kda_chunk_tf32_bv32_ks2_do)
// RNA: nvvm.convert.float.to.tf32
// RNA: nvvm.mma.sync
// K3C_KDA_FUSED=1: one launch instead of prep + recurrence; each block
// runs its chunks' prep itself from the raw q, k, g (fp32) and v (bf16)
// rows, double-buffered by cp.async in dynamic shared memory (16-byte
// copies: 4 and 8 elements), the prep's three phases behind barriers, then
// the recurrence. The shape for 4 heads of 32: 32 value rows a block, the
// key split, O deferred (4 warps). The f32 build keeps the two launches.
// RUN: env K3C_KDA_FUSED=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=FUSED
// RUN: not env K3C_KDA_FUSED=1 K3C_KDA_FUSED_BV=48 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BADFBV
// FUSED-LABEL: func.func @k3_kda_chunk_605990ac(
// FUSED-NOT: kda_prep
// FUSED: gpu.launch {{.*}} = %c128{{.*}} dynamic_shared_memory_size %c50944_i32 module(@k3_kda_chunk_605990ac_kda_chunk_fused_tf32_bv32_ks2_do)
// FUSED: nvgpu.device_async_copy {{.*}}, 4, {{.*}} : memref<?x128xf32> to memref<2x16x32xf32, #gpu.address_space<workgroup>>
// FUSED: nvgpu.device_async_copy {{.*}}, 8, {{.*}} : memref<?x128xbf16> to memref<2x16x32xbf16, #gpu.address_space<workgroup>>
// FUSED: nvvm.cp.async.wait.group 0
// FUSED-NEXT: gpu.barrier
// FUSED: math.exp
// FUSED: gpu.barrier
// FUSED: gpu.barrier
// FUSED: gpu.barrier
// FUSED-NOT: gpu.terminator
// FUSED: nvvm.mma.sync
// FUSED: gpu.terminator
// FUSED-LABEL: func.func @k3_kda_chunk_f32(
// FUSED: module(@k3_kda_chunk_f32_kda_prep)
// FUSED: module(@k3_kda_chunk_f32_kda_chunk_fma)
// BADFBV: LLVM ERROR: k3c: bad KDA chunk recurrence: K3C_KDA_FUSED_BV must be 16, 32, 64 or 128 and divide d_v = 32, got 48
// K3C_KDA_BF16X3=1: the recurrence's products as bf16 m16n8k16 MMAs (fp32
// operand pairs split into bf16 hi and lo words by truncation: the top
// halves of two values in one byte permute each), no tf32 MMA left in the
// kernel.
// RUN: env K3C_KDA_BF16X3=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=BF16X3
// BF16X3: module(@k3_kda_chunk_605990ac_kda_chunk_bf16x3_bv32_ks2_do)
// BF16X3-NOT: mma_type<tf32>
// BF16X3: nvvm.prmt <default> %c30258_i32
// BF16X3-NOT: mma_type<tf32>
// BF16X3: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>
// BF16X3-NOT: mma_type<tf32>
// BF16X3: gpu.terminator
// K3C_KDA_SCRATCH_F16=MASK (1 W^, 2 Qd, 4 Kr): where q and k are L2 norms'
// rows (here the kernel @kda_chunk_norm's inputs come from one), those of
// the prep's W^, Qd and Kr scratch are fp16 (stored by truncf, copied 8
// elements a cp.async into fp16 stages, widened to exact tf32 operands);
// elsewhere they stay fp32. None by default; 2 takes Qd alone (the
// recurrence's name says which: _h2), 7 all three; a value outside 0..7 is
// refused by name. The host lowering makes the
// same choice (scratch is part of the calling convention the two targets
// share) and widens the fp16 rows it stages.
// RUN: env K3C_KDA_SCRATCH_F16=7 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=HALF
// RUN: env K3C_KDA_SCRATCH_F16=7 k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=HOSTHALF
// RUN: env K3C_KDA_SCRATCH_F16=2 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefixes=QDHALF,QDGPU
// RUN: env K3C_KDA_SCRATCH_F16=2 k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=QDHALF
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOHALF
// RUN: not env K3C_KDA_SCRATCH_F16=8 k3-opt %s --k3-lower-kernels=target=host 2>&1 | FileCheck %s --check-prefix=BADHALF
// BADHALF: LLVM ERROR: k3c: K3C_KDA_SCRATCH_F16 must be a mask in 0..7 (1 W^, 2 Qd, 4 Kr), got 8
// HALF-LABEL: func.func @k3_kda_chunk_605990ac(
// HALF-NOT: xf16
// HALF: module(@k3_kda_chunk_605990ac_kda_chunk_tf32_bv32_ks2_do)
// HALF-NOT: xf16
// HALF-LABEL: func.func @k3_kda_chunk_norm(
// HALF-SAME: memref<?x128xf16>, %{{.*}}: memref<?x128xf16>, %{{.*}}: memref<?x128xf16>, %{{.*}}: memref<?x128xf32>
// HALF: module(@k3_kda_chunk_norm_kda_prep)
// HALF: arith.truncf {{.*}} : f32 to f16
// HALF: module(@k3_kda_chunk_norm_kda_chunk_tf32_bv32_ks2_do_h7)
// HALF: nvgpu.device_async_copy {{.*}}, 8, {{.*}} : memref<?x128xf16> to memref<2x16x40xf16, #gpu.address_space<workgroup>>
// HALF: arith.extf {{.*}} : f16 to f32
// HALF: nvvm.mma.sync
// HALF: gpu.terminator
// HOSTHALF-LABEL: func.func @k3_kda_chunk_605990ac(
// HOSTHALF-NOT: xf16
// HOSTHALF-LABEL: func.func @k3_kda_chunk_norm(
// HOSTHALF-SAME: memref<?x128xf16>, %{{.*}}: memref<?x128xf16>, %{{.*}}: memref<?x128xf16>, %{{.*}}: memref<?x128xf32>
// HOSTHALF: arith.truncf {{.*}} : f32 to f16
// HOSTHALF: arith.extf {{.*}} : f16 to f32
// QDHALF-LABEL: func.func @k3_kda_chunk_605990ac(
// QDHALF-NOT: xf16
// QDHALF-LABEL: func.func @k3_kda_chunk_norm(
// QDHALF-SAME: %arg7: memref<?x128xbf16>, %arg8: memref<?x128xf32>, %arg9: memref<?x128xf16>, %arg10: memref<?x128xf32>, %arg11: memref<?x128xf32>
// QDGPU: module(@k3_kda_chunk_norm_kda_chunk_tf32_bv32_ks2_do_h2)
// NOHALF-LABEL: func.func @k3_kda_chunk_norm(
// NOHALF-NOT: xf16
// NOHALF: module(@k3_kda_chunk_norm_kda_chunk_tf32_bv32_ks2_do)
// NOHALF-NOT: xf16
// The prep's phase B (factorized path, with the tensor-core recurrence; by
// default, K3C_KDA_PREP_MMA=0 gives the loop) as Kd Ke^T and Qd Ke^T on tf32
// mma.sync in 3xTF32, one m16n8 tile a warp: 4 k steps x 3 MMAs for d_k =
// 32, no loop over key columns; the f32 build's prep keeps the loop. Rows of
// the prep's shared buffers padded by 1 (a column of several rows in
// distinct banks; the pairwise MMA form's 4, kda-pairwise-mma.mlir);
// K3C_KDA_PREP_PAD overrides it (1..8).
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PREPMMA
// RUN: env K3C_KDA_PREP_PAD=4 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=PAD4
// RUN: not env K3C_KDA_PREP_PAD=9 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BADPAD
// PAD4: module(@k3_kda_chunk_605990ac_kda_prep) {{.*}}workgroup(%{{.*}} : memref<16x36xf32, #gpu.address_space<workgroup>>
// BADPAD: LLVM ERROR: k3c: K3C_KDA_PREP_PAD must be 1..8, got 9
// PREPMMA-LABEL: func.func @k3_kda_chunk_605990ac(
// PREPMMA: module(@k3_kda_chunk_605990ac_kda_prep)
// PREPMMA: gpu.barrier
// PREPMMA-NOT: scf.for
// PREPMMA-COUNT-12: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>
// PREPMMA-NOT: nvvm.mma.sync
// PREPMMA: gpu.barrier
// PREPMMA: gpu.terminator
// PREPMMA-LABEL: func.func @k3_kda_chunk_f32(
// PREPMMA: module(@k3_kda_chunk_f32_kda_prep)
// PREPMMA-NOT: nvvm.mma.sync
// PREPMMA: scf.for
// PREPMMA: module(@k3_kda_chunk_f32_kda_chunk_fma)
// K3C_KDA_MMA=0: the bf16 build on the exact FMA recurrence (comparisons).
// RUN: env K3C_KDA_MMA=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOMMA
// Bad token-kernel switches are errors naming the switch and the value.
// RUN: not env K3C_KDA_TOKEN_THREADS=48 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=TTHREADS
// RUN: not env K3C_KDA_TOKEN_ROWS=0 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=TROWS
// TTHREADS: LLVM ERROR: k3c: bad KDA token kernel: K3C_KDA_TOKEN_THREADS must be a multiple of 32 in 32..1024, got 48
// TROWS: LLVM ERROR: k3c: bad KDA token kernel: K3C_KDA_TOKEN_ROWS must be 1..16, got 0
// RUN: not env K3C_KDA_STAGED_ROWS=17 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=SROWS
// RUN: not env K3C_KDA_STAGED_MIN_BLOCKS=33 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=SMINB
// RUN: not env K3C_KDA_STAGED_FROM=-1 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=SFROM
// SROWS: LLVM ERROR: k3c: bad KDA token kernel: K3C_KDA_STAGED_ROWS must be 1..16, got 17
// SMINB: LLVM ERROR: k3c: bad KDA token kernel: K3C_KDA_STAGED_MIN_BLOCKS must be 0..32, got 33
// SFROM: LLVM ERROR: k3c: bad KDA token kernel: K3C_KDA_STAGED_FROM must be >= 0, got -1
// From 16 sequences the token recurrence stages the state rows through
// shared memory (cp.async into each lane's own slots, 16 rows a warp, at
// most the head's d_v rows a block: 4 rows a warp, 32 x 32 f32 here; no
// barrier); the host picks the kernel by the batch.
// K3C_KDA_STAGED_FROM=0: the register form only; K3C_KDA_STAGED_MIN_BLOCKS
// asks for that many blocks an SM.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=STAGED
// RUN: env K3C_KDA_STAGED_FROM=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOSTAGED
// RUN: env K3C_KDA_STAGED_MIN_BLOCKS=6 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=STAGEDMB
// STAGED-LABEL: func.func @k3_kda_chunk_605990ac(
// STAGED: arith.cmpi ult, %{{.*}}, %c16 : index
// STAGED: module(@k3_kda_chunk_605990ac_kda_tokens)
// STAGED: dynamic_shared_memory_size %c4096_i32 module(@k3_kda_chunk_605990ac_kda_tokens_staged)
// STAGED-NOT: gpu.barrier
// STAGED: nvgpu.device_async_copy {{.*}} : memref<?x4x32x32xf32> to memref<32x32xf32, #gpu.address_space<workgroup>>
// STAGED-NOT: gpu.barrier
// STAGED: nvvm.cp.async.wait.group 0
// STAGED-NOT: gpu.barrier
// STAGED: gpu.terminator
// STAGED-NEXT: }{{$}}
// STAGEDMB: module(@k3_kda_chunk_605990ac_kda_tokens_staged)
// STAGEDMB: gpu.terminator
// STAGEDMB-NEXT: } {k3.min_blocks_per_sm = 6 : i32}
// STAGED-LABEL: func.func @k3_kda_chunk_f32(
// STAGED: module(@k3_kda_chunk_f32_kda_tokens_staged)
// NOSTAGED-NOT: kda_tokens_staged
// NOMMA-LABEL: func.func @k3_kda_chunk_605990ac(
// NOMMA-NOT: nvvm.mma.sync
// NOMMA: module(@k3_kda_chunk_605990ac_kda_chunk_fma)
// NOMMA: return

// GPU-LABEL: func.func @k3_kda_chunk_605990ac(
// GPU-SAME: k3.family = "kda_chunk"
// GPU: gpu.launch {{.*}} = %c256, {{.*}} module(@k3_kda_chunk_605990ac_kda_tokens)
// GPU: gpu.shuffle  xor
// GPU: gpu.launch {{.*}} = %c128{{.*}} module(@k3_kda_chunk_605990ac_kda_prep) {{.*}}workgroup(%{{.*}} : memref<16x33xf32, #gpu.address_space<workgroup>>
// GPU: gpu.barrier
// GPU: gpu.launch {{.*}} module(@k3_kda_chunk_605990ac_kda_chunk_tf32_bv32_ks2_do) {{.*}}workgroup(
// GPU: nvgpu.device_async_copy
// GPU: nvgpu.device_async_create_group
// GPU: nvvm.cp.async.wait.group 0
// GPU-NOT: nvvm.convert.float.to.tf32
// GPU: arith.andi %{{.*}}, %c-8192_i32 : i32
// GPU-NOT: nvvm.convert.float.to.tf32
// GPU: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>{{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 8>
// GPU: nvvm.bar.warp.sync
// GPU: return

// GPU-LABEL: func.func @k3_kda_chunk_f32(
// GPU: module(@k3_kda_chunk_f32_kda_tokens)
// GPU: module(@k3_kda_chunk_f32_kda_prep)
// GPU-NOT: nvvm.mma.sync
// GPU: module(@k3_kda_chunk_f32_kda_chunk_fma)
// GPU-NOT: nvvm.mma.sync
// GPU: return

// HOST-LABEL: func.func @k3_kda_chunk_605990ac(
// HOST-NOT: gpu.
// HOST: memref.alloca() : memref<16x33xf32>
// HOST: scf.parallel
// HOST: return

func.func @kda_chunk(%a0: tensor<?x128xf32>, %a1: tensor<?x128xf32>, %a2: tensor<?x128xbf16>, %a3: tensor<?x128xf32>, %a4: tensor<?x4xbf16>, %a5: tensor<?x4x32x32xf32>, %a6: tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    %r:2 = k3.kernel "k3_kda_chunk_605990ac" family "kda_chunk" (%a0, %a1, %a2, %a3, %a4, %a5, %a6) {bytes_per_token = 34828 : i64, flops_per_token = 28672 : i64} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    ^bb0(%arg401: tensor<?x128xf32>, %arg402: tensor<?x128xf32>, %arg403: tensor<?x128xbf16>, %arg404: tensor<?x128xf32>, %arg405: tensor<?x4xbf16>, %arg406: tensor<?x4x32x32xf32>, %arg407: tensor<?xi32>):
      %result, %new_state = k3.delta_rule %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 {chunk_size = 16 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
      k3.yield %result, %new_state : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
    }
  return %r#0, %r#1 : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
}

func.func @kda_chunk_f32(%a0: tensor<?x128xf32>, %a1: tensor<?x128xf32>, %a2: tensor<?x128xf32>, %a3: tensor<?x128xf32>, %a4: tensor<?x4xf32>, %a5: tensor<?x4x32x32xf32>, %a6: tensor<?xi32>) -> (tensor<?x128xf32>, tensor<?x4x32x32xf32>) {
    %r:2 = k3.kernel "k3_kda_chunk_f32" family "kda_chunk" (%a0, %a1, %a2, %a3, %a4, %a5, %a6) {bytes_per_token = 34828 : i64, flops_per_token = 28672 : i64} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x4xf32>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xf32>, tensor<?x4x32x32xf32>) {
    ^bb0(%arg401: tensor<?x128xf32>, %arg402: tensor<?x128xf32>, %arg403: tensor<?x128xf32>, %arg404: tensor<?x128xf32>, %arg405: tensor<?x4xf32>, %arg406: tensor<?x4x32x32xf32>, %arg407: tensor<?xi32>):
      %result, %new_state = k3.delta_rule %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 {chunk_size = 16 : i64, gamma_type = f32, num_heads = 4 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x4xf32>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xf32>, tensor<?x4x32x32xf32>)
      k3.yield %result, %new_state : tensor<?x128xf32>, tensor<?x4x32x32xf32>
    }
  return %r#0, %r#1 : tensor<?x128xf32>, tensor<?x4x32x32xf32>
}

// The convolutions and the gate (sm_90a): each conv thread owns 4 adjacent
// channels (8-byte loads of x and of the state, 8-byte stores of y) and
// loads 8 tokens' inputs before it slides its window over them; the gate
// is a thread per 4 columns of one head (16-byte f32 loads of the bias and
// stores of the gate). The host keeps a channel and a
// token at a time.
// Launches of at most one token a sequence (decode) take the conv without
// the 4-token unroll (K3C_CONV_DECODE=0: one kernel), with as many channel
// blocks as give the SMs 2 blocks each (264 / sequences on sm_90a, at most
// one block per 1024 channels) and the new window stored from the registers the window
// slid through (no loads of the state after y's store).
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=CONV
// RUN: env K3C_CONV_DECODE=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=ONECONV
// A channel's 4 taps (f32, contiguous) in one 16-byte load on the GPU;
// K3C_CONV_TAP_VEC=0 keeps a load a tap.
// RUN: env K3C_CONV_TAP_VEC=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=TAPS1
// TAPS1-LABEL: func.func @k3_kda_conv_gate_test(
// TAPS1-NOT: memref<128x1x4xf32>, vector<4xf32>
// TAPS1: memref.load %{{.*}} : memref<128x1x4xf32>
// TAPS1: llvm.intr.fma
// TAPS1-NOT: memref<128x1x4xf32>, vector<4xf32>
// TAPS1: return
// RUN: not env K3C_CONV_TAP_VEC=2 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BADTAPS
// BADTAPS: K3C_CONV_TAP_VEC must be 0 or 1, got '2'
// The bf16 build's convolution outputs on sm_90a: the taps' products fused
// into their adds by explicit fma (onto t_3 x; left to contraction, the
// fused product followed the DAG's shape, which the tap loads' form
// changed), the rest contract, and the sigmoid's division approximate (afn);
// K3C_CONV_FAST=0, the f32 build and the host keep the exact form.
// RUN: env K3C_CONV_FAST=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=CONVEXACT
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=CONVEXACT
// CONVEXACT-LABEL: func.func @k3_kda_conv_gate_test(
// CONVEXACT-NOT: fastmath
// CONVEXACT-NOT: llvm.intr.fma
// CONVEXACT: return
// ONECONV-NOT: short_conv_decode
// CONV-LABEL: func.func @k3_kda_conv_gate_test(
// CONV: arith.cmpi ule
// CONV-NEXT: scf.if
// CONV: arith.divui %c264, %{{.*}} : index
// CONV: module(@k3_kda_conv_gate_test_short_conv_decode)
// CONV-NOT: step %c4
// CONV-COUNT-4: vector.load %{{.*}} : memref<128x1x4xf32>, vector<4xf32>
// CONV: vector.store %{{.*}} : memref<?x128xbf16>, vector<4xbf16>
// CONV-NOT: vector.load %{{.*}} : memref<?x3x384xbf16>
// CONV-COUNT-3: vector.store %{{.*}} : memref<?x3x384xbf16>, vector<4xbf16>
// CONV: } else {
// CONV: module(@k3_kda_conv_gate_test_short_conv)
// CONV: vector.load %{{.*}} : memref<?x3x384xbf16>, vector<4xbf16>
// CONV: vector.load %{{.*}} : memref<?x128xbf16>, vector<4xbf16>
// CONV: scf.for {{.*}} step %c4
// CONV-COUNT-4: vector.load %{{.*}} : memref<?x128xbf16>, vector<4xbf16>
// CONV: arith.mulf {{.*}} fastmath<contract>
// CONV-COUNT-3: llvm.intr.fma
// CONV: arith.addf {{.*}} fastmath<contract>
// CONV: arith.divf {{.*}} fastmath<afn>
// CONV: vector.store %{{.*}} : memref<?x128xbf16>, vector<4xbf16>
// CONV: module(@k3_kda_conv_gate_test_short_conv_window)
// CONV: module(@k3_kda_conv_gate_test_kda_gate)
// CONV: vector.load %{{.*}} : memref<?x128xbf16>, vector<4xbf16>
// CONV: vector.load %{{.*}} : memref<128xf32>, vector<4xf32>
// CONV: vector.store %{{.*}} : memref<?x128xf32>, vector<4xf32>
// The window launch (sequences longer than a 32-token tile) runs only where
// a sequence can be longer than 32 tokens: every sequence has at least one
// token, so the longest has at most T - N + 1; on the GPU a host-side branch
// (32 + N < T + 1) skips it for decode of any batch size and for prefill
// rounds of short prompts; the host keeps its loop.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=WIN
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=WINHOST
// WIN-LABEL: func.func @k3_kda_conv_gate_test(
// WIN: %[[T1:.*]] = arith.addi %dim{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}} : index
// WIN: %[[N:.*]] = memref.dim %arg3, %c0{{.*}} : memref<?xi32>
// WIN: %[[TN:.*]] = arith.addi %c32{{.*}}, %[[N]] : index
// WIN-NEXT: arith.cmpi ult, %[[TN]], %[[T1]] : index
// WIN-NEXT: scf.if
// WIN-NOT: gpu.launch
// WIN: gpu.launch {{.*}}module(@k3_kda_conv_gate_test_short_conv_window)
// WINHOST-LABEL: func.func @k3_kda_conv_gate_test(
// WINHOST-NOT: arith.addi %c32{{.*}}, %dim
// The gate in its linear's store (the default; K3C_FUSE_GATE=0: not): the gate's logits come
// from a linear used by nothing else, so from the tensor-core token counts
// the linear's tiles compute the gate in their store (the accumulators
// rounded to bf16 as the linear's store would, plus dt_bias, the gate; f32
// pairs into the gate's result) and the gate has no launch of its own there;
// below them (one token: the GEMV) the gate's own launch follows the linear.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GATE
// RUN: env K3C_FUSE_GATE=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOGATE
// GATE-LABEL: func.func @k3_kda_conv_gate_test(
// GATE: module(@k3_kda_conv_gate_test_linear_gemv1)
// GATE: module(@k3_kda_conv_gate_test_kda_gate)
// GATE: } else {
// GATE: module(@k3_kda_conv_gate_test_linear_gate_mma_32x64x64_s6)
// GATE: arith.truncf %{{.*}} : f32 to bf16
// GATE: math.exp
// GATE: vector.store %{{.*}} : memref<?x128xf32>, vector<2xf32>
// GATE: module(@k3_kda_conv_gate_test_linear_gate_wgmma_128x256x64_s4_f1_tma_ct)
// The column table (dt_bias, exp(A_log)) filled ahead of the MMAs, read in the store.
// GATE: math.exp
// GATE: memref.store %{{.*}} : memref<2x256xf32, #gpu.address_space<workgroup>>
// GATE: memref.store %{{.*}} : memref<2x256xf32, #gpu.address_space<workgroup>>
// GATE: nvvm.wgmma.mma_async
// GATE: memref.load %{{.*}} : memref<2x256xf32, #gpu.address_space<workgroup>>
// Mapped stores stay direct 8-byte pairs (K3C_WGMMA_STAGED_MAP=1 stages them: STAGEDMAP).
// GATE-NOT: memref<128x260xf32
// GATE: vector.store %{{.*}} : memref<?x128xf32>, vector<2xf32>
// GATE-NOT: kda_gate
// GATE: return
// NOGATE-LABEL: func.func @k3_kda_conv_gate_test(
// NOGATE-NOT: linear_gate
// NOGATE: module(@k3_kda_conv_gate_test_linear_wgmma_128x256x64_s4_f1_tma_st)
// NOGATE: module(@k3_kda_conv_gate_test_kda_gate)
// NOGATE: return
// K3C_GEMV_MAP=1 (opt-in until measured): the one-token GEMV does the gate in
// its store too (the sum rounded to bf16 as the linear's store would, plus
// dt_bias, the gate; f32 into the gate's result): no kda_gate launch at all.
// RUN: env K3C_GEMV_MAP=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GEMVGATE
// GEMVGATE-LABEL: func.func @k3_kda_conv_gate_test(
// GEMVGATE-NOT: kda_gate)
// GEMVGATE: module(@k3_kda_conv_gate_test_linear_gate_gemv1)
// GEMVGATE: math.exp
// GEMVGATE: arith.truncf %{{.*}} : f32 to bf16
// GEMVGATE-NEXT: arith.extf %{{.*}} : bf16 to f32
// GEMVGATE-NEXT: arith.addf
// GEMVGATE: math.exp
// GEMVGATE: memref.store %{{.*}} : memref<?x128xf32>
// GEMVGATE: } else {
// GEMVGATE: module(@k3_kda_conv_gate_test_linear_gate_mma_32x64x64_s6)
// GEMVGATE-NOT: kda_gate)
// GEMVGATE: return
// RUN: env K3C_WGMMA_STAGED_MAP=1 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=STAGEDMAP
// STAGEDMAP: module(@k3_kda_conv_gate_test_linear_gate_wgmma_128x256x64_s4_f1_tma_ct_st)
// STAGEDMAP: vector.store %{{.*}} : memref<128x260xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// STAGEDMAP: gpu.barrier
// STAGEDMAP: vector.load %{{.*}} : memref<128x260xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// STAGEDMAP-NEXT: vector.store %{{.*}} : memref<?x128xf32>, vector<4xf32>
// RUN: env K3C_EPILOGUE_COL_TABLE=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NOTABLE
// NOTABLE: module(@k3_kda_conv_gate_test_linear_gate_wgmma_128x256x64_s4_f1_tma)
// NOTABLE-NOT: memref<2x256xf32
// NOTABLE: return
func.func @conv_gate(%a0: tensor<?x128xbf16>, %a1: tensor<128x1x4xf32>, %a2: tensor<?x3x384xbf16>, %a3: tensor<?xi32>, %a9: tensor<?x32xbf16>, %a10: tensor<128x32xbf16>, %a11: tensor<128xf32>, %a12: tensor<128xf32>) -> (tensor<?x128xbf16>, tensor<?x3x384xbf16>, tensor<?x128xf32>) {
  %r:3 = k3.kernel "k3_kda_conv_gate_test" family "kda_conv_gate" (%a0, %a1, %a2, %a3, %a9, %a10, %a11, %a12) : (tensor<?x128xbf16>, tensor<128x1x4xf32>, tensor<?x3x384xbf16>, tensor<?xi32>, tensor<?x32xbf16>, tensor<128x32xbf16>, tensor<128xf32>, tensor<128xf32>) -> (tensor<?x128xbf16>, tensor<?x3x384xbf16>, tensor<?x128xf32>) {
  ^bb0(%x: tensor<?x128xbf16>, %w: tensor<128x1x4xf32>, %s: tensor<?x3x384xbf16>, %lens: tensor<?xi32>, %fa: tensor<?x32xbf16>, %fb: tensor<128x32xbf16>, %alog: tensor<128xf32>, %dt: tensor<128xf32>):
    %y, %ns = k3.short_conv %x, %w, %s, %lens {state_offset = 128 : i64} : (tensor<?x128xbf16>, tensor<128x1x4xf32>, tensor<?x3x384xbf16>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x3x384xbf16>)
    %z = k3.linear %fa, %fb : (tensor<?x32xbf16>, tensor<128x32xbf16>) -> tensor<?x128xbf16>
    %g = k3.kda_gate %z, %alog, %dt {gate_form = #k3.gate_form<bounded_sigmoid>, lower_bound = -5.000000e+00 : f64, num_heads = 4 : i64} : (tensor<?x128xbf16>, tensor<128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
    k3.yield %y, %ns, %g : tensor<?x128xbf16>, tensor<?x3x384xbf16>, tensor<?x128xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<?x128xbf16>, tensor<?x3x384xbf16>, tensor<?x128xf32>
}

// sm_90a: a convolution whose only user is an L2 norm of 128-channel heads
// (a warp's 32 lanes x 4 channels) normalizes in its own store: the silu
// outputs rounded to bf16, a shuffle sum of squares, f32 rows stored; the
// norm's per_head launch is gone. K3C_CONV_L2NORM=0: the norm keeps its
// launch.
// The prefill convolution of whole 1024-channel blocks stages its 32-token
// tile in 64 KB of dynamic shared memory (cp.async, 16 copies a thread, one
// wait and a barrier) and slides the window over it there;
// K3C_CONV_STAGE=0 loads each token's inputs from global memory.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=CONVNORM
// RUN: env K3C_CONV_STAGE=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=STAGE0
// STAGE0-LABEL: func.func @k3_kda_conv_norm_test(
// STAGE0-NOT: _staged
// STAGE0: module(@k3_kda_conv_norm_test_short_conv)
// STAGE0-NOT: nvgpu.device_async_copy
// STAGE0: scf.for {{.*}} step %c4
// STAGE0-COUNT-4: vector.load %{{.*}} : memref<?x1024xbf16>, vector<4xbf16>
// STAGE0: return
// RUN: env K3C_CONV_L2NORM=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=CONVNORM0
// K3C_CONV_DECODE_GROUPS=3 (opt-in): the decode kernel's one-token branch
// takes a thread's channel groups three at a time (a loop stepping three
// sweeps of 256 threads x 4 channels), the three groups' windows and inputs
// loaded before the first group's stores, the later groups' stores guarded;
// other values are refused.
// RUN: env K3C_CONV_DECODE_GROUPS=3 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=GROUPS
// RUN: not env K3C_CONV_DECODE_GROUPS=5 k3-opt %s --k3-lower-kernels=target=sm_90a 2>&1 | FileCheck %s --check-prefix=BADGROUPS
// GROUPS-LABEL: func.func @k3_kda_conv_norm_test(
// GROUPS: module(@k3_kda_conv_norm_test_short_conv_decode)
// GROUPS: arith.muli %c1024{{.*}}, %c3{{.*}} : index
// GROUPS-NEXT: scf.for {{.*}} step %{{.*}} {
// GROUPS-NOT: vector.store
// GROUPS-COUNT-3: vector.load %{{.*}} : memref<?x1024xbf16>, vector<4xbf16>
// GROUPS-NOT: vector.store
// GROUPS: gpu.shuffle  xor
// GROUPS: vector.store %{{.*}} : memref<?x1024xf32>, vector<4xf32>
// GROUPS-COUNT-3: vector.store %{{.*}} : memref<?x3x1024xbf16>, vector<4xbf16>
// GROUPS: scf.if
// GROUPS: vector.store %{{.*}} : memref<?x1024xf32>, vector<4xf32>
// GROUPS-NEXT: }
// GROUPS-NEXT: scf.if
// GROUPS: module(@k3_kda_conv_norm_test_short_conv_staged)
// BADGROUPS: LLVM ERROR: k3c: K3C_CONV_DECODE_GROUPS must be 1..4, got 5
// CONVNORM-LABEL: func.func @k3_kda_conv_norm_test(
// CONVNORM: module(@k3_kda_conv_norm_test_short_conv_decode)
// CONVNORM: gpu.shuffle  xor
// CONVNORM: vector.store %{{.*}} : memref<?x1024xf32>, vector<4xf32>
// CONVNORM: dynamic_shared_memory_size %c65536_i32 module(@k3_kda_conv_norm_test_short_conv_staged)
// CONVNORM-COUNT-16: nvgpu.device_async_copy
// CONVNORM: nvvm.cp.async.wait.group 0
// CONVNORM-NEXT: gpu.barrier
// CONVNORM: scf.for {{.*}} step %c4
// CONVNORM-COUNT-4: vector.load %{{.*}} : memref<32x1024xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// CONVNORM: arith.divf {{.*}} fastmath<afn>
// CONVNORM: gpu.shuffle  xor
// CONVNORM-NOT: fastmath
// CONVNORM: arith.divf
// CONVNORM-NOT: fastmath
// CONVNORM: vector.store %{{.*}} : memref<?x1024xf32>, vector<4xf32>
// CONVNORM-NOT: per_head
// CONVNORM: return
// CONVNORM0-LABEL: func.func @k3_kda_conv_norm_test(
// CONVNORM0: module(@k3_kda_conv_norm_test_short_conv_staged)
// CONVNORM0: vector.store %{{.*}} : memref<?x1024xbf16>, vector<4xbf16>
// CONVNORM0: module(@k3_kda_conv_norm_test_per_head)
func.func @conv_norm(%a0: tensor<?x1024xbf16>, %a1: tensor<1024x1x4xf32>, %a2: tensor<?x3x1024xbf16>, %a3: tensor<?xi32>) -> (tensor<?x3x1024xbf16>, tensor<?x1024xf32>) {
  %r:2 = k3.kernel "k3_kda_conv_norm_test" family "kda_conv_gate" (%a0, %a1, %a2, %a3) : (tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<?x3x1024xbf16>, tensor<?xi32>) -> (tensor<?x3x1024xbf16>, tensor<?x1024xf32>) {
  ^bb0(%x: tensor<?x1024xbf16>, %w: tensor<1024x1x4xf32>, %s: tensor<?x3x1024xbf16>, %lens: tensor<?xi32>):
    %y, %ns = k3.short_conv %x, %w, %s, %lens : (tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<?x3x1024xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x1024xbf16>)
    %n = k3.l2norm %y {eps = 9.9999999999999995E-7 : f64, head_dim = 128 : i64, scale = 0.088388347648318433 : f64} : tensor<?x1024xbf16> -> tensor<?x1024xf32>
    k3.yield %ns, %n : tensor<?x3x1024xbf16>, tensor<?x1024xf32>
  }
  return %r#0, %r#1 : tensor<?x3x1024xbf16>, tensor<?x1024xf32>
}

func.func @kda_chunk_norm(%x: tensor<?x128xbf16>, %a2: tensor<?x128xbf16>, %a3: tensor<?x128xf32>, %a4: tensor<?x4xbf16>, %a5: tensor<?x4x32x32xf32>, %a6: tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    %n:2 = k3.kernel "k3_qk_norm" family "kda_conv_gate" (%x) {bytes_per_token = 1280 : i64, flops_per_token = 512 : i64} : (tensor<?x128xbf16>) -> (tensor<?x128xf32>, tensor<?x128xf32>) {
    ^bb0(%b0: tensor<?x128xbf16>):
      %q = k3.l2norm %b0 {eps = 1.0e-06 : f64, head_dim = 32 : i64, scale = 0.17677669529663687 : f64} : tensor<?x128xbf16> -> tensor<?x128xf32>
      %k = k3.l2norm %b0 {eps = 1.0e-06 : f64, head_dim = 32 : i64} : tensor<?x128xbf16> -> tensor<?x128xf32>
      k3.yield %q, %k : tensor<?x128xf32>, tensor<?x128xf32>
    }
    %r:2 = k3.kernel "k3_kda_chunk_norm" family "kda_chunk" (%n#0, %n#1, %a2, %a3, %a4, %a5, %a6) {bytes_per_token = 34828 : i64, flops_per_token = 28672 : i64} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    ^bb0(%arg401: tensor<?x128xf32>, %arg402: tensor<?x128xf32>, %arg403: tensor<?x128xbf16>, %arg404: tensor<?x128xf32>, %arg405: tensor<?x4xbf16>, %arg406: tensor<?x4x32x32xf32>, %arg407: tensor<?xi32>):
      %result, %new_state = k3.delta_rule %arg401, %arg402, %arg403, %arg404, %arg405, %arg406, %arg407 {chunk_size = 16 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
      k3.yield %result, %new_state : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
    }
  return %r#0, %r#1 : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
}

// The q/k L2 norms in the delta rule's kernel (k3-fuse-kernels'
// kda-norm-in-chunk): no norm launch and no buffer for the normalized rows;
// the prep normalizes the chunk's bf16 rows into shared memory (a warp per
// row, vector loads, the butterfly) and the token kernels normalize each
// token's lanes with two more warp sums. The host runs the same phases.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=NORMLOAD
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=NORMHOST
// Arguments: the inputs, o, then the six prep scratch buffers only.
// NORMLOAD-LABEL: func.func @k3_kda_chunk_normload(%arg0: memref<?x128xbf16>, %arg1: memref<?x128xbf16>, %arg2: memref<?x128xbf16>, %arg3: memref<?x128xf32>, %arg4: memref<?x4xbf16>, %arg5: memref<?x4x32x32xf32>, %arg6: memref<?xi32>, %arg7: memref<?x128xbf16>, %arg8: memref<?x128xf32>, %arg9: memref<?x128xf32>, %arg10: memref<?x128xf32>, %arg11: memref<?x128xf32>, %arg12: memref<?x64xf32>, %arg13: memref<?x128xf32>) attributes
// NORMLOAD-NOT: per_head
// NORMLOAD: module(@k3_kda_chunk_normload_kda_tokens)
// NORMLOAD-COUNT-15: gpu.shuffle  xor
// NORMLOAD: module(@k3_kda_chunk_normload_kda_tokens_staged)
// NORMLOAD: module(@k3_kda_chunk_normload_kda_prep)
// NORMLOAD: memref.load %arg0[%{{.*}}, %{{.*}}] : memref<?x128xbf16>
// NORMLOAD: gpu.shuffle  xor {{.*}} : f32
// NORMLOAD: math.sqrt
// NORMLOAD: gpu.barrier
// NORMLOAD-NOT: per_head
// NORMLOAD: return
// NORMHOST-LABEL: func.func @k3_kda_chunk_normload(
// NORMHOST-NOT: gpu.
// NORMHOST: math.sqrt
// NORMHOST: return
func.func @kda_chunk_normload(%a0: tensor<?x128xbf16>, %a1: tensor<?x128xbf16>, %a2: tensor<?x128xbf16>, %a3: tensor<?x128xf32>, %a4: tensor<?x4xbf16>, %a5: tensor<?x4x32x32xf32>, %a6: tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    %r:2 = k3.kernel "k3_kda_chunk_normload" family "kda_chunk" (%a0, %a1, %a2, %a3, %a4, %a5, %a6) {bytes_per_token = 34828 : i64, flops_per_token = 28672 : i64} : (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    ^bb0(%arg400: tensor<?x128xbf16>, %arg401: tensor<?x128xbf16>, %arg403: tensor<?x128xbf16>, %arg404: tensor<?x128xf32>, %arg405: tensor<?x4xbf16>, %arg406: tensor<?x4x32x32xf32>, %arg407: tensor<?xi32>):
      %q = k3.l2norm %arg400 {eps = 1.0E-6 : f64, head_dim = 32 : i64, scale = 0.17677669529663687 : f64} : tensor<?x128xbf16> -> tensor<?x128xf32>
      %k = k3.l2norm %arg401 {eps = 1.0E-6 : f64, head_dim = 32 : i64} : tensor<?x128xbf16> -> tensor<?x128xf32>
      %result, %new_state = k3.delta_rule %q, %k, %arg403, %arg404, %arg405, %arg406, %arg407 {chunk_size = 16 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
      k3.yield %result, %new_state : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
    }
  return %r#0, %r#1 : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
}

// A split norm's reduction (k3-split-l2norms) in its convolution's store on
// sm_90a: the bf16 rows stored as they are, the squares of the rounded
// outputs summed by the warp's shuffles and one lane's f32 inverse norm a
// (token, head); no per_head launch. K3C_CONV_L2NORM=0 and the host: the
// reduction's own launch (a warp per head, one store).
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=CONVINV
// RUN: env K3C_CONV_L2NORM=0 k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=CONVINV0
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=CONVINVHOST
// CONVINV-LABEL: func.func @k3_kda_conv_inv_test(
// CONVINV: module(@k3_kda_conv_inv_test_short_conv_decode)
// CONVINV: gpu.shuffle  xor
// CONVINV: memref.store %{{.*}} : memref<?x8xf32>
// CONVINV: vector.store %{{.*}} : memref<?x1024xbf16>, vector<4xbf16>
// CONVINV: module(@k3_kda_conv_inv_test_short_conv_staged)
// CONVINV: scf.for {{.*}} step %c4
// CONVINV: gpu.shuffle  xor
// CONVINV: math.sqrt
// CONVINV: memref.store %{{.*}} : memref<?x8xf32>
// CONVINV: vector.store %{{.*}} : memref<?x1024xbf16>, vector<4xbf16>
// CONVINV-NOT: per_head
// CONVINV: return
// CONVINV0-LABEL: func.func @k3_kda_conv_inv_test(
// CONVINV0: module(@k3_kda_conv_inv_test_short_conv_staged)
// CONVINV0-NOT: memref<?x8xf32>
// CONVINV0: module(@k3_kda_conv_inv_test_per_head)
// CONVINV0: gpu.shuffle  xor
// CONVINV0: math.sqrt
// CONVINV0: memref.store %{{.*}} : memref<?x8xf32>
// CONVINVHOST-LABEL: func.func @k3_kda_conv_inv_test(
// CONVINVHOST-NOT: gpu.
// CONVINVHOST: math.sqrt
// CONVINVHOST: memref.store %{{.*}} : memref<?x8xf32>
// CONVINVHOST: return
func.func @conv_inv(%a0: tensor<?x1024xbf16>, %a1: tensor<1024x1x4xf32>, %a2: tensor<?x3x1024xbf16>, %a3: tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?x8xf32>) {
  %r:3 = k3.kernel "k3_kda_conv_inv_test" family "kda_conv_gate" (%a0, %a1, %a2, %a3) : (tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<?x3x1024xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?x8xf32>) {
  ^bb0(%x: tensor<?x1024xbf16>, %w: tensor<1024x1x4xf32>, %s: tensor<?x3x1024xbf16>, %lens: tensor<?xi32>):
    %y, %ns = k3.short_conv %x, %w, %s, %lens : (tensor<?x1024xbf16>, tensor<1024x1x4xf32>, tensor<?x3x1024xbf16>, tensor<?xi32>) -> (tensor<?x1024xbf16>, tensor<?x3x1024xbf16>)
    %n = k3.l2norm_inv %y {eps = 9.9999999999999995E-7 : f64, head_dim = 128 : i64} : tensor<?x1024xbf16> -> tensor<?x8xf32>
    k3.yield %y, %ns, %n : tensor<?x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?x8xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<?x1024xbf16>, tensor<?x3x1024xbf16>, tensor<?x8xf32>
}

// A split norm's scaling in the delta rule's kernel: no launch and no
// buffer for the normalized rows; the prep stages the chunk's inverse norms
// (q's and k's, [T, H] f32) in shared memory and scales the bf16 rows as
// it loads them, with no reduction (no shuffles, no square root); the token
// kernels scale each token's lanes by the loaded inverse norm. The host
// runs the same loads.
// RUN: k3-opt %s --k3-lower-kernels=target=sm_90a | FileCheck %s --check-prefix=SPLITLOAD
// RUN: k3-opt %s --k3-lower-kernels=target=host | FileCheck %s --check-prefix=SPLITHOST
// Arguments: the inputs (rows and inverse norms of q and k), o, then the six prep scratch buffers only.
// SPLITLOAD-LABEL: func.func @k3_kda_chunk_splitload(%arg0: memref<?x128xbf16>, %arg1: memref<?x4xf32>, %arg2: memref<?x128xbf16>, %arg3: memref<?x4xf32>, %arg4: memref<?x128xbf16>, %arg5: memref<?x128xf32>, %arg6: memref<?x4xbf16>, %arg7: memref<?x4x32x32xf32>, %arg8: memref<?xi32>, %arg9: memref<?x128xbf16>, %arg10: memref<?x128xf32>, %arg11: memref<?x128xf32>, %arg12: memref<?x128xf32>, %arg13: memref<?x128xf32>, %arg14: memref<?x64xf32>, %arg15: memref<?x128xf32>) attributes
// SPLITLOAD-NOT: per_head
// SPLITLOAD: module(@k3_kda_chunk_splitload_kda_tokens)
// SPLITLOAD-NOT: math.sqrt
// SPLITLOAD: memref.load %arg3[%{{.*}}, %{{.*}}] : memref<?x4xf32>
// SPLITLOAD-NOT: math.sqrt
// SPLITLOAD: memref.load %arg1[%{{.*}}, %{{.*}}] : memref<?x4xf32>
// SPLITLOAD: module(@k3_kda_chunk_splitload_kda_tokens_staged)
// SPLITLOAD: module(@k3_kda_chunk_splitload_kda_prep)
// SPLITLOAD-NOT: math.sqrt
// SPLITLOAD: memref.load %arg3[%{{.*}}, %{{.*}}] : memref<?x4xf32>
// SPLITLOAD: gpu.barrier
// SPLITLOAD-NOT: math.sqrt
// SPLITLOAD: memref.load %arg0[%{{.*}}, %{{.*}}] : memref<?x128xbf16>
// SPLITLOAD-NOT: per_head
// SPLITLOAD: return
// SPLITHOST-LABEL: func.func @k3_kda_chunk_splitload(
// SPLITHOST-NOT: gpu.
// SPLITHOST-NOT: math.sqrt
// SPLITHOST: memref.load %arg1[%{{.*}}, %{{.*}}] : memref<?x4xf32>
// SPLITHOST-NOT: math.sqrt
// SPLITHOST: return
func.func @kda_chunk_splitload(%a0: tensor<?x128xbf16>, %i0: tensor<?x4xf32>, %a1: tensor<?x128xbf16>, %i1: tensor<?x4xf32>, %a2: tensor<?x128xbf16>, %a3: tensor<?x128xf32>, %a4: tensor<?x4xbf16>, %a5: tensor<?x4x32x32xf32>, %a6: tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    %r:2 = k3.kernel "k3_kda_chunk_splitload" family "kda_chunk" (%a0, %i0, %a1, %i1, %a2, %a3, %a4, %a5, %a6) {bytes_per_token = 34828 : i64, flops_per_token = 28672 : i64} : (tensor<?x128xbf16>, tensor<?x4xf32>, tensor<?x128xbf16>, tensor<?x4xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>) {
    ^bb0(%b0: tensor<?x128xbf16>, %bi0: tensor<?x4xf32>, %b1: tensor<?x128xbf16>, %bi1: tensor<?x4xf32>, %b3: tensor<?x128xbf16>, %b4: tensor<?x128xf32>, %b5: tensor<?x4xbf16>, %b6: tensor<?x4x32x32xf32>, %b7: tensor<?xi32>):
      %q = k3.l2norm %b0, inv_norm %bi0 {eps = 1.0E-6 : f64, head_dim = 32 : i64, scale = 0.17677669529663687 : f64} : tensor<?x128xbf16>, tensor<?x4xf32> -> tensor<?x128xf32>
      %k = k3.l2norm %b1, inv_norm %bi1 {eps = 1.0E-6 : f64, head_dim = 32 : i64} : tensor<?x128xbf16>, tensor<?x4xf32> -> tensor<?x128xf32>
      %result, %new_state = k3.delta_rule %q, %k, %b3, %b4, %b5, %b6, %b7 {chunk_size = 16 : i64, gamma_type = bf16, num_heads = 4 : i64, path = #k3.chunk_path<factorized>, tile = 16 : i64, varlen_masked} : (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xbf16>, tensor<?x128xf32>, tensor<?x4xbf16>, tensor<?x4x32x32xf32>, tensor<?xi32>) -> (tensor<?x128xbf16>, tensor<?x4x32x32xf32>)
      k3.yield %result, %new_state : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
    }
  return %r#0, %r#1 : tensor<?x128xbf16>, tensor<?x4x32x32xf32>
}
