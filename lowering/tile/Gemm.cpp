//===- Gemm.cpp - the GEMM tile layer: FMA and mma.sync strategies --------===//
//
// See Gemm.h. The FMA strategy (gemmTile) is the exact fp32 path of every
// build and the host target; mmaLinear puts bf16 linears on the tensor
// cores through the nvgpu dialect (cp.async, ldmatrix, mma.sync).
//
//===----------------------------------------------------------------------===//

#include "lowering/tile/Gemm.h"

#include "models/MXFP4Layout.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/ADT/StringExtras.h"

#include <cstdlib>

using namespace mlir;

namespace k3c::lowering {

/// The kernel-layout tile width shared by every row of an MXFP4 GEMM tile,
/// or 0 when the fragment path does not apply.
static int64_t mxKTile(const std::function<MxRow(int64_t)> &mxRow, int64_t nRows, int64_t K) {
  if (!mxRow)
    return 0;
  int64_t kt = 0;
  for (int64_t r = 0; r < nRows; ++r) {
    MxRow m = mxRow(r);
    auto layout = m.w->type.getLayout();
    if (!layout || layout.getNTile() != 8 || m.w->type.getShape().back() != K)
      return 0;
    if (kt && layout.getKTile() != kt)
      return 0;
    kt = layout.getKTile();
  }
  return K % kt ? 0 : kt;
}

/// The fragment inner loop of gemmTile for MXFP4 rows (see Families.h): over
/// this chunk's (k tile, column c) items, lanes strided.
static SmallVector<Value> mxfp4Chunk(KernelBuilder &kb, ThreadBlock &tb, Value xs, Value k0,
                                     Value len, int64_t kt, int64_t nRows, int64_t tokTile,
                                     const std::function<MxRow(int64_t)> &mxRow, ValueRange acc) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type i32 = b.getI32Type();
  const int64_t nt = 8, runBytes = kt / 8, bpt = kt / 32;
  Value items = kb.mul(kb.div(len, kt), 4);
  return kb.loopStep(tb.lane, items, kb.idx(tb.lanes), acc, [&](Value item, ValueRange in) {
    Value ti = kb.div(item, 4), c = kb.rem(item, 4);
    Value kLocal = kb.mul(ti, kt), kTileIdx = kb.add(kb.div(k0, kt), ti);
    // Each row's fragment run (runBytes bytes) and its bpt scale bytes.
    SmallVector<SmallVector<Value>> words(nRows);
    SmallVector<Value> scaleAt(nRows);
    SmallVector<const MXFP4Buffers *> bufs(nRows);
    for (int64_t r = 0; r < nRows; ++r) {
      MxRow m = mxRow(r);
      ArrayRef<int64_t> shape = m.w->type.getShape();
      int64_t N = shape[shape.size() - 2], K = shape.back(), tilesK = K / kt;
      Value tile = kb.add(kb.mul(kb.div(m.row, nt), tilesK), kTileIdx);
      Value rr = kb.rem(m.row, nt), t = kb.add(kb.mul(rr, 4), c);
      Value at = kb.add(kb.mul(m.matrix, N * K / 2),
                        kb.add(kb.mul(tile, nt * kt / 2), kb.mul(t, runBytes)));
      words[r] = kb.loadWords(m.w->payload, at, runBytes / 4);
      scaleAt[r] = kb.add(kb.mul(m.matrix, N * K / 32),
                          kb.add(kb.mul(tile, nt * bpt), kb.mul(rr, bpt)));
      bufs[r] = m.w;
    }
    SmallVector<Value> out(in);
    for (int64_t blk = 0; blk < bpt; ++blk) {
      SmallVector<Value> scale(nRows);
      for (int64_t r = 0; r < nRows; ++r)
        scale[r] = kb.e8m0ToF32(arith::ExtUIOp::create(
            b, loc, i32, kb.load(bufs[r]->scales, {kb.add(scaleAt[r], blk)})));
      // Registers 4·blk .. 4·blk+3 of the run (word blk): steps s = 2·blk,
      // 2·blk+1, each a register for columns 2c, 2c+1 and one for 2c+8, 2c+9.
      for (int64_t q = 4 * blk; q < 4 * blk + 4; ++q) {
        int64_t s = q / 2, half = q % 2;
        Value col = kb.add(kb.add(kLocal, 16 * s + 8 * half), kb.mul(c, 2));
        SmallVector<SmallVector<Value>> xv;
        for (int64_t tt = 0; tt < tokTile; ++tt)
          xv.push_back(kb.loadVec(xs, {kb.idx(tt), col}, 2));
        for (int64_t r = 0; r < nRows; ++r) {
          // Register q is pair q % 4 of word q / 4 (models/MXFP4Layout.h,
          // fragment::codeAt): each element's code from its four bits.
          Value word = words[r][q / 4];
          auto codeOf = [&](int elem) {
            const int p = static_cast<int>(q % 4);
            SmallVector<Value> bits;
            for (int i = 0; i < 4; ++i)
              bits.push_back(kb.i32Const(mxfp4::fragment::codeBit(p, i, elem)));
            return kb.mxfp4CodeAt(word, bits);
          };
          Value wlo = kb.fmul(kb.e2m1ToF32(codeOf(0)), scale[r]);
          Value whi = kb.fmul(kb.e2m1ToF32(codeOf(1)), scale[r]);
          for (int64_t tt = 0; tt < tokTile; ++tt) {
            Value &o = out[r * tokTile + tt];
            o = kb.fadd(o, kb.fadd(kb.fmul(wlo, xv[tt][0]), kb.fmul(whi, xv[tt][1])));
          }
        }
      }
    }
    return out;
  });
}

SmallVector<Value> gemmTile(KernelBuilder &kb, ThreadBlock &tb, Value a, int64_t K, int64_t vw,
                            int64_t nRows, const std::function<ActRow(Value)> &rowOf,
                            const std::function<SmallVector<Value>(int64_t, Value, int64_t)> &wLoad,
                            int64_t tokTile, const std::function<MxRow(int64_t)> &mxRow) {
  auto at = cast<MemRefType>(a.getType());
  int64_t aBytes = at.getElementTypeBitWidth() / 8;
  int64_t kc = std::min<int64_t>(K, kChunkBytes / (tokTile * aBytes));
  kc -= kc % vw;
  const int64_t kt = mxKTile(mxRow, nRows, K);
  if (kt)
    kc -= kc % kt; // chunks of whole k tiles
  int64_t chunks = (K + kc - 1) / kc;
  Value xs = kb.shared(tb, {tokTile, kc}, at.getElementType());
  SmallVector<Value> zeros(nRows * tokTile, kb.f32(0.0));
  return kb.loop(kb.idx(0), kb.idx(chunks), zeros, [&](Value c, ValueRange acc) {
    Value k0 = kb.mul(c, kc);
    Value len = K % kc ? kb.minu(kb.idx(kc), kb.sub(kb.idx(K), k0)) : kb.idx(kc);
    Value vecs = kb.div(len, vw);
    // Stage the tile's activation rows (zeros for rows past the end).
    kb.strided(tb, kb.idx(0), kb.mul(vecs, tokTile), [&](Value i) {
      Value tt = kb.div(i, vecs), kv = kb.mul(kb.rem(i, vecs), vw);
      ActRow row = rowOf(tt);
      kb.ifThenElse(
          row.valid,
          [&] {
            SmallVector<Value> src(row.prefix);
            src.push_back(kb.add(k0, kv));
            kb.copyVec(a, src, xs, {tt, kv}, vw);
          },
          [&] { kb.zeroVec(xs, {tt, kv}, vw); });
    });
    kb.barrier(tb);
    if (kt) {
      SmallVector<Value> next = mxfp4Chunk(kb, tb, xs, k0, len, kt, nRows, tokTile, mxRow, acc);
      kb.barrier(tb);
      return next;
    }
    SmallVector<Value> next = kb.loopStep(
        kb.mul(tb.lane, vw), len, kb.idx(tb.lanes * vw), acc, [&](Value kv, ValueRange in) {
          SmallVector<SmallVector<Value>> xv;
          for (int64_t tt = 0; tt < tokTile; ++tt)
            xv.push_back(kb.loadVec(xs, {kb.idx(tt), kv}, vw));
          SmallVector<Value> out(in);
          for (int64_t r = 0; r < nRows; ++r) {
            SmallVector<Value> wv = wLoad(r, kb.add(k0, kv), vw);
            for (int64_t tt = 0; tt < tokTile; ++tt) {
              Value &o = out[r * tokTile + tt];
              for (int64_t j = 0; j < vw; ++j)
                o = kb.fadd(o, kb.fmul(wv[j], xv[tt][j]));
            }
          }
          return out;
        });
    kb.barrier(tb);
    return next;
  });
}

/// Weight rows a GEMV block owns: kGemvRows, or K3C_GEMV_ROWS (2..16, even:
/// a GluPair's block splits them into gate and up rows) on the GPU, where
/// more rows put more bytes in flight a thread for short rows.
static int64_t gemvRows(KernelBuilder &kb) {
  const int64_t r = kb.gpu() ? intFromEnv("K3C_GEMV_ROWS", kGemvRows) : kGemvRows;
  if (r < 2 || r > 16 || r % 2)
    llvm::report_fatal_error("k3c: K3C_GEMV_ROWS must be an even number in 2..16, got " +
                                 llvm::Twine(r),
                             /*gen_crash_diag=*/false);
  return r;
}

/// Threads of a GEMV block: kGemvThreads, or on the GPU without a prologue
/// just enough whole warps for K / vw 16-byte chunks where that is fewer
/// (mla_q_up's K = 1536 kept a quarter of 256 threads idle, a low-rank K =
/// 128 all but 16). Bit-identical: the idle warps only added zeros to the
/// block's sum. K3C_GEMV_FIT_THREADS=0: always kGemvThreads.
static int64_t gemvThreads(KernelBuilder &kb, int64_t K, int64_t vw, const XPrologue &prologue) {
  if (!kb.gpu() || (prologue && gemvPrologueMode() != 2) ||
      !intFromEnv("K3C_GEMV_FIT_THREADS", 1))
    return kGemvThreads;
  const int64_t chunks = (K + vw - 1) / vw;
  return std::min<int64_t>(kGemvThreads, (chunks + 31) / 32 * 32);
}

int64_t gemvPrologueMode() {
  const int64_t m = intFromEnv("K3C_GEMV_PROLOGUE", 0);
  if (m < 0 || m > 2)
    llvm::report_fatal_error("k3c: K3C_GEMV_PROLOGUE must be 0, 1 or 2, got " + llvm::Twine(m),
                             /*gen_crash_diag=*/false);
  return m;
}

bool gemvEarly(KernelBuilder &kb) {
  const int64_t m = intFromEnv("K3C_GEMV_EARLY", 0);
  if (m < 0 || m > 1)
    llvm::report_fatal_error("k3c: K3C_GEMV_EARLY must be 0 or 1, got " + llvm::Twine(m),
                             /*gen_crash_diag=*/false);
  return m && kb.gpu() && kb.info().gridDependencyControl();
}

bool mlaQabsEarly(KernelBuilder &kb) {
  const int64_t m = intFromEnv("K3C_MLA_QABS_EARLY", 0);
  if (m < 0 || m > 1)
    llvm::report_fatal_error("k3c: K3C_MLA_QABS_EARLY must be 0 or 1, got " + llvm::Twine(m),
                             /*gen_crash_diag=*/false);
  return m && kb.gpu() && kb.info().gridDependencyControl();
}

/// A GEMV block's K loop over its rows (wLoad(r, k): row r's `vw` weights
/// at column k as fp32; xLoad(t, k): token t's): thread `tid` takes columns
/// tid * vw, + threads * vw, ... and returns acc[r * tok + t]. With
/// gemvEarly, the first step's weights are loaded before the kernel's grid
/// wait (volatile loads of `pinned(r, k)`, the same values): they stream
/// while the kernels ahead finish (the norm feeding the GEMV lets it start
/// early, earlyForGemv in Families.h); the sums are the same, in the same
/// order. `afterWait`, where given, runs after the grid wait (at the start
/// without `early`) before any xLoad: a per-block prologue building x.
static SmallVector<Value> gemvLoop(KernelBuilder &kb, ThreadBlock &tb, bool early, int64_t K,
                                   int64_t vw, int64_t threads, int64_t R, int64_t tok,
                                   bool xFirst,
                                   const std::function<SmallVector<Value>(int64_t, Value)> &wLoad,
                                   const std::function<Value(int64_t, Value)> &pinned,
                                   const std::function<SmallVector<Value>(int64_t, Value)> &xLoad,
                                   const std::function<void()> &afterWait = {}) {
  // One K step: the weights of row r from wAt(r); x loaded before the
  // weights (xFirst: then each row's weights just before its products) or
  // after them, as the GEMVs always did.
  auto step = [&](const std::function<SmallVector<Value>(int64_t)> &wAt, Value k, ValueRange in) {
    SmallVector<SmallVector<Value>> xv, wv;
    SmallVector<Value> out(in);
    if (xFirst) {
      for (int64_t t = 0; t < tok; ++t)
        xv.push_back(xLoad(t, k));
      for (int64_t r = 0; r < R; ++r) {
        SmallVector<Value> w = wAt(r);
        for (int64_t t = 0; t < tok; ++t)
          for (int64_t j = 0; j < vw; ++j)
            out[r * tok + t] = kb.fadd(out[r * tok + t], kb.fmul(w[j], xv[t][j]));
      }
      return out;
    }
    for (int64_t r = 0; r < R; ++r)
      wv.push_back(wAt(r));
    for (int64_t t = 0; t < tok; ++t)
      xv.push_back(xLoad(t, k));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t t = 0; t < tok; ++t)
        for (int64_t j = 0; j < vw; ++j)
          out[r * tok + t] = kb.fadd(out[r * tok + t], kb.fmul(wv[r][j], xv[t][j]));
    return out;
  };
  auto loop = [&](Value from, ValueRange init) {
    return kb.loopStep(from, kb.idx(K), kb.idx(threads * vw), init, [&](Value k, ValueRange in) {
      return step([&](int64_t r) { return wLoad(r, k); }, k, in);
    });
  };
  SmallVector<Value> zeros(R * tok, kb.f32(0.0));
  Value k0 = kb.mul(tb.tid, vw);
  if (!early) {
    if (afterWait)
      afterWait();
    return loop(k0, zeros);
  }
  Value first = kb.ult(k0, kb.idx(K));
  Value kc = kb.select(first, k0, kb.idx(0));
  SmallVector<Value> raw;
  for (int64_t r = 0; r < R; ++r)
    raw.push_back(pinned(r, kc));
  kb.gridWait(tb);
  if (afterWait)
    afterWait();
  SmallVector<Value> acc = step([&](int64_t r) { return kb.unpackVec(raw[r]); }, kc, zeros);
  for (Value &a : acc)
    a = kb.select(first, a, kb.f32(0.0));
  return loop(kb.add(k0, kb.idx(threads * vw)), acc);
}

/// How a GEMV group gets its x: given (`xs` set: the kernel's buffer or a
/// persistent block's prologue row), or, with K3C_GEMV_PROLOGUE=2 (xs
/// null), built by the group's own block after its grid wait (`afterWait`
/// sets xs, by reference, and waits for the whole row); the first weights
/// are then loaded before the wait wherever the target has grid
/// dependency control, else as gemvEarly says.
struct PerBlockX {
  bool early;
  std::function<void()> afterWait;
};
static PerBlockX perBlockX(KernelBuilder &kb, ThreadBlock &tb, const XPrologue &prologue,
                           Value &xs) {
  if (xs)
    return {gemvEarly(kb) && !prologue, {}};
  return {kb.gpu() && kb.info().gridDependencyControl(), [&kb, &tb, &prologue, &xs] {
            xs = prologue(tb);
            kb.barrier(tb);
          }};
}

/// The GEMV grid: `groups` blocks of rows, one a block, or with a prologue
/// persistent blocks (SMs x K3C_GEMV_PROLOGUE_BLOCKS, 4 by default) that
/// first ask the L2 for their first group's weight rows (sm_90;
/// K3C_GEMV_PREFETCH=0: not), so they stream in while the block builds x
/// once (the prologue), then stride over the groups. (Without a prologue the
/// prefetch was measured slower: mlp_down at batch 1 113 -> 178 us.)
/// `group(g, xs)` emits one group's work; `firstRows(g)` gives its weight
/// rows (memref, row).
static void gemvGrid(KernelBuilder &kb, int64_t groups, int64_t K, int64_t threads,
                     const XPrologue &prologue, Value x, const std::string &name,
                     const std::function<SmallVector<std::pair<Value, Value>>(Value)> &firstRows,
                     const std::function<void(Value, Value, ThreadBlock &)> &group) {
  auto prefetch = [&](Value g, ThreadBlock &tb) {
    if (!kb.info().wgmma || !intFromEnv("K3C_GEMV_PREFETCH", 1))
      return;
    for (auto [r, mr] : llvm::enumerate(firstRows(g))) {
      int64_t bytes = K * (cast<MemRefType>(mr.first.getType()).getElementTypeBitWidth() / 8);
      if (bytes % 16)
        continue;
      kb.ifThen(kb.ieq(tb.tid, kb.idx(static_cast<int64_t>(r))),
                [&] { kb.prefetchL2(mr.first, {mr.second, kb.idx(0)}, bytes); });
    }
  };
  if (!prologue || gemvPrologueMode() == 2) {
    // (K3C_GEMV_PROLOGUE=2: a block per group as without a prologue; the
    // group builds x itself, its xs given null.)
    kb.blocks({kb.idx(groups)}, threads, [&](ValueRange bid, ThreadBlock &tb) {
      if (kb.family == "mla_q_up" && mlaQabsEarly(kb))
        kb.earlyDependents(tb); // the MLA decode's q_abs comes next
      group(bid[0], prologue ? Value() : x, tb);
    }, 0, prologue ? name + "_normedb" : name);
    return;
  }
  // At least one block an SM (a smaller setting would launch no block).
  const int64_t grid = std::min(
      groups, kb.info().smCount * std::max<int64_t>(1, intFromEnv("K3C_GEMV_PROLOGUE_BLOCKS", 4)));
  kb.blocks({kb.idx(grid)}, kGemvThreads, [&](ValueRange bid, ThreadBlock &tb) {
    prefetch(bid[0], tb);
    Value xs = prologue(tb);
    kb.barrier(tb);
    kb.loopStep(bid[0], kb.idx(groups), kb.idx(grid), [&](Value g) {
      group(g, xs, tb);
      kb.barrier(tb); // the group's shared partials are reused by the next
    });
  }, 0, name + "_normed");
}

/// K3C_GEMV_WARP=1 (opt-in, GPU; session 56, not yet timed): short rows
/// (K at most K3C_GEMV_WARP_MAXK, 2048 by default, 1..4096, and at least a
/// warp's 16-byte chunks) take a warp per K3C_GEMV_WARP_ROWS weight rows (2 by
/// default, 1..8) instead of a block per kGemvRows: the lanes stride over K
/// with every row's loads of a step in flight, the row's sum by shuffles,
/// no shared-memory reduction and no barrier, 8 warps a block. The block
/// form spends a barrier and a shared round trip on 4 rows of 3 KB at
/// mla_q_up's K = 1536 (4608 blocks of 192 threads: 66 % of copy on the
/// H200, session 53). The sums in another order: not bit-identical.
static int64_t gemvWarpRows(KernelBuilder &kb, int64_t K, int64_t vw, const XPrologue &prologue) {
  const int64_t on = intFromEnv("K3C_GEMV_WARP", 0);
  if (on < 0 || on > 1)
    llvm::report_fatal_error("k3c: K3C_GEMV_WARP must be 0 or 1, got " + llvm::Twine(on),
                             /*gen_crash_diag=*/false);
  const int64_t maxK = intFromEnv("K3C_GEMV_WARP_MAXK", 2048),
                rows = intFromEnv("K3C_GEMV_WARP_ROWS", 2);
  if (rows < 1 || rows > 8)
    llvm::report_fatal_error("k3c: K3C_GEMV_WARP_ROWS must be 1..8, got " + llvm::Twine(rows),
                             /*gen_crash_diag=*/false);
  if (maxK < 1 || maxK > 4096)
    llvm::report_fatal_error("k3c: K3C_GEMV_WARP_MAXK must be 1..4096, got " +
                                 llvm::Twine(maxK),
                             /*gen_crash_diag=*/false);
  if (!on || !kb.gpu() || prologue || K > maxK || K < 32 * vw)
    return 0;
  return rows;
}

