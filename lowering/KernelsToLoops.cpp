//===- KernelsToLoops.cpp - every distinct k3.kernel to a loop function ---===//
//
// Each distinct kernel (by name) becomes `func.func @<name>` over memrefs in
// destination-passing style: the kernel's inputs (an MXFP4 input becomes its
// payload and scale bytes), then its outputs, then scratch buffers for values
// that stay inside the kernel. State results (KDA state, conv window, MLA
// cache) update their input in place and are not separate arguments. The
// calling convention is recorded in KernelInfo for the artifact manifest.
//
//===----------------------------------------------------------------------===//

#include "lowering/Families.h"
#include "lowering/Lowering.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"

#include <limits>
#include <set>

using namespace mlir;
using namespace mlir::k3;

namespace k3c::lowering {

Value tiedOperand(Value result) {
  Operation *op = result.getDefiningOp();
  if (!op)
    return nullptr;
  if (auto c = dyn_cast<ShortConvOp>(op); c && result == c.getNewConvState())
    return c.getConvState();
  if (auto d = dyn_cast<DeltaRuleOp>(op); d && result == d.getNewState())
    return d.getState();
  if (auto m = dyn_cast<MlaAttentionOp>(op); m && result == m.getNewCache())
    return m.getCache();
  return nullptr;
}

std::string dtypeName(Type t) {
  if (t.isBF16())
    return "bf16";
  if (t.isF16())
    return "f16";
  if (t.isF32())
    return "f32";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(64))
    return "i64";
  if (t.isInteger(8))
    return "i8";
  return "?";
}

namespace {

class KernelLowering {
public:
  KernelLowering(KernelOp k, ModuleOp out, Target target)
      : kernel(k), out(out), target(target) {}

  LogicalResult run(KernelInfo &info);

private:
  /// Adds a memref argument; returns its position.
  int64_t addArg(KernelArg arg, MemRefType type) {
    info->args.push_back(std::move(arg));
    types.push_back(type);
    return static_cast<int64_t>(types.size()) - 1;
  }
  /// The argument position holding `v`'s buffer (following in-place ties).
  std::optional<int64_t> argOf(Value v) {
    while (Value t = tiedOperand(v))
      v = t;
    auto it = position.find(v);
    if (it == position.end())
      return std::nullopt;
    return it->second;
  }
  /// Dynamic dim 0 of an op result follows operand 0 (last_tokens: seq_lens).
  std::pair<int64_t, int64_t> dimSource(Operation *op) {
    Value src = isa<LastTokensOp>(op) ? op->getOperand(1) : op->getOperand(0);
    if (std::optional<int64_t> a = argOf(src))
      return {*a, 0};
    // A value without a buffer (a linear whose residual add is done in its
    // store) has the rows of its own producer's operand 0.
    if (Operation *def = src.getDefiningOp())
      return dimSource(def);
    return {-1, 0};
  }
  KernelArg describe(KernelArg::Kind kind, int64_t index, ShapedType t, Operation *producer) {
    KernelArg a;
    a.kind = kind;
    a.index = index;
    a.dtype = dtypeName(t.getElementType());
    for (int64_t d : t.getShape())
      a.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (t.isDynamicDim(d))
        a.dynamicFrom.push_back(d == 0 && producer ? dimSource(producer)
                                                   : std::pair<int64_t, int64_t>{-1, d});
    return a;
  }

  KernelOp kernel;
  ModuleOp out;
  Target target;
  KernelInfo *info = nullptr;
  SmallVector<Type> types;
  llvm::DenseMap<Value, int64_t> position; // value -> arg position
  llvm::DenseMap<Value, std::pair<int64_t, int64_t>> mxfp4Args;
  llvm::DenseMap<Operation *, SmallVector<int64_t>> opScratch;
};

LogicalResult KernelLowering::run(KernelInfo &ki) {
  info = &ki;
  ki.name = kernel.getSymName().str();
  ki.family = kernel.getFamily().str();
  ki.flopsPerToken = kernel.getFlopsPerToken();
  ki.bytesPerToken = kernel.getBytesPerToken();
  ki.weightBytes = kernel.getWeightBytes();
  Block &body = kernel.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());

