//===- KernelBuilder.cpp - the tile-level layer kernels are written in ----===//

#include "lowering/KernelBuilder.h"
#include "models/MXFP4Layout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace k3c::lowering {

Value KernelBuilder::glu(k3::Activation act, std::optional<APFloat> beta,
                         std::optional<APFloat> linearBeta, Value a, Value b) {
  if (act == k3::Activation::swiglu)
    return fmul(silu(a), b);
  Value b1 = f32(beta->convertToDouble()), b2 = f32(linearBeta->convertToDouble());
  Value g = fmul(fmul(b1, tanh(fdiv(a, b1))), sigmoid(a));
  return fmul(g, fmul(b2, tanh(fdiv(b, b2))));
}

Value KernelBuilder::toF32(Value v) {
  Type t = v.getType();
  if (t.isF32())
    return v;
  if (auto ft = dyn_cast<FloatType>(t)) {
    if (ft.getWidth() < 32)
      return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
    return arith::TruncFOp::create(b, loc, b.getF32Type(), v);
  }
  return arith::SIToFPOp::create(b, loc, b.getF32Type(), v);
}

Value KernelBuilder::fromF32(Value v, Type storage) {
  if (storage.isF32())
    return v;
  if (auto ft = dyn_cast<FloatType>(storage)) {
    if (ft.getWidth() < 32) // round to nearest even, like the reference
      return arith::TruncFOp::create(b, loc, storage, v);
    return arith::ExtFOp::create(b, loc, storage, v);
  }
  return arith::FPToSIOp::create(b, loc, storage, v);
}

void KernelBuilder::storeF32(Value v, Value memref, ValueRange indices) {
  Type elt = cast<MemRefType>(memref.getType()).getElementType();
  store(fromF32(v, elt), memref, indices);
}

void KernelBuilder::parallel(ValueRange ubs, const std::function<void(ValueRange)> &body) {
  SmallVector<Value> lbs(ubs.size(), idx(0)), steps(ubs.size(), idx(1));
  scf::ParallelOp::create(b, loc, lbs, ubs, steps,
                          [&](OpBuilder &nb, Location, ValueRange ivs) {
                            OpBuilder::InsertionGuard g(b);
                            b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
                            body(ivs);
                          });
}

void KernelBuilder::loopStep(Value lb, Value ub, Value step,
                             const std::function<void(Value)> &body) {
  scf::ForOp::create(b, loc, lb, ub, step, ValueRange{},
                     [&](OpBuilder &nb, Location, Value iv, ValueRange) {
                       {
                         OpBuilder::InsertionGuard g(b);
                         b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
                         body(iv);
                       }
                       scf::YieldOp::create(nb, loc);
                     });
}

SmallVector<Value>
KernelBuilder::loopStep(Value lb, Value ub, Value step, ValueRange inits,
                        const std::function<SmallVector<Value>(Value, ValueRange)> &body) {
  auto op = scf::ForOp::create(b, loc, lb, ub, step, inits,
                               [&](OpBuilder &nb, Location, Value iv, ValueRange args) {
                                 SmallVector<Value> next;
                                 {
                                   OpBuilder::InsertionGuard g(b);
                                   b.setInsertionPoint(nb.getInsertionBlock(),
                                                       nb.getInsertionPoint());
                                   next = body(iv, args);
                                 }
                                 scf::YieldOp::create(nb, loc, next);
                               });
  return SmallVector<Value>(op.getResults());
}