void gemvLinear(KernelBuilder &kb, Value x, Value w, Value y, Value T, int64_t tok,
                Value residual, const GluPair &glu, const XPrologue &prologue,
                const StoreEpilogue *map) {
  assert((!prologue || tok == 1) && "a prologue builds one token's row");
  assert((!map || (!residual && !glu)) && "a store map replaces the plain store");
  // Output (t, o) with its sum v: mapped (map), else plain (with the residual).
  auto storeOut = [&](Value v, Value t, Value o) {
    if (map) {
      SmallVector<Value> pre;
      if (map->colLoad)
        pre = map->colLoad(o);
      kb.storeF32(map->map(kb.round(v, map->roundTo), o, pre), y, {t, o});
      return;
    }
    kb.storeF32(addResidual(kb, y, residual, {t, o}, v), y, {t, o});
  };
  const std::string mapName = map ? "linear_" + map->name + "_gemv" : "linear_gemv";
  const int64_t K = cast<MemRefType>(x.getType()).getDimSize(1);
  const int64_t O = cast<MemRefType>(w.getType()).getDimSize(0);
  const int64_t vw = std::min(kb.vecWidth(x, K), kb.vecWidth(w, K));
  if (const int64_t Rw = gemvWarpRows(kb, K, vw, prologue)) {
    // A warp per Rw output rows (with a GluPair: Rw gate and the same Rw up
    // rows), 8 warps a block.
    const int64_t warps = 8, perBlock = warps * Rw;
    kb.blocks({kb.idx((O + perBlock - 1) / perBlock)}, warps * 32,
              [&](ValueRange bid, ThreadBlock &tb) {
      Value r0 = kb.add(kb.mul(bid[0], kb.idx(perBlock)), kb.mul(tb.warp, kb.idx(Rw)));
      SmallVector<Value> rows, toks;
      for (int64_t r = 0; r < Rw; ++r) // past O: row O-1, not stored
        rows.push_back(kb.minu(kb.add(r0, kb.idx(r)), kb.idx(O - 1)));
      for (int64_t t = 0; t < tok; ++t) // past T: row T-1, not stored
        toks.push_back(kb.minu(kb.idx(t), kb.sub(T, kb.idx(1))));
      const int64_t nw = glu ? 2 * Rw : Rw; // weight rows a warp streams
      auto weightOf = [&](int64_t r) { return glu && r >= Rw ? glu.up : w; };
      // Every step's loads issued before the products (K / (32 vw) steps,
      // at most 8 at the default K): the lanes' whole rows in flight at
      // once. A step past K (K not a multiple of 32 vw) loads column 0 and
      // adds nothing.
      const int64_t steps = (K + 32 * vw - 1) / (32 * vw);
      Value k0 = kb.mul(tb.lane, kb.idx(vw));
      SmallVector<Value> ks, in;
      SmallVector<SmallVector<SmallVector<Value>>> wv(steps), xv(steps);
      for (int64_t st = 0; st < steps; ++st) {
        Value k = kb.add(k0, kb.idx(st * 32 * vw));
        in.push_back(kb.ult(k, kb.idx(K)));
        ks.push_back(kb.select(in.back(), k, kb.idx(0)));
        for (int64_t r = 0; r < nw; ++r)
          wv[st].push_back(kb.loadVec(weightOf(r), {rows[r % Rw], ks[st]}, vw));
      }
      for (int64_t st = 0; st < steps; ++st)
        for (int64_t t = 0; t < tok; ++t)
          xv[st].push_back(kb.loadVec(x, {toks[t], ks[st]}, vw));
      SmallVector<Value> acc(nw * tok, kb.f32(0.0));
      for (int64_t st = 0; st < steps; ++st)
        for (int64_t r = 0; r < nw; ++r)
          for (int64_t t = 0; t < tok; ++t) {
            Value part = kb.f32(0.0);
            for (int64_t j = 0; j < vw; ++j)
              part = kb.fadd(part, kb.fmul(wv[st][r][j], xv[st][t][j]));
            acc[r * tok + t] =
                kb.fadd(acc[r * tok + t], kb.select(in[st], part, kb.f32(0.0)));
          }
      for (Value &a : acc)
        a = kb.warpSum(tb, a);
      kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] {
        for (int64_t r = 0; r < Rw; ++r)
          for (int64_t t = 0; t < tok; ++t) {
            Value o = kb.add(r0, kb.idx(r));
            kb.ifThen(kb.andi(kb.ult(o, kb.idx(O)), kb.ult(kb.idx(t), T)), [&] {
              Value v = acc[r * tok + t];
              if (glu) {
                Value g = kb.round(v, glu.roundTo);
                Value u = kb.round(acc[(Rw + r) * tok + t], glu.roundTo);
                kb.storeF32(glu.act(g, u), y, {kb.idx(t), o});
                return;
              }
              storeOut(v, kb.idx(t), o);
            });
          }
      });
    }, 0, (glu ? std::string("linear_glu_gemv") : mapName) + "w" + std::to_string(tok));
    return;
  }
  // With a GluPair a block's R rows are R/2 gate rows and the same R/2 up
  // rows: it stores R/2 hidden columns.
  const int64_t R = gemvRows(kb), outRows = glu ? R / 2 : R,
                launch = gemvThreads(kb, K, vw, prologue), threads = kb.gpu() ? launch : 1;
  auto rowsOf = [&](Value g) {
    Value r0 = kb.mul(g, outRows);
    SmallVector<Value> rows;
    for (int64_t r = 0; r < R; ++r) // past O: row O-1, not stored
      rows.push_back(kb.minu(kb.add(r0, r % outRows), kb.idx(O - 1)));
    return rows;
  };
  auto weightOf = [&](int64_t r) { return glu && r >= outRows ? glu.up : w; };
  auto group = [&](Value g, Value xs, ThreadBlock &tb) {
    Value r0 = kb.mul(g, outRows);
    SmallVector<Value> rows = rowsOf(g), toks;
    for (int64_t t = 0; t < tok; ++t)
      toks.push_back(kb.minu(kb.idx(t), kb.sub(T, kb.idx(1)))); // past T: row T-1, not stored
    PerBlockX pb = perBlockX(kb, tb, prologue, xs);
    SmallVector<Value> acc = gemvLoop(
        kb, tb, pb.early, K, vw, threads, R, tok, /*xFirst=*/false,
        [&](int64_t r, Value k) { return kb.loadVec(weightOf(r), {rows[r], k}, vw); },
        [&](int64_t r, Value k) { return kb.loadVecPinnedRaw(weightOf(r), {rows[r], k}, vw); },
        [&](int64_t t, Value k) { return kb.loadVec(xs, {toks[t], k}, vw); }, pb.afterWait);
    // Warp sums, then the warps' partials through shared memory.
    Value red = kb.shared(tb, {tb.warps, R * tok}, kb.b.getF32Type());
    for (int64_t i = 0; i < R * tok; ++i) {
      Value v = kb.warpSum(tb, acc[i]);
      kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] { kb.store(v, red, {tb.warp, kb.idx(i)}); });
    }
    kb.barrier(tb);
    auto total = [&](Value i) {
      Value sum = kb.f32(0.0);
      for (int64_t wi = 0; wi < tb.warps; ++wi)
        sum = kb.fadd(sum, kb.load(red, {kb.idx(wi), i}));
      return sum;
    };
    kb.strided(tb, kb.idx(0), kb.idx(outRows * tok), [&](Value i) {
      Value r = kb.div(i, tok), t = kb.rem(i, tok);
      Value o = kb.add(r0, r);
      kb.ifThen(kb.andi(kb.ult(o, kb.idx(O)), kb.ult(t, T)), [&] {
        if (glu) {
          Value g = kb.round(total(i), glu.roundTo);
          Value u = kb.round(total(kb.add(i, outRows * tok)), glu.roundTo);
          kb.storeF32(glu.act(g, u), y, {t, o});
          return;
        }
        storeOut(total(i), t, o);
      });
    });
  };
  gemvGrid(kb, (O + outRows - 1) / outRows, K, launch, prologue, x,
           (glu ? std::string("linear_glu_gemv") : mapName) + std::to_string(tok),
           [&](Value g) {
             SmallVector<std::pair<Value, Value>> out;
             SmallVector<Value> rows = rowsOf(g);
             for (int64_t r = 0; r < R; ++r)
               out.push_back({weightOf(r), rows[r]});
             return out;
           },
           group);
}

void gemvMulti(KernelBuilder &kb, Value x, ArrayRef<Value> ws, ArrayRef<Value> ys,
               const XPrologue &prologue) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const int64_t K = cast<MemRefType>(x.getType()).getDimSize(1);
  const int64_t R = gemvRows(kb);
  Type wElt = cast<MemRefType>(ws[0].getType()).getElementType();
  Type yElt = cast<MemRefType>(ys[0].getType()).getElementType();
  int64_t vw = kb.vecWidth(x, K);
  SmallVector<int64_t> starts{0}, rowsOf;
  for (Value w : ws) {
    vw = std::min(vw, kb.vecWidth(w, K));
    rowsOf.push_back(cast<MemRefType>(w.getType()).getDimSize(0));
    starts.push_back(starts.back() + (rowsOf.back() + R - 1) / R);
  }
  const int64_t launch = gemvThreads(kb, K, vw, prologue), threads = kb.gpu() ? launch : 1;
  auto wDyn = MemRefType::get({ShapedType::kDynamic, K}, wElt);
  auto yDyn = MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, yElt);
  // Group g's projection: the last i with starts[i] <= g (selects).
  struct Pick {
    Value w, y, r0, O;
    SmallVector<Value> rows;
  };
  auto pick = [&](Value g) {
    Pick p;
    p.w = memref::CastOp::create(b, loc, wDyn, ws[0]);
    p.y = memref::CastOp::create(b, loc, yDyn, ys[0]);
    Value first = kb.idx(0);
    p.O = kb.idx(rowsOf[0]);
    for (size_t i = 1; i < ws.size(); ++i) {
      Value in = kb.ule(kb.idx(starts[i]), g);
      p.w = arith::SelectOp::create(b, loc, in, memref::CastOp::create(b, loc, wDyn, ws[i]), p.w);
      p.y = arith::SelectOp::create(b, loc, in, memref::CastOp::create(b, loc, yDyn, ys[i]), p.y);
      first = kb.select(in, kb.idx(starts[i]), first);
      p.O = kb.select(in, kb.idx(rowsOf[i]), p.O);
    }
    p.r0 = kb.mul(kb.sub(g, first), R);
    Value last = kb.sub(p.O, kb.idx(1));
    for (int64_t r = 0; r < R; ++r) // past O: row O-1, not stored
      p.rows.push_back(kb.minu(kb.add(p.r0, r), last));
    return p;
  };
  auto group = [&](Value g, Value xs, ThreadBlock &tb) {
    Pick p = pick(g);
    PerBlockX pb = perBlockX(kb, tb, prologue, xs);
    SmallVector<Value> acc = gemvLoop(
        kb, tb, pb.early, K, vw, threads, R, 1, /*xFirst=*/true,
        [&](int64_t r, Value k) { return kb.loadVec(p.w, {p.rows[r], k}, vw); },
        [&](int64_t r, Value k) { return kb.loadVecPinnedRaw(p.w, {p.rows[r], k}, vw); },
        [&](int64_t, Value k) { return kb.loadVec(xs, {kb.idx(0), k}, vw); }, pb.afterWait);
    Value red = kb.shared(tb, {tb.warps, R}, kb.b.getF32Type());
    for (int64_t i = 0; i < R; ++i) {
      Value v = kb.warpSum(tb, acc[i]);
      kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] { kb.store(v, red, {tb.warp, kb.idx(i)}); });
    }
    kb.barrier(tb);
    kb.strided(tb, kb.idx(0), kb.idx(R), [&](Value r) {
      Value total = kb.f32(0.0);
      for (int64_t wi = 0; wi < tb.warps; ++wi)
        total = kb.fadd(total, kb.load(red, {kb.idx(wi), r}));
      Value o = kb.add(p.r0, r);
      kb.ifThen(kb.ult(o, p.O), [&] { kb.storeF32(total, p.y, {kb.idx(0), o}); });
    });
  };
  gemvGrid(kb, starts.back(), K, launch, prologue, x, "linear_gemv1_x" + std::to_string(ws.size()),
           [&](Value g) {
             Pick p = pick(g);
             SmallVector<std::pair<Value, Value>> out;
             for (Value r : p.rows)
               out.push_back({p.w, r});
             return out;
           },
           group);
}

//===----------------------------------------------------------------------===//
// Tensor cores: mma.sync
//===----------------------------------------------------------------------===//

std::string MmaTile::name() const {
  return "mma_" + std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) +
         "_s" + std::to_string(stages);
}

std::string MmaTile::check(const TargetInfo &info) const {
  if (warpsM <= 0 || warpsN <= 0 || stages < 2 || bk % 16 || bk <= 0)
    return "needs warps > 0, stages >= 2 and bk a positive multiple of 16";
  if (bm % (16 * warpsM) || bn % (16 * warpsN))
    return "bm must be a multiple of 16 * warpsM and bn of 16 * warpsN";
  int64_t chunks = bk / 8;
  if ((bm * chunks) % threads() || (bn * chunks) % threads())
    return "the 16-byte chunks of a stage must split evenly over the threads";
  if (sharedBytes(2) > info.maxSharedPerBlock)
    return "needs " + std::to_string(sharedBytes(2)) + " bytes of shared memory, over the " +
           std::to_string(info.maxSharedPerBlock) + " a block may have";
  if (threads() > 1024)
    return "more than 1024 threads a block";
  return "";
}

/// "bm,bn,bk,warpsM,warpsN,stages" from the environment (tuning override;
/// docs/kernels.md), or `dflt`.
static MmaTile tileFromEnv(const char *var, MmaTile dflt) {
  SmallVector<int64_t> f = intsFromEnv(var, {6}, "bm,bn,bk,warpsM,warpsN,stages");
  return f.empty() ? dflt : MmaTile{f[0], f[1], f[2], f[3], f[4], f[5]};
}
WgmmaTile wgmmaTileFromEnv(const char *var, WgmmaTile dflt) {
  SmallVector<int64_t> f = intsFromEnv(var, {3, 4}, "bm,bn,stages[,inflight]");
  if (f.empty())
    return dflt;
  WgmmaTile t = dflt;
  t.bm = f[0];
  t.bn = f[1];
  t.stages = f[2];
  if (f.size() == 4)
    t.inflight = f[3];
  return t;
}
std::string WgmmaTile::name() const {
  return "wgmma_" + std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) +
         "_s" + std::to_string(stages) + (inflight ? "_f" + std::to_string(inflight) : "");
}

std::string WgmmaTile::check(const TargetInfo &info) const {
  if (!info.wgmma)
    return "the target has no warpgroup MMA";
  if (bm % 64 || bm < 64 || bm > 256 || bn % 16 || bn < 16 || bn > 256 || stages < 2)
    return "needs bm in {64, 128, 192, 256}, bn a multiple of 16 up to 256, stages >= 2";
  if (inflight < 0 || inflight > 1 || stages < 2 + inflight)
    return "needs inflight 0 or 1 and stages >= 2 + inflight";
  if ((bm * 8) % threads() || (bn * 8) % threads())
    return "the 16-byte chunks of a stage must split evenly over the threads";
  if (sharedBytes() > info.maxSharedPerBlock)
    return "needs " + std::to_string(sharedBytes()) + " bytes of shared memory, over the " +
           std::to_string(info.maxSharedPerBlock) + " a block may have";
  return "";
}

WgmmaTile splitKTile() { return wgmmaTileFromEnv("K3C_SPLITK_TILE", WgmmaTile{128, 256, 4, 0}); }

WgmmaTile splitKTile(const TargetInfo &info, int64_t O) {
  WgmmaTile t = splitKTile();
  if (std::getenv("K3C_SPLITK_TILE") || !intFromEnv("K3C_SPLITK_FILL", 0))
    return t;
  // The narrowest-loss width: of the widths (multiples of 32 from 256 down
  // to 128) that divide O, the one whose column tiles times the ways give
  // the most SMs a block without a second wave (the widest among equals).
  // 7168 outputs (mlp_down, kda_out, mla_out) on 132 SMs, 4 ways: 224
  // columns, 128 blocks, where 256 gives 112.
  const int64_t ways = splitKWays();
  int64_t best = 0;
  for (int64_t bn = 256; bn >= 128; bn -= 32) {
    const int64_t blocks = O / bn * ways;
    if (O % bn == 0 && blocks <= info.smCount && blocks > best) {
      best = blocks;
      t.bn = bn;
    }
  }
  return t;
}

int64_t splitKWays() {
  const int64_t w = intFromEnv("K3C_SPLITK_WAYS", 4);
  if (w < 2 || w > 8)
    llvm::report_fatal_error("k3c: K3C_SPLITK_WAYS must be in 2..8, got " + llvm::Twine(w),
                             /*gen_crash_diag=*/false);
  return w;
}

LinearPlan linearPlan(const TargetInfo &info, Type xElt, Type wElt, int64_t K, int64_t O,
                      int64_t outputsGcd) {
  LinearPlan p;
  if (!info.mmaSync || !xElt.isBF16() || !wElt.isBF16() || K % 8 || O % 2)
    return p;
  // Tensor cores from 2 tokens (batch-1 decode is a GEMV). Measured on an
  // H200 (docs/perf.md, k3-small slice): batched decode takes 32 x 64 blocks
  // (4 warps of 16 x 32, six 64-column stages) up to 64 tokens (32 or 16
  // with warpgroup MMA, below), so that few row tiles still give every SM
  // blocks, and 128 x 64 (8 warps of 32 x 32, W read once) up to 256;
  // without wgmma, prefill takes 128 x 128 blocks with 64-column stages
  // three deep (8 warps of 64 x 32).
  p.small = tileFromEnv("K3C_MMA_SMALL", MmaTile{32, 64, 64, 2, 2, 6});
  p.medium = tileFromEnv("K3C_MMA_MEDIUM", MmaTile{128, 64, 64, 4, 2, 4});
  p.large = tileFromEnv("K3C_MMA_LARGE", MmaTile{128, 128, 64, 2, 4, 3});
  for (const MmaTile *t : {&p.small, &p.medium, &p.large})
    if (std::string why = t->check(info); !why.empty())
      llvm::report_fatal_error(llvm::Twine("k3c: bad mma tile ") + t->name() + ": " + why,
                               /*gen_crash_diag=*/false);
  p.mmaFrom = std::max<int64_t>(2, intFromEnv("K3C_MMA_FROM", 2));
  p.smallUpTo = intFromEnv("K3C_MMA_SMALL_UP_TO", 64);
  p.mediumUpTo = intFromEnv("K3C_MMA_MEDIUM_UP_TO", 256);
  if (info.wgmma && intFromEnv("K3C_WGMMA", 1)) {
    // Warpgroup MMA from 65 tokens: 128 x 64 blocks (two warpgroups of
    // m64n64, four 64-column stages) for batched decode up to 256, where
    // 7168-wide outputs still give 112 blocks; 128 x 256 (m64n256) for
    // prefill. Both measured against the mma.sync tiles on the H200.
    p.useWgmma = true;
    // Outputs wide enough that 256-column tiles still give every SM two
    // blocks (lm_head's 163840, mlp_in's paired 2 x 33792) take 128 x 256 at
    // batched decode too: W is read once per 128 tokens either way, and the
    // wide tile issues a quarter of the B-tile loads and barriers per MMA (H200,
    // batch 128: lm_head 665 us against 817, mlp_in 602 against 665, while
    // mlp_down's 7168 outputs would get 28 blocks and take 662 against 481).
    const int64_t wideFrom = intFromEnv("K3C_WGMMA_MEDIUM_WIDE_FROM", 2 * info.smCount);
    const bool wide = wideFrom > 0 && (O + 255) / 256 >= wideFrom;
    // The wide tile keeps no group in flight: its four stages then hold
    // three tiles of W in flight instead of two (these launches stream
    // weights; the MMAs of a stage take about half of its copy time). H200,
    // slice, 128 tokens, two rounds (docs/perf.md, session 35): lm_head
    // 708 -> 699 us, mlp_in 616 -> 602, the step graph 2.730 -> 2.705 ms,
    // logits bit-identical.
    // The narrow 128 x 64 tile (mla_in, mla_q_up) likewise: four stages,
    // three in flight. H100, slice, 128 tokens, two rounds (docs/perf.md,
    // session 41): mla_in 100.1 / 99.5 -> 93.5 / 93.5 us, mla_q_up 41.1 /
    // 40.7 -> 39.6 / 39.7, logits bit-identical, dense k3-tiny's checks as
    // before.
    // K3C_WGMMA_WIDE_TILE / K3C_WGMMA_NARROW_TILE set the wide or the
    // other outputs' tile alone (K3C_WGMMA_MEDIUM_TILE both).
    p.wgmmaMedium = wgmmaTileFromEnv(
        "K3C_WGMMA_MEDIUM_TILE",
        wide ? wgmmaTileFromEnv("K3C_WGMMA_WIDE_TILE", WgmmaTile{128, 256, 4, 0})
             : wgmmaTileFromEnv("K3C_WGMMA_NARROW_TILE", WgmmaTile{128, 64, 4, 0}));
    // The 32-row mma.sync tile reads W once per 32 tokens: from 33 tokens
    // the 128-row warpgroup tile (W once, rows masked) is faster everywhere,
    // and from 17 for the wide outputs, whose 128 x 256 tile streams W
    // better than 32 x 64 blocks re-reading x. H200, slice (docs/perf.md,
    // session 18), graph replay of a decode step: batch 64 4.04 -> 2.48 ms
    // (lm_head 1257 -> 627 us, mlp_down 571 -> 371), batch 32 2.38 -> 2.29
    // with every output on the wgmma tile (lm_head 706 -> 602, mlp_in 618
    // -> 576; the narrow ones 2-11 % slower there, so they keep 32 x 64).
    p.smallUpTo = intFromEnv("K3C_MMA_SMALL_UP_TO", wide ? 16 : 32);
    // Shallow products (K <= 128: two 64-column stages; KDA's low-rank gate
    // projection f_b) take 128 x 128 tiles with two stages and no group in
    // flight: 122 instead of 164 registers and 65 instead of 197 KB of
    // shared memory, so two blocks an SM overlap one's stores with the
    // other's loads, where the deep tile's four-stage ring would hold two
    // stages it never fills. H200, slice, 8192 tokens: the
    // conv/gate family 1.273 -> 1.229 ms (f_b: 8192 x 12288 x 128), logits
    // bit-identical with every prefill GEMM on this tile (docs/perf.md,
    // session 17). Only for wide outputs (O >= 4096, the measured shape
    // class: many column tiles for the two blocks to overlap) that the tile
    // divides (outputsGcd: every width of a shared launch; the 128-wide
    // tile's column tail has not run on a GPU yet, the 256-wide one's has).
    const int64_t gcdO = outputsGcd ? outputsGcd : O;
    const bool shallow = K <= 2 * WgmmaTile::bk && O >= 4096 && gcdO % 128 == 0;
    // K3C_WGMMA_SHALLOW_TILE sets the shallow tile alone.
    const WgmmaTile prefillTile =
        shallow ? wgmmaTileFromEnv("K3C_WGMMA_SHALLOW_TILE", WgmmaTile{128, 128, 2, 0})
                : WgmmaTile{128, 256, 4};
    p.wgmma = wgmmaTileFromEnv("K3C_WGMMA_TILE", prefillTile);
    // The split tile too (mlp_down 307 -> 300 us, mla_out 74.3 -> 73.0 at
    // 128 tokens, same call; bit-identical).
    p.wgmmaSplit = splitKTile(info, O);
    // Clusters sharing the x tile (opt-in, session 58, not yet measured):
    // the batched-decode tiles by K3C_WGMMA_CLUSTER, the prefill tile by
    // K3C_WGMMA_CLUSTER_PREFILL.
    p.wgmmaMedium.cluster = p.wgmmaSplit.cluster = wgmmaClusterSize("K3C_WGMMA_CLUSTER");
    p.wgmma.cluster = wgmmaClusterSize("K3C_WGMMA_CLUSTER_PREFILL");
    for (const WgmmaTile *t : {&p.wgmmaMedium, &p.wgmma, &p.wgmmaSplit})
      if (std::string why = t->check(info); !why.empty())
        llvm::report_fatal_error(llvm::Twine("k3c: bad wgmma tile ") + t->name() + ": " + why,
                                 /*gen_crash_diag=*/false);
  }
  return p;
}