  // Inputs.
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    if (auto m = dyn_cast<MXFP4Type>(arg.getType())) {
      int64_t n = 1;
      for (int64_t d : m.getShape())
        n *= d;
      auto bytes = [&](int64_t count, int component) {
        KernelArg a;
        a.kind = KernelArg::Kind::Input;
        a.index = i;
        a.component = component;
        a.dtype = "i8";
        a.shape = {count};
        return addArg(a, MemRefType::get({count}, IntegerType::get(out.getContext(), 8)));
      };
      int64_t p = bytes(n / 2, 0), s = bytes(n / 32, 1);
      mxfp4Args[arg] = {p, s};
      continue;
    }
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t)
      return kernel.emitOpError() << "input #" << i << " has unsupported type " << arg.getType();
    KernelArg a = describe(KernelArg::Kind::Input, i, t, nullptr);
    for (auto &df : a.dynamicFrom)
      df.first = static_cast<int64_t>(types.size()); // a dynamic input dim is its own source
    position[arg] = addArg(a, MemRefType::get(t.getShape(), t.getElementType()));
  }
  // Outputs (results computed here), then scratch.
  ki.resultAliases.assign(yield.getNumOperands(), -1);
  llvm::DenseMap<Value, int64_t> outputIndex;
  for (auto [p, v] : llvm::enumerate(yield.getValues())) {
    Value root = v;
    while (Value t = tiedOperand(root))
      root = t;
    if (auto ba = dyn_cast<BlockArgument>(root)) {
      ki.resultAliases[p] = ba.getArgNumber();
      continue;
    }
    if (!outputIndex.count(v))
      outputIndex[v] = p;
  }
  // Residual adds done in their linear's store: the linear's own result is
  // never materialized.
  DenseMap<Operation *, Operation *> residualAdd = fuseResidualAdds(body);
  for (Operation &op : body.without_terminator()) {
    // A linear stored into its residual add's buffer has no result buffer
    // (its scratch, below, it still has).
    const bool fusedResult = residualAdd.count(&op) || kdaNormedOnLoad(&op) ||
                             kdaGatedOnLoad(&op);
    for (Value r : op.getResults()) {
      if (fusedResult)
        break;
      if (tiedOperand(r))
        continue;
      auto t = dyn_cast<RankedTensorType>(r.getType());
      if (!t)
        return op.emitOpError() << "result of unsupported type " << r.getType();
      auto it = outputIndex.find(r);
      KernelArg::Kind kind = it != outputIndex.end() ? KernelArg::Kind::Output
                                                     : KernelArg::Kind::Scratch;
      int64_t index = it != outputIndex.end() ? it->second : static_cast<int64_t>(position.size());
      position[r] = addArg(describe(kind, index, t, &op), MemRefType::get(t.getShape(),
                                                                          t.getElementType()));
    }
    for (const ScratchNeed &need : scratchNeeds(&op)) {
      auto t = RankedTensorType::get(
          SmallVector<int64_t>(llvm::map_range(need.shape, [](int64_t d) {
            return d < 0 ? ShapedType::kDynamic : d;
          })),
          need.elementType);
      KernelArg a = describe(KernelArg::Kind::Scratch, -1, t, &op);
      a.deviceOnly = need.deviceOnly;
      opScratch[&op].push_back(addArg(a, MemRefType::get(t.getShape(), t.getElementType())));
    }
  }

  // The function.
  OpBuilder b = OpBuilder::atBlockEnd(out.getBody());
  Location loc = kernel.getLoc();
  auto fn = func::FuncOp::create(b, loc, ki.name, b.getFunctionType(types, {}));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  LowerState st;
  for (auto [v, pos] : position)
    st.buffer[v] = entry->getArgument(pos);
  for (auto [v, pos] : mxfp4Args)
    st.mxfp4[v] = MXFP4Buffers{entry->getArgument(pos.first), entry->getArgument(pos.second),
                               cast<MXFP4Type>(v.getType())};
  for (auto &[op, list] : opScratch)
    for (int64_t pos : list)
      st.scratch[op].push_back(entry->getArgument(pos));
  st.residualAdd = residualAdd;
  for (auto [lin, add] : residualAdd)
    st.fusedAway.insert(add);
  st.gluPair = fuseGluPairs(body);
  for (auto &[glu, pair] : st.gluPair) {
    st.fusedAway.insert(pair.first);
    st.fusedAway.insert(pair.second);
  }
  KernelBuilder kb(b, loc, target);
  kb.function = fn;
  kb.family = ki.family;
  if (kb.gpu()) {
    st.linearGate = fuseGateLinears(body);
    for (auto [lin, gate] : st.linearGate)
      st.fusedAway.insert(gate);
    st.gemvGroup = gemvGroups(body, st);
    for (auto &[first, group] : st.gemvGroup)
      for (Operation *o : group)
        if (o != first)
          st.fusedAway.insert(o);
    st.oneTokenChain = oneTokenChains(body);
    for (auto &[x, chain] : st.oneTokenChain)
      st.oneTokenOps.insert(chain.begin(), chain.end());
  }
  for (Operation &op : body.without_terminator()) {
    for (Value r : op.getResults())
      if (Value t = tiedOperand(r))
        st.buffer[r] = st.buffer.lookup(t);
    kb.loc = op.getLoc();
    std::optional<LogicalResult> done;
    for (auto lower : {lowerDenseFamily, lowerKdaFamily, lowerMlaFamily, lowerMoeFamily}) {
      done = lower(&op, kb, st);
      if (done)
        break;
    }
    if (!done)
      return op.emitOpError() << "has no lowering to loops (kernel " << ki.name << ")";
    if (failed(*done))
      return failure();
  }
  func::ReturnOp::create(b, loc);
  return success();
}

} // namespace

