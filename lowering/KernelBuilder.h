//===- KernelBuilder.h - the tile-level layer kernels are written in -*- C++ -*-===//
//
// Kernel families (lowering/families/*.cpp) lower each core op inside a
// k3.kernel with this builder, for one target at a time:
//
//  * `parallel`: independent outputs (scf.parallel; the GPU pipeline tiles it
//    into 128-thread blocks) for elementwise work;
//  * `blocks`: cooperative thread-block programs: a grid of blocks, each
//    with `threads` threads that share memory (`shared`), synchronize
//    (`barrier`), reduce across a warp or the block (`warpSum`,
//    `blockSum`) and read global memory 16 bytes at a time (`loadVec`,
//    `copyVec`). On the GPU a block is a gpu.launch block; on the host it
//    is one iteration of a parallel loop run by a single thread (threads =
//    warps = lanes = 1, shared memory on the stack), so the same family code
//    is correct for both: it must only assume that its strided loops cover
//    [lb, ub) whatever the thread count.
//
// Values are computed in fp32 with explicit rounding to each value's storage
// type. Tensor-core (mma/wgmma) and TMA versions of the inner loops plug in
// behind `blocks` without changing the families' structure.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_LOWERING_KERNELBUILDER_H
#define K3C_LOWERING_KERNELBUILDER_H

#include "dialects/K3/IR/K3Ops.h"
#include "lowering/Lowering.h"
#include "lowering/TargetInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"
#include <cstdlib>
#include <string_view>

#include <functional>

namespace k3c::lowering {

using mlir::Value;
using mlir::ValueRange;

/// An MXFP4 weight as kernel arguments: flat payload and scale bytes.
struct MXFP4Buffers {
  Value payload, scales;
  mlir::k3::MXFP4Type type;
};

/// One thread block of a cooperative kernel (KernelBuilder::blocks). On the
/// host: one thread (tid = warp = lane = 0).
struct ThreadBlock {
  Value tid, warp, lane;
  int64_t threads = 1, warps = 1, lanes = 1;
  mlir::gpu::LaunchOp launch; ///< null on the host
  mlir::Block *hostEntry = nullptr; ///< host: where shared buffers are allocated
};

class KernelBuilder {
public:
  KernelBuilder(mlir::OpBuilder &b, mlir::Location loc, Target target = Target::Host)
      : b(b), loc(loc), target(target), contract(switchFromEnv("K3C_FP_CONTRACT")),
        fastDiv(switchFromEnv("K3C_FAST_DIV")) {}
  /// A 0/1 compile-time switch from the environment (unset or empty:
  /// `dflt`); any other value is a fatal error naming it.
  static bool switchFromEnv(const char *var, bool dflt = false) {
    const char *v = std::getenv(var);
    if (!v || !*v)
      return dflt;
    std::string_view s(v);
    if (s != "0" && s != "1")
      llvm::report_fatal_error(llvm::Twine("k3c: ") + var + " must be 0 or 1, got '" + v + "'",
                               /*gen_crash_diag=*/false);
    return s == "1";
  }

  mlir::OpBuilder &b;
  mlir::Location loc;
  Target target;
  /// The kernel function being built (names outlined kernels; found from
  /// the insertion point when unset, which fails inside a loop body that is
  /// still being built).
  mlir::func::FuncOp function;
  /// The k3.kernel's family while its body is lowered ("" for the
  /// artifact's utility kernels).
  std::string family;
  bool gpu() const { return target == Target::Gpu; }
  /// Float adds and multiplies may fuse on the GPU (see fadd).
  bool contract;
  /// GPU float divisions may be approximate (see fdiv).
  bool fastDiv;
  /// What the target offers (shared memory, SMs, matrix instructions).
  const TargetInfo &info() const { return TargetInfo::get(target); }

  // Constants and shapes.
  Value idx(int64_t v) { return mlir::arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return mlir::arith::ConstantOp::create(b, loc, b.getF32FloatAttr(static_cast<float>(v)));
  }
  Value i32Const(int64_t v) {
    return mlir::arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
  }
  Value dim(Value memref, int64_t i) { return mlir::memref::DimOp::create(b, loc, memref, i); }