/// The rows of a vector<Rx2xbf16> fragment (ldmatrix's result) as the i32
/// registers mma.sync takes (two bf16 packed, low half first).
SmallVector<Value> fragmentWords(KernelBuilder &kb, Value frag, int64_t first, int64_t count) {
  OpBuilder &b = kb.b;
  SmallVector<Value> out;
  for (int64_t r = first; r < first + count; ++r) {
    Value row = vector::ExtractOp::create(b, kb.loc, frag, ArrayRef<int64_t>{r});
    Value word = vector::BitCastOp::create(b, kb.loc, VectorType::get({1}, b.getI32Type()), row);
    out.push_back(vector::ExtractOp::create(b, kb.loc, word, ArrayRef<int64_t>{0}));
  }
  return out;
}

Value loadPairWord(KernelBuilder &kb, Value memref, ValueRange indices) {
  OpBuilder &b = kb.b;
  Value v = vector::LoadOp::create(b, kb.loc, VectorType::get({2}, b.getBF16Type()), memref,
                                   indices, /*nontemporal=*/false, llvm::MaybeAlign(4));
  Value w = vector::BitCastOp::create(b, kb.loc, VectorType::get({1}, b.getI32Type()), v);
  return vector::ExtractOp::create(b, kb.loc, w, ArrayRef<int64_t>{0});
}

Value loadColumnPairWord(KernelBuilder &kb, Value memref, Value row, Value col) {
  OpBuilder &b = kb.b;
  Value lo = memref::LoadOp::create(b, kb.loc, memref, ValueRange{row, col});
  Value hi = memref::LoadOp::create(b, kb.loc, memref, ValueRange{kb.add(row, kb.idx(1)), col});
  Value pair = vector::FromElementsOp::create(b, kb.loc, VectorType::get({2}, b.getBF16Type()),
                                              ValueRange{lo, hi});
  Value w = vector::BitCastOp::create(b, kb.loc, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, kb.loc, w, ArrayRef<int64_t>{0});
}

/// c += a b for one m16n8k16 bf16 tile (mma.sync.aligned.m16n8k16.row.col
/// .f32.bf16.bf16.f32): `a` 4 and `b` 2 i32 words of packed bf16 pairs, `c`
/// the thread's 4 fp32 accumulators. nvgpu.mma.sync deduces no PTX type for
/// bf16 in MLIR 22, so this builds the NVVM op with its types spelled out.
/// c += a b for one m16n8k{k} tile of `type` (row-major A, column-major
/// B, fp32 accumulators) through nvvm.mma.sync with its PTX types spelled out.
static void mmaSync(KernelBuilder &kb, NVVM::MMATypes type, int64_t k, ValueRange a,
                    ValueRange b, MutableArrayRef<Value> c) {
  OpBuilder &bd = kb.b;
  Type f32 = bd.getF32Type();
  auto result = LLVM::LLVMStructType::getLiteral(bd.getContext(), {f32, f32, f32, f32});
  Value d = NVVM::MmaOp::create(bd, kb.loc, result, a, b, SmallVector<Value>(c.begin(), c.end()),
                                ArrayRef<int64_t>{16, 8, k}, std::nullopt, std::nullopt,
                                std::array<NVVM::MMATypes, 2>{type, type},
                                std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                                               NVVM::MMALayout::col});
  for (int64_t i = 0; i < 4; ++i)
    c[i] = LLVM::ExtractValueOp::create(bd, kb.loc, d, ArrayRef<int64_t>{i});
}

void mmaBf16(KernelBuilder &kb, ValueRange a, ValueRange b, MutableArrayRef<Value> c) {
  mmaSync(kb, NVVM::MMATypes::bf16, 16, a, b, c);
}

Value packBf16(KernelBuilder &kb, Value lo, Value hi) {
  OpBuilder &b = kb.b;
  Value pair = vector::FromElementsOp::create(b, kb.loc, VectorType::get({2}, b.getF32Type()),
                                              ValueRange{lo, hi});
  Value h = arith::TruncFOp::create(b, kb.loc, VectorType::get({2}, b.getBF16Type()), pair);
  Value w = vector::BitCastOp::create(b, kb.loc, VectorType::get({1}, b.getI32Type()), h);
  return vector::ExtractOp::create(b, kb.loc, w, ArrayRef<int64_t>{0});
}

Value ldmatrixX4(KernelBuilder &kb, Value smem, ValueRange indices, bool transpose) {
  OpBuilder &b = kb.b;
  return nvgpu::LdMatrixOp::create(b, kb.loc, VectorType::get({4, 2}, b.getBF16Type()), smem,
                                   indices, transpose, 4);
}

void mmaTf32(KernelBuilder &kb, ValueRange a, ValueRange b, MutableArrayRef<Value> c) {
  mmaSync(kb, NVVM::MMATypes::tf32, 8, a, b, c);
}

/// The output tile (first row m0, first column n0) of block `bid` in grouped
/// raster order: consecutive blocks take kRasterGroup row tiles of one column
/// tile, then the next column tile, so the W tiles a wave reads stay in L2.
static constexpr int64_t kRasterGroup = 8;
static std::pair<Value, Value> rasterTile(KernelBuilder &kb, Value bid, Value mTiles,
                                          int64_t nTiles, int64_t bm, int64_t bn) {
  Value inGroup = kb.idx(kRasterGroup * nTiles);
  Value firstM = kb.mul(kb.div(bid, inGroup), kRasterGroup);
  Value size = kb.minu(kb.sub(mTiles, firstM), kb.idx(kRasterGroup));
  Value local = kb.rem(bid, inGroup);
  return {kb.mul(kb.add(firstM, kb.rem(local, size)), bm), kb.mul(kb.div(local, size), bn)};
}

/// One stage of a tile: `count` rows of k tile `kt` of `src` ([rows, K], rows
/// from r0, valid below `limit`) into ring slot `slot` of `dst`, 16 bytes
/// (8 bf16) a cp.async copy spread over the block's threads; chunk `c` of
/// tile row `r` lands at column 8 * dstChunk(r, c). Rows past `limit` and
/// columns past K read nothing and are zero-filled. Returns the copies'
/// tokens.
/// With `glu`, src is the gate weight and tile rows alternate 8 gate and 8
/// up rows (GluPair): tile row r0 + r reads row 8 ((r0 + r) / 16) + r % 8 of
/// gate or up (`limit` counts both: 2 O).
static SmallVector<Value> copyTileRows(KernelBuilder &kb, ThreadBlock &tb, Value src, Value dst,
                                       Value slot, Value r0, Value limit, Value kt,
                                       int64_t count, int64_t bk, int64_t K,
                                       const std::function<Value(Value, Value)> &dstChunk,
                                       const GluPair *glu = nullptr) {
  OpBuilder &b = kb.b;
  const int64_t chunksPerRow = bk / 8;
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  SmallVector<Value> tokens;
  for (int64_t i = 0; i < count * chunksPerRow / tb.threads; ++i) {
    Value lin = kb.add(tb.tid, kb.idx(i * tb.threads));
    Value r = kb.div(lin, chunksPerRow), chunk = kb.rem(lin, chunksPerRow);
    Value row = kb.add(r0, r), k = kb.add(kb.mul(kt, bk), kb.mul(chunk, 8));
    Value ok = kb.andi(kb.ult(row, limit), kb.ult(k, kb.idx(K)));
    Value from = src, fromRow = row;
    if (glu) {
      Value isUp = kb.ieq(kb.rem(kb.div(row, 8), 2), kb.idx(1));
      from = arith::SelectOp::create(b, kb.loc, isUp, glu->up, src);
      fromRow = kb.add(kb.mul(kb.div(row, 16), 8), kb.rem(row, 8));
    }
    Value srcRow = kb.select(ok, fromRow, kb.idx(0)), srcK = kb.select(ok, k, kb.idx(0));
    Value n = kb.select(ok, kb.idx(8), kb.idx(0));
    tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(
        b, kb.loc, tokenType, dst, ValueRange{slot, r, kb.mul(dstChunk(r, chunk), 8)}, from,
        ValueRange{srcRow, srcK}, b.getIndexAttr(8), n, b.getUnitAttr()));
  }
  return tokens;
}

/// Stores accumulators v0, v1 (fp32) at y[row, col], y[row, col + 1] when
/// row < T and col < O (O is even): one 4-byte store of the rounded pair for
/// a 16-bit y.
void storePair(KernelBuilder &kb, Value mem, ValueRange indices, Value v0, Value v1,
               bool aligned8) {
  OpBuilder &b = kb.b;
  Type elt = cast<MemRefType>(mem.getType()).getElementType();
  if (aligned8 && elt.isF32() && kb.gpu()) {
    Value v = vector::FromElementsOp::create(b, kb.loc, VectorType::get({2}, elt),
                                             ValueRange{v0, v1});
    vector::StoreOp::create(b, kb.loc, v, mem, indices, false, llvm::MaybeAlign(8));
    return;
  }
  if (elt.getIntOrFloatBitWidth() == 16) {
    Value pair = vector::FromElementsOp::create(b, kb.loc, VectorType::get({2}, b.getF32Type()),
                                                ValueRange{v0, v1});
    Value v = arith::TruncFOp::create(b, kb.loc, VectorType::get({2}, elt), pair);
    vector::StoreOp::create(b, kb.loc, v, mem, indices, false, llvm::MaybeAlign(4));
    return;
  }
  SmallVector<Value> next(indices.begin(), indices.end());
  next.back() = kb.add(next.back(), 1);
  kb.storeF32(v0, mem, indices);
  kb.storeF32(v1, mem, next);
}

void storeGluPair(KernelBuilder &kb, Value y, Value row, Value col, Value g0, Value g1, Value u0,
                  Value u1, Value T, int64_t O, const GluPair &glu) {
  kb.ifThen(kb.andi(kb.ult(row, T), kb.ult(col, kb.idx(O))), [&] {
    Value v0 = glu.act(kb.round(g0, glu.roundTo), kb.round(u0, glu.roundTo));
    Value v1 = glu.act(kb.round(g1, glu.roundTo), kb.round(u1, glu.roundTo));
    storePair(kb, y, {row, col}, v0, v1);
  });
}

Value addResidual(KernelBuilder &kb, Value y, Value residual, ValueRange indices, Value v) {
  if (!residual)
    return v;
  return kb.fadd(kb.round(v, cast<MemRefType>(y.getType()).getElementType()),
                 kb.loadF32(residual, indices));
}

/// The epilogue's values of accumulators v0, v1 at y[row, col .. col + 1]:
/// the map's two f32 outputs of the rounded pair, or the pair with the
/// residual added (still fp32: storePair rounds it to y's type).
static std::pair<Value, Value> epiloguePair(KernelBuilder &kb, Value y, Value row, Value col,
                                            Value v0, Value v1, const StoreEpilogue &ep,
                                            ArrayRef<Value> pre0 = {}, ArrayRef<Value> pre1 = {}) {
  if (ep.map) {
    Value col1 = kb.add(col, 1);
    SmallVector<Value> own0, own1;
    if (ep.colLoad && pre0.empty()) {
      own0 = ep.colLoad(col);
      own1 = ep.colLoad(col1);
      pre0 = own0;
      pre1 = own1;
    }
    return {ep.map(kb.round(v0, ep.roundTo), col, pre0),
            ep.map(kb.round(v1, ep.roundTo), col1, pre1)};
  }
  if (ep.residual)
    return {addResidual(kb, y, ep.residual, {row, col}, v0),
            addResidual(kb, y, ep.residual, {row, kb.add(col, 1)}, v1)};
  return {v0, v1};
}

void storeAccPair(KernelBuilder &kb, Value y, Value row, Value col, Value v0, Value v1, Value T,
                  Value O, const StoreEpilogue &ep, ArrayRef<Value> pre0, ArrayRef<Value> pre1) {
  kb.ifThen(kb.andi(kb.ult(row, T), kb.ult(col, O)), [&] {
    auto [a, c] = epiloguePair(kb, y, row, col, v0, v1, ep, pre0, pre1);
    if (ep.map) // two f32 outputs: one 8-byte store (col is even)
      kb.storeVec({a, c}, y, {row, col});
    else
      storePair(kb, y, {row, col}, a, c);
  });
}

/// The column-tile grid of a linear and its MoreProjections: per
/// projection its weight, output, width and first tile.
namespace {
struct ProjectionTiles {
  SmallVector<Value> ws, ys;
  SmallVector<int64_t> widths, starts; ///< starts: first tile, then the total
  int64_t total() const { return starts.back(); }
  ProjectionTiles(Value w, Value y, int64_t cols, int64_t bn, const MoreProjections &more)
      : ws{w}, ys{y}, widths{cols}, starts{0, (cols + bn - 1) / bn} {
    for (auto [mw, my] : llvm::zip(more.ws, more.ys)) {
      int64_t o = cast<MemRefType>(mw.getType()).getDimSize(0);
      ws.push_back(mw);
      ys.push_back(my);
      widths.push_back(o);
      starts.push_back(starts.back() + (o + bn - 1) / bn);
    }
  }
  /// The projection of the tile starting at grid column n0: its weight and
  /// output (cast to dynamic shapes when there are several), width, and the
  /// tile's first column in it.
  struct Pick {
    Value w, y, width, n0;
    Value off; ///< the projection's first column among all the set's columns
    Value map; ///< its weight's tensor map (pick's `maps`, one a projection)
  };
  /// The first column of projection i among all the set's columns.
  int64_t offset(size_t i) const {
    int64_t o = 0;
    for (size_t j = 0; j < i; ++j)
      o += widths[j];
    return o;
  }
  int64_t columns() const { return offset(widths.size()); }
  /// `m` cast to dynamic rows (and columns unless rowsOnly), so that the
  /// set's projections can be selected between.
  static Value dyn(KernelBuilder &kb, Value m, bool rowsOnly) {
    auto t = cast<MemRefType>(m.getType());
    auto to = MemRefType::get(
        {ShapedType::kDynamic, rowsOnly ? t.getDimSize(1) : ShapedType::kDynamic},
        t.getElementType());
    return memref::CastOp::create(kb.b, kb.loc, to, m).getResult();
  }
  /// The projection holding column `col` of all the set's columns (the
  /// split-K sum's): its output (dynamic), width, the column in it (n0) and
  /// its offset; w is not set.
  Pick pickColumn(KernelBuilder &kb, Value col) const {
    Pick p{Value(), dyn(kb, ys[0], false), kb.idx(widths[0]), Value(), kb.idx(0)};
    for (size_t i = 1; i < ys.size(); ++i) {
      Value in = kb.ule(kb.idx(offset(i)), col);
      p.y = arith::SelectOp::create(kb.b, kb.loc, in, dyn(kb, ys[i], false), p.y);
      p.off = kb.select(in, kb.idx(offset(i)), p.off);
      p.width = kb.select(in, kb.idx(widths[i]), p.width);
    }
    p.n0 = kb.sub(col, p.off);
    return p;
  }
  Pick pick(KernelBuilder &kb, Value n0, int64_t bn, ArrayRef<Value> maps = {}) const {
    if (ws.size() == 1)
      return {ws[0], ys[0], kb.idx(widths[0]), n0, kb.idx(0), maps.empty() ? Value() : maps[0]};
    OpBuilder &b = kb.b;
    auto dyn = [&](Value m, bool rowsOnly) { return ProjectionTiles::dyn(kb, m, rowsOnly); };
    Value t = kb.div(n0, bn);
    Pick p{dyn(ws[0], true), dyn(ys[0], false), kb.idx(widths[0]), kb.idx(0), kb.idx(0),
           maps.empty() ? Value() : maps[0]};
    for (size_t i = 1; i < ws.size(); ++i) {
      Value in = kb.ule(kb.idx(starts[i]), t);
      if (!maps.empty())
        p.map = arith::SelectOp::create(b, kb.loc, in, maps[i], p.map);
      p.w = arith::SelectOp::create(b, kb.loc, in, dyn(ws[i], true), p.w);
      p.y = arith::SelectOp::create(b, kb.loc, in, dyn(ys[i], false), p.y);
      p.width = kb.select(in, kb.idx(widths[i]), p.width);
      p.n0 = kb.select(in, kb.idx(starts[i] * bn), p.n0);
      p.off = kb.select(in, kb.idx(offset(i)), p.off);
    }
    p.n0 = kb.sub(n0, p.n0);
    return p;
  }
};
} // namespace

