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
    kb.parallel({kb.dim(x, 0), kb.idx(width)}, [&](ValueRange iv) {
      Value base = kb.mul(kb.div(iv[1], d), d);
      Value ss = kb.sum(kb.idx(0), kb.idx(d), [&](Value i) {
        Value v = kb.loadF32(x, {iv[0], kb.add(base, i)});
        return kb.fmul(v, v);
      });
      Value inv = kb.rsqrt(kb.fadd(ss, eps));
      kb.storeF32(kb.fmul(kb.fmul(kb.loadF32(x, iv), inv), scale), y, iv);
    });
    return success();
  }
  if (auto rule = dyn_cast<DeltaRuleOp>(op)) {
    // Row j of the [d_v, d_k] state of (sequence n, head h) evolves on its own:
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
    kb.parallel({kb.dim(x, 0), kb.idx(width)}, [&](ValueRange iv) {
      Value base = kb.mul(kb.div(iv[1], d), d);
      Value ss = kb.sum(kb.idx(0), kb.idx(d), [&](Value i) {
        Value v = kb.loadF32(x, {iv[0], kb.add(base, i)});
        return kb.fmul(v, v);
      });
      Value inv = kb.rsqrt(kb.fadd(kb.fdiv(ss, kb.f32(static_cast<double>(d))), eps));
      Value val = kb.fmul(kb.fmul(kb.loadF32(x, iv), inv), kb.loadF32(w, {kb.rem(iv[1], d)}));
      kb.storeF32(kb.fmul(val, kb.sigmoid(kb.loadF32(gate, iv))), y, iv);
    });
    return success();
  }
  return std::nullopt;
}

} // namespace k3c::lowering
