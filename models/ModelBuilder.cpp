//===- ModelBuilder.cpp - model config -> k3 IR ---------------------------===//

#include "models/ModelBuilder.h"
#include "models/Weights.h"
#include "support/Common.h"

#include "dialects/K3/IR/K3Ops.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include <map>

using namespace mlir;

namespace k3c {

// The dialect's ops live in mlir::k3; this library's code in ::k3.
using namespace mlir::k3;

void loadBuilderDialects(MLIRContext &ctx) {
  ctx.loadDialect<mlir::k3::K3Dialect, func::FuncDialect, arith::ArithDialect>();
}

namespace {

class Builder {
public:
  Builder(MLIRContext &ctx, const ModelConfig &c, const BuildOptions &o)
      : ctx(ctx), c(c), opts(o), b(&ctx) {
    bf16 = b.getBF16Type();
    f32 = b.getF32Type();
    act = o.f32Activations ? f32 : bf16;
    kdaState = o.bf16KdaState ? bf16 : f32;
    i32 = b.getI32Type();
  }

  OwningOpRef<ModuleOp> build() {
    Location loc = FileLineColLoc::get(&ctx, c.source, 0, 0);
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    module->getOperation()->setAttr("k3.model_type", b.getStringAttr(c.modelType));
    module->getOperation()->setAttr("k3.num_layers", b.getI64IntegerAttr(c.numLayers));
    b.setInsertionPointToEnd(module->getBody());
    buildEntry("prefill", loc);
    buildEntry("decode", loc);
    return module;
  }

private:
  static constexpr int64_t kDyn = ShapedType::kDynamic;

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type elt) {
    return RankedTensorType::get(shape, elt);
  }
  IntegerAttr i64(int64_t v) { return b.getI64IntegerAttr(v); }
  FloatAttr f64(double v) { return b.getF64FloatAttr(v); }
  Location nameLoc(const std::string &name, Location base) {
    return NameLoc::get(b.getStringAttr(name), base);
  }

  /// Declares the function arguments: inputs, states, then every weight.
  void declareArgs() {
    argTypes.clear();
    argAttrs.clear();
    auto arg = [&](Type t, StringRef key, const std::string &name) {
      argTypes.push_back(t);
      argAttrs.push_back(b.getDictionaryAttr({b.getNamedAttr(key, b.getStringAttr(name))}));
      return argTypes.size() - 1;
    };
    idsArg = arg(tensor({kDyn}, i32), "k3.input", "token_ids");
    lensArg = arg(tensor({kDyn}, i32), "k3.input", "seq_lens");
    cacheLensArg = arg(tensor({kDyn}, i32), "k3.input", "cache_lens");
    const bool paged = opts.mlaPage > 0 && c.count(AttnKind::MLA) > 0;
    blockTableArg = -1;
    if (paged)
      blockTableArg = static_cast<int64_t>(arg(
          tensor({kDyn, (opts.maxContext + opts.mlaPage - 1) / opts.mlaPage}, i32), "k3.input",
          "block_table"));
    stateArgs.clear();
    for (int64_t li = 0; li < c.numLayers; ++li) {
      std::string p = "layers." + std::to_string(li) + ".";
      if (c.attn[li] == AttnKind::KDA) {
        stateArgs.push_back(arg(tensor({kDyn, c.kdaHeads, c.kdaHeadDim, c.kdaHeadDim}, kdaState),
                                "k3.state", p + "kda_state"));
        stateArgs.push_back(arg(tensor({kDyn, c.convKernel - 1, 3 * c.kdaProjDim()}, act),
                                "k3.state", p + "conv_state"));
      } else {
        int64_t cap = paged ? opts.mlaPage : opts.maxContext > 0 ? opts.maxContext : kDyn;
        stateArgs.push_back(
            arg(tensor({kDyn, cap, c.mlaCacheDim()}, act), "k3.state", p + "mla_cache"));
      }
    }
    weightArg.clear();
    for (const WeightSpec &s : expectedWeights(c)) {
      if (s.kind == WeightKind::MXFP4Scale)
        continue;
      std::string name = s.name;
      Type t;
      size_t ex = name.find(".experts.");
      if (ex != std::string::npos) {
        // One stacked argument per (layer, w1|w2|w3): skip all but expert 0.
        size_t dot = name.find('.', ex + 9);
        if (name.compare(ex + 9, dot - ex - 9, "0") != 0)
          continue;
        std::string which = name.substr(dot + 1, 2);
        name = name.substr(0, ex) + ".experts." + which;
        int64_t rows = s.shapes.front()[0];
        int64_t cols = s.kind == WeightKind::MXFP4Packed ? s.shapes.front()[1] * 2
                                                         : s.shapes.front()[1];
        if (s.kind == WeightKind::MXFP4Packed)
          t = MXFP4Type::get(&ctx, {c.numExperts, rows, cols});
        else
          t = tensor({c.numExperts, rows, cols}, bf16);
      } else {
        t = tensor(s.shapes.front(), s.storeType == DType::F32 ? (Type)f32 : (Type)bf16);
      }
      weightArg[name] = arg(t, "k3.weight", name);
    }
  }