void mmaLinear(KernelBuilder &kb, Value x, Value w, Value y, Value T, const MmaTile &tile,
               const StoreEpilogue &ep, const GluPair &glu, const MoreProjections &more) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const int64_t K = cast<MemRefType>(x.getType()).getDimSize(1);
  const int64_t O = cast<MemRefType>(w.getType()).getDimSize(0);
  const int64_t bm = tile.bm, bn = tile.bn, bk = tile.bk, pitch = tile.pitch();
  const int64_t wm = bm / tile.warpsM, wn = bn / tile.warpsN, mi = wm / 16, ni = wn / 8;
  const int64_t tileCols = glu ? 2 * O : O; // a GluPair's gate and up rows
  ProjectionTiles proj(w, y, tileCols, bn, more);
  const int64_t kTiles = (K + bk - 1) / bk, nTiles = proj.total();
  const int64_t threads = tile.threads();
  Type bf16 = b.getBF16Type();
  Value mTiles = kb.ceilDiv(T, bm);
  auto vec = [&](ArrayRef<int64_t> shape, Type t) { return VectorType::get(shape, t); };
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());

  kb.blocks({kb.mul(mTiles, kb.idx(nTiles))}, threads, [&](ValueRange bid, ThreadBlock &tb) {
    auto [m0, n0g] = rasterTile(kb, bid[0], mTiles, nTiles, bm, bn);
    ProjectionTiles::Pick pk = proj.pick(kb, n0g, bn);
    Value w = pk.w, y = pk.y, n0 = pk.n0, limit = pk.width;
    Value as = kb.dynamicShared(tb, 0, {tile.stages, bm, pitch}, bf16);
    Value bs = kb.dynamicShared(tb, tile.stages * bm * pitch * 2, {tile.stages, bn, pitch}, bf16);

    // One stage: k tile `kt` of x's rows m0.. and W's rows n0.. into ring
    // slot `slot` (rows padded, chunks in place), one cp.async group.
    auto issue = [&](Value kt, Value slot) {
      auto inPlace = [](Value, Value chunk) { return chunk; };
      SmallVector<Value> tokens =
          copyTileRows(kb, tb, x, as, slot, m0, T, kt, bm, bk, K, inPlace);
      tokens.append(copyTileRows(kb, tb, w, bs, slot, n0, limit, kt, bn, bk, K, inPlace,
                                 glu ? &glu : nullptr));
      nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, tokens);
    };
    for (int64_t s = 0; s + 1 < tile.stages; ++s)
      issue(kb.idx(s), kb.idx(s));

    // Accumulators: m16n8 tile (i, j) of the warp is acc[(i * ni + j) * 4 + e],
    // e = rows g, g, g + 8, g + 8 and columns 2t, 2t + 1 (g = lane / 4,
    // t = lane % 4).
    SmallVector<Value> init(mi * ni * 4, kb.f32(0.0));
    Value lane = tb.lane;
    Value wRow = kb.mul(kb.div(tb.warp, tile.warpsN), wm);
    Value wCol = kb.mul(kb.rem(tb.warp, tile.warpsN), wn);
    // ldmatrix addresses (per lane): A x4 = rows lane % 16, column
    // 8 * (lane / 16); B x4 = two n8 tiles, rows lane % 8 + 8 * (lane / 16),
    // column 8 * ((lane / 8) % 2).
    Value aRow = kb.add(wRow, kb.rem(lane, 16)), aCol = kb.mul(kb.div(lane, 16), 8);
    Value bRow = kb.add(wCol, kb.add(kb.rem(lane, 8), kb.mul(kb.div(lane, 16), 8)));
    Value bCol = kb.mul(kb.rem(kb.div(lane, 8), 2), 8);
    SmallVector<Value> acc = kb.loop(kb.idx(0), kb.idx(kTiles), init, [&](Value kt, ValueRange in) {
      // Stage kt has landed (at most stages-2 younger groups in flight) and
      // every warp is done with stage kt-1, whose slot is refilled next.
      NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(tile.stages - 2));
      kb.barrier(tb);
      Value next = kb.add(kt, tile.stages - 1);
      issue(next, kb.rem(next, tile.stages));
      Value slot = kb.rem(kt, tile.stages);
      SmallVector<Value> out(in);
      for (int64_t ks = 0; ks < bk / 16; ++ks) {
        SmallVector<SmallVector<Value>> a, bw;
        for (int64_t i = 0; i < mi; ++i)
          a.push_back(fragmentWords(
              kb,
              nvgpu::LdMatrixOp::create(
                  b, loc, vec({4, 2}, bf16), as,
                  ValueRange{slot, kb.add(aRow, i * 16), kb.add(aCol, ks * 16)}, false, 4),
              0, 4));
        for (int64_t j = 0; j < ni / 2; ++j) {
          Value v = nvgpu::LdMatrixOp::create(
              b, loc, vec({4, 2}, bf16), bs,
              ValueRange{slot, kb.add(bRow, j * 16), kb.add(bCol, ks * 16)}, false, 4);
          bw.push_back(fragmentWords(kb, v, 0, 2));
          bw.push_back(fragmentWords(kb, v, 2, 2));
        }
        for (int64_t i = 0; i < mi; ++i)
          for (int64_t j = 0; j < ni; ++j)
            mmaBf16(kb, a[i], bw[j], MutableArrayRef<Value>(out).slice((i * ni + j) * 4, 4));
      }
      return out;
    });
    NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));

    // Epilogue: accumulator (i, j) holds rows g, g + 8 (g = lane / 4) and
    // columns 2 (lane % 4) + {0, 1} of its m16n8 tile.
    Value g = kb.div(lane, 4), c2 = kb.mul(kb.rem(lane, 4), 2);
    if (glu) {
      // Tiles j (gate) and j + 1 (up) of hidden columns (n0 + wCol) / 2 + 4 j.
      Value hBase = kb.add(kb.div(kb.add(n0, wCol), 2), c2);
      for (int64_t i = 0; i < mi; ++i)
        for (int64_t j = 0; j < ni; j += 2)
          for (int64_t h = 0; h < 2; ++h) {
            int64_t gi = (i * ni + j) * 4 + 2 * h, ui = (i * ni + j + 1) * 4 + 2 * h;
            storeGluPair(kb, y, kb.add(kb.add(m0, wRow), kb.add(g, i * 16 + 8 * h)),
                         kb.add(hBase, 4 * j), acc[gi], acc[gi + 1], acc[ui], acc[ui + 1], T, O,
                         glu);
          }
      return;
    }
    for (int64_t i = 0; i < mi; ++i)
      for (int64_t j = 0; j < ni; ++j)
        for (int64_t h = 0; h < 2; ++h)
          storeAccPair(kb, y, kb.add(kb.add(m0, wRow), kb.add(g, i * 16 + 8 * h)),
                       kb.add(kb.add(n0, wCol), kb.add(c2, j * 8)),
                       acc[(i * ni + j) * 4 + 2 * h], acc[(i * ni + j) * 4 + 2 * h + 1], T, limit,
                       ep);
  }, tile.sharedBytes(2),
            (glu ? "linear_glu_" : ep.map ? "linear_" + ep.name + "_" : "linear_") + tile.name());
}

//===----------------------------------------------------------------------===//
// Tensor cores: warpgroup MMA (sm_90a)
//===----------------------------------------------------------------------===//

/// The shared-memory matrix descriptor of a K-major operand tile in the
/// 128-byte swizzle: start address >> 4 (bits 0-13), leading offset 1 (unused
/// for swizzled K-major), stride 1024 bytes between 8-row atoms (bits 32-45),
/// swizzle mode 1 = 128 B (bits 62-63). `addr` is the shared-space address
/// (i64); advancing it by 32 bytes steps K by 16 inside the swizzled row.
/// With `leadingBytes` (an MN-major operand, wgmmaChain), the leading
/// offset is the byte distance between its 64-element MN blocks.
/// The descriptor's high word: stride 1024 bytes (bits 32-45), 128-byte
/// swizzle (bits 62-63).
constexpr uint64_t kDescHigh = (uint64_t(1024 >> 4) << 32) | (1ull << 62);
static Value smemDescriptor(KernelBuilder &kb, Value addr, int64_t leadingBytes = 16) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type i64 = b.getI64Type();
  auto c = [&](uint64_t v) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(i64, static_cast<int64_t>(v)))
        .getResult();
  };
  Value lo = arith::ShRUIOp::create(b, loc, arith::AndIOp::create(b, loc, addr, c(0x3FFFF)), c(4));
  Value fixed = c((uint64_t((leadingBytes & 0x3FFFF) >> 4) << 16) | kDescHigh);
  return arith::OrIOp::create(b, loc, lo, fixed);
}

AlignedShared alignedDynamicShared(KernelBuilder &kb) {
  OpBuilder &b = kb.b;
  auto space = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  AlignedShared s;
  s.raw = gpu::DynamicSharedMemoryOp::create(
      b, kb.loc, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                 MemRefLayoutAttrInterface{}, space));
  s.base = memref::ExtractAlignedPointerAsIndexOp::create(b, kb.loc, s.raw);
  s.pad = kb.rem(kb.sub(kb.idx(1024), kb.rem(s.base, 1024)), 1024);
  return s;
}
Value AlignedShared::view(KernelBuilder &kb, Value offset, ArrayRef<int64_t> shape,
                          Type elementType) const {
  auto space = gpu::AddressSpaceAttr::get(kb.b.getContext(), gpu::AddressSpace::Workgroup);
  return memref::ViewOp::create(
             kb.b, kb.loc, MemRefType::get(shape, elementType, MemRefLayoutAttrInterface{}, space),
             raw, kb.add(pad, offset), ValueRange{})
      .getResult();
}
Value AlignedShared::address(KernelBuilder &kb, Value offset) const {
  return kb.add(base, kb.add(pad, offset));
}

/// The descriptors of an operand's k16 steps: the first step's, then
/// each step's start address added into its low bits (shared addresses stay
/// below 256 KB, so the 14-bit field never carries), all before the fence.
/// The low word (start address, leading offset) is formed and stepped as an
/// i32 and the high word (stride, swizzle) is a constant OR'd in: the
/// descriptors an i64 add would give, but ptxas keeps one 32-bit add and one uniform
/// move a step where the i64 adds cost it 12 instructions an HGMMA (Nsight
/// Compute on the MLA decode core, session 49: 386 instructions to issue
/// its 36-step S chain; the same times on an H100 in session 50, where
/// the i64 form, then behind K3C_WGMMA_DESC_I64, was removed).
static SmallVector<Value> stepDescriptors(KernelBuilder &kb, const WgmmaOperand &op,
                                          int64_t ksteps) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const int64_t leading = op.mnMajor ? op.blockBytes : 16;
  // K-major: 16 columns are 32 bytes of a 128-byte row, then the next
  // 64-column block; MN-major: 16 rows of 128 bytes.
  auto offsetOf = [&](int64_t s) {
    return op.mnMajor ? s * 16 * 128 : (s / 4) * op.blockBytes + (s % 4) * 32;
  };
  SmallVector<Value> out;
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto c32 = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(i32, v)).getResult();
  };
  Value addr = arith::TruncIOp::create(b, loc, i32, op.addr);
  Value lo = arith::OrIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, arith::AndIOp::create(b, loc, addr, c32(0x3FFFF)),
                                     c32(4)),
      c32(((leading & 0x3FFFF) >> 4) << 16));
  Value hi = arith::ConstantOp::create(b, loc,
                                       b.getIntegerAttr(i64, static_cast<int64_t>(kDescHigh)));
  for (int64_t s = 0; s < ksteps; ++s) {
    int64_t off = offsetOf(s);
    Value w = off ? arith::AddIOp::create(b, loc, lo, c32(off >> 4)).getResult() : lo;
    out.push_back(arith::OrIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i64, w), hi));
  }
  return out;
}

Value wgmmaChain(KernelBuilder &kb, Type accType, Value acc, const WgmmaOperand &a,
                 const WgmmaOperand &bOp, int64_t n, int64_t ksteps) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  MLIRContext *ctx = b.getContext();
  SmallVector<Value> da = stepDescriptors(kb, a, ksteps), db = stepDescriptors(kb, bOp, ksteps);
  // No accumulator: the first step overwrites (scale-d 0) undefined ones.
  const bool fresh = !acc;
  if (fresh)
    acc = LLVM::UndefOp::create(b, loc, accType);
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  for (int64_t s = 0; s < ksteps; ++s)
    acc = NVVM::WgmmaMmaAsyncOp::create(
        b, loc, accType, acc, da[s], db[s], NVVM::MMAShapeAttr::get(ctx, 64, n, 16),
        NVVM::WGMMATypes::bf16, NVVM::WGMMATypes::bf16, NVVM::WGMMATypes::f32,
        fresh && s == 0 ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
        a.mnMajor ? NVVM::MMALayout::col : NVVM::MMALayout::row,
        bOp.mnMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col, nullptr);
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  return acc;
}

/// One 64-column stage of a warpgroup's 64 x bn tile: four
/// wgmma.m64n{bn}k16 (bf16 -> f32) from the K-major, 128-byte-swizzled A and
/// B tiles at shared addresses aAddr, bAddr (i64), committed as one group.
static Value wgmmaK64(KernelBuilder &kb, Type accType, Value acc, Value aAddr, Value bAddr,
                      int64_t bn) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  MLIRContext *ctx = b.getContext();
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  for (int64_t k = 0; k < 4; ++k) {
    Value step = arith::ConstantOp::create(b, loc, b.getIntegerAttr(b.getI64Type(), 32 * k));
    Value da = smemDescriptor(kb, arith::AddIOp::create(b, loc, aAddr, step));
    Value db = smemDescriptor(kb, arith::AddIOp::create(b, loc, bAddr, step));
    acc = NVVM::WgmmaMmaAsyncOp::create(
        b, loc, accType, acc, da, db, NVVM::MMAShapeAttr::get(ctx, 64, bn, 16),
        NVVM::WGMMATypes::bf16, NVVM::WGMMATypes::bf16, NVVM::WGMMATypes::f32,
        NVVM::WGMMAScaleOut::one, NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
        NVVM::MMALayout::row, NVVM::MMALayout::col, nullptr);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  return acc;
}

