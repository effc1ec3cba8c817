//===- Kda.cpp - KDA: short conv, gate, L2 norm, delta rule, gated norm ---===//
//
// Kernel contracts: docs/kernels.md. Sequences of a varlen batch are laid out
// one after another (seq_lens); state tensors are updated in place.
//
//===----------------------------------------------------------------------===//

#include "lowering/Families.h"

using namespace mlir;
using namespace mlir::k3;

namespace k3c::lowering {

/// Sum of squares of x[row, base .. base + d) over a warp's lanes.
static Value headSumSq(KernelBuilder &kb, ThreadBlock &tb, Value x, Value row, Value base,
                       int64_t d) {
  auto elem = [&](Value i) { return SmallVector<Value>{kb.loadF32(x, {row, kb.add(base, i)})}; };
  return kb.warpDot(tb, d, 1, elem, elem);
}

/// The chunked delta rule (spec §4.4), C = the tiling pass's chunk size (its
/// 16-token tile when the chunk's buffers exceed shared memory): a
/// block per (sequence, head) walks the sequence's chunks. Per chunk:
///  A. threads over key channels c: the in-chunk cumulative gate G, then
///     Kd = k e^G, Qd = q e^G, Kr = k e^(G_last - G) and e^G_last into shared
///     memory; beta = sigmoid(logits);
///  B. threads over (i, j) pairs: L = beta_i (k_i . k_j e^(G_i - G_j)) (j < i)
///     and M = q_i . k_j e^(G_i - G_j) (j <= i), the exponent taken per pair
///     on the pairwise path and as Kd_i . (k_j e^-G_j) on the factorized path;
///  C. a warp per value row j of the state S[j, :] (lanes over c, coalesced):
///     W = beta (v - Kd S[j]), U = (I + L)^-1 W by forward substitution
///     (every lane holds U[:, j]), o = Qd S[j] + M U,
///     S[j] <- e^G_last * S[j] + Kr^T U, in place.
/// Returns false (nothing emitted) when the op has no chunk size or the
/// chunk buffers do not fit the shared-memory budget.
static bool lowerChunkedDeltaRule(DeltaRuleOp rule, KernelBuilder &kb, LowerState &st) {
  if (!rule.getChunkSize())
    return false;
  int64_t C = *rule.getChunkSize(), H = rule.getNumHeads(), dk = rule.getKeyDim(),
          dv = rule.getValueDim();
  bool pairwise = rule.getPath() && *rule.getPath() == ChunkPath::pairwise;
  auto smemBytes = [&](int64_t c) { return 4 * (4 * c * dk + c * dv + 2 * c * c + c + dk); };
  // A chunk whose buffers exceed the budget runs as chunks of the pass's
  // 16-token tile: the chunk form is exact for any chunk length, and a
  // smaller one only keeps the gate products smaller.
  if (smemBytes(C) > kSharedBudget && rule.getTile())
    C = *rule.getTile();
  if (smemBytes(C) > kSharedBudget)
    return false;
  Value q = st.get(rule.getQ()), k = st.get(rule.getK()), v = st.get(rule.getV()),
        g = st.get(rule.getG()), beta = st.get(rule.getBeta()), S = st.get(rule.getState()),
        lens = st.get(rule.getSeqLens()), o = st.get(rule.getResult());
  Type f32 = kb.b.getF32Type();
  kb.blocks({kb.dim(lens, 0), kb.idx(H)}, kKdaThreads, [&](ValueRange bid, ThreadBlock &tb) {
    Value n = bid[0], h = bid[1];
    Value G = kb.shared(tb, {C, dk}, f32), Kd = kb.shared(tb, {C, dk}, f32),
          Qd = kb.shared(tb, {C, dk}, f32), Kr = kb.shared(tb, {C, dk}, f32),
          U = kb.shared(tb, {C, dv}, f32), L = kb.shared(tb, {C, C}, f32),
          M = kb.shared(tb, {C, C}, f32), B = kb.shared(tb, {C}, f32),
          Gl = kb.shared(tb, {dk}, f32);
    Value start = kb.seqOffset(lens, n), len = kb.seqLen(lens, n);
    Value kbase = kb.mul(h, dk), vbase = kb.mul(h, dv);
    kb.loopStep(kb.idx(0), len, kb.idx(C), [&](Value t0) {
      Value nc = kb.minu(kb.idx(C), kb.sub(len, t0));
      Value row0 = kb.add(start, t0);
      auto rowOf = [&](Value r) { return kb.add(row0, r); };
      // A. Cumulative gate and the decayed q/k.
      kb.strided(tb, kb.idx(0), kb.idx(dk), [&](Value c) {
        Value col = kb.add(kbase, c);
        Value last = kb.loop(kb.idx(0), nc, ValueRange{kb.f32(0.0)}, [&](Value r, ValueRange a) {
          Value acc = kb.fadd(a[0], kb.loadF32(g, {rowOf(r), col}));
          kb.store(acc, G, {r, c});
          return SmallVector<Value>{acc};
        })[0];
        kb.store(kb.exp(last), Gl, {c});
        kb.loop(kb.idx(0), nc, [&](Value r) {
          Value gr = kb.load(G, {r, c}), e = kb.exp(gr);
          Value kv = kb.loadF32(k, {rowOf(r), col});
          kb.store(kb.fmul(kv, e), Kd, {r, c});
          kb.store(kb.fmul(kb.loadF32(q, {rowOf(r), col}), e), Qd, {r, c});
          kb.store(kb.fmul(kv, kb.exp(kb.fsub(last, gr))), Kr, {r, c});
        });
      });
      kb.strided(tb, kb.idx(0), nc, [&](Value r) {
        kb.store(kb.sigmoid(kb.loadF32(beta, {rowOf(r), h})), B, {r});
      });
      kb.barrier(tb);
      // B. L and M over (i, j) pairs of the chunk.
      kb.strided(tb, kb.idx(0), kb.idx(C * C), [&](Value p) {
        Value i = kb.div(p, C), j = kb.rem(p, C);
        kb.ifThen(kb.andi(kb.ult(i, nc), kb.ule(j, i)), [&] {
          auto pair = kb.loop(kb.idx(0), kb.idx(dk), ValueRange{kb.f32(0.0), kb.f32(0.0)},
                              [&](Value c, ValueRange a) {
                                Value col = kb.add(kbase, c);
                                Value kj = kb.loadF32(k, {rowOf(j), col});
                                Value gj = kb.load(G, {j, c});
                                Value ki, qi;
                                if (pairwise) {
                                  Value d = kb.exp(kb.fsub(kb.load(G, {i, c}), gj));
                                  ki = kb.fmul(kb.loadF32(k, {rowOf(i), col}), d);
                                  qi = kb.fmul(kb.loadF32(q, {rowOf(i), col}), d);
                                } else {
                                  kj = kb.fmul(kj, kb.exp(kb.fneg(gj)));
                                  ki = kb.load(Kd, {i, c});
                                  qi = kb.load(Qd, {i, c});
                                }
                                return SmallVector<Value>{kb.fadd(a[0], kb.fmul(ki, kj)),
                                                          kb.fadd(a[1], kb.fmul(qi, kj))};
                              });
          kb.store(kb.select(kb.ult(j, i), kb.fmul(kb.load(B, {i}), pair[0]), kb.f32(0.0)), L,
                   {i, j});
          kb.store(pair[1], M, {i, j});
        });
      });
      kb.barrier(tb);
      // C. A warp per value row j of the state.
      kb.loopStep(tb.warp, kb.idx(dv), kb.idx(tb.warps), [&](Value j) {
        // A[r, :] . S[j, :] over the warp's lanes.
        auto laneDot = [&](Value A, Value r) {
          return kb.warpDot(
              tb, dk, 1, [&](Value c) { return SmallVector<Value>{kb.load(A, {r, c})}; },
              [&](Value c) { return SmallVector<Value>{kb.load(S, {n, h, j, c})}; });
        };
        Value vcol = kb.add(vbase, j);
        // W and the forward substitution; every lane writes (and later reads
        // only) its own identical copy of U[:, j].
        kb.loop(kb.idx(0), nc, [&](Value r) {
          Value w = kb.fmul(kb.load(B, {r}),
                            kb.fsub(kb.loadF32(v, {rowOf(r), vcol}), laneDot(Kd, r)));
          Value u = kb.loop(kb.idx(0), r, ValueRange{w}, [&](Value s2, ValueRange a) {
            return SmallVector<Value>{
                kb.fsub(a[0], kb.fmul(kb.load(L, {r, s2}), kb.load(U, {s2, j})))};
          })[0];
          kb.store(u, U, {r, j});
        });
        kb.loop(kb.idx(0), nc, [&](Value r) {
          Value acc = kb.loop(kb.idx(0), kb.add(r, 1), ValueRange{laneDot(Qd, r)},
                              [&](Value s2, ValueRange a) {
                                return SmallVector<Value>{kb.fadd(
                                    a[0], kb.fmul(kb.load(M, {r, s2}), kb.load(U, {s2, j})))};
                              })[0];
          kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] { kb.storeF32(acc, o, {rowOf(r), vcol}); });
        });
        kb.loopStep(tb.lane, kb.idx(dk), kb.idx(tb.lanes), [&](Value c) {
          Value acc = kb.fmul(kb.load(Gl, {c}), kb.load(S, {n, h, j, c}));
          acc = kb.loop(kb.idx(0), nc, ValueRange{acc}, [&](Value r, ValueRange a) {
            return SmallVector<Value>{
                kb.fadd(a[0], kb.fmul(kb.load(Kr, {r, c}), kb.load(U, {r, j})))};
          })[0];
          kb.storeF32(acc, S, {n, h, j, c});
        });
      });
      kb.barrier(tb); // the next chunk overwrites the shared buffers
    });
  });
  return true;
}