  // Index arithmetic.
  Value add(Value a, Value c) { return mlir::arith::AddIOp::create(b, loc, a, c); }
  Value sub(Value a, Value c) { return mlir::arith::SubIOp::create(b, loc, a, c); }
  Value mul(Value a, Value c) { return mlir::arith::MulIOp::create(b, loc, a, c); }
  Value div(Value a, Value c) { return mlir::arith::DivUIOp::create(b, loc, a, c); }
  Value rem(Value a, Value c) { return mlir::arith::RemUIOp::create(b, loc, a, c); }
  Value add(Value a, int64_t c) { return add(a, idx(c)); }
  Value mul(Value a, int64_t c) { return mul(a, idx(c)); }
  Value div(Value a, int64_t c) { return div(a, idx(c)); }
  Value rem(Value a, int64_t c) { return rem(a, idx(c)); }
  Value minu(Value a, Value c) { return mlir::arith::MinUIOp::create(b, loc, a, c); }
  Value ceilDiv(Value a, int64_t c) { return div(add(a, c - 1), c); }
  Value ult(Value a, Value c) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult, a, c);
  }
  Value ule(Value a, Value c) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ule, a, c);
  }
  Value slt(Value a, Value c) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::slt, a, c);
  }
  Value ieq(Value a, Value c) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, a, c);
  }
  Value ine(Value a, Value c) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ne, a, c);
  }
  Value andi(Value a, Value c) { return mlir::arith::AndIOp::create(b, loc, a, c); }
  Value toIndex(Value intValue) {
    return mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(), intValue);
  }
  Value select(Value c, Value t, Value f) {
    return mlir::arith::SelectOp::create(b, loc, c, t, f);
  }

  // Float math (fp32). K3C_FP_CONTRACT=1 gives GPU adds, subtracts and
  // multiplies `contract`: NVPTX then fuses a multiply feeding an add into
  // one fma.rn (one rounding instead of two); by default it emits mul.rn +
  // add.rn, which ptxas does not fuse. Measured on the H200 (slice, one
  // call): the KDA chunk family at 8192 tokens 4.73 -> 4.65 ms, its decode at
  // batch 128 472 -> 506 us; within run-to-run spread, so off by default.
  Value fadd(Value a, Value c) { return mlir::arith::AddFOp::create(b, loc, a, c, fmf()); }
  Value fsub(Value a, Value c) { return mlir::arith::SubFOp::create(b, loc, a, c, fmf()); }
  Value fmul(Value a, Value c) { return mlir::arith::MulFOp::create(b, loc, a, c, fmf()); }
  mlir::arith::FastMathFlags fmf() const {
    return gpu() && contract ? mlir::arith::FastMathFlags::contract
                             : mlir::arith::FastMathFlags::none;
  }
  /// a / c: IEEE division (div.rn / rcp.rn on the GPU, a dozen instructions
  /// with a slow path); K3C_FAST_DIV=1 marks GPU divisions `afn`, which NVPTX
  /// emits as div.approx / rcp.approx (within 2 ulp; not yet measured).
  Value fdiv(Value a, Value c) {
    return mlir::arith::DivFOp::create(b, loc, a, c,
                                       gpu() && fastDiv ? mlir::arith::FastMathFlags::afn
                                                        : mlir::arith::FastMathFlags::none);
  }
  Value fmax(Value a, Value c) { return mlir::arith::MaximumFOp::create(b, loc, a, c); }
  Value fgt(Value a, Value c) {
    return mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::OGT, a, c);
  }
  Value fneg(Value a) { return mlir::arith::NegFOp::create(b, loc, a); }
  Value exp(Value a) { return mlir::math::ExpOp::create(b, loc, a); }
  /// 2^a (one ex2.approx on the GPU: the softmax of the attention kernels).
  Value exp2(Value a) { return mlir::math::Exp2Op::create(b, loc, a); }
  Value tanh(Value a) { return mlir::math::TanhOp::create(b, loc, a); }
  Value sqrt(Value a) { return mlir::math::SqrtOp::create(b, loc, a); }
  Value log1p(Value a) { return mlir::math::Log1pOp::create(b, loc, a); }
  Value rsqrt(Value a) { return fdiv(f32(1.0), sqrt(a)); }
  Value sigmoid(Value a) { return fdiv(f32(1.0), fadd(f32(1.0), exp(fneg(a)))); }
  Value silu(Value a) { return fmul(a, sigmoid(a)); }
  /// softplus(x) = x for x > 20, else log1p(exp(x)) (the reference's form).
  Value softplus(Value a) { return select(fgt(a, f32(20.0)), a, log1p(exp(a))); }

  /// The gated activation act(gate, up): SiTU-GLU with betas (b1, b2) or SwiGLU.
  Value glu(mlir::k3::Activation act, std::optional<llvm::APFloat> beta,
            std::optional<llvm::APFloat> linearBeta, Value gate, Value up);

  // Storage conversions: every value is stored in its memref's element type
  // and computed on in fp32.
  Value toF32(Value v);
  Value fromF32(Value v, mlir::Type storage);
  Value load(Value memref, ValueRange indices) {
    return mlir::memref::LoadOp::create(b, loc, memref, indices);
  }
  Value loadF32(Value memref, ValueRange indices) { return toF32(load(memref, indices)); }
  void store(Value v, Value memref, ValueRange indices) {
    mlir::memref::StoreOp::create(b, loc, v, memref, indices);
  }
  /// Rounds fp32 `v` to the memref's element type and stores it.
  void storeF32(Value v, Value memref, ValueRange indices);
  /// fp32 -> the storage type -> fp32: the rounding a value gets when stored.
  Value round(Value v, mlir::Type storage) { return toF32(fromF32(v, storage)); }

  // Loops.
  /// Independent iterations over [0, ubs[i]).
  void parallel(ValueRange ubs, const std::function<void(ValueRange)> &body);
  /// A sequential loop over [lb, ub).
  void loop(Value lb, Value ub, const std::function<void(Value)> &body) {
    loopStep(lb, ub, idx(1), body);
  }
  /// A sequential loop carrying `inits`; `body` returns the next values.
  llvm::SmallVector<Value> loop(Value lb, Value ub, ValueRange inits,
                                const std::function<llvm::SmallVector<Value>(Value, ValueRange)> &body) {
    return loopStep(lb, ub, idx(1), inits, body);
  }
  /// Sum over [lb, ub) of body(i) in fp32, in index order.
  Value sum(Value lb, Value ub, const std::function<Value(Value)> &body);
  /// An fp32 value computed by `then` when `cond` holds, else by `otherwise`
  /// (only the taken side runs: guarded loads stay in bounds).
  Value ifElse(Value cond, const std::function<Value()> &then,
               const std::function<Value()> &otherwise);
  /// If-then with no results.
  void ifThen(Value cond, const std::function<void()> &then);
  /// If-then-else with no results.
  void ifThenElse(Value cond, const std::function<void()> &then,
                  const std::function<void()> &otherwise);

  /// A sequential loop over [lb, ub) with step `step`.
  void loopStep(Value lb, Value ub, Value step, const std::function<void(Value)> &body);
  llvm::SmallVector<Value>
  loopStep(Value lb, Value ub, Value step, ValueRange inits,
           const std::function<llvm::SmallVector<Value>(Value, ValueRange)> &body);

  // Cooperative thread blocks.
  /// A grid of `grid` blocks (row-major block ids) of `threads` threads on
  /// the GPU (a multiple of 32), one thread per block on the host. A grid
  /// with no blocks launches nothing. On the GPU, `dynamicSharedBytes` of
  /// dynamic shared memory come with every block (the runtime raises the
  /// kernel's opt-in limit when it exceeds the static 48 KB; views into it
  /// by `dynamicShared`), and `name`, when given, names the outlined kernel
  /// (`<function>_<name>`: what the kernel is, e.g. linear_mma_128x128).
  /// `cluster` > 1 (GPU, sm_90): consecutive blocks of the flattened grid
  /// (the last grid dimension varies fastest) form thread block clusters of
  /// that many; the grid must be a multiple of it.
  void blocks(ValueRange grid, int64_t threads,
              const std::function<void(ValueRange, ThreadBlock &)> &body,
              int64_t dynamicSharedBytes = 0, llvm::StringRef name = {}, int64_t cluster = 1);
  /// A view of the block's dynamic shared memory from `byteOffset` (GPU
  /// blocks launched with dynamicSharedBytes only).
  Value dynamicShared(ThreadBlock &tb, int64_t byteOffset, llvm::ArrayRef<int64_t> shape,
                      mlir::Type elementType);
  /// Block-shared memory: workgroup memory on the GPU (16-byte aligned), a
  /// stack buffer on the host.
  Value shared(ThreadBlock &tb, llvm::ArrayRef<int64_t> shape, mlir::Type elementType);
  /// Synchronizes the block's threads (nothing on the host).
  void barrier(ThreadBlock &tb);
  /// Asks for at least `n` blocks of this launch resident on an SM (PTX
  /// .minnctapersm on its outlined kernel: ptxas caps the registers to fit;
  /// K3C_LAUNCH_BOUNDS overrides it). Nothing on the host.
  void minBlocksPerSm(ThreadBlock &tb, int64_t n) {
    if (tb.launch)
      tb.launch->setAttr(kMinBlocksAttr, b.getI32IntegerAttr(static_cast<int32_t>(n)));
  }
  /// The gpu.launch attribute minBlocksPerSm sets (read by the GPU target
  /// when it outlines the launch).
  static constexpr llvm::StringLiteral kMinBlocksAttr = "k3.min_blocks_per_sm";
  /// Programmatic dependent launch per kernel (GPU, where the target's
  /// gridDependencyMode is not 0; nothing elsewhere). gridWait: the outlined
  /// kernel waits for the grids ahead here (griddepcontrol.wait) instead of
  /// at its start; what the block does before it may read only memory that
  /// no kernel of the step writes (weights), and write nothing. Call it once,
  /// uniformly. earlyDependents: the next grid may be scheduled as soon as
  /// every block of this launch has started (griddepcontrol.launch_dependents
  /// after its wait), so that its blocks can do their part before the wait
  /// beside this launch's (GpuTarget's chainGrids places both).
  void gridWait(ThreadBlock &tb);
  void earlyDependents(ThreadBlock &tb);
  /// griddepcontrol.launch_dependents where `cond` holds (GPU with grid
  /// dependency control; nothing elsewhere): the next grid may be scheduled
  /// once every block of this launch has executed it or exited (its own
  /// griddepcontrol.wait still waits for this grid to complete).
  void launchDependentsIf(ThreadBlock &tb, Value cond);
  static constexpr llvm::StringLiteral kOwnWaitAttr = "k3.own_grid_wait";
  static constexpr llvm::StringLiteral kEarlyDependentsAttr = "k3.early_dependents";
  /// Sum over a warp's lanes (butterfly shuffles; all lanes get it).
  Value warpSum(ThreadBlock &tb, Value v);
  /// Maximum (arith.maximumf: NaN wins) over a warp's lanes, all lanes
  /// get it (GPU; a warp of one lane on the host returns `v`).
  Value warpMax(ThreadBlock &tb, Value v);
  /// One warp shuffle (32 lanes) of an i32 or f32 value: `mode` XOR with
  /// `lane` the offset, IDX with `lane` the source lane (index).
  Value shuffle(Value v, Value lane, mlir::gpu::ShuffleMode mode);
  /// Integer (index) versions over a warp's lanes: the sum (all lanes get
  /// it), the inclusive prefix sum up to each lane, and lane `src`'s value.
  /// On the host (one lane) they return `v`.
  Value warpSumIndex(ThreadBlock &tb, Value v);
  Value warpPrefixIndex(ThreadBlock &tb, Value v);
  Value warpBroadcastIndex(ThreadBlock &tb, Value v, Value src);
  /// Sum over the block's threads; `red` is shared f32 [warps] scratch.
  /// Every thread gets the total; contains barriers (call uniformly).
  Value blockSum(ThreadBlock &tb, Value v, Value red);
  /// Several block sums with one exchange: `red` is shared f32
  /// [warps * vs.size()]; each total equals blockSum's of the same value
  /// (same order of additions).
  llvm::SmallVector<Value> blockSums(ThreadBlock &tb, llvm::ArrayRef<Value> vs, Value red);
  /// sm_90: asks the L2 for `bytes` (a multiple of 16) of a 16-byte aligned
  /// region of global memref `m` from `indices` (cp.async.bulk.prefetch;
  /// nothing is waited for). Identity-layout memrefs only.
  void prefetchL2(Value m, ValueRange indices, int64_t bytes);
  /// The byte address of memref `m`'s element at `indices` (row-major with
  /// its strides; none: element 0): its aligned pointer plus the
  /// descriptor's offset, as an index.
  Value byteAddress(Value m, ValueRange indices = {});
  /// An index address as an LLVM pointer of address space `space`.
  Value pointerAt(Value addr, unsigned space);
  /// The dot product over [0, len) of two rows, split over a warp's lanes
  /// `width` elements at a time (16-byte loads), summed across the warp:
  /// a(k) and b(k) give `width` fp32 values from index k.
  Value warpDot(ThreadBlock &tb, int64_t len, int64_t width,
                const std::function<llvm::SmallVector<Value>(Value)> &a,
                const std::function<llvm::SmallVector<Value>(Value)> &b);
  /// [lb, ub) split over the block's threads / a warp's lanes / the warps.
  void strided(ThreadBlock &tb, Value lb, Value ub, const std::function<void(Value)> &body) {
    loopStep(add(lb, tb.tid), ub, idx(tb.threads), body);
  }
  /// `width` consecutive elements of the innermost dim starting at
  /// `indices`, as fp32: one 16-byte (or narrower) vector load on the GPU.
  /// The caller guarantees alignment (row length and start multiples of
  /// `width`, buffers 16-byte aligned).
  llvm::SmallVector<Value> loadVec(Value memref, ValueRange indices, int64_t width);
  /// loadVec's `width` elements as one vector value in the memref's element
  /// type (host: a vector of them too), issued where it stands (GPU: a
  /// volatile load of global memory, which no pass sinks toward its uses):
  /// the loads a kernel issues before its gridWait. unpackVec converts them
  /// where they are used, so packed narrow values hold fewer registers
  /// meanwhile.
  Value loadVecPinnedRaw(Value memref, ValueRange indices, int64_t width);
  /// A vector value's elements as fp32.
  llvm::SmallVector<Value> unpackVec(Value v);
  /// Copies `width` consecutive elements (same element type), vectorized on
  /// the GPU.
  void copyVec(Value src, ValueRange srcIdx, Value dst, ValueRange dstIdx, int64_t width);
  /// Stores fp32 `values` (rounded to dst's element type) at consecutive
  /// elements from `indices`: one vector store on the GPU (alignment as for
  /// loadVec), scalar stores on the host.
  void storeVec(llvm::ArrayRef<Value> values, Value dst, ValueRange indices);
  /// Stores `width` zeros of dst's element type at dstIdx.
  void zeroVec(Value dst, ValueRange dstIdx, int64_t width);
  /// The widest vector (elements) a 16-byte load of `memref`'s element type
  /// allows for rows of `rowLength` elements: 1 on the host.
  int64_t vecWidth(Value memref, int64_t rowLength);

  /// Tokens before sequence `n` in a varlen batch: sum of seq_lens[0..n).
  Value seqOffset(Value seqLens, Value n);
  /// The same, summed by the lanes of each warp of a block together
  /// (n / 32 loads a lane instead of n a thread; every thread gets it).
  Value seqOffset(ThreadBlock &tb, Value seqLens, Value n);
  Value seqLen(Value seqLens, Value n) { return toIndex(load(seqLens, {n})); }

  /// Element (row n, column k) of matrix `e` of an MXFP4 weight, in fp32.
  Value mxfp4Element(const MXFP4Buffers &w, Value e, Value n, Value k);
  /// The E2M1 code in the low 4 bits of `nib` (i32; higher bits ignored) as
  /// fp32, by bit operations: magnitude m = nib & 7 is 0, 0.5 or, for m >= 2,
  /// the bits (m + 252) << 22; bit 3 is the sign.
  Value e2m1ToF32(Value nib);
  /// The E2M1 code (s e1 e0 m) of a kernel-layout run word (i32) whose code
  /// bits m, e0, e1, s sit at `bits` (four i32 values; models/MXFP4Layout.h,
  /// fragment::codeAt).
  Value mxfp4CodeAt(Value word, llvm::ArrayRef<Value> bits);
  /// The E8M0 scale byte `s8` (i32) as fp32: 2^(s - 127); 0x00 is 2^-127,
  /// 0xFF is NaN.
  Value e8m0ToF32(Value s8);
  /// `words` little-endian i32 words of the i8 buffer `bytes` from byte `at`
  /// (4-byte aligned): one vector load on the GPU, byte loads on the host.
  llvm::SmallVector<Value> loadWords(Value bytes, Value at, int64_t words);
};

} // namespace k3c::lowering

#endif // K3C_LOWERING_KERNELBUILDER_H