Value wgmmaChainRegA(KernelBuilder &kb, Type accType, Value acc,
                     ArrayRef<std::array<Value, 4>> aRegs, const WgmmaOperand &bOp, int64_t n) {
  // The NVVM dialect's wgmma.mma_async takes A from shared memory only; the
  // register-A form is the one instruction k3c writes as inline PTX (here):
  // d += a b with d the n / 2 accumulators (tied in and out), a four b32
  // registers, b the shared-memory descriptor, scale-d 1, no negation, B
  // transposed when MN-major.
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const int64_t m = n / 2;
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned.m64n" +
                     std::to_string(n) + "k16.f32.bf16.bf16 {";
  std::string constraints;
  for (int64_t i = 0; i < m; ++i) {
    text += (i ? ", $" : "$") + std::to_string(i);
    constraints += "=f,";
  }
  text += "}, {$" + std::to_string(m) + ", $" + std::to_string(m + 1) + ", $" +
          std::to_string(m + 2) + ", $" + std::to_string(m + 3) + "}, $" + std::to_string(m + 4) +
          ", p, 1, 1, " + (bOp.mnMajor ? "1" : "0") + ";\n}";
  constraints += "r,r,r,r,l";
  for (int64_t i = 0; i < m; ++i)
    constraints += "," + std::to_string(i);
  SmallVector<Value> db = stepDescriptors(kb, bOp, aRegs.size());
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  for (size_t s = 0; s < aRegs.size(); ++s) {
    SmallVector<Value> operands(aRegs[s].begin(), aRegs[s].end());
    operands.push_back(db[s]);
    for (int64_t i = 0; i < m; ++i)
      operands.push_back(LLVM::ExtractValueOp::create(b, loc, acc, ArrayRef<int64_t>{i}));
    acc = LLVM::InlineAsmOp::create(b, loc, accType, operands, text, constraints,
                                    /*has_side_effects=*/true, /*is_align_stack=*/false,
                                    LLVM::tailcallkind::TailCallKind::None,
                                    LLVM::AsmDialectAttr(), ArrayAttr())
              .getResult(0);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  return acc;
}

/// The default fill of the warpgroup tiles' ring (measured on the H200,
/// docs/perf.md: both TMA forms beat cp.async at prefill and batched decode).
static constexpr int64_t kDefaultWgmmaTma = 1;

int64_t wgmmaTmaMode() {
  const int64_t m = intFromEnv("K3C_WGMMA_TMA", kDefaultWgmmaTma);
  if (m < 0 || m > 2)
    llvm::report_fatal_error("k3c: K3C_WGMMA_TMA must be 0, 1 or 2, got " + llvm::Twine(m),
                             /*gen_crash_diag=*/false);
  return m;
}

int64_t wgmmaClusterSize(const char *var) {
  const int64_t c = intFromEnv(var, 1);
  if (c != 1 && c != 2 && c != 4)
    llvm::report_fatal_error(llvm::Twine("k3c: ") + var + " must be 1, 2 or 4, got " +
                                 llvm::Twine(c),
                             /*gen_crash_diag=*/false);
  return c;
}

/// Whether TMA can copy boxes of `m` (a bf16 memref): an identity layout
/// (the tensor map's strides are the row sizes), the innermost dimension
/// static with rows a multiple of 16 bytes.
bool tmaOperand(Value m) {
  auto t = dyn_cast<MemRefType>(m.getType());
  return t && t.getRank() >= 2 && t.getRank() <= 5 && t.getLayout().isIdentity() &&
         t.getElementType().isBF16() && !t.isDynamicDim(t.getRank() - 1) &&
         t.getDimSize(t.getRank() - 1) % 8 == 0 && !t.getMemorySpace();
}

Value tmaTensorMap(KernelBuilder &kb, Value m, ArrayRef<int64_t> box) {
  OpBuilder &b = kb.b;
  MLIRContext *ctx = b.getContext();
  auto t = cast<MemRefType>(m.getType());
  assert(static_cast<int64_t>(box.size()) == t.getRank() && box.back() == WgmmaTile::bk &&
         "a box of the operand's rank, 64-element rows");
  Value unranked = memref::CastOp::create(
      b, kb.loc, UnrankedMemRefType::get(t.getElementType(), t.getMemorySpace()), m);
  auto boxType = MemRefType::get(box, t.getElementType(), MemRefLayoutAttrInterface{},
                                 gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  auto type = nvgpu::TensorMapDescriptorType::get(
      ctx, boxType, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_256B, nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  SmallVector<Value> sizes;
  for (int64_t v : box)
    sizes.push_back(kb.idx(v));
  Value map = nvgpu::TmaCreateDescriptorOp::create(b, kb.loc, type, unranked, sizes);
  return UnrealizedConversionCastOp::create(b, kb.loc, LLVM::LLVMPointerType::get(ctx), map)
      .getResult(0);
}

static Value indexI32(KernelBuilder &kb, Value index) {
  return arith::IndexCastOp::create(kb.b, kb.loc, kb.b.getI32Type(), index);
}

void tmaCopyTile(KernelBuilder &kb, Value dst, Value map, ArrayRef<Value> coords, Value bar,
                 Value multicast) {
  // The copy's destination is a shared::cluster address (address space 7;
  // the launch is its own cluster of one).
  Value cluster = LLVM::AddrSpaceCastOp::create(
      kb.b, kb.loc, LLVM::LLVMPointerType::get(kb.b.getContext(), 7), kb.pointerAt(dst, 3));
  SmallVector<Value> c32;
  for (Value c : coords)
    c32.push_back(indexI32(kb, c));
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      kb.b, kb.loc, cluster, map, c32, bar, ValueRange{}, multicast, Value(),
      NVVM::TMALoadMode::TILE, /*isCTAOnly=*/false, NVVM::CTAGroupKindAttr(), Value());
}

void clusterSync(KernelBuilder &kb) {
  NVVM::ClusterArriveOp::create(kb.b, kb.loc, kb.b.getUnitAttr());
  NVVM::ClusterWaitOp::create(kb.b, kb.loc, kb.b.getUnitAttr());
}

/// The warpgroup tiles' 2-D operands: boxes of `boxRows` rows x 64 columns.
static Value tensorMapOf(KernelBuilder &kb, Value m, int64_t boxRows) {
  return tmaTensorMap(kb, m, {boxRows, WgmmaTile::bk});
}
static void tmaCopy(KernelBuilder &kb, Value dst, Value map, Value c0, Value r0, Value bar) {
  tmaCopyTile(kb, dst, map, {c0, r0}, bar);
}

void wgmmaLinear(KernelBuilder &kb, Value x, Value w, Value y, Value T, const WgmmaTile &tile,
                 const StoreEpilogue &ep, const GluPair &glu, const MoreProjections &more,
                 Value splitWs, int64_t splitWays) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  MLIRContext *ctx = b.getContext();
  const int64_t K = cast<MemRefType>(x.getType()).getDimSize(1);
  const int64_t O = cast<MemRefType>(w.getType()).getDimSize(0);
  const int64_t bm = tile.bm, bn = tile.bn, bk = WgmmaTile::bk, stages = tile.stages;
  const int64_t tileCols = glu ? 2 * O : O; // a GluPair's gate and up rows
  ProjectionTiles proj(w, y, tileCols, bn, more);
  const int64_t kTiles = (K + bk - 1) / bk, nTiles = proj.total();
  const int64_t threads = tile.threads(), rowBytes = bk * 2;
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type(), i64 = b.getI64Type();
  const int64_t accN = bn / 2; // fp32 accumulators a thread holds (m64nN: 64 * N / 128)
  auto accType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(accN, f32));
  Value mTiles = kb.ceilDiv(T, bm);
  const bool split = static_cast<bool>(splitWs);
  assert((!split || !glu) && "split-K: plain projections");
  const int64_t ways = split ? splitWays : 1;
  if (split && (ways < 2 || ways * kSplitRows > cast<MemRefType>(splitWs.getType()).getDimSize(0) ||
                proj.columns() > cast<MemRefType>(splitWs.getType()).getDimSize(1)))
    llvm::report_fatal_error("k3c: split-K of " + llvm::Twine(ways) +
                                 " ways does not fit its workspace",
                             /*gen_crash_diag=*/false);
  const int64_t kPer = (kTiles + ways - 1) / ways;
  Value tiles = kb.mul(mTiles, kb.idx(nTiles));

  // TMA (K3C_WGMMA_TMA=1): the tensor maps, made on the host before the
  // launch. A GluPair's tile then holds bn / 2 gate rows, then the same
  // bn / 2 rows of up (two boxes), instead of alternating 8-row groups.
  const int64_t tmaMode = wgmmaTmaMode();
  auto tma2 = [](Value m) {
    return tmaOperand(m) && cast<MemRefType>(m.getType()).getRank() == 2;
  };
  bool tma = tmaMode >= 1 && kb.gpu() && tma2(x) && (!glu || tma2(glu.up));
  for (Value m : proj.ws)
    tma &= tma2(m);
  // K3C_WGMMA_TMA=2: warp-specialized. A producer warp after the consumer
  // warpgroups issues every stage's copies as soon as its slot is released
  // (an `empty` mbarrier a slot, one arrival a consumer warp after its
  // wgmma group completed); the consumers wait only on the `full` barriers:
  // no block barrier a stage, all `stages` slots in flight.
  const bool specialized = tma && tmaMode == 2;
  // tile.cluster = C (2 or 4; K3C_WGMMA_CLUSTER, K3C_WGMMA_CLUSTER_PREFILL;
  // TMA without warp specialization): the C
  // blocks of a thread block cluster take C adjacent column tiles of one row
  // tile and share its x tile: block r copies x rows [r bm / C, (r + 1) bm /
  // C) of each stage by TMA multicast into every block's slot (each block's
  // full barrier expects the whole stage, the others' rows completing on it
  // too), so x leaves L2 once a cluster instead of once a block (at batched
  // decode, one 128-row tile of x against 256 W rows, a third of the bytes
  // a block reads). The block barrier before a slot is refilled becomes a
  // cluster barrier (arrive after the step's wgmma wait, wait before the
  // next step's copies: every block of the cluster done with the slot that
  // the copies overwrite). Launches whose column tiles C does not divide
  // keep single blocks. The same products in the same order.
  const int64_t clusterC = tile.cluster;
  const bool clustered = tma && !specialized && clusterC > 1 && nTiles % clusterC == 0 &&
                         bm % (8 * clusterC) == 0;
  const int64_t C = clustered ? clusterC : 1;
  const int64_t blockThreads = threads + (specialized ? 32 : 0);
  const int64_t consumerWarps = threads / 32;
  const int64_t wBoxRows = glu ? bn / 2 : bn;
  Value xMap, upMap;
  SmallVector<Value> wMaps;
  if (tma) {
    xMap = tensorMapOf(kb, x, bm / C);
    for (Value m : proj.ws)
      wMaps.push_back(tensorMapOf(kb, m, wBoxRows));
    if (glu)
      upMap = tensorMapOf(kb, glu.up, wBoxRows);
  }
  const int64_t ringBytes = stages * (bm + bn) * rowBytes;
  // K3C_WGMMA_STAGED_STORE (default on since session 43; =0 stores the pairs directly): the plain projections' epilogue
  // writes the tile's outputs (rounded, mapped or with the residual added,
  // as storeAccPair computes them) into shared memory over the drained
  // ring, rows padded by 16 bytes, then the block copies the tile out in
  // 16-byte chunks, a warp covering whole rows (the accumulator layout
  // stores 8-byte pairs to 8 rows a warp instruction). Needs every width
  // of the launch a multiple of a chunk and one output type; the same
  // values at the same places.
  Type outElt = cast<MemRefType>(y.getType()).getElementType();
  // Not for mapped stores (the KDA gate's f32 outputs): staged, f_b's
  // gate tile lost ~85 us at 8192 tokens (kda_conv_gate 1.03 -> 1.12 ms,
  // H100, session 43) while the plain projections gained;
  // K3C_WGMMA_STAGED_MAP=1 stages them too.
  bool staged = kb.gpu() && !glu && !split && !specialized &&
                KernelBuilder::switchFromEnv("K3C_WGMMA_STAGED_STORE", true) &&
                (!ep.map || KernelBuilder::switchFromEnv("K3C_WGMMA_STAGED_MAP")) &&
                (outElt.isF32() || outElt.isBF16());
  const int64_t outBytes = outElt.getIntOrFloatBitWidth() / 8, chunkElts = 16 / outBytes;
  for (auto [yy, wd] : llvm::zip(proj.ys, proj.widths))
    staged &= cast<MemRefType>(yy.getType()).getElementType() == outElt && wd % chunkElts == 0;
  // The copy-out keeps a thread on one chunk column: a row's chunks divide
  // the threads (not 128 x 192 tiles).
  staged &= threads % (bn / chunkElts) == 0;
  const int64_t stagePitch = bn + chunkElts; // elements a staged row
  const int64_t stagedBytes = staged ? bm * stagePitch * outBytes : 0;
  const int64_t extraBytes = std::max<int64_t>(0, stagedBytes - ringBytes);
  const int64_t barrierBytes = tma ? (specialized ? 16 : 8) * stages : 0;
  // The map's column table (StoreEpilogue::colLoad; TMA tiles, whose block
  // barrier after the mbarriers' initialization orders its writes before
  // the store's reads): [colValues][bn] f32 past the ring, its barriers and
  // the staged tile. K3C_EPILOGUE_COL_TABLE=0 loads them in the store.
  const bool colTable = tma && ep.map && ep.colLoad && ep.colValues > 0 && !split &&
                        KernelBuilder::switchFromEnv("K3C_EPILOGUE_COL_TABLE", true);
  const int64_t tableOffset = ringBytes + extraBytes + barrierBytes;
  const int64_t tableBytes = colTable ? ep.colValues * bn * 4 : 0;

  kb.blocks({kb.mul(tiles, kb.idx(ways))}, blockThreads, [&](ValueRange bid, ThreadBlock &tb) {
    // Split-K: block b takes K tiles [k0, k1) of output tile b mod tiles.
    // Without a split every block takes all kTiles, as constants: a loop
    // whose trip count the compiler cannot prove positive keeps a path
    // where the zero accumulators reach the final wgmma wait, and ptxas
    // then serializes every wgmma of the kernel (C7515; full K3's shared
    // expert GLU tile, found by k3-compile's ptxas advisories).
    Value part = kb.div(bid[0], tiles);
    Value k0 = ways == 1 ? kb.idx(0) : kb.mul(part, kb.idx(kPer));
    Value k1 = ways == 1 ? kb.idx(kTiles) : kb.minu(kb.idx(kTiles), kb.add(k0, kb.idx(kPer)));
    // Clustered: tile t's cluster t / C takes a C bn wide column tile in
    // raster order, block rank t % C its rank-th bn columns.
    Value tIdx = kb.rem(bid[0], tiles);
    Value rank = C > 1 ? kb.rem(tIdx, kb.idx(C)) : Value();
    auto [m0, n0c] = C > 1 ? rasterTile(kb, kb.div(tIdx, kb.idx(C)), mTiles, nTiles / C, bm, C * bn)
                           : rasterTile(kb, tIdx, mTiles, nTiles, bm, bn);
    Value n0g = C > 1 ? kb.add(n0c, kb.mul(rank, kb.idx(bn))) : n0c;
    ProjectionTiles::Pick pk = proj.pick(kb, n0g, bn, wMaps);
    Value w = pk.w, y = pk.y, n0 = pk.n0, limit = pk.width, wsCol = pk.off;

    // The ring starts at the first 1024-byte boundary of dynamic shared
    // memory (the swizzle pattern is anchored to 1024-byte atoms).
    AlignedShared sm = alignedDynamicShared(kb);
    Value bOffset = kb.idx(stages * bm * rowBytes);
    Value as = sm.view(kb, kb.idx(0), {stages, bm, bk}, bf16),
          bs = sm.view(kb, bOffset, {stages, bn, bk}, bf16);
    Value aBase = sm.address(kb, kb.idx(0)), bBase = sm.address(kb, bOffset);
    // Prefetch distance: with a wgmma group left in flight at the end of
    // step kt - 1, the slot step kt may refill is the one step kt - 2 read.
    const int64_t ahead = stages - 1 - tile.inflight;

    // TMA: a ring slot's mbarrier (8 bytes after the ring) completes when
    // its stage's bytes have landed; thread 0 arms it (one arrival, the
    // stage's bytes expected: out-of-bounds parts of a box count too, as
    // zeros) and issues the copies, for K tiles [k0, k1) only.
    const Value isFirst = kb.ieq(tb.tid, kb.idx(0));
    auto barrierAt = [&](Value slot) {
      return kb.pointerAt(sm.address(kb, kb.add(kb.idx(ringBytes), kb.mul(slot, 8))), 3);
    };
    auto emptyAt = [&](Value slot) {
      return kb.pointerAt(
          sm.address(kb, kb.add(kb.idx(ringBytes + 8 * stages), kb.mul(slot, 8))), 3);
    };
    Value clusterMask =
        C > 1 ? arith::ConstantOp::create(b, loc, b.getIntegerAttr(b.getI16Type(), (1 << C) - 1))
                    .getResult()
              : Value();
    auto clusterArrive = [&] { NVVM::ClusterArriveOp::create(b, loc, b.getUnitAttr()); };
    auto clusterWait = [&] { NVVM::ClusterWaitOp::create(b, loc, b.getUnitAttr()); };
    // (The cluster barrier's arrives and waits alternate in every thread:
    // one pair after the mbarriers' initialization, then an arrive after
    // the prologue's copies that the first step's wait takes, a wait and an
    // arrive a step, and the last step's arrive taken after the loop.)
    auto issueTma = [&](Value issuer, Value kt, Value slot) {
      kb.ifThen(kb.andi(issuer, kb.ult(kt, k1)), [&] {
        Value bar = barrierAt(slot);
        NVVM::MBarrierArriveExpectTxOp::create(b, loc, Type(), bar,
                                               kb.i32Const((bm + bn) * rowBytes),
                                               NVVM::MemScopeKind::CTA, /*relaxed=*/false, Value());
        Value col = kb.mul(kt, bk);
        Value bSlot = kb.add(bBase, kb.mul(slot, bn * rowBytes));
        Value aSlot = kb.add(aBase, kb.mul(slot, bm * rowBytes));
        // Clustered: this block's bm / C rows of x, to every block of the cluster.
        Value xr = C > 1 ? kb.mul(rank, kb.idx(bm / C)) : kb.idx(0);
        tmaCopyTile(kb, kb.add(aSlot, kb.mul(xr, kb.idx(rowBytes))), xMap, {col, kb.add(m0, xr)},
                    bar, clusterMask);
        if (glu) {
          Value h0 = kb.div(n0, 2);
          tmaCopy(kb, bSlot, pk.map, col, h0, bar);
          tmaCopy(kb, kb.add(bSlot, kb.idx(wBoxRows * rowBytes)), upMap, col, h0, bar);
        } else {
          tmaCopy(kb, bSlot, pk.map, col, n0, bar);
        }
      });
    };
    Value table;
    if (colTable) {
      table = sm.view(kb, kb.idx(tableOffset), {ep.colValues, bn}, b.getF32Type());
      kb.ifThen(kb.ult(tb.tid, kb.idx(bn)), [&] {
        Value col = kb.add(n0, tb.tid);
        // Columns past the output load column 0's values (never stored).
        SmallVector<Value> vals = ep.colLoad(kb.select(kb.ult(col, limit), col, kb.idx(0)));
        for (int64_t i = 0; i < ep.colValues; ++i)
          kb.store(vals[i], table, {kb.idx(i), tb.tid});
      });
    }
    auto tableAt = [&](Value lc) {
      SmallVector<Value> vals;
      for (int64_t i = 0; i < ep.colValues; ++i)
        vals.push_back(kb.loadF32(table, {kb.idx(i), lc}));
      return vals;
    };
    if (tma) {
      kb.ifThen(isFirst, [&] {
        for (int64_t s = 0; s < stages; ++s) {
          NVVM::MBarrierInitOp::create(b, loc, barrierAt(kb.idx(s)), kb.i32Const(1), Value());
          if (specialized)
            NVVM::MBarrierInitOp::create(b, loc, emptyAt(kb.idx(s)),
                                         kb.i32Const(consumerWarps), Value());
        }
        NVVM::FenceMbarrierInitOp::create(b, loc);
      });
      kb.barrier(tb);
      if (C > 1)
        clusterSync(kb); // every block's mbarriers, before any multicast reaches them
    }

    // Stage: tile row r's 16-byte chunk c goes to chunk c ^ (r % 8) of its
    // 128-byte row (the 128-byte swizzle); edges zero-filled.
    auto issue = [&](Value kt, Value slot) {
      if (tma) {
        issueTma(isFirst, kt, slot);
        return;
      }
      // K tiles past the block's range read nothing (zero-filled, never
      // consumed).
      kt = kb.select(kb.ult(kt, k1), kt, kb.idx(kTiles));
      auto swizzled = [&](Value r, Value chunk) {
        return arith::XOrIOp::create(b, loc, chunk, kb.rem(r, 8)).getResult();
      };
      copyTileRows(kb, tb, x, as, slot, m0, T, kt, bm, bk, K, swizzled);
      copyTileRows(kb, tb, w, bs, slot, n0, limit, kt, bn, bk, K, swizzled,
                   glu ? &glu : nullptr);
      NVVM::CpAsyncCommitGroupOp::create(b, loc);
    };
    if (!specialized)
      for (int64_t s = 0; s < ahead; ++s)
        issue(kb.add(k0, kb.idx(s)), kb.idx(s));
    if (C > 1)
      clusterArrive();

    // The specialized producer: lane 0 of the last warp, stage by stage,
    // each slot's reuse u >= 1 after the consumers released use u - 1.
    auto produce = [&] {
      Value me = kb.ieq(tb.tid, kb.idx(threads));
      kb.ifThen(me, [&] {
        kb.loop(kb.idx(0), kb.sub(k1, k0), ValueRange{}, [&](Value kt, ValueRange) {
          Value slot = kb.rem(kt, stages);
          kb.ifThen(kb.ule(kb.idx(stages), kt), [&] {
            NVVM::MBarrierTryWaitParityOp::create(
                b, loc, emptyAt(slot), indexI32(kb, kb.rem(kb.add(kb.div(kt, stages), 1), 2)),
                kb.i32Const(10000000));
          });
          issueTma(me, kb.add(k0, kt), slot);
          return SmallVector<Value>{};
        });
      });
    };

    auto consume = [&] {
    Value wg = kb.div(tb.tid, 128);
    Value aWg = kb.add(aBase, kb.mul(wg, 64 * rowBytes));
    auto toI64 = [&](Value v) { return arith::IndexCastUIOp::create(b, loc, i64, v).getResult(); };
    Value zero = LLVM::ZeroOp::create(b, loc, accType);
    Value acc = kb.loop(kb.idx(0), kb.sub(k1, k0), ValueRange{zero}, [&](Value kt, ValueRange in) {
      // Stage kt landed; generic-proxy writes made visible to the async
      // proxy (wgmma reads shared memory through it); every warpgroup is
      // done with stage kt - 1 - inflight (its wgmma waited below), whose
      // slot is refilled next. TMA writes through the async proxy: its
      // stage is waited for on the slot's mbarrier (phase kt / stages).
      if (tma) {
        Value slot = kb.rem(kt, stages);
        NVVM::MBarrierTryWaitParityOp::create(b, loc, barrierAt(slot),
                                              indexI32(kb, kb.rem(kb.div(kt, stages), 2)),
                                              kb.i32Const(10000000));
      } else {
        NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(ahead - 1));
        NVVM::FenceProxyOp::create(b, loc, NVVM::ProxyKind::async_shared,
                                   NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
      }
      if (!specialized) {
        if (C > 1)
          clusterWait();
        else
          kb.barrier(tb);
        Value next = kb.add(kt, ahead);
        issue(kb.add(k0, next), kb.rem(next, stages));
      }
      Value slot = kb.rem(kt, stages);
      Value aAddr = toI64(kb.add(aWg, kb.mul(slot, bm * rowBytes)));
      Value bAddr = toI64(kb.add(bBase, kb.mul(slot, bn * rowBytes)));
      static_assert(WgmmaTile::bk == 64, "wgmmaK64 multiplies 64-column stages");
      Value d = wgmmaK64(kb, accType, in[0], aAddr, bAddr, bn);
      NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(tile.inflight));
      if (C > 1)
        clusterArrive(); // done with stage kt - inflight
      if (specialized) {
        // This warp is done with stage kt - inflight: release its slot.
        Value done = kb.sub(kt, kb.idx(tile.inflight));
        kb.ifThen(kb.andi(kb.ule(kb.idx(tile.inflight), kt), kb.ieq(tb.lane, kb.idx(0))), [&] {
          NVVM::MBarrierArriveOp::create(b, loc, Type(), emptyAt(kb.rem(done, stages)), Value());
        });
      }
      return SmallVector<Value>{d};
    })[0];
    // (clustered: the last step's arrive; past it every block has issued
    // its last copies, and this block's landed before its last step)
    if (C > 1)
      clusterWait();
    if (tile.inflight)
      NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
    if (!tma)
      NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));

    // Epilogue: accumulator 4j + e of a thread holds row 16 (warp % 4) +
    // lane / 4 (+ 8 for e >= 2) and column 8j + 2 (lane % 4) + (e % 2) of its
    // warpgroup's 64 x bn tile.
    Value lane = tb.lane;
    Value rowBase = kb.add(kb.add(m0, kb.mul(wg, 64)),
                           kb.add(kb.mul(kb.rem(tb.warp, 4), 16), kb.div(lane, 4)));
    Value colBase = kb.add(n0, kb.mul(kb.rem(lane, 4), 2));
    auto accAt = [&](int64_t i) {
      return LLVM::ExtractValueOp::create(b, loc, acc, ArrayRef<int64_t>{i}).getResult();
    };
    if (glu && tma) {
      // n8 tiles j (gate) and j + bn / 16 (up) hold hidden columns n0 / 2 + 8 j.
      Value hBase = kb.add(kb.div(n0, 2), kb.mul(kb.rem(lane, 4), 2));
      const int64_t up = bn / 16;
      for (int64_t j = 0; j < bn / 16; ++j)
        for (int64_t h = 0; h < 2; ++h)
          storeGluPair(kb, y, kb.add(rowBase, 8 * h), kb.add(hBase, 8 * j), accAt(4 * j + 2 * h),
                       accAt(4 * j + 2 * h + 1), accAt(4 * (j + up) + 2 * h),
                       accAt(4 * (j + up) + 2 * h + 1), T, O, glu);
      return;
    }
    if (glu) {
      // n8 tiles j (gate) and j + 1 (up) hold hidden columns n0 / 2 + 4 j.
      Value hBase = kb.add(kb.div(n0, 2), kb.mul(kb.rem(lane, 4), 2));
      for (int64_t j = 0; j < bn / 8; j += 2)
        for (int64_t h = 0; h < 2; ++h)
          storeGluPair(kb, y, kb.add(rowBase, 8 * h), kb.add(hBase, 4 * j), accAt(4 * j + 2 * h),
                       accAt(4 * j + 2 * h + 1), accAt(4 * j + 4 + 2 * h),
                       accAt(4 * j + 4 + 2 * h + 1), T, O, glu);
      return;
    }
    if (split) {
      // This block's fp32 partial tile into its slice of the workspace.
      Value sliceRow = kb.mul(part, kb.idx(kSplitRows));
      for (int64_t j = 0; j < bn / 8; ++j)
        for (int64_t h = 0; h < 2; ++h) {
          Value row = kb.add(rowBase, 8 * h), col = kb.add(colBase, 8 * j);
          kb.ifThen(kb.andi(kb.ult(row, T), kb.ult(col, limit)), [&] {
            storePair(kb, splitWs, {kb.add(sliceRow, row), kb.add(wsCol, col)},
                      accAt(4 * j + 2 * h), accAt(4 * j + 2 * h + 1));
          });
        }
      return;
    }
    if (staged) {
      // Every warpgroup done reading the ring (its last group waited); a
      // staged tile longer than the ring covers the stages' mbarriers,
      // invalidated first (their phases are all complete).
      if (tma && stagedBytes > ringBytes)
        kb.ifThen(isFirst, [&] {
          for (int64_t st = 0; st < stages; ++st)
            NVVM::MBarrierInvalOp::create(b, loc, barrierAt(kb.idx(st)));
        });
      kb.barrier(tb);
      Value tileSm = sm.view(kb, kb.idx(0), {bm, stagePitch}, outElt);
      Value lRow = kb.add(kb.mul(wg, 64), kb.add(kb.mul(kb.rem(tb.warp, 4), 16), kb.div(lane, 4)));
      Value lCol = kb.mul(kb.rem(lane, 4), 2);
      for (int64_t j = 0; j < bn / 8; ++j) {
        Value lc = kb.add(lCol, kb.idx(8 * j));
        SmallVector<Value> pre0, pre1;
        if (table) {
          pre0 = tableAt(lc);
          pre1 = tableAt(kb.add(lc, 1));
        }
        for (int64_t h = 0; h < 2; ++h) {
          Value lr = kb.add(lRow, kb.idx(8 * h));
          Value row = kb.add(m0, lr), col = kb.add(n0, lc);
          kb.ifThen(kb.andi(kb.ult(row, T), kb.ult(col, limit)), [&] {
            auto [v0, v1] = epiloguePair(kb, y, row, col, accAt(4 * j + 2 * h),
                                         accAt(4 * j + 2 * h + 1), ep, pre0, pre1);
            storePair(kb, tileSm, {lr, lc}, v0, v1, /*aligned8=*/true);
          });
        }
      }
      kb.barrier(tb);
      // Chunk c = tid + threads i: row c / perRow, its chunk c % perRow
      // (threads a multiple of perRow: a thread keeps its column).
      const int64_t perRow = bn / chunkElts;
      auto vt = VectorType::get({chunkElts}, outElt);
      Value c0 = kb.mul(kb.rem(tb.tid, kb.idx(perRow)), chunkElts);
      Value r0 = kb.div(tb.tid, kb.idx(perRow));
      for (int64_t i = 0; i < bm * perRow / threads; ++i) {
        Value lr = kb.add(r0, kb.idx(i * threads / perRow));
        Value row = kb.add(m0, lr), col = kb.add(n0, c0);
        kb.ifThen(kb.andi(kb.ult(row, T), kb.ult(col, limit)), [&] {
          Value v = vector::LoadOp::create(b, loc, vt, tileSm, ValueRange{lr, c0}, false,
                                           llvm::MaybeAlign(16));
          vector::StoreOp::create(b, loc, v, y, ValueRange{row, col}, false, llvm::MaybeAlign(16));
        });
      }
      return;
    }
    for (int64_t j = 0; j < bn / 8; ++j) {
      SmallVector<Value> pre0, pre1;
      if (table) {
        Value lc = kb.add(kb.sub(colBase, n0), kb.idx(8 * j));
        pre0 = tableAt(lc);
        pre1 = tableAt(kb.add(lc, 1));
      }
      for (int64_t h = 0; h < 2; ++h)
        storeAccPair(kb, y, kb.add(rowBase, 8 * h), kb.add(colBase, 8 * j),
                     accAt(4 * j + 2 * h), accAt(4 * j + 2 * h + 1), T, limit, ep, pre0, pre1);
    }
    };
    if (!specialized) {
      consume();
      return;
    }
    kb.ifThenElse(kb.ult(tb.tid, kb.idx(threads)), consume, produce);
  }, tile.sharedBytes() + extraBytes + barrierBytes + tableBytes,
            (glu ? "linear_glu_" : ep.map ? "linear_" + ep.name + "_" : "linear_") + tile.name() +
                (tma ? (specialized ? "_tmaws" : "_tma") : "") + (colTable ? "_ct" : "") +
                (split ? "_splitk" + std::to_string(ways) : "") + (staged ? "_st" : "") +
                (C > 1 ? "_c" + std::to_string(C) : ""),
            C);
  if (!split)
    return;
  // The sum of the slices, in slice order, then the epilogue: a thread per
  // column pair (8-byte loads of each slice) of all the set's columns (each
  // projection's width is even), stored into its projection's output.
  const int64_t pairs = proj.columns() / 2;
  kb.blocks({kb.mul(T, kb.idx((pairs + 255) / 256))}, 256, [&](ValueRange bid, ThreadBlock &tb) {
    const int64_t perRow = (pairs + 255) / 256;
    Value row = kb.div(bid[0], perRow);
    Value pair = kb.add(kb.mul(kb.rem(bid[0], perRow), 256), tb.tid);
    kb.ifThen(kb.ult(pair, kb.idx(pairs)), [&] {
      Value col = kb.mul(pair, 2);
      Value v0 = kb.f32(0.0), v1 = kb.f32(0.0);
      for (int64_t s = 0; s < ways; ++s) {
        SmallVector<Value> p = kb.loadVec(splitWs, {kb.add(row, kb.idx(s * kSplitRows)), col}, 2);
        v0 = s ? kb.fadd(v0, p[0]) : p[0];
        v1 = s ? kb.fadd(v1, p[1]) : p[1];
      }
      if (proj.ws.size() == 1) {
        storeAccPair(kb, y, row, col, v0, v1, T, kb.idx(O), ep);
        return;
      }
      ProjectionTiles::Pick pc = proj.pickColumn(kb, col);
      storeAccPair(kb, pc.y, row, pc.n0, v0, v1, T, pc.width, ep);
    });
  }, 0, "linear_splitk_sum");
}