void KernelBuilder::blocks(ValueRange grid, int64_t threads,
                           const std::function<void(ValueRange, ThreadBlock &)> &body,
                           int64_t dynamicSharedBytes, StringRef name, int64_t cluster) {
  if (!gpu()) {
    // The host runs blocks one after another: one stack buffer at the kernel
    // function's entry serves every block.
    Operation *fn = function;
    if (!fn) {
      fn = b.getInsertionBlock()->getParentOp();
      if (!isa<func::FuncOp>(fn))
        fn = fn->getParentOfType<func::FuncOp>();
    }
    Block *entry = &cast<func::FuncOp>(fn).getBody().front();
    parallel(grid, [&](ValueRange bid) {
      ThreadBlock tb;
      tb.hostEntry = entry;
      tb.tid = tb.warp = tb.lane = idx(0);
      body(bid, tb);
    });
    return;
  }
  assert(threads % 32 == 0 && "GPU blocks are whole warps");
  Value total = grid[0];
  for (Value g : grid.drop_front())
    total = mul(total, g);
  ifThen(ult(idx(0), total), [&] {
    Value one = idx(1);
    Value dyn = dynamicSharedBytes ? i32Const(dynamicSharedBytes) : Value();
    FlatSymbolRefAttr fnName;
    if (!name.empty()) {
      func::FuncOp fn = function;
      if (!fn)
        fn = b.getInsertionBlock()->getParentOp()->getParentOfType<func::FuncOp>();
      if (!fn)
        fn = dyn_cast<func::FuncOp>(b.getInsertionBlock()->getParentOp());
      fnName = FlatSymbolRefAttr::get(b.getContext(), (fn.getSymName() + "_" + name).str());
    }
    Value cx = cluster > 1 ? idx(cluster) : Value(), cyz = cluster > 1 ? one : Value();
    auto launch = gpu::LaunchOp::create(b, loc, total, one, one, idx(threads), one, one, dyn,
                                        nullptr, {}, {}, {}, cx, cyz, cyz, fnName, fnName);
    if (cluster > 1 &&
        launch.getBody().getNumArguments() == gpu::LaunchOp::kNumConfigRegionAttributes)
      // (MLIR 22's builder makes the 12 block / thread arguments only; a
      // clustered launch also has the cluster ids and sizes after them)
      for (unsigned i = 0; i < 6; ++i)
        launch.getBody().insertArgument(gpu::LaunchOp::kNumConfigRegionAttributes + i,
                                        b.getIndexType(), loc);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    Value flat = launch.getBlockIds().x;
    SmallVector<Value> bid(grid.size());
    for (int64_t i = static_cast<int64_t>(grid.size()) - 1; i >= 0; --i) {
      bid[i] = i ? rem(flat, grid[i]) : flat;
      if (i)
        flat = div(flat, grid[i]);
    }
    ThreadBlock tb;
    tb.tid = launch.getThreadIds().x;
    tb.warp = div(tb.tid, 32);
    tb.lane = rem(tb.tid, 32);
    tb.threads = threads;
    tb.warps = threads / 32;
    tb.lanes = 32;
    tb.launch = launch;
    body(bid, tb);
    gpu::TerminatorOp::create(b, loc);
  });
}

Value KernelBuilder::dynamicShared(ThreadBlock &tb, int64_t byteOffset, ArrayRef<int64_t> shape,
                                  Type elementType) {
  assert(tb.launch && "dynamic shared memory exists on the GPU only");
  if (!tb.launch.getWorkgroupAttributions().empty())
    llvm::report_fatal_error("k3c: a kernel with workgroup buffers (KernelBuilder::shared) takes "
                             "no dynamic shared memory: the two overlap in the PTX",
                             /*gen_crash_diag=*/false);
  auto space = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  auto raw = gpu::DynamicSharedMemoryOp::create(
      b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface{},
                              space));
  return memref::ViewOp::create(
      b, loc, MemRefType::get(shape, elementType, MemRefLayoutAttrInterface{}, space), raw,
      idx(byteOffset), ValueRange{});
}

Value KernelBuilder::shared(ThreadBlock &tb, ArrayRef<int64_t> shape, Type elementType) {
  if (tb.launch) {
    // The dynamic allocation is a one-byte symbol in the PTX that the
    // kernel addresses past its end, over any other workgroup buffer: a
    // kernel with dynamic shared memory takes every buffer from it.
    if (tb.launch.getDynamicSharedMemorySize())
      llvm::report_fatal_error("k3c: a kernel with dynamic shared memory takes its workgroup "
                               "buffers from it (KernelBuilder::dynamicShared), not from "
                               "KernelBuilder::shared: the two overlap in the PTX",
                               /*gen_crash_diag=*/false);
    auto space = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
    auto t = MemRefType::get(shape, elementType, MemRefLayoutAttrInterface{}, space);
    return tb.launch.addWorkgroupAttribution(t, loc);
  }
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(tb.hostEntry);
  return memref::AllocaOp::create(b, loc, MemRefType::get(shape, elementType));
}