std::optional<LogicalResult> lowerKdaFamily(Operation *op, KernelBuilder &kb, LowerState &st) {
  if (auto conv = dyn_cast<ShortConvOp>(op)) {
    // One iteration per (sequence, channel): the causal window over the
    // sequence's tokens (the state supplies the W-1 inputs before it), then
    // the new window. Reads of the old window precede the writes that
    // replace it, so the state is updated in place.
    Value x = st.get(conv.getInput()), w = st.get(conv.getWeight()),
          state = st.get(conv.getConvState()), lens = st.get(conv.getSeqLens()),
          y = st.get(conv.getResult());
    int64_t W = cast<MemRefType>(w.getType()).getDimSize(2);
    Value off = kb.idx(conv.getStateOffset()), Wm1 = kb.idx(W - 1);
    kb.parallel({kb.dim(lens, 0), kb.dim(x, 1)}, [&](ValueRange iv) {
      Value n = iv[0], c = iv[1], sc = kb.add(off, c);
      Value start = kb.seqOffset(lens, n), len = kb.seqLen(lens, n);
      kb.loop(kb.idx(0), len, [&](Value t) {
        Value u = kb.f32(0.0);
        for (int64_t j = 0; j < W; ++j) {
          // Position t - (W-1) + j, shifted by W-1 to stay non-negative:
          // ps < W-1 reads window row ps, else input row start + ps - (W-1).
          Value ps = kb.add(t, kb.idx(j));
          Value inSeq = kb.ult(ps, Wm1);
          Value in = kb.ifElse(
              inSeq, [&] { return kb.loadF32(state, {n, ps, sc}); },
              [&] { return kb.loadF32(x, {kb.add(start, kb.sub(ps, Wm1)), c}); });
          u = kb.fadd(u, kb.fmul(kb.loadF32(w, {c, kb.idx(0), kb.idx(j)}), in));
        }
        kb.storeF32(kb.silu(u), y, {kb.add(start, t), c});
      });
      // New window row r = input at position len - (W-1) + r, i.e. combined
      // index len + r of [old window ++ inputs]. Ascending r reads rows
      // len + r >= r + 1 before they are overwritten.
      kb.loop(kb.idx(0), Wm1, [&](Value r) {
        Value ci = kb.add(len, r);
        Value fromOld = kb.ult(ci, Wm1);
        Value v = kb.ifElse(
            fromOld, [&] { return kb.loadF32(state, {n, ci, sc}); },
            [&] { return kb.loadF32(x, {kb.add(start, kb.sub(ci, Wm1)), c}); });
        kb.storeF32(v, state, {n, r, sc});
      });
    });
    return success();
  }
  if (auto gate = dyn_cast<KdaGateOp>(op)) {
    Value z = st.get(gate.getLogits()), alog = st.get(gate.getALog()),
          dt = st.get(gate.getDtBias()), y = st.get(gate.getResult());
    int64_t width = cast<MemRefType>(z.getType()).getDimSize(1);
    int64_t d = width / gate.getNumHeads();
    bool bounded = gate.getGateForm() == GateForm::bounded_sigmoid;
    kb.parallel({kb.dim(z, 0), kb.idx(width)}, [&](ValueRange iv) {
      Value h = kb.div(iv[1], d);
      Value a = kb.exp(kb.loadF32(alog, {h}));
      Value zz = kb.fadd(kb.loadF32(z, iv), kb.loadF32(dt, {iv[1]}));
      Value g = bounded ? kb.fmul(kb.f32(gate.getLowerBound()->convertToDouble()),
                                  kb.sigmoid(kb.fmul(a, zz)))
                        : kb.fneg(kb.fmul(a, kb.softplus(zz)));
      kb.storeF32(g, y, iv);
    });
    return success();
  }
  if (auto l2 = dyn_cast<L2NormOp>(op)) {
    Value x = st.get(l2.getInput()), y = st.get(l2.getResult());
    int64_t d = l2.getHeadDim();
    int64_t width = cast<MemRefType>(x.getType()).getDimSize(1);
    Value eps = kb.f32(l2.getEps().convertToDouble()),
          scale = kb.f32(l2.getScale().convertToDouble());
    // A warp per (token, head): lanes reduce the head's squares.
    kb.blocks({kb.dim(x, 0), kb.idx(width / d)}, 32, [&](ValueRange bid, ThreadBlock &tb) {
      Value row = bid[0], base = kb.mul(bid[1], d);
      Value inv = kb.rsqrt(kb.fadd(headSumSq(kb, tb, x, row, base, d), eps));
      kb.loopStep(tb.lane, kb.idx(d), kb.idx(tb.lanes), [&](Value i) {
        Value col = kb.add(base, i);
        kb.storeF32(kb.fmul(kb.fmul(kb.loadF32(x, {row, col}), inv), scale), y, {row, col});
      });
    });
    return success();
  }
  if (auto rule = dyn_cast<DeltaRuleOp>(op)) {
    if (lowerChunkedDeltaRule(rule, kb, st))
      return success();
    // Token-by-token fallback (no chunk size, or chunk buffers over the
    // shared-memory budget). Row j of the [d_v, d_k] state of (sequence n,
    // head h) evolves on its own:
    //   S[j,:] <- S[j,:] * exp(g_t);  u = beta_t (v_t[j] - S[j,:] . k_t)
    //   S[j,:] <- S[j,:] + u k_t;     o_t[j] = S[j,:] . q_t
    // so every (n, h, j) is one parallel iteration looping over the tokens.
    Value q = st.get(rule.getQ()), k = st.get(rule.getK()), v = st.get(rule.getV()),
          g = st.get(rule.getG()), beta = st.get(rule.getBeta()), S = st.get(rule.getState()),
          lens = st.get(rule.getSeqLens()), o = st.get(rule.getResult());
    int64_t H = rule.getNumHeads(), dk = rule.getKeyDim(), dv = rule.getValueDim();
    Value DK = kb.idx(dk);
    kb.parallel({kb.dim(lens, 0), kb.idx(H), kb.idx(dv)}, [&](ValueRange iv) {
      Value n = iv[0], h = iv[1], j = iv[2];
      Value start = kb.seqOffset(lens, n), len = kb.seqLen(lens, n);
      Value kbase = kb.mul(h, dk), vcol = kb.add(kb.mul(h, dv), j);
      kb.loop(kb.idx(0), len, [&](Value t) {
        Value row = kb.add(start, t);
        // Decay, then the prediction S[j,:] . k.
        kb.loop(kb.idx(0), DK, [&](Value i) {
          Value a = kb.exp(kb.loadF32(g, {row, kb.add(kbase, i)}));
          kb.storeF32(kb.fmul(kb.loadF32(S, {n, h, j, i}), a), S, {n, h, j, i});
        });
        Value pred = kb.sum(kb.idx(0), DK, [&](Value i) {
          return kb.fmul(kb.loadF32(S, {n, h, j, i}), kb.loadF32(k, {row, kb.add(kbase, i)}));
        });
        Value b = kb.sigmoid(kb.loadF32(beta, {row, h}));
        Value u = kb.fmul(b, kb.fsub(kb.loadF32(v, {row, vcol}), pred));
        kb.loop(kb.idx(0), DK, [&](Value i) {
          Value s = kb.fadd(kb.loadF32(S, {n, h, j, i}),
                            kb.fmul(kb.loadF32(k, {row, kb.add(kbase, i)}), u));
          kb.storeF32(s, S, {n, h, j, i});
        });
        Value out = kb.sum(kb.idx(0), DK, [&](Value i) {
          return kb.fmul(kb.loadF32(S, {n, h, j, i}), kb.loadF32(q, {row, kb.add(kbase, i)}));
        });
        kb.storeF32(out, o, {row, vcol});
      });
    });
    return success();
  }
  if (auto norm = dyn_cast<GatedRMSNormOp>(op)) {
    Value x = st.get(norm.getInput()), gate = st.get(norm.getGate()),
          w = st.get(norm.getWeight()), y = st.get(norm.getResult());
    int64_t d = cast<MemRefType>(w.getType()).getDimSize(0);
    int64_t width = cast<MemRefType>(x.getType()).getDimSize(1);
    Value eps = kb.f32(norm.getEps().convertToDouble());
    kb.blocks({kb.dim(x, 0), kb.idx(width / d)}, 32, [&](ValueRange bid, ThreadBlock &tb) {
      Value row = bid[0], base = kb.mul(bid[1], d);
      Value ss = headSumSq(kb, tb, x, row, base, d);
      Value inv = kb.rsqrt(kb.fadd(kb.fdiv(ss, kb.f32(static_cast<double>(d))), eps));
      kb.loopStep(tb.lane, kb.idx(d), kb.idx(tb.lanes), [&](Value i) {
        Value col = kb.add(base, i);
        Value val = kb.fmul(kb.fmul(kb.loadF32(x, {row, col}), inv), kb.loadF32(w, {i}));
        kb.storeF32(kb.fmul(val, kb.sigmoid(kb.loadF32(gate, {row, col}))), y, {row, col});
      });
    });
    return success();
  }
  return std::nullopt;
}

} // namespace k3c::lowering