//===----------------------------------------------------------------------===//
// Tensor cores: grouped MXFP4 GEMM (mma.sync, B fragments decoded in registers)
//===----------------------------------------------------------------------===//

/// An i32 as bf16x2 and back.
static Value asBf16x2(KernelBuilder &kb, Value word) {
  OpBuilder &b = kb.b;
  Value v = vector::FromElementsOp::create(b, kb.loc, VectorType::get({1}, b.getI32Type()),
                                           ValueRange{word});
  return vector::BitCastOp::create(b, kb.loc, VectorType::get({2}, b.getBF16Type()), v);
}
static Value asI32(KernelBuilder &kb, Value pair) {
  OpBuilder &b = kb.b;
  Value w = vector::BitCastOp::create(b, kb.loc, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, kb.loc, w, ArrayRef<int64_t>{0});
}

/// Byte `byteIdx` of `word` in the low byte, zeros above (one prmt on the GPU).
static Value byteOf(KernelBuilder &kb, Value word, int64_t byteIdx) {
  return NVVM::PermuteOp::create(kb.b, kb.loc, kb.b.getI32Type(), word, kb.i32Const(0),
                                 kb.i32Const(0x4440 | byteIdx), NVVM::PermuteMode::DEFAULT);
}

Value mxScalePair(KernelBuilder &kb, Value word, int64_t byteIdx) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Value s = byteOf(kb, word, byteIdx);
  // s << 7 in both halves (one multiply), then the two codes that are not
  // 2^(s - 127) as a normal number: 0x00 (2^-127, subnormal) and 0xFF (NaN).
  using namespace mxfp4::fragment;
  Value pair = arith::MulIOp::create(b, loc, s, kb.i32Const(kScaleMul));
  pair = kb.select(kb.ieq(s, kb.i32Const(0)), kb.i32Const(kScaleZero),
                   kb.select(kb.ieq(s, kb.i32Const(255)), kb.i32Const(kScaleNaN), pair));
  return asBf16x2(kb, pair);
}

Value mxScalePairFolded(KernelBuilder &kb, Value word, int64_t byteIdx) {
  // (s + 126) << 7 in both halves: one multiply-add.
  Value s = byteOf(kb, word, byteIdx);
  Value pair = arith::AddIOp::create(
      kb.b, kb.loc, arith::MulIOp::create(kb.b, kb.loc, s, kb.i32Const(mxfp4::fragment::kScaleMul)),
      kb.i32Const(mxfp4::fragment::kFoldAdd));
  return asBf16x2(kb, pair);
}

Value mxfpFragment(KernelBuilder &kb, Value word, int64_t pair, Value scalePair, bool folded) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  auto c = [&](int64_t v) { return kb.i32Const(v); };
  // Each of the pair's pieces (one a rotation of the word; pair 3 has two)
  // reaches its bf16 bits (magnitudes e1 e0 m at 8..6 of each half, signs
  // at 15 and 31) by one shift, rotation or none, and one mask; the pieces
  // merged are the E2M1 value times 2^-126 (models/MXFP4Layout.h, format 5,
  // fragment::codeBits: 9 operations a word).
  using namespace mxfp4::fragment;
  const int p = static_cast<int>(pair);
  Value bits;
  for (int k = 0; k < rotCount(p); ++k) {
    const int r = rotAt(p, k);
    const uint32_t mask = pieceMask(p, r);
    Value moved = word;
    switch (moveOf(mask, r)) {
    case Move::None:
      break;
    case Move::Shl:
      moved = arith::ShLIOp::create(b, loc, word, c(32 - r));
      break;
    case Move::Shr:
      moved = arith::ShRUIOp::create(b, loc, word, c(r));
      break;
    case Move::Rot: // one funnel shift (shf.l.wrap) in the PTX
      moved = arith::OrIOp::create(b, loc, arith::ShRUIOp::create(b, loc, word, c(r)),
                                   arith::ShLIOp::create(b, loc, word, c(32 - r)));
      break;
    }
    Value piece = arith::AndIOp::create(b, loc, moved, c(static_cast<int32_t>(mask)));
    bits = k ? arith::OrIOp::create(b, loc, bits, piece).getResult() : piece;
  }
  Value v = asBf16x2(kb, bits);
  if (!folded)
    v = arith::MulFOp::create(b, loc, v, asBf16x2(kb, c(kTwo126)));
  return asI32(kb, arith::MulFOp::create(b, loc, v, scalePair));
}

std::string MxfpGroupedMma::check(const TargetInfo &info) const {
  if (warpsM != 1 && warpsM != 2)
    return "row warps must be 1 or 2, got " + std::to_string(warpsM);
  if (bm <= 0 || bm % (16 * warpsM))
    return "token rows " + std::to_string(bm) + " are not a multiple of 16 per row warp";
  if (stages < 2 || stages > 8)
    return "stages must be 2..8, got " + std::to_string(stages);
  if (kTile != 32 && kTile != 64 && kTile != 128)
    return "k_tile must be 32, 64 or 128, got " + std::to_string(kTile);
  if (sharedBytes() > info.maxSharedPerBlock)
    return std::to_string(sharedBytes()) + " bytes of shared memory exceed the " +
           std::to_string(info.maxSharedPerBlock) + " a block may have";
  return "";
}

/// A work item of a persistent grouped GEMM (MxfpGroupedMma,
/// MxfpGroupedWgmma): column tile j of token tile `tile`, whose group e is
/// the largest with tileStarts[e] <= tile (empty groups share their
/// successor's start and are passed over); rows [m0, end) of the group
/// (end: the next group's start, or the spec's endsIndex row), `last` its
/// final row.
struct GroupItem {
  Value j, e, m0, end, last;
};
static Value groupStart(KernelBuilder &kb, Value buf, ArrayRef<Value> lead, Value i) {
  SmallVector<Value> ix(lead.begin(), lead.end());
  ix.push_back(i);
  return kb.toIndex(kb.load(buf, ix));
}
/// The work items: token tiles x column tiles.
template <typename Spec> static Value groupItems(KernelBuilder &kb, const Spec &g) {
  return kb.mul(groupStart(kb, g.tileStarts, g.tilesIndex, kb.idx(g.experts)), g.nTiles);
}
template <typename Spec>
static GroupItem groupItemAt(KernelBuilder &kb, const Spec &g, Value item) {
  auto tileStart = [&](Value e) { return groupStart(kb, g.tileStarts, g.tilesIndex, e); };
  auto rowStart = [&](Value e) { return groupStart(kb, g.groupStarts, g.startsIndex, e); };
  Value tile = kb.div(item, g.nTiles), j = kb.rem(item, g.nTiles);
  Value lo = kb.idx(0), hi = kb.idx(g.experts);
  for (int64_t span = g.experts; span > 1; span = (span + 1) / 2) {
    Value mid = kb.div(kb.add(lo, hi), 2);
    Value le = kb.ule(tileStart(mid), tile);
    lo = kb.select(le, mid, lo);
    hi = kb.select(le, hi, mid);
  }
  Value e = lo;
  Value end = g.endsIndex.empty() ? rowStart(kb.add(e, 1))
                                  : groupStart(kb, g.groupStarts, g.endsIndex,
                                               kb.add(e, g.endsNext));
  Value m0 = kb.add(rowStart(e), kb.mul(kb.sub(tile, tileStart(e)), g.bm));
  return GroupItem{j, e, m0, end, kb.sub(end, kb.idx(1))};
}

/// The grouped expert GEMMs' own checks and the grid's, as errors naming the
/// kernel (`gridKnob`: the switch that sets the grid, for the message).
template <typename Spec>
static void checkGrouped(KernelBuilder &kb, const Spec &g, int64_t grid, const char *gridKnob) {
  if (std::string why = g.check(kb.info()); !why.empty())
    llvm::report_fatal_error(llvm::Twine("k3c: bad expert GEMM ") + g.name + ": " + why,
                             /*gen_crash_diag=*/false);
  if (grid < 1)
    llvm::report_fatal_error(llvm::Twine("k3c: bad expert GEMM ") + g.name +
                                 ": blocks per SM" + gridKnob + " must be >= 1",
                             /*gen_crash_diag=*/false);
}

namespace {
/// The shared-memory ring of an mxfpGroupedMma block: gathered A rows,
/// weight fragment runs, their scales, and (row warps sharing) the decoded
/// fragments.
struct MxfpRing {
  Value as, bs, ss, dec;
};
} // namespace

static MxfpRing mxfpRing(KernelBuilder &kb, const MxfpGroupedMma &g, ThreadBlock &tb) {
  const int64_t bm = g.bm, KT = g.kTile, S = g.stages;
  const int64_t aBytes = S * bm * (KT + 8) * 2, bBytes = S * 16 * 4 * KT, sBytes = S * 16 * (KT / 4);
  MxfpRing r;
  r.as = kb.dynamicShared(tb, 0, {S, bm, KT + 8}, kb.b.getBF16Type());
  r.bs = kb.dynamicShared(tb, aBytes, {S, 16, 4 * KT}, kb.b.getI8Type());
  r.ss = kb.dynamicShared(tb, aBytes + bBytes, {S, 16, KT / 4}, kb.b.getI8Type());
  // Decoded fragments shared by the row warps: [tile][k pair][lane][4].
  if (g.warpsM > 1)
    r.dec = kb.dynamicShared(tb, aBytes + bBytes + sBytes, {16, KT / 32, 32, 4}, kb.b.getI32Type());
  return r;
}

namespace {
/// Split-K of one work item (the chained decode launch, mxfpGroupedMmaChain):
/// when `on`, the item runs k chunks [kc0, kc0 + nChunks) of its base item
/// `base` (half `half` of two), stores its accumulators' valid rows to
/// `partials[base, half]` and counts itself in `counts[base]`; the second of
/// the two halves to finish (the count it sees is 1) adds the other's
/// partials to its own (fp32 addition commutes: the same sum whichever half
/// finishes last), resets the count to 0 for the next launch and runs the
/// epilogue. `slot[slotAt]`: a shared i32 through which thread 0 tells the block.
struct ItemSplit {
  Value on, half, base, kc0, nChunks;
  Value partials, counts, slot;
  int64_t slotAt = 0;
};
} // namespace