void KernelBuilder::barrier(ThreadBlock &tb) {
  if (tb.launch)
    gpu::BarrierOp::create(b, loc);
}

Value KernelBuilder::warpSum(ThreadBlock &tb, Value v) {
  if (!tb.launch)
    return v;
  Type i32 = b.getI32Type();
  Value width = arith::ConstantIntOp::create(b, loc, i32, 32);
  for (int64_t off = 16; off >= 1; off /= 2) {
    Value o = arith::ConstantIntOp::create(b, loc, i32, off);
    v = fadd(v, gpu::ShuffleOp::create(b, loc, v, o, width, gpu::ShuffleMode::XOR)
                    .getShuffleResult());
  }
  return v;
}

Value KernelBuilder::shuffle(Value v, Value lane, gpu::ShuffleMode mode) {
  Value l = b.createOrFold<arith::IndexCastOp>(loc, b.getI32Type(), lane);
  return gpu::ShuffleOp::create(b, loc, v, l, i32Const(32), mode).getShuffleResult();
}

Value KernelBuilder::warpMax(ThreadBlock &tb, Value v) {
  if (!tb.launch)
    return v;
  for (int64_t off = 16; off >= 1; off /= 2)
    v = fmax(v, shuffle(v, idx(off), gpu::ShuffleMode::XOR));
  return v;
}

/// One shuffle of an index value (as i32) from the lane `lane` names.
static Value shuffleIndex(KernelBuilder &kb, Value v, Value lane, gpu::ShuffleMode mode) {
  OpBuilder &b = kb.b;
  Type i32 = b.getI32Type();
  Value x = arith::IndexCastOp::create(b, kb.loc, i32, v);
  Value width = arith::ConstantIntOp::create(b, kb.loc, i32, 32);
  Value l = arith::IndexCastOp::create(b, kb.loc, i32, lane);
  Value r = gpu::ShuffleOp::create(b, kb.loc, x, l, width, mode).getShuffleResult();
  return arith::IndexCastOp::create(b, kb.loc, b.getIndexType(), r);
}

Value KernelBuilder::warpSumIndex(ThreadBlock &tb, Value v) {
  if (!tb.launch)
    return v;
  for (int64_t off = 16; off >= 1; off /= 2)
    v = add(v, shuffleIndex(*this, v, idx(off), gpu::ShuffleMode::XOR));
  return v;
}

Value KernelBuilder::warpPrefixIndex(ThreadBlock &tb, Value v) {
  if (!tb.launch)
    return v;
  for (int64_t off = 1; off < 32; off *= 2) {
    Value up = shuffleIndex(*this, v, idx(off), gpu::ShuffleMode::UP);
    v = select(ult(tb.lane, idx(off)), v, add(v, up));
  }
  return v;
}

Value KernelBuilder::warpBroadcastIndex(ThreadBlock &tb, Value v, Value src) {
  if (!tb.launch)
    return v;
  return shuffleIndex(*this, v, src, gpu::ShuffleMode::IDX);
}

Value KernelBuilder::blockSum(ThreadBlock &tb, Value v, Value red) {
  return blockSums(tb, {v}, red)[0];
}

SmallVector<Value> KernelBuilder::blockSums(ThreadBlock &tb, ArrayRef<Value> vs, Value red) {
  SmallVector<Value> sums;
  for (Value v : vs)
    sums.push_back(warpSum(tb, v));
  if (tb.warps == 1)
    return sums;
  const int64_t n = static_cast<int64_t>(vs.size());
  ifThen(ieq(tb.lane, idx(0)), [&] {
    for (int64_t i = 0; i < n; ++i)
      store(sums[i], red, {add(mul(tb.warp, n), idx(i))});
  });
  barrier(tb);
  SmallVector<Value> totals;
  for (int64_t i = 0; i < n; ++i) {
    Value total = f32(0.0);
    for (int64_t w = 0; w < tb.warps; ++w)
      total = fadd(total, load(red, {idx(w * n + i)}));
    totals.push_back(total);
  }
  barrier(tb); // `red` may be reused right after
  return totals;
}