/// 16-byte loads a thread issues before comparing (GPU).
static constexpr int64_t kArgmaxUnroll = 4;

/// k3_argmax_f32_<V>: ids[n] (i32) = argmax of logits[n, :V] (f32) as
/// std::max_element chooses: a block a row; each thread scans its columns
/// keeping (value, column) and takes a column when its value is greater, or
/// equal with a lower column (NaN compares neither way: never taken); warps,
/// then the block's warps (shared memory) combine the same way; a NaN in
/// column 0 gives 0 (std::max_element never leaves column 0 then), as does a
/// row with no other value. The choice does not depend on the order the
/// columns are visited in, so on the GPU each thread issues kArgmaxUnroll
/// 16-byte loads (4 columns each) before it compares any: a row of 163840
/// logits is 655 KB read by one block, which one 4-byte load in flight a
/// thread left at ~250 us (a launch alone at 128 rows on an H100, session
/// 41); the columns past the last whole round of loads are read one at a
/// time.
static KernelInfo buildArgmaxKernel(ModuleOp out, Location loc, Target target, int64_t V) {
  KernelInfo info;
  info.name = "k3_argmax_f32_" + std::to_string(V);
  info.family = "argmax";
  KernelArg logits, ids;
  logits.kind = KernelArg::Kind::Input;
  logits.index = 0;
  logits.dtype = "f32";
  logits.shape = {-1, V};
  logits.dynamicFrom = {{0, 0}};
  ids.kind = KernelArg::Kind::Output;
  ids.index = 0;
  ids.dtype = "i32";
  ids.shape = {-1};
  ids.dynamicFrom = {{0, 0}};
  info.args = {logits, ids};
  info.resultAliases = {-1};
  info.bytesPerToken = V * 4 + 4;
  OpBuilder b = OpBuilder::atBlockEnd(out.getBody());
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  auto fn = func::FuncOp::create(
      b, loc, info.name,
      b.getFunctionType({MemRefType::get({ShapedType::kDynamic, V}, f32),
                         MemRefType::get({ShapedType::kDynamic}, i32)},
                        {}));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  KernelBuilder kb(b, loc, target);
  kb.function = fn;
  Value x = entry->getArgument(0), y = entry->getArgument(1);
  // 1024 threads for an LM head's vocabulary (a full round of vector loads
  // covers 16384 columns), 256 for small ones.
  const int64_t threads = V >= 16 * 1024 ? 1024 : 256;
  kb.blocks({kb.dim(x, 0)}, threads, [&](ValueRange bid, ThreadBlock &tb) {
    Value row = bid[0];
    // (value, column) pairs; the column as i32 (shuffles move 32 bits).
    auto better = [&](Value v, Value c, Value bv, Value bc) {
      Value greater = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, bv, v);
      Value tie = kb.andi(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, v, bv),
                          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, c, bc));
      return arith::OrIOp::create(b, loc, greater, tie).getResult();
    };
    auto merge = [&](Value &bv, Value &bc, Value v, Value c) {
      Value take = better(v, c, bv, bc);
      bv = arith::SelectOp::create(b, loc, take, v, bv);
      bc = arith::SelectOp::create(b, loc, take, c, bc);
    };
    Value none = arith::ConstantIntOp::create(b, loc, i32, V);
    Value ninf = kb.f32(-std::numeric_limits<double>::infinity());
    auto column = [&](Value i) { return arith::IndexCastOp::create(b, loc, i32, i).getResult(); };
    // Whole rounds of threads x width x kUnroll columns by vector loads (GPU,
    // rows of a multiple of 4 floats), then the rest a column at a time.
    const int64_t width = tb.launch ? kb.vecWidth(x, V) : 1;
    const int64_t round = tb.threads * width * kArgmaxUnroll;
    const int64_t vecEnd = width > 1 ? V / round * round : 0;
    SmallVector<Value> st{ninf, none};
    if (vecEnd > 0)
      st = kb.loopStep(
          kb.mul(tb.tid, kb.idx(width)), kb.idx(vecEnd), kb.idx(round), st,
          [&](Value i, ValueRange in) {
            SmallVector<SmallVector<Value>> vals;
            for (int64_t u = 0; u < kArgmaxUnroll; ++u)
              vals.push_back(kb.loadVec(x, {row, kb.add(i, kb.idx(u * tb.threads * width))}, width));
            Value bv = in[0], bc = in[1];
            for (int64_t u = 0; u < kArgmaxUnroll; ++u)
              for (int64_t e = 0; e < width; ++e)
                merge(bv, bc, vals[u][e], column(kb.add(i, kb.idx(u * tb.threads * width + e))));
            return SmallVector<Value>{bv, bc};
          });
    st = kb.loopStep(
        kb.add(kb.idx(vecEnd), tb.tid), kb.idx(V), kb.idx(tb.threads), st,
        [&](Value i, ValueRange in) {
          Value bv = in[0], bc = in[1];
          merge(bv, bc, kb.loadF32(x, {row, i}), column(i));
          return SmallVector<Value>{bv, bc};
        });
    Value bv = st[0], bc = st[1];
    if (tb.launch) {
      for (int64_t off = 16; off >= 1; off /= 2) {
        Value ov = kb.shuffle(bv, kb.idx(off), gpu::ShuffleMode::XOR);
        Value oc = kb.shuffle(bc, kb.idx(off), gpu::ShuffleMode::XOR);
        merge(bv, bc, ov, oc);
      }
      Value vs = kb.shared(tb, {tb.warps}, f32), cs = kb.shared(tb, {tb.warps}, i32);
      kb.ifThen(kb.ieq(tb.lane, kb.idx(0)), [&] {
        kb.store(bv, vs, {tb.warp});
        kb.store(bc, cs, {tb.warp});
      });
      kb.barrier(tb);
      bv = kb.load(vs, {kb.idx(0)});
      bc = kb.load(cs, {kb.idx(0)});
      for (int64_t w = 1; w < tb.warps; ++w)
        merge(bv, bc, kb.load(vs, {kb.idx(w)}), kb.load(cs, {kb.idx(w)}));
    }
    kb.ifThen(kb.ieq(tb.tid, kb.idx(0)), [&] {
      Value first = kb.loadF32(x, {row, kb.idx(0)});
      Value nan0 = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, first, first);
      Value noneFound = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, bc, none);
      Value zero = arith::ConstantIntOp::create(b, loc, i32, 0);
      Value id = arith::SelectOp::create(
          b, loc, arith::OrIOp::create(b, loc, nan0, noneFound).getResult(), zero, bc);
      kb.store(id, y, {row});
    });
  }, 0, "argmax");
  func::ReturnOp::create(b, loc);
  return info;
}