/// One work item of a grouped MXFP4 GEMM (see MxfpGroupedMma): the ring
/// filled and drained within the item, the epilogue after the last barrier.
/// With `split`, possibly half of a split item (ItemSplit): returns whether
/// this block ran the epilogue (an i1; true without `split`).
static Value mxfpItem(KernelBuilder &kb, const MxfpGroupedMma &g, ThreadBlock &tb,
                      const MxfpRing &ring, const GroupItem &it,
                      const ItemSplit *split = nullptr) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const int64_t bm = g.bm, KT = g.kTile, S = g.stages, wM = g.warpsM, threads = 32 * g.warps();
  const int64_t mi = bm / wM / 16, kChunks = g.K / KT, runBytes = KT / 8, runWords = KT / 32;
  const int64_t tileBytes = 4 * KT, scaleBytes = KT / 4;
  const int64_t scaleCopy = std::min<int64_t>(16, scaleBytes);
  const bool lean = g.lean && wM == 1 && scaleBytes % 16 == 0;
  const bool pair = g.pair && kChunks % 2 == 0 && S >= 4;
  Type i8 = b.getI8Type(), i32 = b.getI32Type();
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  auto vec = [&](ArrayRef<int64_t> shape, Type t) { return VectorType::get(shape, t); };

  Value as = ring.as, bs = ring.bs, ss = ring.ss, dec = ring.dec;
  Value lane = tb.lane, wn = kb.rem(tb.warp, 4), wm = kb.div(tb.warp, 4);
  Value j = it.j, e = it.e, m0 = it.m0, end = it.end, last = it.last;
  // The item's k chunks: [kc0, kc0 + nChunks) (all of them unless split).
  Value kc0 = split ? split->kc0 : kb.idx(0);
  Value nChunks = split ? split->nChunks : kb.idx(kChunks);

  // This thread's copies of a stage, fixed for the work item: A rows
  // (16 bytes of a gathered row each), then the weight tiles its warp
  // stages (row warp wm of the column warp's four: q % warpsM == wm; a
  // lane's 16 bytes of each run, the scale block by the first lanes).
  struct ACopy {
    Value row, col, ok;
    SmallVector<Value> src;
  };
  SmallVector<ACopy> aCopies;
  const int64_t aTotal = bm * KT / 8;
  for (int64_t i = 0; i < (aTotal + threads - 1) / threads; ++i) {
    Value lin = kb.add(tb.tid, kb.idx(i * threads));
    if (aTotal % threads)
      lin = kb.rem(lin, aTotal); // duplicates copy the same bytes
    Value r = kb.div(lin, KT / 8), pos = kb.add(m0, r);
    aCopies.push_back({r, kb.mul(kb.rem(lin, KT / 8), 8), kb.ult(pos, end),
                       g.aRow(kb.minu(pos, last))});
  }
  struct WCopy {
    MxfpGroupedMma::WTile t;
    Value payload, scales; // byte offsets of chunk 0
  };
  SmallVector<WCopy> wCopies;
  for (int64_t q = 0; q < 4; ++q) {
    MxfpGroupedMma::WTile t = g.wTile(q, wn, j, e);
    ArrayRef<int64_t> shape = t.w->type.getShape();
    int64_t N = shape[shape.size() - 2];
    Value tile0 = kb.mul(kb.div(t.row0, 8), g.K / KT);
    wCopies.push_back({t,
                       kb.add(kb.mul(t.matrix, N * g.K / 2), kb.mul(tile0, tileBytes)),
                       kb.add(kb.mul(t.matrix, N * g.K / 32), kb.mul(tile0, scaleBytes))});
    if (lean) { // a missing tile's source: the buffer's start (size 0: read nothing)
      wCopies.back().payload = kb.select(t.valid, wCopies.back().payload, kb.idx(0));
      wCopies.back().scales = kb.select(t.valid, wCopies.back().scales, kb.idx(0));
    }
  }
  // Lean scale copies: lane l < 4 scaleParts copies part l % scaleParts
  // of tile l / scaleParts's scale block, from `scaleSrc` (chunk 0) to
  // `scaleDst` (slot 0), when `scaleOk`.
  const int64_t scaleParts = scaleBytes / 16;
  Value scaleSrc, scaleDst, scaleOk;
  if (lean) {
    Value q = kb.div(lane, scaleParts), part = kb.rem(lane, scaleParts);
    scaleSrc = kb.idx(0);
    scaleOk = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 0);
    for (int64_t qq = 0; qq < 4; ++qq) {
      Value here = kb.ieq(q, kb.idx(qq));
      scaleSrc = kb.select(
          here, kb.add(kb.byteAddress(wCopies[qq].t.w->scales), wCopies[qq].scales), scaleSrc);
      scaleOk = kb.select(here, wCopies[qq].t.valid, scaleOk);
    }
    scaleSrc = kb.add(scaleSrc, kb.mul(part, 16));
    scaleDst = kb.add(kb.byteAddress(ss),
                      kb.add(kb.mul(kb.add(kb.mul(wn, 4), q), scaleBytes), kb.mul(part, 16)));
  }
  // Chunk kc may lie past the last: then nothing is copied (the group
  // is committed empty and keeps the wait counts).
  auto issue = [&](Value kc, Value slot) {
    Value inK = kb.ult(kc, nChunks);
    Value kcSafe = kb.select(inK, kc, kb.idx(0));
    if (split)
      kcSafe = kb.add(kc0, kcSafe);
    auto inRange = [&](Value ok) { return kb.andi(ok, inK); };
    SmallVector<Value> tokens;
    for (ACopy &c : aCopies) {
      Value ok = inRange(c.ok);
      SmallVector<Value> src(c.src);
      src.push_back(kb.add(kb.mul(kcSafe, KT), c.col));
      tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(
          b, loc, tokenType, as, ValueRange{slot, c.row, c.col}, g.a, src,
          b.getIndexAttr(8), kb.select(ok, kb.idx(8), kb.idx(0)), b.getUnitAttr()));
    }
    if (lean) {
      for (int64_t q = 0; q < 4; ++q) {
        WCopy &w = wCopies[q];
        Value size = kb.select(inRange(w.t.valid), kb.idx(16), kb.idx(0));
        Value dstTile = kb.add(kb.mul(wn, 4), kb.idx(q));
        for (int64_t part = 0; part < (tileBytes / 16 + 31) / 32; ++part) {
          Value off = kb.add(kb.mul(lane, 16), kb.idx(part * 512));
          auto copy = [&] {
            nvgpu::DeviceAsyncCopyOp::create(
                b, loc, tokenType, bs, ValueRange{slot, dstTile, off}, w.t.w->payload,
                ValueRange{kb.add(w.payload, kb.add(kb.mul(kcSafe, tileBytes), off))},
                b.getIndexAttr(16), size, b.getUnitAttr());
          };
          if ((part + 1) * 512 <= tileBytes)
            copy();
          else
            kb.ifThen(kb.ult(off, kb.idx(tileBytes)), copy);
        }
      }
      kb.ifThen(kb.ult(lane, kb.idx(4 * scaleParts)), [&] {
        Value dst = kb.pointerAt(kb.add(scaleDst, kb.mul(slot, 16 * scaleBytes)), 3);
        Value src = kb.pointerAt(kb.add(scaleSrc, kb.mul(kcSafe, scaleBytes)), 1);
        Value size = kb.select(inRange(scaleOk), kb.i32Const(16), kb.i32Const(0));
        NVVM::CpAsyncOp::create(b, loc, dst, src, 16, NVVM::LoadCacheModifierKind::CG, size);
      });
    }
    for (int64_t q = 0; q < 4 && !lean; ++q) {
      WCopy &w = wCopies[q];
      Value ok = inRange(w.t.valid);
      if (wM > 1)
        ok = kb.andi(ok, kb.ieq(wm, kb.idx(q % wM)));
      Value dstTile = kb.add(kb.mul(wn, 4), kb.idx(q));
      // The payload: lane l copies bytes 16 l .. of the 4 KT-byte tile.
      for (int64_t part = 0; part < (tileBytes / 16 + 31) / 32; ++part) {
        Value off = kb.add(kb.mul(lane, 16), kb.idx(part * 512));
        kb.ifThen(kb.andi(ok, kb.ult(off, kb.idx(tileBytes))), [&] {
          nvgpu::DeviceAsyncCopyOp::create(
              b, loc, tokenType, bs, ValueRange{slot, dstTile, off}, w.t.w->payload,
              ValueRange{kb.add(w.payload, kb.add(kb.mul(kcSafe, tileBytes), off))},
              b.getIndexAttr(16), Value(), b.getUnitAttr());
        });
      }
      Value off = kb.mul(lane, scaleCopy);
      kb.ifThen(kb.andi(ok, kb.ult(off, kb.idx(scaleBytes))), [&] {
        nvgpu::DeviceAsyncCopyOp::create(
            b, loc, tokenType, ss, ValueRange{slot, dstTile, off}, w.t.w->scales,
            ValueRange{kb.add(w.scales, kb.add(kb.mul(kcSafe, scaleBytes), off))},
            b.getIndexAttr(scaleCopy), Value(), scaleCopy == 16 ? b.getUnitAttr() : UnitAttr());
      });
    }
    nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, tokens);
  };
  for (int64_t s = 0; s + 1 < (pair ? S - 1 : S); ++s)
    issue(kb.idx(s), kb.idx(s));

  Value gq = kb.div(lane, 4);
  Value aRowL = kb.add(kb.mul(wm, bm / wM), kb.rem(lane, 16));
  Value aColL = kb.mul(kb.div(lane, 16), 8);
  // The tiles this warp decodes: all four of its column warp's, or (row
  // warps sharing) those it staged.
  SmallVector<int64_t> mine;
  for (int64_t q = 0; q < 4; ++q)
    if (wM == 1 || q % wM == 0)
      mine.push_back(q);
  // The runs (runWords words a lane) and row scale words of the tiles
  // this warp decodes, in ring slot `slot`.
  struct Run {
    SmallVector<Value> words, scales;
  };
  auto loadRuns = [&](Value slot) {
    SmallVector<Run> runs;
    for (int64_t q : mine) {
      Value t = kb.add(kb.mul(wn, 4), wM > 1 ? kb.add(wm, kb.idx(q)) : kb.idx(q));
      Value run = vector::LoadOp::create(b, loc, vec({runBytes}, i8), bs,
                                         ValueRange{slot, t, kb.mul(lane, runBytes)}, false,
                                         llvm::MaybeAlign(runBytes));
      Value w = vector::BitCastOp::create(b, loc, vec({runWords}, i32), run);
      Run r;
      for (int64_t k = 0; k < runWords; ++k)
        r.words.push_back(vector::ExtractOp::create(b, loc, w, ArrayRef<int64_t>{k}));
      Value rowAt = kb.mul(gq, runWords);
      if (runWords == 4) { // the row's four scale bytes as one word
        Value sw = vector::LoadOp::create(b, loc, vec({4}, i8), ss, ValueRange{slot, t, rowAt},
                                          false, llvm::MaybeAlign(4));
        Value w1 = vector::BitCastOp::create(b, loc, vec({1}, i32), sw);
        r.scales.assign(4, vector::ExtractOp::create(b, loc, w1, ArrayRef<int64_t>{0}));
      } else {
        for (int64_t k = 0; k < runWords; ++k)
          r.scales.push_back(arith::ExtUIOp::create(
              b, loc, i32, kb.load(ss, {slot, t, kb.add(rowAt, kb.idx(k))})));
      }
      runs.push_back(r);
    }
    return runs;
  };
  // The fragment words of 32-column block `blk` (k steps 2 blk, 2 blk + 1)
  // of every run: [run][k step of the two][2], by the folded path unless
  // `exact` (chunkExact), where the exact two-multiply path runs.
  // One warp vote a k chunk: whether any
  // scale byte of the chunk's runs is >= 0x80 (2^1 and up, NaN). Both
  // paths are exact, so the choice does not change a result.
  auto chunkExact = [&](ArrayRef<Run> runs) {
    Value any = kb.i32Const(0);
    for (const Run &r : runs)
      for (int64_t k = 0; k < (runWords == 4 ? 1 : runWords); ++k)
        any = arith::OrIOp::create(b, loc, any, r.scales[k]);
    const int32_t highBits = runWords == 4 ? static_cast<int32_t>(0x80808080u) : 0x80;
    Value high = arith::AndIOp::create(b, loc, any, kb.i32Const(highBits));
    return NVVM::VoteSyncOp::create(b, loc, b.getI1Type(), kb.i32Const(-1),
                                    arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                                          high, kb.i32Const(0)),
                                    NVVM::VoteSyncKind::any)
        .getResult();
  };
  auto decodeBlock = [&](ArrayRef<Run> runs, int64_t blk, Value exact) {
    int64_t byteIdx = runWords == 4 ? blk : 0;
    auto words = [&](bool folded) {
      SmallVector<Value> out;
      for (const Run &r : runs) {
        Value sp = folded ? mxScalePairFolded(kb, r.scales[blk], byteIdx)
                          : mxScalePair(kb, r.scales[blk], byteIdx);
        for (int64_t pair = 0; pair < 4; ++pair)
          out.push_back(mxfpFragment(kb, r.words[blk], pair, sp, folded));
      }
      return out;
    };
    int64_t n = static_cast<int64_t>(runs.size()) * 4;
    auto ifOp = scf::IfOp::create(b, loc, TypeRange(SmallVector<Type>(n, i32)), exact, true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      scf::YieldOp::create(b, loc, words(false));
      b.setInsertionPointToStart(&ifOp.getElseRegion().front());
      scf::YieldOp::create(b, loc, words(true));
    }
    return SmallVector<Value>(ifOp.getResults().begin(), ifOp.getResults().end());
  };

  SmallVector<Value> init(mi * 16, kb.f32(0.0));
  // Decode and multiply the chunk in ring slot `slot`.
  auto compute = [&](Value slot, ValueRange in) {
    SmallVector<Run> runs = loadRuns(slot);
    Value exact = chunkExact(runs);
    if (wM > 1) {
      // Publish this warp's tiles (16 bytes a lane per block: two k
      // steps), then read all four of the column warp's.
      for (int64_t blk = 0; blk < runWords; ++blk) {
        SmallVector<Value> w = decodeBlock(runs, blk, exact);
        for (size_t m = 0; m < mine.size(); ++m) {
          Value t = kb.add(kb.mul(wn, 4), kb.add(wm, kb.idx(mine[m])));
          Value v = vector::FromElementsOp::create(
              b, loc, vec({4}, i32), ArrayRef<Value>(w).slice(4 * m, 4));
          vector::StoreOp::create(b, loc, v, dec, ValueRange{t, kb.idx(blk), lane, kb.idx(0)},
                                  false, llvm::MaybeAlign(16));
        }
      }
      kb.barrier(tb);
    }
    SmallVector<Value> out(in);
    for (int64_t blk = 0; blk < runWords; ++blk) {
      SmallVector<SmallVector<Value>> bw(4);
      if (wM > 1) {
        for (int64_t q = 0; q < 4; ++q) {
          Value t = kb.add(kb.mul(wn, 4), kb.idx(q));
          Value v = vector::LoadOp::create(b, loc, vec({4}, i32), dec,
                                           ValueRange{t, kb.idx(blk), lane, kb.idx(0)}, false,
                                           llvm::MaybeAlign(16));
          for (int64_t x = 0; x < 4; ++x)
            bw[q].push_back(vector::ExtractOp::create(b, loc, v, ArrayRef<int64_t>{x}));
        }
      } else {
        SmallVector<Value> w = decodeBlock(runs, blk, exact);
        for (int64_t q = 0; q < 4; ++q)
          bw[q].assign(w.begin() + 4 * q, w.begin() + 4 * q + 4);
      }
      for (int64_t h = 0; h < 2; ++h) {
        int64_t ks = 2 * blk + h;
        SmallVector<SmallVector<Value>> a;
        for (int64_t i = 0; i < mi; ++i)
          a.push_back(fragmentWords(
              kb,
              ldmatrixX4(kb, as,
                         ValueRange{slot, kb.add(aRowL, i * 16), kb.add(aColL, ks * 16)},
                         false),
              0, 4));
        for (int64_t q = 0; q < 4; ++q) {
          SmallVector<Value> w2{bw[q][2 * h], bw[q][2 * h + 1]};
          for (int64_t i = 0; i < mi; ++i)
            mmaBf16(kb, a[i], w2, MutableArrayRef<Value>(out).slice((i * 4 + q) * 4, 4));
        }
      }
    }
    return out;
  };
  // One k chunk a step: wait for chunk kc, issue chunk kc + S - 1 into
  // the slot of kc - 1 (the barrier: every warp is done with it).
  auto step = [&](Value kc, ValueRange in) {
    NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(S - 2));
    kb.barrier(tb);
    Value next = kb.add(kc, S - 1);
    issue(next, kb.rem(next, S));
    return compute(kb.rem(kc, S), in);
  };
  // Two chunks a step: chunks 2p and 2p + 1 landed (S - 4 of the newer
  // groups may be in flight), the slots of 2p - 2 and 2p - 1 refilled
  // with 2p + S - 2 and 2p + S - 1.
  auto pairStep = [&](Value p, ValueRange in) {
    Value kc = kb.mul(p, 2);
    NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(S - 4));
    kb.barrier(tb);
    for (int64_t h = 0; h < 2; ++h) {
      Value next = kb.add(kc, S - 2 + h);
      issue(next, kb.rem(next, S));
    }
    SmallVector<Value> mid = compute(kb.rem(kc, S), in);
    return compute(kb.rem(kb.add(kc, 1), S), mid);
  };
  // (Peeling the last S - 1 chunks into a loop of their own, so the
  // main loop's copies carry no in-range selects, measured within the
  // spread on the H200 in session 25 and was removed.)
  SmallVector<Value> acc =
      pair ? kb.loop(kb.idx(0), split ? kb.div(nChunks, 2) : kb.idx(kChunks / 2), init,
                     [&](Value p, ValueRange in) { return pairStep(p, in); })
           : kb.loop(kb.idx(0), nChunks, init,
                     [&](Value kc, ValueRange in) { return step(kc, in); });
  NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
  kb.barrier(tb); // the next item refills the ring
  Value rowsAt = kb.add(m0, kb.mul(wm, bm / wM));
  if (!split) {
    g.epilogue(acc, rowsAt, end, wn, j, e, tb);
    return arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
  }
  // Split-K: accumulator a = (i * 4 + q) * 4 + r holds row g + 8 (r / 2) +
  // 16 i of the warp's rows; only rows below `end` are stored and read.
  const int64_t nAcc = static_cast<int64_t>(acc.size());
  auto rowValid = [&](int64_t a) {
    Value pos = kb.add(rowsAt, kb.add(gq, kb.idx(16 * (a / 16) + 8 * ((a % 4) / 2))));
    return kb.ult(pos, end);
  };
  auto partialAt = [&](Value half, int64_t a) {
    return SmallVector<Value>{split->base, half, kb.idx(a), tb.tid};
  };
  Value i1True = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
  auto ifOn = scf::IfOp::create(b, loc, TypeRange{b.getI1Type()}, split->on, true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOn.getThenRegion().front());
    for (int64_t a = 0; a < nAcc; ++a)
      kb.ifThen(rowValid(a), [&] { kb.store(acc[a], split->partials, partialAt(split->half, a)); });
    // Release the partials, count this half (thread 0), tell the block.
    kb.barrier(tb);
    kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] {
      NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
      Value old = memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi, kb.i32Const(1),
                                              split->counts, ValueRange{split->base})
                      .getResult();
      // Acquire: the other half's partials (released the same way) before
      // the block's loads.
      NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
      kb.store(old, split->slot, {kb.idx(split->slotAt)});
    });
    kb.barrier(tb);
    Value finisher = kb.ieq(kb.toIndex(kb.load(split->slot, {kb.idx(split->slotAt)})), kb.idx(1));
    scf::YieldOp::create(b, loc, ValueRange{finisher});
    b.setInsertionPointToStart(&ifOn.getElseRegion().front());
    scf::YieldOp::create(b, loc, ValueRange{i1True});
  }
  Value run = ifOn.getResult(0);
  kb.ifThen(run, [&] {
    // The finisher of a split item adds the other half's partials (volatile
    // loads: past L1, which may hold an older launch's lines).
    Value other = kb.sub(kb.idx(1), split->half);
    Value fin = kb.andi(split->on, run);
    SmallVector<Type> types(nAcc, b.getF32Type());
    auto ifFin = scf::IfOp::create(b, loc, types, fin, true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifFin.getThenRegion().front());
      kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] {
        kb.store(kb.i32Const(0), split->counts, {split->base});
      });
      SmallVector<Value> sum;
      for (int64_t a = 0; a < nAcc; ++a) {
        auto ld = scf::IfOp::create(b, loc, TypeRange{b.getF32Type()}, rowValid(a), true);
        {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPointToStart(&ld.getThenRegion().front());
          Value ptr = kb.pointerAt(kb.byteAddress(split->partials, partialAt(other, a)), 1);
          Value v = LLVM::LoadOp::create(b, loc, b.getF32Type(), ptr, /*alignment=*/4,
                                         /*isVolatile=*/true);
          scf::YieldOp::create(b, loc, ValueRange{v});
          b.setInsertionPointToStart(&ld.getElseRegion().front());
          scf::YieldOp::create(b, loc, ValueRange{kb.f32(0.0)});
        }
        sum.push_back(arith::AddFOp::create(b, loc, acc[a], ld.getResult(0)));
      }
      scf::YieldOp::create(b, loc, sum);
      b.setInsertionPointToStart(&ifFin.getElseRegion().front());
      scf::YieldOp::create(b, loc, acc);
    }
    SmallVector<Value> total(ifFin.getResults().begin(), ifFin.getResults().end());
    g.epilogue(total, rowsAt, end, wn, j, e, tb);
  });
  return run;
}

void mxfpGroupedMma(KernelBuilder &kb, const MxfpGroupedMma &g, int64_t grid) {
  checkGrouped(kb, g, grid, " (K3C_MOE_CTAS_*)");
  kb.blocks({kb.idx(grid)}, 32 * g.warps(), [&](ValueRange bid, ThreadBlock &tb) {
    MxfpRing ring = mxfpRing(kb, g, tb);
    kb.loopStep(bid[0], groupItems(kb, g), kb.idx(grid),
                [&](Value item) { (void)mxfpItem(kb, g, tb, ring, groupItemAt(kb, g, item)); });
  }, g.sharedBytes(), g.name);
}

std::string MxfpGroupedChain::check() const {
  if (first.warps() != second.warps())
    return "the two GEMMs' blocks have " + std::to_string(first.warps()) + " and " +
           std::to_string(second.warps()) + " warps (one launch runs both)";
  if (splitBelow < 0)
    return "split-K threshold must be >= 0, got " + std::to_string(splitBelow);
  if (splitBelow > 0 && (!partials || !counts))
    return "split-K needs its partials and counts";
  return "";
}

bool MxfpGroupedChain::splits() const {
  if (splitBelow <= 0)
    return false;
  for (const MxfpGroupedMma *g : {&first, &second}) {
    const int64_t kChunks = g->K / g->kTile;
    // Each half a whole number of steps (two chunks a step when paired).
    const bool pair = g->pair && kChunks % 2 == 0 && g->stages >= 4;
    if (kChunks % (pair ? 4 : 2) || g->warpsM != 1 || 32 * g->warps() != kSplitThreads ||
        g->bm / 16 * 16 != kSplitAccs)
      return false;
  }
  return true;
}

/// The work queue: thread 0 claims items by an atomic add on the queue word
/// (sync[experts]), one item ahead (the claim for the next item is made when
/// the current one starts, into the other of two shared slots, and read
/// after the item's barriers). Items [0, U) are the first GEMM's, [U, U + D)
/// the second's; a second-GEMM item of group e starts once sync[e] counts
/// all first-GEMM items of e (tiles of e x first.nTiles). Every item is
/// claimed by a running block after all items before it, so a block that
/// waits only waits for items already running elsewhere: no deadlock, for any
/// grid and any number of resident blocks.
void mxfpGroupedMmaChain(KernelBuilder &kb, const MxfpGroupedChain &c, int64_t grid) {
  const MxfpGroupedMma &up = c.first, &down = c.second;
  checkGrouped(kb, up, grid, " (K3C_MOE_CTAS_*)");
  checkGrouped(kb, down, grid, " (K3C_MOE_CTAS_*)");
  if (std::string why = c.check(); !why.empty())
    llvm::report_fatal_error(llvm::Twine("k3c: bad chained expert GEMMs ") + c.name + ": " + why,
                             /*gen_crash_diag=*/false);
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type i32 = b.getI32Type();
  auto syncAt = [&](Value i) {
    SmallVector<Value> ix(c.syncIndex.begin(), c.syncIndex.end());
    ix.push_back(i);
    return ix;
  };
  auto atomicAdd = [&](Value mem, ArrayRef<Value> ix, int64_t v) {
    return memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi, kb.i32Const(v), mem,
                                       ix)
        .getResult();
  };
  // The rings, then the two claim slots (from the dynamic allocation too:
  // KernelBuilder::shared would overlap it).
  const int64_t ringBytes = std::max(up.sharedBytes(), down.sharedBytes());
  const int64_t shared = ringBytes + 16;
  const bool canSplit = c.splits();
  kb.blocks({kb.idx(grid)}, 32 * up.warps(), [&](ValueRange, ThreadBlock &tb) {
    // Each GEMM's ring over the same shared memory (an item drains its ring).
    MxfpRing upRing = mxfpRing(kb, up, tb), downRing = mxfpRing(kb, down, tb);
    // Two claim slots, then the split-K finisher's word.
    Value claims = kb.dynamicShared(tb, ringBytes, {3}, i32);
    Value first = kb.ieq(tb.tid, kb.idx(0));
    Value queue = kb.idx(up.experts);
    Value U = groupItems(kb, up);
    Value base = kb.add(U, groupItems(kb, down));
    // Split-K (MxfpGroupedChain::splitBelow): with fewer base items than
    // splitBelow a block (and at most the partials' capacity), every item is
    // run as two halves of its k chunks, adjacent in the queue.
    Value splitOn = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 0);
    if (canSplit) {
      const int64_t capacity = cast<MemRefType>(c.partials.getType()).getDimSize(0);
      splitOn = kb.ule(base, kb.idx(std::min(c.splitBelow * grid, capacity)));
    }
    Value factor = kb.select(splitOn, kb.idx(2), kb.idx(1));
    Value total = kb.mul(base, factor);
    kb.ifThen(first, [&] { kb.store(atomicAdd(c.sync, syncAt(queue), 1), claims, {kb.idx(0)}); });
    kb.barrier(tb);
    Type index = b.getIndexType();
    auto loop = scf::WhileOp::create(b, loc, TypeRange{index, index}, ValueRange{kb.idx(0)});
    {
      OpBuilder::InsertionGuard guard(b);
      Block *before = b.createBlock(&loop.getBefore(), {}, {index}, {loc});
      Value par = before->getArgument(0);
      Value item = kb.toIndex(kb.load(claims, {par}));
      scf::ConditionOp::create(b, loc, kb.ult(item, total), ValueRange{item, par});
      Block *after = b.createBlock(&loop.getAfter(), {}, {index, index}, {loc, loc});
      item = after->getArgument(0);
      par = after->getArgument(1);
      Value other = kb.sub(kb.idx(1), par);
      kb.ifThen(first, [&] { kb.store(atomicAdd(c.sync, syncAt(queue), 1), claims, {other}); });
      // The base item and which half of it (0 unless split).
      Value baseItem = kb.select(splitOn, kb.div(item, 2), item);
      Value half = kb.select(splitOn, kb.rem(item, 2), kb.idx(0));
      auto splitOf = [&](const MxfpGroupedMma &g) {
        const int64_t kChunks = g.K / g.kTile;
        ItemSplit s;
        s.on = splitOn;
        s.half = half;
        s.base = baseItem;
        s.nChunks = kb.select(splitOn, kb.idx(kChunks / 2), kb.idx(kChunks));
        s.kc0 = kb.mul(half, kChunks / 2);
        s.partials = c.partials;
        s.counts = c.counts;
        s.slot = claims;
        s.slotAt = 2;
        return s;
      };
      kb.ifThenElse(
          kb.ult(baseItem, U),
          [&] {
            GroupItem it = groupItemAt(kb, up, baseItem);
            ItemSplit s;
            if (canSplit)
              s = splitOf(up);
            Value done = mxfpItem(kb, up, tb, upRing, it, canSplit ? &s : nullptr);
            // Release: the block's stores of the item, then the count (by
            // the block that ran the epilogue).
            kb.barrier(tb);
            kb.ifThen(kb.andi(first, done), [&] {
              NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
              atomicAdd(c.sync, syncAt(it.e), 1);
            });
          },
          [&] {
            GroupItem it = groupItemAt(kb, down, kb.sub(baseItem, U));
            auto tileStart = [&](Value e) {
              return groupStart(kb, up.tileStarts, up.tilesIndex, e);
            };
            Value need = kb.mul(kb.sub(tileStart(kb.add(it.e, 1)), tileStart(it.e)), up.nTiles);
            // Acquire: warp 0 polls the count (every lane the same
            // ld.acquire.gpu, so the warp stays converged for the barrier),
            // the block follows. A count that never arrives traps after
            // ~2^22 polls (seconds) instead of hanging.
            Value counter = kb.pointerAt(kb.byteAddress(c.sync, syncAt(it.e)), 1);
            kb.ifThen(kb.ieq(tb.warp, kb.idx(0)), [&] {
              auto spin = scf::WhileOp::create(b, loc, TypeRange{index}, ValueRange{kb.idx(0)});
              OpBuilder::InsertionGuard g2(b);
              Block *poll = b.createBlock(&spin.getBefore(), {}, {index}, {loc});
              Value done = kb.toIndex(LLVM::LoadOp::create(
                  b, loc, i32, counter, /*alignment=*/4, /*isVolatile=*/false,
                  /*isNonTemporal=*/false, /*isInvariant=*/false, /*isInvariantGroup=*/false,
                  LLVM::AtomicOrdering::acquire, "device"));
              scf::ConditionOp::create(b, loc, kb.ult(done, need), poll->getArguments());
              Block *sleep = b.createBlock(&spin.getAfter(), {}, {index}, {loc});
              NVVM::NanosleepOp::create(b, loc, kb.i32Const(64));
              kb.ifThen(kb.ule(kb.idx(int64_t{1} << 22), sleep->getArgument(0)),
                        [&] { LLVM::Trap::create(b, loc); });
              scf::YieldOp::create(b, loc, ValueRange{kb.add(sleep->getArgument(0), 1)});
            });
            kb.barrier(tb);
            ItemSplit s;
            if (canSplit)
              s = splitOf(down);
            (void)mxfpItem(kb, down, tb, downRing, it, canSplit ? &s : nullptr);
          });
      scf::YieldOp::create(b, loc, ValueRange{other});
    }
  }, shared, c.name);
}