Value KernelBuilder::byteAddress(Value m, ValueRange indices) {
  auto t = cast<MemRefType>(m.getType());
  int64_t eltBytes = t.getElementTypeBitWidth() / 8;
  // Linear element offset (row-major) plus the descriptor's offset.
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, m);
  Value off = meta.getOffset();
  for (auto [i, v] : llvm::enumerate(indices))
    off = add(off, mul(v, meta.getStrides()[i]));
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, m);
  return add(base, mul(off, idx(eltBytes)));
}

Value KernelBuilder::pointerAt(Value addr, unsigned space) {
  Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), addr);
  return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), space), i64);
}

void KernelBuilder::gridWait(ThreadBlock &tb) {
  if (!tb.launch || !info().gridDependencyControl())
    return;
  tb.launch->setAttr(kOwnWaitAttr, b.getUnitAttr());
  NVVM::GriddepcontrolOp::create(b, loc, NVVM::GridDepActionKind::wait);
}

void KernelBuilder::earlyDependents(ThreadBlock &tb) {
  if (tb.launch && info().gridDependencyControl())
    tb.launch->setAttr(kEarlyDependentsAttr, b.getUnitAttr());
}

void KernelBuilder::launchDependentsIf(ThreadBlock &tb, Value cond) {
  if (!tb.launch || !info().gridDependencyControl())
    return;
  ifThen(cond, [&] {
    NVVM::GriddepcontrolOp::create(b, loc, NVVM::GridDepActionKind::launch_dependents);
  });
}

void KernelBuilder::prefetchL2(Value m, ValueRange indices, int64_t bytes) {
  Value ptr = pointerAt(byteAddress(m, indices), 1);
  Value size = arith::ConstantIntOp::create(b, loc, b.getI32Type(), bytes);
  NVVM::CpAsyncBulkPrefetchOp::create(b, loc, ptr, size, /*l2CacheHint=*/Value());
}

Value KernelBuilder::warpDot(ThreadBlock &tb, int64_t len, int64_t width,
                             const std::function<SmallVector<Value>(Value)> &a,
                             const std::function<SmallVector<Value>(Value)> &b) {
  Value part = loopStep(mul(tb.lane, width), idx(len), idx(tb.lanes * width),
                        ValueRange{f32(0.0)}, [&](Value k, ValueRange acc) {
                          SmallVector<Value> av = a(k), bv = b(k);
                          Value x = acc[0];
                          for (int64_t j = 0; j < width; ++j)
                            x = fadd(x, fmul(av[j], bv[j]));
                          return SmallVector<Value>{x};
                        })[0];
  return warpSum(tb, part);
}

int64_t KernelBuilder::vecWidth(Value memref, int64_t rowLength) {
  if (!gpu())
    return 1;
  Type elt = cast<MemRefType>(memref.getType()).getElementType();
  int64_t bytes = std::max<int64_t>(1, elt.getIntOrFloatBitWidth() / 8);
  for (int64_t w = 16 / bytes; w > 1; w /= 2)
    if (rowLength % w == 0)
      return w;
  return 1;
}

SmallVector<Value> KernelBuilder::loadVec(Value memref, ValueRange indices, int64_t width) {
  SmallVector<Value> out;
  if (width == 1 || !gpu()) {
    SmallVector<Value> at(indices);
    for (int64_t j = 0; j < width; ++j) {
      at.back() = j ? add(indices.back(), j) : indices.back();
      out.push_back(loadF32(memref, at));
    }
    return out;
  }
  Type elt = cast<MemRefType>(memref.getType()).getElementType();
  int64_t bytes = elt.getIntOrFloatBitWidth() / 8;
  auto vt = VectorType::get({width}, elt);
  return unpackVec(vector::LoadOp::create(b, loc, vt, memref, indices, /*nontemporal=*/false,
                                         llvm::MaybeAlign(std::min<int64_t>(16, width * bytes))));
}

