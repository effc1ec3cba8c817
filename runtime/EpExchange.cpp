//===- EpExchange.cpp - expert parallelism: routed pairs all-to-all ---------===//

#include "runtime/HostModel.h"

namespace k3c::rt::detail {

static std::vector<Buffer *> expertWeightBuffers(Entry &e, Launch &l) {
  std::vector<Buffer *> out;
  for (size_t i = 2; i < l.inputs.size(); ++i) {
    const auto &v = e.values[l.inputs[i]];
    out.push_back(v.buf);
    if (v.scales)
      out.push_back(v.scales);
  }
  return out;
}

void HostModel::gatherRows(Buffer *src, const std::string &dtype, std::vector<int64_t> srcDims,
                           const std::vector<int32_t> &rows, Buffer *dst) {
  if (rows.empty())
    return;
  // The value's dtype (from the manifest), not the buffer's: a pooled
  // activation buffer may have held a value of another dtype before.
  std::string name = "k3_ep_rows_" + dtype + "_" + std::to_string(srcDims[1]);
  auto it = kernels.find(name);
  if (it == kernels.end())
    throw Error("artifact has no EP row kernel " + name + " (recompile it with this k3c)");
  epRows->write(rows.data(), rows.size() * sizeof(int32_t));
  epRows->dims = {static_cast<int64_t>(rows.size())};
  Buffer view; // src as [rows, width] without owning it
  view.owns = false;
  view.device = src->device;
  view.dtype = dtype;
  view.data = src->data;
  view.dims = std::move(srcDims);
  launchOne(it->second, {&view, epRows, dst}, static_cast<int64_t>(rows.size()));
}

void HostModel::runExpertsEP(Entry &e, Launch &l, std::vector<Buffer *> &bufOf) {
  Transport &tr = *opts.ep;
  const int64_t R = tr.size(), me = tr.rank();
  KernelSpec &k = *l.kernel;
  Buffer *zb = bufOf[l.inputs[0]], *ib = bufOf[l.inputs[1]];
  const int64_t T = zb->dims[0], L = zb->dims[1], K = ib->dims[1];
  const int64_t E = e.values[l.inputs[2]].shape[0];
  // Dtypes of the values (a pooled buffer's own dtype may be stale).
  const std::string zDtype = e.values[l.inputs[0]].dtype, yDtype = e.values[l.outputs[0]].dtype;
  const int64_t zes = dtypeBytes(zDtype), rowBytes = L * zes;
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  ++ep.layers;
  std::vector<int32_t> idx(T * K); // the router's choices (the latents stay on the device)
  if (T > 0)
    ib->read(idx.data(), idx.size() * sizeof(int32_t));
  int64_t sent0 = tr.bytesSent;
  Buffer *yb = bufOf[l.outputs[0]];
  if (!epZ) {
    int64_t cap = plan.maxTokens * K * R, mine = plan.maxTokens * K;
    epZ = newBuffer(zDtype, {cap, L}, "EP received latents");
    epIdx = newBuffer("i32", {cap, K}, "EP received experts");
    epY = newBuffer(yDtype, {cap, K, L}, "EP expert outputs");
    epOut = newBuffer(yDtype, {cap, L}, "EP slot-0 outputs");
    epSend = newBuffer(zDtype, {mine, L}, "EP rows to send");
    epRecv = newBuffer(yDtype, {mine, L}, "EP outputs received");
    epRows = newBuffer("i32", {cap}, "EP row indices");
  }

  // 1. Counts from every rank (fixed size, one round); the same plan
  //    everywhere.
  auto t0 = now();
  std::vector<int64_t> mine = countPairs(idx.data(), T * K, E);
  std::vector<int64_t> out(R * E), all(R * E);
  for (int64_t d = 0; d < R; ++d)
    std::copy(mine.begin(), mine.end(), out.begin() + d * E);
  std::vector<size_t> countBytes(R, E * sizeof(int64_t));
  tr.allToAllBuffers(out.data(), countBytes, all.data(), countBytes, /*device=*/false);
  // cum[s][x]: pairs of expert x on ranks before s (the global pair order is
  // source rank, then the source's order).
  std::vector<std::vector<int64_t>> cum(R + 1, std::vector<int64_t>(E, 0));
  for (int64_t s = 0; s < R; ++s)
    for (int64_t x = 0; x < E; ++x) {
      if (all[s * E + x] < 0)
        throw Error("EP: rank " + std::to_string(s) + " sent a negative pair count");
      cum[s + 1][x] = cum[s][x] + all[s * E + x];
    }
  if (!std::equal(mine.begin(), mine.end(), all.begin() + me * E))
    throw Error("EP: this rank's counts came back changed from the exchange");
  auto t1 = now();
  std::vector<Buffer *> wbufs = expertWeightBuffers(e, l);
  const ExpertSlots es = expertSlots(E);
  auto slotBytes = [&](Buffer *b) { return b->bytes / es.slots; };
  int64_t minPairs = opts.epReplicaMinPairs;
  if (minPairs <= 0 && !gpu)
    minPairs = 1;
  if (minPairs <= 0) {
    // Break-even on the GPU: the expert's bytes over the link against its
    // pairs' math (2 FLOPs per weight element and pair).
    double bytes = 0, elements = 0;
    for (Buffer *b : wbufs)
      bytes += static_cast<double>(slotBytes(b));
    for (size_t i = 2; i < l.inputs.size(); ++i) {
      double n = 1;
      for (int64_t d : e.values[l.inputs[i]].shape)
        n *= static_cast<double>(d);
      elements += n / static_cast<double>(E);
    }
    minPairs = replicaBreakEven(bytes, 2 * elements, 250e9, 200e12);
  }
  ep.replicaMinPairs = minPairs;
  Placement pl = planPlacement(cum[R], R, opts.epBalance, minPairs);
  auto t2 = now();
  ep.planSeconds += secs(t1, t2);

  // 2. Replica weights from their home ranks, slot to slot (device to device
  //    over NCCL): every rank derives the same pieces from the plan.
  auto slotPtr = [&](Buffer *b, int64_t slot) {
    return static_cast<void *>(static_cast<uint8_t *>(b->data) + slot * slotBytes(b));
  };
  std::vector<int64_t> fetched;
  std::vector<Transport::Piece> wsend, wrecv;
  bool anyReplica = false;
  for (int64_t x = 0; x < E; ++x) {
    int64_t home = homeRank(x, E, R);
    for (auto [d, n] : pl.shares[x]) {
      if (d == home || n == 0)
        continue;
      anyReplica = true;
      if (d == me && (fetched.empty() || fetched.back() != x))
        fetched.push_back(x);
      if (home == me)
        for (Buffer *b : wbufs)
          wsend.push_back({d, slotPtr(b, x - es.first), static_cast<size_t>(slotBytes(b))});
    }
  }
  // Local slots: home experts first, then this step's replicas.
  if (static_cast<int64_t>(fetched.size()) > es.slots - es.home)
    throw Error("EP: the placement gives rank " + std::to_string(me) + " " +
                std::to_string(fetched.size()) + " replicas; it has room for " +
                std::to_string(es.slots - es.home));
  std::vector<int64_t> slotOf(E, -1);
  for (int64_t x = es.first; x < es.first + es.home; ++x)
    slotOf[x] = x - es.first;
  for (size_t j = 0; j < fetched.size(); ++j) {
    int64_t x = fetched[j], slot = es.home + static_cast<int64_t>(j);
    slotOf[x] = slot;
    for (Buffer *b : wbufs)
      wrecv.push_back({homeRank(x, E, R), slotPtr(b, slot), static_cast<size_t>(slotBytes(b))});
  }
  if (anyReplica) // the same answer on every rank: the round is collective
    tr.exchangePieces(wsend, wrecv, gpu);
  ep.replicasFetched += static_cast<int64_t>(fetched.size());

  // 3. Dispatch: each of my pairs goes to the rank whose share holds its
  //    position in the expert's global order, grouped by expert (so the
  //    receiver knows every row's expert from the counts and the plan: no
  //    expert ids travel).
  std::vector<int64_t> seen(E, 0);
  std::vector<std::vector<int32_t>> sentPairs(R);
  for (int64_t p = 0; p < T * K; ++p) {
    int32_t x = idx[p];
    int64_t g = cum[me][x] + seen[x]++, acc = 0, dest = -1;
    for (auto [d, n] : pl.shares[x]) {
      if (g < acc + n) {
        dest = d;
        break;
      }
      acc += n;
    }
    if (dest < 0)
      throw Error("EP: the placement lost a pair of expert " + std::to_string(x));
    sentPairs[dest].push_back(static_cast<int32_t>(p));
    if (dest != me)
      ++ep.pairsSent;
  }
  for (auto &v : sentPairs)
    std::stable_sort(v.begin(), v.end(), [&](int32_t a, int32_t b) { return idx[a] < idx[b]; });
  // What I receive from each source: per expert (ascending), the overlap of
  // the source's pairs with my shares; each row's local expert slot.
  std::vector<int64_t> fromRank(R, 0);
  std::vector<int32_t> rowSlot;
  for (int64_t s = 0; s < R; ++s)
    for (int64_t x = 0; x < E; ++x) {
      int64_t lo = cum[s][x], hi = cum[s + 1][x], acc = 0;
      if (lo == hi)
        continue;
      for (auto [d, n] : pl.shares[x]) {
        int64_t ov = std::min(hi, acc + n) - std::max(lo, acc);
        acc += n;
        if (d != me || ov <= 0)
          continue;
        if (slotOf[x] < 0)
          throw Error("EP: the placement sends pairs of expert " + std::to_string(x) +
                      " to rank " + std::to_string(me) + ", which does not hold it");
        rowSlot.insert(rowSlot.end(), ov, static_cast<int32_t>(slotOf[x]));
        fromRank[s] += ov;
      }
    }
  const int64_t n = static_cast<int64_t>(rowSlot.size());
  // The permute: the rows to send, destination by destination, gathered on
  // the device by the compiled row kernel, then sent buffer to buffer.
  std::vector<int32_t> sendRows;
  for (int64_t d = 0; d < R; ++d)
    for (int32_t p : sentPairs[d])
      sendRows.push_back(static_cast<int32_t>(p / K));
  if (!sendRows.empty())
    gatherRows(zb, zDtype, {T, L}, sendRows, epSend);
  std::vector<size_t> sendBytes(R), recvBytes(R);
  for (int64_t d = 0; d < R; ++d) {
    sendBytes[d] = sentPairs[d].size() * rowBytes;
    recvBytes[d] = fromRank[d] * rowBytes;
  }
  tr.allToAllBuffers(epSend->data, sendBytes, epZ->data, recvBytes, gpu);
  auto t3 = now();

  // 4. The compiled expert kernel on the received pairs: one row each, the
  //    expert's local slot in top-k slot 0 and no expert (-1) in the others.
  ep.pairsComputed += n;
  const int64_t yes = dtypeBytes(yDtype), outRow = L * yes;
  if (n > 0) {
    std::vector<int32_t> ir(n * K, -1);
    for (int64_t r = 0; r < n; ++r)
      ir[r * K] = rowSlot[r];
    epZ->dims = {n, L};
    epIdx->write(ir.data(), ir.size() * sizeof(int32_t));
    epIdx->dims = {n, K};
    // The launch's own buffers, with the received pairs in place of the
    // latents, expert ids and outputs.
    std::vector<Buffer *> argBuf = argBuffers(e, l, bufOf);
    for (size_t i = 0; i < k.args.size(); ++i) {
      const ArgSpec &a = k.args[i];
      if (a.kind == "input" && (a.index == 0 || a.index == 1))
        argBuf[i] = a.index == 0 ? epZ : epIdx;
      else if (a.kind == "output")
        argBuf[i] = epY;
    }
    auto t4 = now();
    launchOne(k, argBuf, n);
    if (gpu)
      cuda::synchronize("the EP expert kernel");
    ep.expertSeconds += secs(t4, now());
    // Slot 0 of every row (the unpermute's first half, on the device).
    std::vector<int32_t> slot0(n);
    for (int64_t r = 0; r < n; ++r)
      slot0[r] = static_cast<int32_t>(r * K);
    gatherRows(epY, yDtype, {n * K, L}, slot0, epOut);
  }
  auto t5 = now();

  // 5. Combine: outputs back to their sources in the order they came
  //    (buffer to buffer), then the unpermute gathers every pair's output row
  //    back into [T, K] order on the device.
  for (int64_t d = 0; d < R; ++d) {
    sendBytes[d] = fromRank[d] * outRow;
    recvBytes[d] = sentPairs[d].size() * outRow;
  }
  tr.allToAllBuffers(epOut->data, sendBytes, epRecv->data, recvBytes, gpu);
  std::vector<int32_t> inverse(T * K, -1);
  int64_t pos = 0;
  for (int64_t d = 0; d < R; ++d)
    for (int32_t p : sentPairs[d])
      inverse[p] = static_cast<int32_t>(pos++);
  if (T > 0)
    gatherRows(epRecv, yDtype, {T * K, L}, inverse, yb);
  yb->dims = {T, K, L};

  // 6. Replicas are dropped after the layer (a later step fetches again).
  for (size_t j = 0; j < fetched.size(); ++j)
    for (Buffer *b : wbufs)
      b->clearAt((es.home + static_cast<int64_t>(j)) * slotBytes(b), slotBytes(b));
  auto tEnd = now();
  ep.exchangeSeconds += secs(t0, t1) + secs(t2, t3) + secs(t5, tEnd);
  ep.moeSeconds += secs(t0, tEnd);
  if (decoding) {
    ++ep.decodeLayers;
    ep.decodeMoeSeconds += secs(t0, tEnd);
  }
  ep.bytesSent += tr.bytesSent - sent0;
}

} // namespace k3c::rt::detail