//===----------------------------------------------------------------------===//
// Warpgroup MMA: grouped MXFP4 GEMM (the tile decoded once per CTA)
//===----------------------------------------------------------------------===//

/// Run `lane` of weight tile q in stage `slot` of the payload/scale rings,
/// decoded into B tile `dslot`: row r = lane / 4, thread column c = lane %
/// 4; pair b of its word w (mxfpFragment) is the bf16 pair at columns 16 (2w +
/// b / 2) + 2c + 8 (b % 2) of the stage, i.e. 16-byte chunk 4w + b, word c, of the
/// swizzled row 8q + r (chunk ^ r); its scale is block w of the stage's two
/// (`half` of a 128-column k chunk, or 0). Folded scales (one multiply)
/// unless a scale byte of the warp's rows is >= 0x80 (2^1 and up, NaN): then
/// the exact path (a warp vote; the warp's lanes must all take part).
static void decodeRun(KernelBuilder &kb, Value ps, Value ss, Value dec, Value slot, Value dslot,
                      Value q, Value lane, Value half, int64_t scaleRow) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type i8 = b.getI8Type(), i32 = b.getI32Type();
  auto vec = [&](ArrayRef<int64_t> shape, Type t) { return VectorType::get(shape, t); };
  Value r = kb.div(lane, 4), c = kb.rem(lane, 4);
  Value run = vector::LoadOp::create(b, loc, vec({8}, i8), ps, ValueRange{slot, q, kb.mul(lane, 8)},
                                     false, llvm::MaybeAlign(8));
  Value words = vector::BitCastOp::create(b, loc, vec({2}, i32), run);
  Value w0 = vector::ExtractOp::create(b, loc, words, ArrayRef<int64_t>{0});
  Value w1 = vector::ExtractOp::create(b, loc, words, ArrayRef<int64_t>{1});
  // The row's scale bytes of this stage's two 32-column blocks in bytes 0
  // and 1 of `sw` (k_tile 128: four bytes a row; 64: rows 2p, 2p + 1 share a
  // word).
  Value at = scaleRow == 4 ? kb.mul(r, 4) : kb.mul(kb.div(r, 2), 4);
  Value shift = scaleRow == 4 ? kb.mul(half, 16) : kb.mul(kb.rem(r, 2), 16);
  Value v = vector::LoadOp::create(b, loc, vec({4}, i8), ss, ValueRange{slot, q, at}, false,
                                   llvm::MaybeAlign(4));
  Value word = vector::ExtractOp::create(b, loc, vector::BitCastOp::create(b, loc, vec({1}, i32), v),
                                         ArrayRef<int64_t>{0});
  Value sw = arith::ShRUIOp::create(b, loc, word, arith::IndexCastUIOp::create(b, loc, i32, shift));
  Value high = arith::AndIOp::create(b, loc, sw, kb.i32Const(0x8080));
  Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, high, kb.i32Const(0));
  Value exact = NVVM::VoteSyncOp::create(b, loc, b.getI1Type(), kb.i32Const(-1), any,
                                         NVVM::VoteSyncKind::any);
  auto frags = [&](bool folded) {
    SmallVector<Value> out;
    for (int64_t wi = 0; wi < 2; ++wi) {
      Value sp = folded ? mxScalePairFolded(kb, sw, wi) : mxScalePair(kb, sw, wi);
      for (int64_t pair = 0; pair < 4; ++pair)
        out.push_back(mxfpFragment(kb, wi ? w1 : w0, pair, sp, folded));
    }
    return out;
  };
  auto ifOp = scf::IfOp::create(b, loc, TypeRange(SmallVector<Type>(8, i32)), exact, true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    scf::YieldOp::create(b, loc, frags(false));
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, loc, frags(true));
  }
  Value row = kb.add(kb.mul(q, 8), r);
  for (int64_t ch = 0; ch < 8; ++ch) {
    Value swz = arith::XOrIOp::create(b, loc, kb.idx(ch), r).getResult();
    Value col = kb.add(kb.mul(swz, 8), kb.mul(c, 2));
    vector::StoreOp::create(b, loc, asBf16x2(kb, ifOp.getResult(ch)), dec,
                            ValueRange{dslot, row, col}, false, llvm::MaybeAlign(4));
  }
}

std::string MxfpGroupedWgmma::check(const TargetInfo &info) const {
  if (!info.wgmma)
    return "the target has no warpgroup MMA";
  if (bm != 64 && bm != 128)
    return "token rows must be 64 or 128 (one or two warpgroups), got " + std::to_string(bm);
  if (bn < 16 || bn > 256 || bn % 16 || (bn * 4) % (2 * threads()))
    return "weight rows " + std::to_string(bn) + " do not split into the block's decode items";
  if (stages < 3 || stages > 8)
    return "stages must be 3..8, got " + std::to_string(stages);
  if (kTile != 64 && kTile != 128)
    return "k_tile must be 64 or 128, got " + std::to_string(kTile);
  if (K <= 0 || K % kTile)
    return "K = " + std::to_string(K) + " is not a multiple of k_tile " + std::to_string(kTile);
  if (sharedBytes() > info.maxSharedPerBlock)
    return std::to_string(sharedBytes()) + " bytes of shared memory exceed the " +
           std::to_string(info.maxSharedPerBlock) + " a block may have";
  return "";
}

/// The shared memory of a grouped wgmma block, from the first 1024-byte
/// boundary (the swizzle atom): A ring [stages, bm, 64] bf16, the decoded B
/// tiles [D, bn, 64] bf16 (both swizzled), payload ring [stages, bn / 8,
/// 256] and scale ring [stages, bn / 8, 32] bytes; aBase and decBase are the
/// shared addresses of the A ring and the decoded tiles.
struct WgSmem {
  Value as, dec, ps, ss, aBase, decBase;
};
static WgSmem wgSharedLayout(KernelBuilder &kb, const MxfpGroupedWgmma &g) {
  OpBuilder &b = kb.b;
  const int64_t bk = MxfpGroupedWgmma::bk, S = g.stages, D = g.decodedTiles(), tiles = g.bn / 8;
  Type i8 = b.getI8Type();
  AlignedShared sm = alignedDynamicShared(kb);
  Value decOff = kb.idx(S * g.bm * bk * 2);
  Value pOff = kb.add(decOff, kb.idx(D * g.bn * bk * 2));
  Value sOff = kb.add(pOff, kb.idx(S * g.bn * 32));
  WgSmem m;
  m.as = sm.view(kb, kb.idx(0), {S, g.bm, bk}, b.getBF16Type());
  m.dec = sm.view(kb, decOff, {D, g.bn, bk}, b.getBF16Type());
  m.ps = sm.view(kb, pOff, {S, tiles, 32 * 8}, i8);
  m.ss = sm.view(kb, sOff, {S, tiles, 32}, i8);
  m.aBase = sm.address(kb, kb.idx(0));
  m.decBase = sm.address(kb, decOff);
  return m;
}

/// A decoding thread's weight items of a work item: item i is run `lane` of
/// B tile q = 2 warp + i % 2 + 2 warps (i / 2) (q's parity i % 2; `warps`:
/// the decoding warps), with the tile's payload and scale byte offsets at k
/// chunk 0.
struct WgWeightItem {
  Value q;
  MxfpGroupedMma::WTile t;
  Value payload, scales;
};
static SmallVector<WgWeightItem> wgWeightItems(KernelBuilder &kb, const MxfpGroupedWgmma &g,
                                               Value warp, int64_t warps, int64_t items, Value j,
                                               Value e) {
  SmallVector<WgWeightItem> out;
  const int64_t KT = g.kTile, scaleRow = KT / 32;
  for (int64_t i = 0; i < items; ++i) {
    Value q = kb.add(kb.mul(warp, 2), kb.idx(i % 2 + 2 * warps * (i / 2)));
    MxfpGroupedMma::WTile t = g.wTile(i % 2, q, j, e);
    ArrayRef<int64_t> shape = t.w->type.getShape();
    int64_t N = shape[shape.size() - 2];
    Value tile0 = kb.mul(kb.div(kb.minu(t.row0, kb.idx(N - 8)), 8), g.K / KT);
    out.push_back({q, t, kb.add(kb.mul(t.matrix, N * g.K / 2), kb.mul(tile0, 4 * KT)),
                   kb.add(kb.mul(t.matrix, N * g.K / 32), kb.mul(tile0, 8 * scaleRow))});
  }
  return out;
}

/// The cp.async copies of k step `ks` (valid: `inK`) of the weight items
/// into ring slot `slot`: bytes 8 half .. of run `lane` (four k steps of the
/// k chunk kc), and the chunk's scales of the tile by its first lanes (16
/// bytes each). Tiles past the weight's rows copy nothing.
static void wgWeightCopies(KernelBuilder &kb, const MxfpGroupedWgmma &g,
                           ArrayRef<WgWeightItem> items, Value ps, Value ss, Value ks, Value inK,
                           Value slot, Value lane) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  const int64_t KT = g.kTile, bk = MxfpGroupedWgmma::bk, scaleRow = KT / 32;
  const int64_t scalePieces = 8 * scaleRow / 16;
  Value k0 = kb.mul(kb.select(inK, ks, kb.idx(0)), bk);
  Value kc = kb.div(k0, KT), half = kb.div(kb.rem(k0, KT), bk);
  for (const WgWeightItem &w : items) {
    Value ok = kb.andi(w.t.valid, inK);
    kb.ifThen(ok, [&] {
      Value src = kb.add(w.payload, kb.add(kb.mul(kc, 4 * KT),
                                           kb.add(kb.mul(lane, KT / 8), kb.mul(half, 8))));
      nvgpu::DeviceAsyncCopyOp::create(b, loc, tokenType, ps, ValueRange{slot, w.q, kb.mul(lane, 8)},
                                       w.t.w->payload, ValueRange{src}, b.getIndexAttr(8), Value(),
                                       UnitAttr());
    });
    kb.ifThen(kb.andi(ok, kb.ult(lane, kb.idx(scalePieces))), [&] {
      Value src = kb.add(w.scales, kb.add(kb.mul(kc, 8 * scaleRow), kb.mul(lane, 16)));
      nvgpu::DeviceAsyncCopyOp::create(b, loc, tokenType, ss, ValueRange{slot, w.q, kb.mul(lane, 16)},
                                       w.t.w->scales, ValueRange{src}, b.getIndexAttr(16), Value(),
                                       b.getUnitAttr());
    });
  }
}


/// A thread's A copies of a work item: 16-byte chunk `chunk` of tile rows
/// first + step i (i < count), gathered by g.aRow (rows past the group
/// zero-filled), into chunk (chunk ^ row % 8) of the swizzled row.
struct WgACopy {
  Value row, dstCol, ok;
  SmallVector<Value> src;
};
static SmallVector<WgACopy> wgACopies(KernelBuilder &kb, const MxfpGroupedWgmma &g,
                                      const GroupItem &it, Value first, int64_t step, int64_t count,
                                      Value chunk) {
  SmallVector<WgACopy> out;
  for (int64_t i = 0; i < count; ++i) {
    Value r = kb.add(first, kb.idx(step * i)), pos = kb.add(it.m0, r);
    Value swz = arith::XOrIOp::create(kb.b, kb.loc, chunk, kb.rem(r, 8)).getResult();
    out.push_back({r, kb.mul(swz, 8), kb.ult(pos, it.end), g.aRow(kb.minu(pos, it.last))});
  }
  return out;
}
/// The copies of k step `ks` (valid: `inK`) into A ring slot `slot`.
static void wgACopyStage(KernelBuilder &kb, const MxfpGroupedWgmma &g, Value as,
                         ArrayRef<WgACopy> copies, Value ks, Value inK, Value slot, Value chunk) {
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(kb.b.getContext());
  Value k0 = kb.mul(kb.select(inK, ks, kb.idx(0)), MxfpGroupedWgmma::bk);
  for (const WgACopy &c : copies) {
    SmallVector<Value> src(c.src);
    src.push_back(kb.add(k0, kb.mul(chunk, 8)));
    nvgpu::DeviceAsyncCopyOp::create(kb.b, kb.loc, tokenType, as,
                                     ValueRange{slot, c.row, c.dstCol}, g.a, src,
                                     kb.b.getIndexAttr(8),
                                     kb.select(kb.andi(c.ok, inK), kb.idx(8), kb.idx(0)),
                                     kb.b.getUnitAttr());
  }
}

void mxfpGroupedWgmma(KernelBuilder &kb, const MxfpGroupedWgmma &g, int64_t grid) {
  checkGrouped(kb, g, grid, "");
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  MLIRContext *ctx = b.getContext();
  const int64_t bm = g.bm, bn = g.bn, bk = MxfpGroupedWgmma::bk, S = g.stages, KT = g.kTile;
  const int64_t threads = g.threads(), warps = threads / 32, kSteps = g.K / bk;
  const int64_t rowBytes = bk * 2;
  const int64_t items = bn * 4 / threads;    // (tile, lane) runs a thread copies and decodes
  const int64_t scaleRow = KT / 32;          // scale bytes of a tile row per k chunk
  const int64_t ahead = S - 2; // stages in flight ahead of the one consumed
  Type i64 = b.getI64Type(), f32 = b.getF32Type();
  const int64_t accN = bn / 2;
  auto accType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(accN, f32));

  kb.blocks({kb.idx(grid)}, threads, [&](ValueRange bid, ThreadBlock &tb) {
    WgSmem sm = wgSharedLayout(kb, g);
    Value as = sm.as, dec = sm.dec, ps = sm.ps, ss = sm.ss, aBase = sm.aBase, decBase = sm.decBase;

    Value lane = tb.lane, wg = kb.div(tb.tid, 128);
    Value total = groupItems(kb, g);
    auto toI64 = [&](Value v) { return arith::IndexCastUIOp::create(b, loc, i64, v).getResult(); };

    // A work item's copies (A: 16-byte chunk tid % 8 of rows tid / 8 +
    // threads / 8 * i; weights: wgWeightItems) and its stage issue.
    Value chunk = kb.rem(tb.tid, 8);
    kb.loopStep(bid[0], total, kb.idx(grid), [&](Value item) {
      GroupItem it = groupItemAt(kb, g, item);
      Value j = it.j, e = it.e, m0 = it.m0, end = it.end;
      SmallVector<WgACopy> aCopies =
          wgACopies(kb, g, it, kb.div(tb.tid, 8), threads / 8, bm * 8 / threads, chunk);
      SmallVector<WgWeightItem> wItems = wgWeightItems(kb, g, tb.warp, warps, items, j, e);
      auto issue = [&](Value ks, Value slot) {
        Value inK = kb.ult(ks, kb.idx(kSteps));
        wgACopyStage(kb, g, as, aCopies, ks, inK, slot, chunk);
        wgWeightCopies(kb, g, wItems, ps, ss, ks, inK, slot, lane);
        NVVM::CpAsyncCommitGroupOp::create(b, loc);
      };
      for (int64_t s = 0; s < ahead; ++s)
        issue(kb.idx(s), kb.idx(s));

      // Decode stage `slot` (k step ks) into decoded tile `dslot`.
      auto decode = [&](Value ks, Value slot, Value dslot) {
        Value half = kb.div(kb.rem(kb.mul(ks, bk), KT), bk);
        for (WgWeightItem &w : wItems)
          decodeRun(kb, ps, ss, dec, slot, dslot, w.q, lane, half, scaleRow);
      };
      Value aWg = kb.add(aBase, kb.mul(wg, 64 * rowBytes));
      Value zero = LLVM::ZeroOp::create(b, loc, accType);
      Value acc = kb.loop(kb.idx(0), kb.idx(kSteps), ValueRange{zero}, [&](Value ks, ValueRange in) {
        // Stage ks landed (this thread's copies; the barrier: everyone's);
        // every warpgroup is done with step ks - 2 (its wgmma waited to one
        // group in flight), whose ring slot is refilled and whose decoded
        // tile is overwritten next.
        NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(ahead - 1));
        kb.barrier(tb);
        Value next = kb.add(ks, ahead);
        issue(next, kb.rem(next, S));
        Value slot = kb.rem(ks, S), dslot = kb.rem(ks, 2);
        decode(ks, slot, dslot);
        // The decoded tile and the landed A rows (generic proxy) made
        // visible to wgmma's async proxy, then to every warpgroup.
        NVVM::FenceProxyOp::create(b, loc, NVVM::ProxyKind::async_shared,
                                   NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
        kb.barrier(tb);
        Value aAddr = toI64(kb.add(aWg, kb.mul(slot, bm * rowBytes)));
        Value bAddr = toI64(kb.add(decBase, kb.mul(dslot, bn * rowBytes)));
        Value d = wgmmaK64(kb, accType, in[0], aAddr, bAddr, bn);
        NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(1));
        return SmallVector<Value>{d};
      })[0];
      NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
      NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
      kb.barrier(tb); // the next item refills the ring and the decoded tiles
      Value rowBase = kb.add(kb.add(m0, kb.mul(wg, 64)),
                             kb.add(kb.mul(kb.rem(tb.warp, 4), 16), kb.div(lane, 4)));
      g.epilogue([&](int64_t i) {
        return LLVM::ExtractValueOp::create(b, loc, acc, ArrayRef<int64_t>{i}).getResult();
      }, rowBase, end, j, e, tb);
    });
  }, g.sharedBytes(), g.name);
}

} // namespace k3c::lowering