Value KernelBuilder::loadVecPinnedRaw(Value memref, ValueRange indices, int64_t width) {
  Type elt = cast<MemRefType>(memref.getType()).getElementType();
  auto vt = VectorType::get({width}, elt);
  if (!gpu()) {
    SmallVector<Value> at(indices), els;
    for (int64_t j = 0; j < width; ++j) {
      at.back() = j ? add(indices.back(), j) : indices.back();
      els.push_back(load(memref, at));
    }
    return vector::FromElementsOp::create(b, loc, vt, els);
  }
  int64_t bytes = elt.getIntOrFloatBitWidth() / 8;
  return LLVM::LoadOp::create(b, loc, vt, pointerAt(byteAddress(memref, indices), 1),
                              static_cast<unsigned>(std::min<int64_t>(16, width * bytes)),
                              /*isVolatile=*/true);
}

SmallVector<Value> KernelBuilder::unpackVec(Value v) {
  SmallVector<Value> out;
  int64_t width = cast<VectorType>(v.getType()).getNumElements();
  for (int64_t j = 0; j < width; ++j)
    out.push_back(toF32(vector::ExtractOp::create(b, loc, v, ArrayRef<int64_t>{j})));
  return out;
}

void KernelBuilder::copyVec(Value src, ValueRange srcIdx, Value dst, ValueRange dstIdx,
                            int64_t width) {
  if (width == 1 || !gpu()) {
    SmallVector<Value> s(srcIdx), d(dstIdx);
    for (int64_t j = 0; j < width; ++j) {
      s.back() = j ? add(srcIdx.back(), j) : srcIdx.back();
      d.back() = j ? add(dstIdx.back(), j) : dstIdx.back();
      store(load(src, s), dst, d);
    }
    return;
  }
  Type elt = cast<MemRefType>(src.getType()).getElementType();
  auto align = llvm::MaybeAlign(std::min<int64_t>(16, width * elt.getIntOrFloatBitWidth() / 8));
  auto vt = VectorType::get({width}, elt);
  Value v = vector::LoadOp::create(b, loc, vt, src, srcIdx, false, align);
  vector::StoreOp::create(b, loc, v, dst, dstIdx, false, align);
}

void KernelBuilder::storeVec(ArrayRef<Value> values, Value dst, ValueRange indices) {
  int64_t width = static_cast<int64_t>(values.size());
  Type elt = cast<MemRefType>(dst.getType()).getElementType();
  if (width == 1 || !gpu()) {
    SmallVector<Value> at(indices);
    for (int64_t j = 0; j < width; ++j) {
      at.back() = j ? add(indices.back(), j) : indices.back();
      storeF32(values[j], dst, at);
    }
    return;
  }
  auto f32v = VectorType::get({width}, b.getF32Type());
  Value v = vector::FromElementsOp::create(b, loc, f32v, values);
  if (!elt.isF32())
    v = arith::TruncFOp::create(b, loc, VectorType::get({width}, elt), v);
  vector::StoreOp::create(b, loc, v, dst, indices, false,
                          llvm::MaybeAlign(std::min<int64_t>(16, width * elt.getIntOrFloatBitWidth() / 8)));
}

void KernelBuilder::zeroVec(Value dst, ValueRange dstIdx, int64_t width) {
  Type elt = cast<MemRefType>(dst.getType()).getElementType();
  Value zero = fromF32(f32(0.0), elt);
  SmallVector<Value> d(dstIdx);
  for (int64_t j = 0; j < width; ++j) {
    d.back() = j ? add(dstIdx.back(), j) : dstIdx.back();
    store(zero, dst, d);
  }
}

Value KernelBuilder::sum(Value lb, Value ub, const std::function<Value(Value)> &body) {
  return loop(lb, ub, ValueRange{f32(0.0)}, [&](Value i, ValueRange acc) {
    return SmallVector<Value>{fadd(acc[0], body(i))};
  })[0];
}

