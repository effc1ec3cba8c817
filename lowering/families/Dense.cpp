//===- Dense.cpp - linear, norms, activations, AttnRes, gathers -----------===//
//
// Kernel contracts: docs/kernels.md. The linear layer is a tiled block
// program (lowerLinear); row reductions (RMSNorm, AttnRes) run one block per
// row with block-wide reductions; elementwise ops are one parallel
// iteration per element. Reductions accumulate in fp32; results round once
// to their storage type (the reference's rounding points, spec §4.1).
//
//===----------------------------------------------------------------------===//

#include "lowering/Families.h"

using namespace mlir;
using namespace mlir::k3;

namespace k3c::lowering {

Value rowInvRms(KernelBuilder &kb, ThreadBlock &tb, Value x, Value row, int64_t d, Value eps,
                Value red) {
  Value part = kb.loopStep(tb.tid, kb.idx(d), kb.idx(tb.threads), ValueRange{kb.f32(0.0)},
                           [&](Value i, ValueRange a) {
                             Value v = kb.loadF32(x, {row, i});
                             return SmallVector<Value>{kb.fadd(a[0], kb.fmul(v, v))};
                           })[0];
  Value ss = kb.blockSum(tb, part, red);
  return kb.rsqrt(kb.fadd(kb.fdiv(ss, kb.f32(static_cast<double>(d))), eps));
}

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
      // Bytes 4·blk .. 4·blk+3 of the run: steps s = 2·blk, 2·blk+1, each a
      // byte for columns 2c, 2c+1 and one for 2c+8, 2c+9.
      for (int64_t q = 4 * blk; q < 4 * blk + 4; ++q) {
        int64_t s = q / 2, half = q % 2;
        Value col = kb.add(kb.add(kLocal, 16 * s + 8 * half), kb.mul(c, 2));
        SmallVector<SmallVector<Value>> xv;
        for (int64_t tt = 0; tt < tokTile; ++tt)
          xv.push_back(kb.loadVec(xs, {kb.idx(tt), col}, 2));
        for (int64_t r = 0; r < nRows; ++r) {
          Value word = words[r][q / 4];
          int64_t shift = 8 * (q % 4);
          Value lo = arith::ShRUIOp::create(b, loc, word, kb.i32Const(shift));
          Value hi = arith::ShRUIOp::create(b, loc, word, kb.i32Const(shift + 4));
          Value wlo = kb.fmul(kb.e2m1ToF32(lo), scale[r]);
          Value whi = kb.fmul(kb.e2m1ToF32(hi), scale[r]);
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
  // A one-token tile shares its launch with the kTokTile one: a smaller chunk
  // keeps their shared memory together under the static limit.
  int64_t budget = tokTile == 1 ? kChunkBytesOneToken : kChunkBytes;
  int64_t kc = std::min<int64_t>(K, budget / (tokTile * aBytes));
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

/// y[T, O] = x[T, K] W[O, K]^T, tiled: a block computes kTokTile tokens x
/// (kRowsPerWarp * warps) output rows through gemmTile: the block stages its
/// tokens' x in shared memory, kChunkBytes at a time (16-byte loads); each
/// warp owns kRowsPerWarp rows of W and its lanes split K, reading W 16 bytes
/// at a time (each row streamed once per token tile), then reduce by
/// shuffles. On the GPU a single-token step (decode at batch 1) branches,
/// uniformly for the whole launch, to a one-token tile (no arithmetic on
/// empty rows); one launch, one module. On the host: one thread per block,
/// the same loop nest.
void lowerLinear(KernelBuilder &kb, Value x, Value w, Value y) {
  auto xt = cast<MemRefType>(x.getType());
  int64_t K = xt.getDimSize(1), O = cast<MemRefType>(w.getType()).getDimSize(0);
  int64_t vw = std::min(kb.vecWidth(x, K), kb.vecWidth(w, K));
  Value T = kb.dim(x, 0);
  int64_t warps = kb.gpu() ? kLinearThreads / 32 : 1, rowsPerBlock = kRowsPerWarp * warps;
  kb.blocks({kb.ceilDiv(T, kTokTile), kb.idx((O + rowsPerBlock - 1) / rowsPerBlock)},
            kLinearThreads, [&](ValueRange bid, ThreadBlock &tb) {
    Value r0 = kb.add(kb.mul(bid[1], rowsPerBlock), kb.mul(tb.warp, kRowsPerWarp));
    // Rows past O read row O-1 and are not stored.
    SmallVector<Value> rows;
    for (int64_t r = 0; r < kRowsPerWarp; ++r)
      rows.push_back(kb.minu(kb.add(r0, r), kb.idx(O - 1)));
    auto tile = [&](int64_t tokTile) {
      Value t0 = kb.mul(bid[0], kTokTile);
      SmallVector<Value> acc = gemmTile(
          kb, tb, x, K, vw, kRowsPerWarp,
          [&](Value tt) {
            Value t = kb.add(t0, tt);
            return ActRow{kb.ult(t, T), {t}};
          },
          [&](int64_t r, Value k, int64_t width) { return kb.loadVec(w, {rows[r], k}, width); },
          tokTile);
      for (int64_t r = 0; r < kRowsPerWarp; ++r)
        for (int64_t tt = 0; tt < tokTile; ++tt) {
          Value v = kb.warpSum(tb, acc[r * tokTile + tt]);
          Value t = kb.add(t0, kb.idx(tt)), o = kb.add(r0, kb.idx(r));
          Value ok = kb.andi(kb.andi(kb.ieq(tb.lane, kb.idx(0)), kb.ult(t, T)),
                             kb.ult(o, kb.idx(O)));
          kb.ifThen(ok, [&] { kb.storeF32(v, y, {t, o}); });
        }
    };
    if (!kb.gpu()) {
      tile(kTokTile);
      return;
    }
    kb.ifThenElse(
        kb.ieq(T, kb.idx(1)), [&] { tile(1); }, [&] { tile(kTokTile); });
  });
}

std::optional<LogicalResult> lowerDenseFamily(Operation *op, KernelBuilder &kb, LowerState &st) {
  if (auto lin = dyn_cast<LinearOp>(op)) {
    lowerLinear(kb, st.get(lin.getInput()), st.get(lin.getWeight()), st.get(lin.getResult()));
    return success();
  }
  if (auto norm = dyn_cast<RMSNormOp>(op)) {
    // KimiRMSNorm: x * rsqrt(mean x^2 + eps), rounded to x's type, times w.
    // One block per row: block-wide sum of squares, then the row strided.
    Value x = st.get(norm.getInput()), w = st.get(norm.getWeight()), y = st.get(norm.getResult());
    Type xt = cast<MemRefType>(x.getType()).getElementType();
    int64_t d = cast<MemRefType>(x.getType()).getDimSize(1);
    Value eps = kb.f32(norm.getEps().convertToDouble());
    kb.blocks({kb.dim(x, 0)}, kRowThreads, [&](ValueRange bid, ThreadBlock &tb) {
      Value row = bid[0];
      Value red = kb.shared(tb, {tb.warps}, kb.b.getF32Type());
      Value inv = rowInvRms(kb, tb, x, row, d, eps, red);
      kb.strided(tb, kb.idx(0), kb.idx(d), [&](Value i) {
        Value xn = kb.round(kb.fmul(kb.loadF32(x, {row, i}), inv), xt);
        kb.storeF32(kb.fmul(xn, kb.loadF32(w, {i})), y, {row, i});
      });
    });
    return success();
  }
  if (auto glu = dyn_cast<GluOp>(op)) {
    Value a = st.get(glu.getGate()), b = st.get(glu.getUp()), y = st.get(glu.getResult());
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      Value v = kb.glu(glu.getActivation(), glu.getSituBeta(), glu.getSituLinearBeta(),
                           kb.loadF32(a, iv), kb.loadF32(b, iv));
      kb.storeF32(v, y, iv);
    });
    return success();
  }
  if (auto addf = dyn_cast<arith::AddFOp>(op)) {
    Value a = st.get(addf.getLhs()), b = st.get(addf.getRhs()), y = st.get(addf.getResult());
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      kb.storeF32(kb.fadd(kb.loadF32(a, iv), kb.loadF32(b, iv)), y, iv);
    });
    return success();
  }
  if (auto emb = dyn_cast<EmbeddingOp>(op)) {
    // The runtime checks ids against the vocabulary before launching.
    Value ids = st.get(emb.getIds()), table = st.get(emb.getTable()), y = st.get(emb.getResult());
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      Value row = kb.toIndex(kb.load(ids, {iv[0]}));
      kb.storeF32(kb.loadF32(table, {row, iv[1]}), y, iv);
    });
    return success();
  }
  if (auto last = dyn_cast<LastTokensOp>(op)) {
    Value x = st.get(last.getInput()), lens = st.get(last.getSeqLens()),
          y = st.get(last.getResult());
    kb.parallel({kb.dim(y, 0), kb.dim(y, 1)}, [&](ValueRange iv) {
      Value row = kb.sub(kb.add(kb.seqOffset(lens, iv[0]), kb.seqLen(lens, iv[0])), kb.idx(1));
      kb.store(kb.load(x, {row, iv[1]}), y, iv);
    });
    return success();
  }
  if (auto mix = dyn_cast<AttnResOp>(op)) {
    // Spec §4.6: scores of the RMS-normalized sources against w_norm * w_proj,
    // softmax over sources in fp32, mix of the raw sources. One block per
    // row: two block-wide reductions per source, then the mix strided.
    SmallVector<Value> src;
    for (Value v : mix.getSources())
      src.push_back(st.get(v));
    Value wn = st.get(mix.getNormWeight()), wp = st.get(mix.getProjWeight()),
          y = st.get(mix.getResult());
    int64_t d = cast<MemRefType>(y.getType()).getDimSize(1);
    Value D = kb.idx(d), eps = kb.f32(mix.getEps().convertToDouble());
    kb.blocks({kb.dim(y, 0)}, kRowThreads, [&](ValueRange bid, ThreadBlock &tb) {
      Value row = bid[0];
      Value red = kb.shared(tb, {tb.warps}, kb.b.getF32Type());
      SmallVector<Value> scores;
      for (Value s : src) {
        Value inv = rowInvRms(kb, tb, s, row, d, eps, red);
        Value part = kb.loopStep(tb.tid, D, kb.idx(tb.threads), ValueRange{kb.f32(0.0)},
                                 [&](Value i, ValueRange a) {
                                   Value q = kb.fmul(kb.loadF32(wn, {i}),
                                                     kb.loadF32(wp, {kb.idx(0), i}));
                                   Value v = kb.fmul(kb.loadF32(s, {row, i}), q);
                                   return SmallVector<Value>{kb.fadd(a[0], v)};
                                 })[0];
        scores.push_back(kb.fmul(kb.blockSum(tb, part, red), inv));
      }
      Value mx = kb.f32(-INFINITY);
      for (Value s : scores)
        mx = kb.fmax(mx, s);
      Value z = kb.f32(0.0);
      SmallVector<Value> e;
      for (Value s : scores) {
        e.push_back(kb.exp(kb.fsub(s, mx)));
        z = kb.fadd(z, e.back());
      }
      kb.strided(tb, kb.idx(0), D, [&](Value i) {
        Value acc = kb.f32(0.0);
        for (auto [w, s] : llvm::zip(e, src))
          acc = kb.fadd(acc, kb.fmul(kb.fdiv(w, z), kb.loadF32(s, {row, i})));
        kb.storeF32(acc, y, {row, i});
      });
    });
    return success();
  }
  return std::nullopt;
}

} // namespace k3c::lowering