FailureOr<OwningOpRef<ModuleOp>> lowerKernelsToLoops(ModuleOp fused,
                                                      std::vector<KernelInfo> &kernels,
                                                      Target target) {
  MLIRContext *ctx = fused.getContext();
  ctx->loadDialect<func::FuncDialect, scf::SCFDialect, memref::MemRefDialect,
                   arith::ArithDialect, math::MathDialect, gpu::GPUDialect,
                   vector::VectorDialect, nvgpu::NVGPUDialect, NVVM::NVVMDialect>();
  OwningOpRef<ModuleOp> out = ModuleOp::create(fused.getLoc());
  std::set<std::string> seen;
  bool ok = true;
  fused.walk([&](KernelOp k) {
    if (!ok || !seen.insert(k.getSymName().str()).second)
      return;
    KernelInfo info;
    if (failed(KernelLowering(k, *out, target).run(info))) {
      ok = false;
      return;
    }
    kernels.push_back(std::move(info));
  });
  if (!ok)
    return failure();
  // Expert parallelism moves rows of the routed experts' latents and outputs
  // between ranks: one row-gather kernel per (dtype, width) of those tensors,
  // dst[i, :] = src[rows[i], :] (the runtime composes permutes, unpermutes
  // and slot extraction from it; docs/runtime.md).
  std::set<std::pair<std::string, int64_t>> rowKinds;
  fused.walk([&](ExpertMlpOp x) {
    auto in = cast<RankedTensorType>(x.getInput().getType());
    auto res = cast<RankedTensorType>(x.getResult().getType());
    rowKinds.insert({dtypeName(in.getElementType()), in.getDimSize(1)});
    rowKinds.insert({dtypeName(res.getElementType()), res.getDimSize(2)});
  });
  for (auto [dt, width] : rowKinds) {
    Type elt = dt == "bf16" ? Type(BFloat16Type::get(ctx))
               : dt == "f16" ? Type(Float16Type::get(ctx))
                             : Type(Float32Type::get(ctx));
    KernelInfo info;
    info.name = "k3_ep_rows_" + dt + "_" + std::to_string(width);
    info.family = "ep_rows";
    KernelArg src, rows, dst;
    src.kind = rows.kind = KernelArg::Kind::Input;
    src.index = 0;
    rows.index = 1;
    src.dtype = dst.dtype = dt;
    rows.dtype = "i32";
    src.shape = dst.shape = {-1, width};
    rows.shape = {-1};
    src.dynamicFrom = {{0, 0}};
    rows.dynamicFrom = {{1, 0}};
    dst.kind = KernelArg::Kind::Output;
    dst.index = 0;
    dst.dynamicFrom = {{1, 0}};
    info.args = {src, rows, dst};
    info.resultAliases = {-1}; // one result, its own output argument
    info.bytesPerToken = 2 * width * (elt.getIntOrFloatBitWidth() / 8);
    OpBuilder b = OpBuilder::atBlockEnd(out->getBody());
    Location loc = fused.getLoc();
    auto rowsT = MemRefType::get({ShapedType::kDynamic, width}, elt);
    auto fn = func::FuncOp::create(
        b, loc, info.name,
        b.getFunctionType({rowsT, MemRefType::get({ShapedType::kDynamic}, b.getI32Type()), rowsT},
                          {}));
    fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    KernelBuilder kb(b, loc, target);
    Value srcM = entry->getArgument(0), rowsM = entry->getArgument(1), dstM = entry->getArgument(2);
    kb.parallel({kb.dim(dstM, 0), kb.idx(width)}, [&](ValueRange iv) {
      Value r = kb.toIndex(kb.load(rowsM, {iv[0]}));
      kb.store(kb.load(srcM, {r, iv[1]}), dstM, iv);
    });
    func::ReturnOp::create(b, loc);
    kernels.push_back(std::move(info));
  }
  // Greedy sampling where the logits are: for the fp32 logits of the
  // lm_head kernels, ids[n] = the index std::max_element picks in row n
  // (the first maximum; NaNs never win, except one in column 0, which
  // std::max_element keeps), so the runtime copies N ids back instead of
  // N x vocab floats (docs/runtime.md).
  std::set<int64_t> vocabs;
  fused.walk([&](KernelOp k) {
    if (k.getFamily() != "lm_head" || k.getNumResults() != 1)
      return;
    auto t = dyn_cast<RankedTensorType>(k.getResult(0).getType());
    if (t && t.getRank() == 2 && t.getElementType().isF32() && !t.isDynamicDim(1))
      vocabs.insert(t.getDimSize(1));
  });
  for (int64_t V : vocabs)
    kernels.push_back(buildArgmaxKernel(*out, fused.getLoc(), target, V));
  return out;
}

} // namespace k3c::lowering