  Value W(const std::string &name) {
    auto it = weightArg.find(name);
    if (it == weightArg.end())
      return nullptr;
    return entry->getArgument(it->second);
  }
  Value LW(int64_t li, const std::string &rest) { return W(layerName(li, rest)); }

  void buildEntry(StringRef name, Location loc) {
    declareArgs();
    SmallVector<Type> results = {tensor({kDyn, c.vocabSize}, f32)};
    for (size_t a : stateArgs)
      results.push_back(argTypes[a]);
    auto fnType = b.getFunctionType(argTypes, results);
    auto fn = func::FuncOp::create(b, loc, name, fnType);
    fn.setAllArgAttrs(argAttrs);
    fn->setAttr("k3.entry", b.getStringAttr(name));
    entry = fn.addEntryBlock();
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(entry);
    emitBody(loc);
  }

  Value attnRes(ArrayRef<Value> blocks, Value prefix, Value norm, Value proj, Location loc) {
    SmallVector<Value> sources(blocks.begin(), blocks.end());
    sources.push_back(prefix);
    return AttnResOp::create(b, loc, prefix.getType(), sources, norm, proj, f64(c.rmsNormEps));
  }

  Value rmsnorm(Value x, Value w, double eps, Location loc) {
    return RMSNormOp::create(b, loc, x.getType(), x, w, f64(eps));
  }

  FloatAttr optF64(bool present, double v) { return present ? f64(v) : FloatAttr(); }