Value KernelBuilder::ifElse(Value cond, const std::function<Value()> &then,
                            const std::function<Value()> &otherwise) {
  auto op = scf::IfOp::create(b, loc, b.getF32Type(), cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(&op.getThenRegion().front());
  scf::YieldOp::create(b, loc, then());
  b.setInsertionPointToStart(&op.getElseRegion().front());
  scf::YieldOp::create(b, loc, otherwise());
  return op.getResult(0);
}

void KernelBuilder::ifThen(Value cond, const std::function<void()> &then) {
  auto op = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(&op.getThenRegion().front());
  then();
}

void KernelBuilder::ifThenElse(Value cond, const std::function<void()> &then,
                               const std::function<void()> &otherwise) {
  auto op = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(&op.getThenRegion().front());
  then();
  b.setInsertionPointToStart(&op.getElseRegion().front());
  otherwise();
}

Value KernelBuilder::seqOffset(Value seqLens, Value n) {
  return loop(idx(0), n, ValueRange{idx(0)}, [&](Value i, ValueRange acc) {
    return SmallVector<Value>{add(acc[0], seqLen(seqLens, i))};
  })[0];
}

Value KernelBuilder::seqOffset(ThreadBlock &tb, Value seqLens, Value n) {
  if (!tb.launch)
    return seqOffset(seqLens, n);
  Value part = loopStep(tb.lane, n, idx(32), ValueRange{idx(0)}, [&](Value i, ValueRange acc) {
    return SmallVector<Value>{add(acc[0], seqLen(seqLens, i))};
  })[0];
  return warpSumIndex(tb, part);
}

Value KernelBuilder::mxfp4Element(const MXFP4Buffers &w, Value e, Value n, Value k) {
  ArrayRef<int64_t> shape = w.type.getShape();
  int64_t N = shape[shape.size() - 2], K = shape.back();
  Value byteIdx, high, scaleIdx, codeBits[4];
  Value matrixBytes = mul(e, N * K / 2), matrixScales = mul(e, N * K / 32);
  if (auto layout = w.type.getLayout()) {
    // models/MXFP4Layout.h, kernelPayloadSlot / kernelScaleOffset.
    int64_t kt = layout.getKTile(), nt = layout.getNTile(), tilesK = K / kt;
    Value tile = add(mul(div(n, nt), tilesK), div(k, kt));
    Value r = rem(n, nt), kk = rem(k, kt);
    Value s = div(kk, 16), within = rem(kk, 16);
    Value c = div(rem(within, 8), 2);
    Value eIdx = add(rem(within, 2), mul(div(within, 8), 2));
    Value t = add(mul(r, 4), c), j = add(mul(s, 4), eIdx);
    // Register j / 2 is pair (j / 2) % 4 of the run word j / 8, element
    // j % 2 of it: the code's bits in that word (fragment::codeBit; element
    // 1 16 bits further, mod 32).
    Value pairIdx = rem(div(j, 2), 4), elem = rem(j, 2);
    byteIdx = add(add(mul(tile, nt * kt / 2), mul(t, kt / 8)), mul(div(j, 8), 4));
    auto table = [&](int i) {
      Value v = idx(mxfp4::fragment::codeBit(3, i, 0));
      for (int p = 2; p >= 0; --p)
        v = select(ieq(pairIdx, idx(p)), idx(mxfp4::fragment::codeBit(p, i, 0)), v);
      return rem(add(v, mul(elem, 16)), idx(32));
    };
    for (int i = 0; i < 4; ++i)
      codeBits[i] = table(i);
    int64_t bpt = kt / 32;
    scaleIdx = add(add(mul(tile, nt * bpt), mul(r, bpt)), rem(div(k, 32), bpt));
  } else {
    byteIdx = add(mul(n, K / 2), div(k, 2));
    high = ieq(rem(k, 2), idx(1));
    scaleIdx = add(mul(n, K / 32), div(k, 32));
  }
  Type i32 = b.getI32Type();
  Value code;
  if (codeBits[0]) {
    // The run word (four byte loads, little-endian), then the code's bits.
    Value word = i32Const(0);
    for (int64_t i = 0; i < 4; ++i) {
      Value byte = arith::ExtUIOp::create(b, loc, i32,
                                          load(w.payload, {add(matrixBytes, add(byteIdx, i))}));
      word = arith::OrIOp::create(b, loc, word,
                                  i ? arith::ShLIOp::create(b, loc, byte, i32Const(8 * i)).getResult()
                                    : byte);
    }
    auto toI32 = [&](Value v) { return arith::IndexCastOp::create(b, loc, i32, v).getResult(); };
    code = mxfp4CodeAt(word, {toI32(codeBits[0]), toI32(codeBits[1]), toI32(codeBits[2]),
                              toI32(codeBits[3])});
  } else {
    Value byte = arith::ExtUIOp::create(b, loc, i32, load(w.payload, {add(matrixBytes, byteIdx)}));
    code = select(high, arith::ShRUIOp::create(b, loc, byte, i32Const(4)), byte);
  }
  Value s8 = arith::ExtUIOp::create(b, loc, i32, load(w.scales, {add(matrixScales, scaleIdx)}));
  return fmul(e2m1ToF32(code), e8m0ToF32(s8));
}

Value KernelBuilder::mxfp4CodeAt(Value word, ArrayRef<Value> bits) {
  Value code;
  for (size_t i = 0; i < bits.size(); ++i) {
    Value bit = arith::AndIOp::create(b, loc, arith::ShRUIOp::create(b, loc, word, bits[i]),
                                      i32Const(1));
    if (i)
      bit = arith::ShLIOp::create(b, loc, bit, i32Const(static_cast<int64_t>(i)));
    code = i ? arith::OrIOp::create(b, loc, code, bit).getResult() : bit;
  }
  return code;
}

Value KernelBuilder::e2m1ToF32(Value nib) {
  Value mag = arith::AndIOp::create(b, loc, nib, i32Const(7));
  Value big = arith::ShLIOp::create(b, loc, arith::AddIOp::create(b, loc, mag, i32Const(252)),
                                    i32Const(22));
  Value small = arith::MulIOp::create(b, loc, mag, i32Const(0x3F000000));
  Value ge2 = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, mag, i32Const(2));
  Value sign = arith::ShLIOp::create(b, loc, arith::AndIOp::create(b, loc, nib, i32Const(8)),
                                     i32Const(28));
  return arith::BitcastOp::create(b, loc, b.getF32Type(),
                                  arith::OrIOp::create(b, loc, select(ge2, big, small), sign));
}

