//===- Passes.td - k3c transformation passes ----------------*- tablegen -*-===//
//
// One pass = one file = one flag = one lit test (test/Passes/<flag>.mlir).
//
//===----------------------------------------------------------------------===//

#ifndef K3C_PASSES_PASSES_TD
#define K3C_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def K3DecomposeLayersPass : Pass<"k3-decompose-layers", "::mlir::ModuleOp"> {
  let summary = "Decompose model-level k3 ops (L0) into core ops (L1)";
  let description = [{
    Rewrites `k3.kda`, `k3.gated_mla`, `k3.latent_moe`, `k3.mlp` and
    `k3.lm_head` into `k3.linear`, `k3.short_conv`, `k3.kda_gate`,
    `k3.l2norm`, `k3.delta_rule`, `k3.gated_rmsnorm`, `k3.mla_attention`,
    `k3.moe_router`, `k3.expert_mlp`, `k3.moe_combine`, `k3.glu`,
    `k3.rmsnorm` and `arith.addf`, following spec §4 op by op.
  }];
  let dependentDialects = ["::mlir::k3::K3Dialect", "::mlir::arith::ArithDialect"];
}

def K3KdaTilingLegalityPass : Pass<"k3-kda-tiling-legality", "::mlir::ModuleOp"> {
  let summary = "Choose and verify the KDA chunk tiling under the gate's decay bound";
  let description = [{
    For every `k3.delta_rule`, finds the gate's lower bound g_min (from the
    `k3.kda_gate` producing `g`) and checks that the factorized chunk form's
    Γ⁻¹ = exp(16|g_min|) over one 16-token tile (the tensor-core M tile) and
    Γ = exp(-16|g_min|) stay finite and normal in `gamma-type` with a 2^4
    margin: 16|g_min| <= min(ln(max), -ln(min normal)) - ln 16. Chunks are 16
    tokens unless `chunk-size` forces 32 or 64 (their intra-chunk products
    per 16-token sub-block). An unbounded gate gets the pairwise path
    (exp(G_i - G_j), no Γ⁻¹) with a remark. An illegal tiling or chunk size
    is an error printing g_min, the dtype and the bound. Records chunk_size,
    tile, gamma_type, path and varlen_masked on the op.
  }];
  let options = [
    Option<"chunkSize", "chunk-size", "int64_t", /*default=*/"0",
           "Chunk size: 16, 32 or 64 (0: 16)">,
    Option<"gammaType", "gamma-type", "std::string", /*default=*/"\"bf16\"",
           "Dtype holding Γ and Γ⁻¹: bf16, f16 or f32">
  ];
  let dependentDialects = ["::mlir::k3::K3Dialect"];
}

def K3MXFP4LayoutPass : Pass<"k3-mxfp4-layout", "::mlir::ModuleOp"> {
  let summary = "Put routed-expert MXFP4 weights into the expert kernel's layout";
  let description = [{
    Rewrites every MXFP4 weight argument of the entry functions from the
    checkpoint layout to `#k3.mxfp4_layout<n_tile = 8, k_tile = KT>` (KT the
    largest of 128/64/32 dividing K): tiles whose per-thread 16-byte runs
    are mma.m16n8k16 B fragments (docs/mxfp4-layout.md). The runtime's
    repacker reads the same attribute (models/MXFP4Layout.h).
  }];
  let dependentDialects = ["::mlir::k3::K3Dialect"];
}

def K3SplitL2NormsPass : Pass<"k3-split-l2norms", "::mlir::ModuleOp"> {
  let summary = "Split the KDA q/k L2 norms into a reduction and a scaling";
  let description = [{
    Rewrites every `k3.l2norm` whose result is read only as a
    `k3.delta_rule`'s q or k and whose input is narrower than its result
    (bf16 rows normalized into f32) into `k3.l2norm_inv` (the per-head
    inverse norms, `[T, H]` f32) and `k3.l2norm %x, inv_norm %r` (the
    scaling): the same values. `k3-fuse-kernels` then runs the reduction in
    the convolutions' kernel and the scaling in the delta rule's, so the
    rows cross between them in the input's dtype with one f32 a (token,
    head). f32 inputs (the exact build) are left alone.
  }];
  let dependentDialects = ["::mlir::k3::K3Dialect"];
}

def K3FuseKernelsPass : Pass<"k3-fuse-kernels", "::mlir::ModuleOp"> {
  let summary = "Group core ops into k3.kernel regions, one per future kernel launch";
  let description = [{
    Forms the fused regions of docs/fusion.md (norm + projections, KDA conv +
    gate, chunked delta rule, gated norm + output projection + residual, MLA
    q up-projection, MLA attention + gate, router, experts, combine + norm +
    up + shared add, ...). Values inside a region stay out of global memory.
    Kernels with identical bodies (identical layers) share one name. With
    `report` a remark per kernel gives its estimated bytes and FLOPs.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per kernel with its cost estimates">,
    Option<"fuseGlu", "fuse-glu", "bool", /*default=*/"true",
           "Put a gated activation (dense MLP, shared experts) in the kernel of "
           "its gate and up projections, so only the activation leaves it">,
    Option<"kdaNormInChunk", "kda-norm-in-chunk", "bool", /*default=*/"false",
           "Put the KDA q/k L2 norms in the kda_chunk kernel instead of the "
           "convolutions' (the delta rule then normalizes the convolutions' "
           "rows as it loads them: they cross in the activation dtype)">,
    Option<"kdaOutNormInChunk", "kda-out-norm-in-chunk", "bool", /*default=*/"false",
           "Put KDA's gated output norm in the kda_chunk kernel instead of "
           "kda_out's (decode: the token recurrence's last block of a head "
           "normalizes it, one launch fewer a layer; prefill: its own launch)">,
    Option<"kdaGateInChunk", "kda-gate-in-chunk", "bool", /*default=*/"false",
           "Put the KDA gate in the kda_chunk kernel instead of the convolutions' "
           "(the delta rule then forms each gate value from f_b's logits as it "
           "loads them: they cross in the activation dtype, not as fp32 gates)">
  ];
  let dependentDialects = ["::mlir::k3::K3Dialect"];
}

def K3LowerKernelsPass : Pass<"k3-lower-kernels", "::mlir::ModuleOp"> {
  let summary = "Lower every k3.kernel to a loop function for one target";
  let description = [{
    Runs the kernel lowering of k3-compile on a module holding `k3.kernel`
    regions (a fused module, or a function with a single kernel for a test)
    and replaces the module's contents with one `func.func` per distinct
    kernel over memrefs (destination-passing style, docs/kernels.md), plus
    the EP row-gather kernels. `target=host` gives loops with one thread a
    block; `target=sm_90a` gives `gpu.launch` thread blocks whose matrix
    products go through the GEMM tile layer (lowering/tile/Gemm.h): FMA for
    f32 and few tokens, `mma.sync` (cp.async + ldmatrix) and `wgmma` tiles
    for bf16 behind a host-side branch on the token count. Outlined GPU
    kernels are named after what they are (`<kernel>_linear_wgmma_128x256x64_s4`).
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"host\"",
           "Kernel target: host or sm_90a">
  ];
  let dependentDialects = [
    "::mlir::func::FuncDialect", "::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect",
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect", "::mlir::gpu::GPUDialect",
    "::mlir::vector::VectorDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::LLVM::LLVMDialect"
  ];
}

#endif // K3C_PASSES_PASSES_TD