  void emitBody(Location loc) {
    Value ids = entry->getArgument(idsArg), lens = entry->getArgument(lensArg),
          cacheLens = entry->getArgument(cacheLensArg);
    auto actT = tensor({kDyn, c.hiddenSize}, act);
    Value h = EmbeddingOp::create(b, nameLoc("embed", loc), actT, ids,
                                  W("model.embed_tokens.weight"));
    SmallVector<Value> newStates;
    size_t stateIdx = 0;
    SmallVector<Value> blocks;
    Value prefix = h;
    bool attnRes_ = c.hasAttnRes();
    ActivationAttr actAttr = ActivationAttr::get(
        &ctx, c.act == Act::SiTU ? Activation::situ : Activation::swiglu);
    bool situ = c.act == Act::SiTU;
    for (int64_t li = 0; li < c.numLayers; ++li) {
      std::string lp = "layers." + std::to_string(li) + ".";
      Value x;
      if (attnRes_) {
        x = blocks.empty() ? prefix
                           : attnRes(blocks, prefix, LW(li, "self_attention_res_norm.weight"),
                                     LW(li, "self_attention_res_proj.weight"),
                                     nameLoc(lp + "self_attention_res", loc));
        if (li % c.attnResBlockSize == 0) {
          blocks.push_back(prefix);
          prefix = nullptr;
        }
      } else {
        x = h;
      }
      Value xn = rmsnorm(x, LW(li, "input_layernorm.weight"), c.rmsNormEps,
                         nameLoc(lp + "input_layernorm", loc));
      Value a;
      if (c.attn[li] == AttnKind::KDA) {
        Value st = entry->getArgument(stateArgs[stateIdx]);
        Value conv = entry->getArgument(stateArgs[stateIdx + 1]);
        stateIdx += 2;
        auto L = [&](const char *r) { return LW(li, std::string("self_attn.") + r); };
        auto op = KdaOp::create(
            b, nameLoc(lp + "self_attn", loc), actT, st.getType(), conv.getType(), xn, lens, st,
            conv, L("q_proj.weight"), L("k_proj.weight"), L("v_proj.weight"),
            L("q_conv1d.weight"), L("k_conv1d.weight"), L("v_conv1d.weight"),
            L("f_a_proj.weight"), L("f_b_proj.weight"), L("dt_bias"), L("A_log"),
            L("b_proj.weight"), L("o_norm.weight"), L("o_proj.weight"), L("g_proj.weight"),
            L("g_a_proj.weight"), L("g_b_proj.weight"), i64(c.kdaHeads), i64(c.kdaHeadDim),
            GateFormAttr::get(&ctx, c.gateLowerBound ? GateForm::bounded_sigmoid
                                                     : GateForm::softplus),
            optF64(c.gateLowerBound.has_value(), c.gateLowerBound.value_or(0)),
            f64(c.rmsNormEps));
        a = op.getResult();
        newStates.push_back(op.getNewState());
        newStates.push_back(op.getNewConvState());
      } else {
        Value cache = entry->getArgument(stateArgs[stateIdx++]);
        auto L = [&](const char *r) { return LW(li, std::string("self_attn.") + r); };
        auto op = GatedMlaOp::create(
            b, nameLoc(lp + "self_attn", loc), actT, cache.getType(), xn, lens, cache, cacheLens,
            blockTableArg >= 0 ? entry->getArgument(blockTableArg) : Value(),
            L("q_a_proj.weight"), L("q_a_layernorm.weight"), L("q_b_proj.weight"),
            L("q_proj.weight"), L("kv_a_proj_with_mqa.weight"), L("kv_a_layernorm.weight"),
            L("kv_b_proj.weight"), L("g_proj.weight"), L("o_proj.weight"), i64(c.mlaHeads),
            i64(c.qkNopeHeadDim), i64(c.qkRopeHeadDim), i64(c.vHeadDim), i64(c.kvLoraRank),
            f64(1.0 / std::sqrt(static_cast<double>(c.qkHeadDim()))), f64(c.mlaNormEps));
        a = op.getResult();
        newStates.push_back(op.getNewCache());
      }
      Value y;
      if (attnRes_) {
        prefix = prefix ? arith::AddFOp::create(b, nameLoc(lp + "attn_accumulate", loc), prefix, a)
                        : a;
        y = attnRes(blocks, prefix, LW(li, "mlp_res_norm.weight"), LW(li, "mlp_res_proj.weight"),
                    nameLoc(lp + "mlp_res", loc));
      } else {
        h = arith::AddFOp::create(b, nameLoc(lp + "attn_residual", loc), h, a);
        y = h;
      }
      Value yn = rmsnorm(y, LW(li, "post_attention_layernorm.weight"), c.rmsNormEps,
                         nameLoc(lp + "post_attention_layernorm", loc));
      Value m;
      if (c.ffn[li] == FfnKind::Dense) {
        m = MlpOp::create(b, nameLoc(lp + "mlp", loc), actT, yn, LW(li, "mlp.gate_proj.weight"),
                          LW(li, "mlp.up_proj.weight"), LW(li, "mlp.down_proj.weight"), actAttr,
                          optF64(situ, c.situBeta), optF64(situ, c.situLinearBeta));
      } else {
        auto L = [&](const char *r) { return LW(li, std::string("block_sparse_moe.") + r); };
        m = LatentMoeOp::create(
            b, nameLoc(lp + "block_sparse_moe", loc), actT, yn, L("gate.weight"),
            L("gate.e_score_correction_bias"), L("routed_expert_down_proj.weight"),
            L("routed_expert_norm.weight"), L("routed_expert_up_proj.weight"), L("experts.w1"),
            L("experts.w3"), L("experts.w2"), L("shared_experts.gate_proj.weight"),
            L("shared_experts.up_proj.weight"), L("shared_experts.down_proj.weight"),
            i64(c.topK),
            RouterScoreAttr::get(&ctx, c.routerScore == "sigmoid" ? RouterScore::sigmoid
                                                                  : RouterScore::softmax),
            b.getBoolAttr(c.renormalize), f64(c.routedScalingFactor), actAttr,
            optF64(situ, c.situBeta), optF64(situ, c.situLinearBeta), f64(c.rmsNormEps));
      }
      if (attnRes_)
        prefix = arith::AddFOp::create(b, nameLoc(lp + "ffn_accumulate", loc), prefix, m);
      else
        h = arith::AddFOp::create(b, nameLoc(lp + "ffn_residual", loc), h, m);
    }
    Value out = attnRes_ ? attnRes(blocks, prefix, W("model.output_attn_res_norm.weight"),
                                   W("model.output_attn_res_proj.weight"),
                                   nameLoc("output_attn_res", loc))
                         : h;
    Value last = LastTokensOp::create(b, nameLoc("last_tokens", loc), actT, out, lens);
    Value fn = rmsnorm(last, W("model.norm.weight"), c.rmsNormEps, nameLoc("norm", loc));
    Value logits = LmHeadOp::create(b, nameLoc("lm_head", loc), tensor({kDyn, c.vocabSize}, f32),
                                    fn, W("lm_head.weight"));
    SmallVector<Value> rets = {logits};
    rets.append(newStates.begin(), newStates.end());
    func::ReturnOp::create(b, loc, rets);
  }

  MLIRContext &ctx;
  const ModelConfig &c;
  BuildOptions opts;
  OpBuilder b;
  Type bf16, f32, i32, act, kdaState;
  Block *entry = nullptr;
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  size_t idsArg = 0, lensArg = 0, cacheLensArg = 0;
  int64_t blockTableArg = -1; ///< the paged MLA cache's block table, or -1
  SmallVector<size_t> stateArgs;
  std::map<std::string, size_t> weightArg;
};

} // namespace

OwningOpRef<ModuleOp> buildModel(MLIRContext &ctx, const ModelConfig &config,
                                 const BuildOptions &options) {
  loadBuilderDialects(ctx);
  if (options.mlaPage < 0 || (options.mlaPage > 0 && options.maxContext <= 0))
    throw Error("a paged MLA cache needs a page size >= 1 and a static max context (got page " +
                std::to_string(options.mlaPage) + ", context " +
                std::to_string(options.maxContext) + ")");
  OwningOpRef<ModuleOp> module = Builder(ctx, config, options).build();
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace k3c