Value KernelBuilder::e8m0ToF32(Value s8) {
  Value bits = select(ieq(s8, i32Const(0)), i32Const(0x00400000),
                      select(ieq(s8, i32Const(255)), i32Const(0x7fc00000),
                             arith::ShLIOp::create(b, loc, s8, i32Const(23))));
  return arith::BitcastOp::create(b, loc, b.getF32Type(), bits);
}

SmallVector<Value> KernelBuilder::loadWords(Value bytes, Value at, int64_t words) {
  Type i32 = b.getI32Type();
  SmallVector<Value> out;
  if (gpu()) {
    auto vt = VectorType::get({4 * words}, b.getI8Type());
    Value v = vector::LoadOp::create(b, loc, vt, bytes, ValueRange{at}, /*nontemporal=*/false,
                                     llvm::MaybeAlign(std::min<int64_t>(16, 4 * words)));
    Value w = vector::BitCastOp::create(b, loc, VectorType::get({words}, i32), v);
    for (int64_t j = 0; j < words; ++j)
      out.push_back(vector::ExtractOp::create(b, loc, w, ArrayRef<int64_t>{j}));
    return out;
  }
  for (int64_t j = 0; j < words; ++j) {
    Value word;
    for (int64_t q = 0; q < 4; ++q) {
      Value byte = arith::ExtUIOp::create(b, loc, i32, load(bytes, {add(at, 4 * j + q)}));
      if (q)
        byte = arith::ShLIOp::create(b, loc, byte, i32Const(8 * q));
      word = q ? arith::OrIOp::create(b, loc, word, byte).getResult() : byte;
    }
    out.push_back(word);
  }
  return out;
}

} // namespace k3c::lowering
