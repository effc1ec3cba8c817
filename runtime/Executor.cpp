//===- Executor.cpp - schedules, launches, graphs, kernel dumps -------------===//

#include "runtime/HostModel.h"

#include <functional>

namespace k3c::rt::detail {

void HostModel::copySlot(int64_t from, int64_t to, int64_t positions) {
  for (const Value &v : entries.at("prefill").values) {
    if (v.kind != "state" || v.paged())
      continue;
    Buffer *b = states.at(v.name);
    const size_t slot = static_cast<size_t>(b->bytes / b->capacity[0]);
    size_t bytes = slot;
    if (v.dims.size() > 1 && v.dims[1] == "context")
      bytes = slot / static_cast<size_t>(b->capacity[1]) * static_cast<size_t>(positions);
    b->copyWithin(static_cast<size_t>(to) * slot, static_cast<size_t>(from) * slot, bytes);
  }
}

void HostModel::releasePages(int64_t n) {
  for (int32_t page : seqPages[n])
    if (--pageRefs[page] == 0) {
      freePages.push_back(page);
      std::push_heap(freePages.begin(), freePages.end(), std::greater<int32_t>());
      --plan.pagesInUse;
    }
  seqPages[n].clear();
  trimPools();
}

int32_t HostModel::takePage() {
  std::pop_heap(freePages.begin(), freePages.end(), std::greater<int32_t>());
  const int32_t page = freePages.back();
  freePages.pop_back();
  pageRefs[page] = 1;
  plan.pagesPeak = std::max(plan.pagesPeak, ++plan.pagesInUse);
  plan.pagesSpan = std::max<int64_t>(plan.pagesSpan, page + 1);
  return page;
}

void HostModel::trimPools() {
  // The lowest free page goes first (takePage), so the held pages gather at
  // the pool's start and what lies past the highest one can be given back.
  int64_t span = plan.pagesSpan;
  while (span > 1 && pageRefs[static_cast<size_t>(span - 1)] == 0)
    --span;
  plan.pagesSpan = span; // page 0 (the zero page) stays: block tables point there
  if (!poolTrim) // K3C_POOL_TRIM=0
    return;
  for (Buffer *b : pools) {
    const size_t page = static_cast<size_t>(b->bytes / plan.cachePages);
    // Half or less of the mapped memory held: unmap what lies past the
    // highest held page (hysteresis: a pool that sequences keep filling and
    // leaving is not unmapped and mapped again each time).
    if (b->grow && static_cast<size_t>(span) * page * 2 <= b->grow->mapped)
      b->shrink(static_cast<size_t>(span) * page, "the paged MLA cache's pool");
  }
}

void HostModel::clearSlot(int64_t n, bool contextOnly) {
  for (const Value &v : entries.at("prefill").values) {
    if (v.kind != "state" || v.paged())
      continue;
    if (contextOnly && !(v.dims.size() > 1 && v.dims[1] == "context"))
      continue;
    Buffer *b = states.at(v.name);
    const size_t slot = static_cast<size_t>(b->bytes / b->capacity[0]);
    b->clearAt(static_cast<size_t>(n) * slot, slot);
  }
}

void HostModel::restartSequence(int64_t n) {
  if (n < 0 || n >= batch)
    throw Error("restartSequence: sequence " + std::to_string(n) + " is not in the batch of " +
                std::to_string(batch));
  shared = {};
  clearSlot(n, /*contextOnly=*/false);
  if (plan.cachePage)
    releasePages(n);
  lens[n] = 0;
}

void HostModel::retireSequence(int64_t n) {
  if (n < 0 || n >= batch)
    throw Error("retireSequence: sequence " + std::to_string(n) + " is not in the batch of " +
                std::to_string(batch));
  shared = {};
  const int64_t last = batch - 1;
  if (plan.cachePage)
    releasePages(n);
  if (n != last) {
    copySlot(last, n, lens[last]);
    if (plan.cachePage)
      seqPages[n] = std::move(seqPages[last]);
    lens[n] = lens[last];
  }
  seqPages.resize(static_cast<size_t>(last));
  lens.pop_back();
  --batch;
}

void HostModel::reservePages(const std::vector<int64_t> &seqLens) {
  const int64_t P = plan.cachePage;
  for (int64_t n = 0; n < batch; ++n) {
    const int64_t need = (lens[n] + seqLens[n] + P - 1) / P;
    while (static_cast<int64_t>(seqPages[n].size()) < need) {
      if (freePages.empty())
        throw Error("the paged MLA cache is full: sequence " + std::to_string(n) + " needs page " +
                    std::to_string(seqPages[n].size() + 1) + " for " +
                    std::to_string(lens[n] + seqLens[n]) + " tokens, and all " +
                    std::to_string(plan.cachePages - 1) + " pages of " + std::to_string(P) +
                    " tokens are held (" + std::to_string(plan.pagesInUse * P) +
                    " tokens over " + std::to_string(batch) +
                    " sequences); give a larger pool (k3-run --cache-tokens, or compile with "
                    "--cache-tokens)");
      const int32_t page = takePage();
      for (Buffer *b : pools) {
        const size_t bytes = static_cast<size_t>(b->bytes / plan.cachePages);
        b->clearAt(static_cast<size_t>(page) * bytes, bytes);
      }
      seqPages[n].push_back(page);
    }
  }
}

std::vector<int32_t> HostModel::blockTable() const {
  const int64_t per = (plan.maxContext + plan.cachePage - 1) / plan.cachePage;
  std::vector<int32_t> table(static_cast<size_t>(batch * per), 0);
  for (int64_t n = 0; n < batch; ++n)
    std::copy(seqPages[n].begin(), seqPages[n].end(), table.begin() + n * per);
  return table;
}

void HostModel::prefillPrefix(const std::vector<int64_t> &prefix) {
  if (prefix.empty())
    return;
  if (opts.ep)
    throw Error("a shared prompt prefix is not supported under expert parallelism");
  for (int64_t n = 0; n < batch; ++n)
    if (lens[n] != 0)
      throw Error("prefillPrefix: the batch's sequences already hold tokens (call reset first)");
  const int64_t L = static_cast<int64_t>(prefix.size());
  // Sequence 0 alone (the other sequences' slots untouched), its logits not
  // copied: they are the prefix's, which nobody samples from.
  {
    const int64_t saved = batch;
    struct Restore {
      int64_t &batch, saved;
      ~Restore() { batch = saved; }
    } restore{batch, saved};
    batch = 1;
    LogitsKept off{keepLogits};
    const size_t routingFrom = routing.size();
    prefill(std::vector<std::vector<int64_t>>{prefix}, 0);
    shared.routingFrom = routingFrom;
    shared.routingCount = routing.size() - routingFrom;
  }
  shared.length = L;
  if (tracing)
    shared.trace = traces;
  forkPrefix(L);
}

void HostModel::forkPrefix(int64_t L) {
  const int64_t N = batch;
  // States: sequence 0's slot to every other slot; of a contiguous MLA cache
  // only the prefix's rows. A paged MLA cache: the prefix's full pages are
  // shared (no sequence writes a position below its length), its last
  // partial page copied.
  for (int64_t n = 1; n < N; ++n) {
    copySlot(0, n, L);
    if (plan.cachePage)
      seqPages[n] = prefixPages(seqPages[0], L, "sequence " + std::to_string(n));
  }
  lens.assign(N, L);
}

std::vector<int32_t> HostModel::prefixPages(const std::vector<int32_t> &from, int64_t L,
                                            const std::string &who) {
  const int64_t P = plan.cachePage, full = L / P;
  std::vector<int32_t> pages(from.begin(), from.begin() + full);
  if (L % P != 0) {
    if (freePages.empty())
      throw Error("the paged MLA cache is full: " + who +
                  " needs a copy of the shared prefix's last page, and all " +
                  std::to_string(plan.cachePages - 1) + " pages of " + std::to_string(P) +
                  " tokens are held; give a larger pool (k3-run --cache-tokens, or compile "
                  "with --cache-tokens)");
    const int32_t page = takePage();
    for (Buffer *b : pools) {
      const size_t bytes = static_cast<size_t>(b->bytes / plan.cachePages);
      b->copyWithin(static_cast<size_t>(page) * bytes, static_cast<size_t>(from[full]) * bytes,
                    bytes);
    }
    pages.push_back(page);
  }
  for (int64_t i = 0; i < full; ++i)
    ++pageRefs[pages[i]];
  return pages;
}

void HostModel::keepPrefix() {
  const int64_t L = shared.length;
  if (!L)
    throw Error("keepPrefix: no shared prefix was just prefilled (call prefillPrefix first)");
  const int64_t slot = plan.maxSeqs - 1;
  if (batch > slot)
    throw Error("keepPrefix: the batch of " + std::to_string(batch) +
                " sequences leaves no free slot of the artifact's " +
                std::to_string(plan.maxSeqs) + " for the prefix (at most " +
                std::to_string(slot) + ")");
  copySlot(0, slot, L);
  if (plan.cachePage)
    kept.pages = prefixPages(seqPages[0], L, "the kept prefix");
  kept.length = L;
  kept.slot = slot;
}

void HostModel::restartFromPrefix(int64_t n) {
  if (!kept.length)
    throw Error("restartFromPrefix: no prefix is kept (call keepPrefix first)");
  if (n < 0 || n >= batch)
    throw Error("restartFromPrefix: sequence " + std::to_string(n) +
                " is not in the batch of " + std::to_string(batch));
  shared = {};
  // The kept slot's copy overwrites every state whole except a contiguous
  // MLA cache (its prefix rows only): only that one is cleared first.
  clearSlot(n, /*contextOnly=*/true);
  if (plan.cachePage)
    releasePages(n);
  copySlot(kept.slot, n, kept.length);
  if (plan.cachePage)
    seqPages[n] = prefixPages(kept.pages, kept.length, "sequence " + std::to_string(n));
  lens[n] = kept.length;
}

void HostModel::mergeSharedPrefix(const std::vector<std::vector<int64_t>> &prompts) {
  if (!shared.length)
    return;
  SharedPrefix s = std::move(shared);
  shared = {};
  const int64_t L = s.length, B = static_cast<int64_t>(prompts.size());
  // Per layer: each sequence's rows, the prefix's first.
  if (tracing)
    for (auto &[name, rest] : traces) {
      auto it = s.trace.find(name);
      if (it == s.trace.end() || it->second.empty())
        continue;
      const std::vector<float> &pre = it->second;
      const size_t D = pre.size() / static_cast<size_t>(L);
      std::vector<float> merged;
      merged.reserve(pre.size() * B + rest.size());
      size_t off = 0;
      for (int64_t b = 0; b < B; ++b) {
        const size_t rows = prompts[b].size();
        merged.insert(merged.end(), pre.begin(), pre.end());
        merged.insert(merged.end(), rest.begin() + off * D, rest.begin() + (off + rows) * D);
        off += rows;
      }
      rest = std::move(merged);
    }
  // Routing: record c of the prefix step and record c of the rest (one
  // round each: as many records) as one record of the whole prompts.
  const size_t restFrom = s.routingFrom + s.routingCount;
  if (routingOn && s.routingCount && routing.size() - restFrom == s.routingCount) {
    std::vector<RoutingRecord> merged;
    for (size_t c = 0; c < s.routingCount; ++c) {
      const RoutingRecord &pre = routing[s.routingFrom + c], &rest = routing[restFrom + c];
      RoutingRecord r;
      r.topK = pre.topK;
      r.tokens = pre.tokens * B + rest.tokens;
      size_t off = 0;
      for (int64_t b = 0; b < B; ++b) {
        const size_t rows = prompts[b].size() * static_cast<size_t>(r.topK);
        r.ids.insert(r.ids.end(), pre.ids.begin(), pre.ids.end());
        r.ids.insert(r.ids.end(), rest.ids.begin() + off, rest.ids.begin() + off + rows);
        off += rows;
      }
      merged.push_back(std::move(r));
    }
    routing.resize(s.routingFrom);
    routing.insert(routing.end(), merged.begin(), merged.end());
  }
}

const std::vector<float> &HostModel::run(Entry &e, const std::vector<int64_t> &ids,
                                  const std::vector<int64_t> &seqLens, bool graph) {
  const int64_t T = static_cast<int64_t>(ids.size()), N = batch;
  if (T > plan.maxTokens)
    throw Error(std::to_string(T) + " tokens in one step exceed the artifact's capacity of " +
                std::to_string(plan.maxTokens) + " (compile with --max-tokens)");
  for (int64_t n = 0; n < N; ++n) {
    // Every sequence of a step has at least one token: the kernels rely on
    // it (one token each when T == N: the decode convolution; a longest
    // sequence of at most T - N + 1 tokens: the window launch's skip).
    if (seqLens[n] < 1)
      throw Error("sequence " + std::to_string(n) + " has no token in this step (every sequence "
                  "of a step needs at least one)");
    int64_t total = lens[n] + seqLens[n];
    if (total > plan.maxContext || (maxPositions > 0 && total > maxPositions))
      throw Error("sequence " + std::to_string(n) + " would hold " + std::to_string(total) +
                  " tokens, more than the planned cache of " + std::to_string(plan.maxContext) +
                  " (compile with --max-context)");
  }
  for (int64_t t = 0; t < T; ++t)
    if (ids[t] < 0 || ids[t] >= vocab)
      throw Error("token id " + std::to_string(ids[t]) + " is outside the vocabulary [0, " +
                  std::to_string(vocab) + ")");
  if (plan.cachePage)
    reservePages(seqLens);
  // Inputs.
  for (Value &v : e.values) {
    if (v.kind == "input" && v.name == "block_table") {
      // Uploaded when it changed (a sequence crossed into a new page: once
      // every P steps in decode), not every step.
      std::vector<int32_t> table = blockTable();
      if (table != tableUploaded) {
        v.buf->write(table.data(), table.size() * sizeof(int32_t));
        tableUploaded = std::move(table);
      }
      v.buf->dims = {N, v.buf->capacity[1]};
    } else if (v.kind == "input") {
      std::vector<int32_t> host;
      if (v.name == "token_ids") {
        for (int64_t t = 0; t < T; ++t)
          host.push_back(static_cast<int32_t>(ids[t]));
      } else {
        for (int64_t n = 0; n < N; ++n)
          host.push_back(static_cast<int32_t>(v.name == "seq_lens" ? seqLens[n] : lens[n]));
      }
      if (static_cast<int64_t>(host.size() * sizeof(int32_t)) > v.buf->bytes)
        throw Error("input " + v.name + ": " + std::to_string(host.size()) +
                    " values this step, its buffer holds " +
                    std::to_string(v.buf->bytes / sizeof(int32_t)) +
                    " (the artifact's buffer plan is inconsistent)");
      v.buf->write(host.data(), host.size() * sizeof(int32_t));
      v.buf->dims = {static_cast<int64_t>(host.size())};
    } else if (v.kind == "state") {
      v.buf->dims = v.buf->capacity;
      if (!v.paged())
        v.buf->dims[0] = N;
    } else if (v.kind == "weight") {
      v.buf->dims = v.buf->capacity;
      if (v.scales)
        v.scales->dims = v.scales->capacity;
    }
  }
  // Decode on the GPU replays one CUDA graph per batch size: the launches,
  // their buffers and dims are the same every step; only the uploaded inputs
  // (token ids, cache lengths) change.
  // (Not under EP: the exchange between kernels runs on the host.)
  // Kernel dumps (K3C_DUMP_KERNEL) copy buffers to the host between
  // launches, which a capture does not allow.
  bool graphable = graph && gpu && graphsOk && !tracing && !routingOn && !opts.ep &&
                   !std::getenv("K3C_DUMP_KERNEL");
  bool useGraph = graphable && !profiling;
  graphTimed = false;
  auto it = decodeGraphs.find(N);
  if (graphable && profiling && cuda::canMarkGraphs() && !cuda::launchesProfiled()) {
    // Profiling decode times the kernels as the step runs them: inside a
    // replayed graph, with an event node between kernels (no host launch
    // overhead, no synchronization between kernels; the gap before a kernel
    // counts to it).
    runProfiledGraph(e, T, N);
  } else if (useGraph && it != decodeGraphs.end()) {
    graphTimer.begin();
    cuda::launchGraph(it->second);
    graphTimer.end(); // read by lastGraphSeconds(): no wait here
    graphTimed = true;
  } else if (useGraph && lastDecodeN != N) {
    // A batch size's first step runs eagerly: its graph is captured on the
    // second step in a row at that size, so sizes that last one step (a
    // continuous batch shrinking as its last sequences finish) cost launches
    // instead of a capture and an instantiation each.
    launchAll(e, T);
  } else if (useGraph && cuda::beginCapture()) {
    launchAll(e, T);
    void *exec = cuda::endCapture();
    if (exec) {
      decodeGraphs[N] = exec;
      graphTimer.begin();
      cuda::launchGraph(exec);
      graphTimer.end();
      graphTimed = true;
    } else {
      graphsOk = false; // capture unsupported here: run eagerly from now on
      launchAll(e, T);
    }
  } else {
    launchAll(e, T);
  }
  if (graph)
    lastDecodeN = N;
  for (int64_t n = 0; n < N; ++n)
    lens[n] += seqLens[n];
  if (N == 0) // a step without sequences (idle): the last logits stay
    return logitsHost;
  lastEntry = &e;
  if (!keepLogits) // a greedy step: greedyIds() reads them where they are
    return logitsHost;
  Buffer *logits = e.values[e.returns[0]].buf;
  if (logits->device && !logitsPinTried) {
    // Room for every step's rows up front: the pinned pages never move.
    logitsPinTried = true;
    logitsHost.reserve(static_cast<size_t>(std::max<int64_t>(plan.maxSeqs, N) * vocab));
    logitsPinned = cuda::pinHost(logitsHost.data(), logitsHost.capacity() * sizeof(float));
  }
  if (logitsPinned && static_cast<size_t>(N * vocab) > logitsHost.capacity()) {
    cuda::unpinHost(logitsHost.data()); // a larger step than planned: pageable from now on
    logitsPinned = false;
  }
  logitsHost.resize(N * vocab);
  logits->read(logitsHost.data(), logitsHost.size() * sizeof(float));
  return logitsHost;
}

const std::vector<int64_t> &HostModel::greedyIds() {
  greedyHost.assign(batch, 0);
  if (batch == 0 || !lastEntry)
    return greedyHost;
  const Value &out = lastEntry->values[lastEntry->returns[0]];
  auto it = kernels.find("k3_argmax_f32_" + std::to_string(vocab));
  if (it == kernels.end() || out.dtype != "f32") {
    // An artifact without the kernel: the logits come back and the greedy
    // sampler picks, as it does for k3-run's host path.
    std::vector<float> host(static_cast<size_t>(batch * vocab));
    out.buf->read(host.data(), host.size() * sizeof(float));
    Sampler greedy(/*temperature=*/0, /*topP=*/1, /*seed=*/0);
    for (int64_t n = 0; n < batch; ++n)
      greedyHost[n] = greedy.sample(host.data() + n * vocab, vocab);
    return greedyHost;
  }
  if (!greedyBuf)
    greedyBuf = newBuffer("i32", {plan.maxSeqs}, "greedy token ids");
  launchOne(it->second, {out.buf, greedyBuf}, batch);
  std::vector<int32_t> ids(batch);
  greedyBuf->read(ids.data(), ids.size() * sizeof(int32_t));
  for (int64_t n = 0; n < batch; ++n) {
    if (ids[n] < 0 || ids[n] >= vocab)
      throw Error("the argmax kernel returned token " + std::to_string(ids[n]) +
                  " outside the vocabulary [0, " + std::to_string(vocab) + ")");
    greedyHost[n] = ids[n];
  }
  return greedyHost;
}

void HostModel::runProfiledGraph(Entry &e, int64_t T, int64_t N) {
  ProfiledGraph &g = profiledGraphs[N];
  if (!g.exec) {
    if (!cuda::beginCapture()) {
      graphsOk = false;
      launchAll(e, T);
      return;
    }
    marks = &g;
    try {
      launchAll(e, T);
      g.events.push_back(cuda::markEvent());
    } catch (...) {
      marks = nullptr;
      cuda::endCapture();
      throw;
    }
    marks = nullptr;
    g.exec = cuda::endCapture();
    if (!g.exec) {
      profiledGraphs.erase(N);
      graphsOk = false;
      launchAll(e, T);
      return;
    }
  }
  cuda::launchGraph(g.exec);
  cuda::synchronize("a profiled decode graph");
  for (size_t i = 0; i < g.launches.size(); ++i)
    account(*g.launches[i].kernel, g.launches[i].T,
            cuda::markSeconds(g.events[i], g.events[i + 1]), g.launches[i].args);
}

void HostModel::overlapSharedExperts(Entry &e) {
  auto &ls = e.launches;
  for (size_t i = 0; i < ls.size(); ++i) {
    if (ls[i].kernel->family != "moe_shared")
      continue;
    for (size_t j = i + 1; j < ls.size(); ++j) {
      bool reads = false;
      for (int64_t in : ls[j].inputs)
        reads |= std::find(ls[i].outputs.begin(), ls[i].outputs.end(), in) != ls[i].outputs.end();
      if (reads)
        break;
      if (ls[j].kernel->family == "moe_experts") {
        Launch shared = ls[i];
        ls.erase(ls.begin() + i);
        ls.insert(ls.begin() + j, shared); // now right after the routed experts
        i = j;
        break;
      }
    }
  }
}

void HostModel::launchAll(Entry &e, int64_t T) {
  std::vector<Buffer *> bufOf(e.values.size());
  for (Value &v : e.values)
    bufOf[v.id] = v.buf;
  PendingExchange pending;
  try {
    for (Launch &l : e.launches) {
      if (skipped.empty() || !skipped.count(l.kernel->family)) {
        launchStep(e, l, T, bufOf, pending);
        continue;
      }
      // Left out (skipFamilies): its in-place outputs still name their
      // input's buffer for the launches after it.
      for (size_t p = 0; p < l.outputs.size(); ++p)
        if (l.kernel->resultAliases[p] >= 0)
          bufOf[l.outputs[p]] = bufOf[l.inputs[l.kernel->resultAliases[p]]];
    }
    pending.join();
  } catch (...) {
    if (pending.thread.joinable()) { // its peers must not wait for this rank
      opts.ep->abort("a kernel launch failed on this rank");
      pending.thread.join();
    }
    throw;
  }
}

void HostModel::launchStep(Entry &e, Launch &l, int64_t T, std::vector<Buffer *> &bufOf,
                           PendingExchange &pending) {
  KernelSpec &k = *l.kernel;
  if (pending.feeds(l))
    pending.join();
  // Outputs aliasing inputs (state updated in place) share their buffer.
  for (size_t p = 0; p < l.outputs.size(); ++p)
    if (k.resultAliases[p] >= 0)
      bufOf[l.outputs[p]] = bufOf[l.inputs[k.resultAliases[p]]];
  if (opts.ep && k.family == "moe_experts") {
    pending.join(); // one exchange at a time
    if (!profiling && !tracing) {
      pending.outputs = l.outputs;
      pending.thread = std::thread([this, &e, &l, &bufOf, &pending] {
        try {
          if (gpu)
            cuda::bindThread();
          runExpertsEP(e, l, bufOf);
        } catch (...) {
          pending.error = std::current_exception();
        }
      });
    } else {
      runExpertsEP(e, l, bufOf);
    }
  } else {
    launchOne(k, argBuffers(e, l, bufOf), T);
  }
  if (tracing)
    for (int64_t out : l.outputs) {
      const Value &v = e.values[out];
      if (v.trace.empty())
        continue;
      traces[v.trace] = readAsF32(*bufOf[out], v.dtype);
    }
  if (routingOn && k.family == "moe_router")
    for (int64_t out : l.outputs) { // the expert ids: the i32 [T, top-k] result
      const Buffer &b = *bufOf[out];
      if (e.values[out].dtype != "i32" || b.dims.size() != 2)
        continue;
      RoutingRecord r;
      r.tokens = b.dims[0];
      r.topK = b.dims[1];
      r.ids.resize(r.tokens * r.topK);
      b.read(r.ids.data(), r.ids.size() * sizeof(int32_t));
      routing.push_back(std::move(r));
    }
}

/// A float32 .npy of `b`'s current contents (readAsF32).
/// Byte buffers (i8: MXFP4 payload and scales) are written as raw uint8.
/// `rows` >= 0: the leading dimension's first `rows` only.
static void dumpNpy(const std::string &path, const Buffer &b, const std::string &dtype,
                    int64_t rows = -1) {
  const bool bytes = dtype == "i8";
  std::vector<float> f;
  std::vector<uint8_t> raw;
  std::vector<int64_t> dims = b.dims;
  if (rows >= 0 && !dims.empty())
    dims[0] = std::min(rows, dims[0]);
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  if (bytes) {
    raw.resize(n);
    b.read(raw.data(), raw.size());
  } else {
    f = readAsF32(b, dtype, rows);
  }
  std::string shape = "(";
  for (int64_t d : dims)
    shape += std::to_string(d) + ",";
  shape += ")";
  std::string header = std::string("{'descr': '") + (bytes ? "|u1" : "<f4") +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64)
    header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  uint16_t hl = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char *>(&hl), 2);
  out << header;
  if (bytes)
    out.write(reinterpret_cast<const char *>(raw.data()), n);
  else
    out.write(reinterpret_cast<const char *>(f.data()), n * 4);
  if (!out)
    throw Error("K3C_DUMP_KERNEL: cannot write " + path);
}

/// K3C_DUMP_KERNEL=FAMILY[@MIN[-MAX]]:DIR: the first launch of a kernel of
/// FAMILY with MIN..MAX tokens (default 1..any) writes its arguments before
/// (argI_in.npy) and after (argI_out.npy) the launch, as float32 (byte
/// buffers as uint8; scratch
/// arguments excepted: a kernel's own workspace), and
/// args.json (kind, index, dtype, dims) into DIR: a kernel's exact inputs
/// and outputs, for checking it against an independent implementation.
struct KernelDump {
  std::string family, dir;
  int64_t minTokens = 1, maxTokens = std::numeric_limits<int64_t>::max();
  bool done = false;
  static KernelDump &get() {
    static KernelDump d = [] {
      KernelDump d;
      const char *v = std::getenv("K3C_DUMP_KERNEL");
      if (!v || !*v)
        return d;
      std::string s(v);
      size_t colon = s.find(':');
      if (colon == std::string::npos)
        throw Error("K3C_DUMP_KERNEL must be FAMILY[@MIN[-MAX]]:DIR, got '" + s + "'");
      d.family = s.substr(0, colon);
      d.dir = s.substr(colon + 1);
      if (size_t at = d.family.find('@'); at != std::string::npos) {
        std::string range = d.family.substr(at + 1);
        d.family.resize(at);
        size_t dash = range.find('-');
        d.minTokens = std::atoll(range.substr(0, dash).c_str());
        if (dash != std::string::npos)
          d.maxTokens = std::atoll(range.substr(dash + 1).c_str());
        if (d.minTokens < 1 || d.maxTokens < d.minTokens)
          throw Error("K3C_DUMP_KERNEL: bad token range '" + range + "'");
      }
      return d;
    }();
    return d;
  }
  bool wants(const KernelSpec &k, int64_t T) const {
    return !done && !family.empty() && k.family == family && T >= minTokens && T <= maxTokens;
  }
};

void HostModel::launchOne(KernelSpec &k, const std::vector<Buffer *> &argBuf, int64_t T) {
  std::vector<Descriptor> desc(k.args.size());
  std::vector<void *> argv(k.args.size(), nullptr);
  std::vector<std::vector<int64_t>> dims(k.args.size());
  for (size_t i = 0; i < k.args.size(); ++i) {
    const ArgSpec &a = k.args[i];
    Buffer *b = argBuf[i];
    if (!b || !b->data)
      throw Error("kernel " + k.name + ": argument " + std::to_string(i) + " has no buffer");
    dims[i] = a.shape;
    size_t dyn = 0;
    for (size_t d = 0; d < dims[i].size(); ++d)
      if (dims[i][d] < 0) {
        auto [src, sd] = a.dynamicFrom[dyn++];
        dims[i][d] = (a.kind == "input" || src < 0 || src == static_cast<int64_t>(i))
                         ? b->dims[d]
                         : dims[src][sd];
      }
    if (a.kind != "input") {
      // What the kernel writes must fit the buffer the plan gave the value
      // (a manifest that sizes an activation below its rows is refused here,
      // not written past).
      int64_t need = a.dtype == "mxfp4" ? 1 : dtypeBytes(a.dtype);
      for (int64_t d : dims[i])
        need = d < 0 || (d > 0 && need > INT64_MAX / d) ? INT64_MAX : need * d;
      if (need > b->bytes && !(a.deviceOnly && !gpu)) // (a host stub stands in for device-only scratch)
        throw Error("kernel " + k.name + ": argument " + std::to_string(i) + " (" + a.kind +
                    ") needs " + std::to_string(need) + " bytes at this step's sizes, its buffer holds " +
                    std::to_string(b->bytes) + " (the artifact's buffer plan is inconsistent)");
      b->dims = dims[i];
    }
    desc[i].set(b->data, dims[i]);
    argv[i] = desc[i].words.data();
  }
  KernelDump &dump = KernelDump::get();
  const bool dumping = dump.wants(k, T);
  // A paged MLA cache's pool is dumped up to the highest page held (block
  // tables point below it): the whole pool is gigabytes of unused pages.
  auto poolRows = [&](const Buffer *b) -> int64_t {
    return std::find(pools.begin(), pools.end(), b) != pools.end()
               ? std::max<int64_t>(plan.pagesSpan, 1)
               : -1;
  };
  if (dumping) {
    std::filesystem::create_directories(dump.dir);
    json meta = json::array();
    for (size_t i = 0; i < k.args.size(); ++i) {
      std::vector<int64_t> shown = dims[i];
      if (const int64_t rows = poolRows(argBuf[i]); rows >= 0 && !shown.empty())
        shown[0] = std::min(shown[0], rows);
      meta.push_back({{"kind", k.args[i].kind}, {"index", k.args[i].index},
                      {"dtype", k.args[i].dtype}, {"dims", shown}, {"kernel", k.name}});
      if (k.args[i].kind != "scratch") // a kernel's own workspace (maybe a stub)
        dumpNpy(dump.dir + "/arg" + std::to_string(i) + "_in.npy", *argBuf[i], k.args[i].dtype,
                poolRows(argBuf[i]));
    }
    std::ofstream(dump.dir + "/args.json") << meta.dump(1) << "\n";
  }
  auto t0 = std::chrono::steady_clock::now();
  cuda::Timer timer;
  const bool timed = profiling && !marks; // a profiled graph's capture: marks instead
  if (timed && gpu)
    timer.begin();
  if (marks) {
    marks->events.push_back(cuda::markEvent());
    marks->launches.push_back({&k, T, argBuf});
  }
  k.fn(argv.data());
  if (gpu)
    cuda::checkLaunchError(k.name);
  if (dumping) {
    for (size_t i = 0; i < k.args.size(); ++i)
      if (k.args[i].kind != "scratch")
        dumpNpy(dump.dir + "/arg" + std::to_string(i) + "_out.npy", *argBuf[i], k.args[i].dtype,
                poolRows(argBuf[i]));
    dump.done = true;
  }
  if (timed)
    account(k, T,
            gpu ? timer.endSeconds()
                : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
            argBuf);
}

void HostModel::account(const KernelSpec &k, int64_t T, double s,
                        const std::vector<Buffer *> &argBuf) {
  KernelProfile &p = prof[k.name];
  p.name = k.name;
  p.family = k.family;
  ++p.launches;
  p.seconds += s;
  p.flops += static_cast<double>(k.flopsPerToken) * T;
  // An embedding gathers T rows of its table, not the whole table; the
  // routed experts read the experts that got a pair (counted from the
  // kernel's group offsets: row 0 of its scratch [kMoeGroupScratchRows, E + 1]),
  // not all E.
  double weights = static_cast<double>(k.weightBytes);
  if (k.family == "embed")
    weights = static_cast<double>(k.bytesPerToken) * T;
  if (k.family == "moe_experts")
    for (size_t i = 0; i < k.args.size(); ++i) {
      const ArgSpec &a = k.args[i];
      if (a.kind != "scratch" || a.shape.size() != 2 || a.shape[0] != kMoeGroupScratchRows ||
          a.shape[1] < 2 || !argBuf[i] || argBuf[i]->bytes < a.shape[1] * 4)
        continue;
      std::vector<int32_t> starts(a.shape[1]);
      argBuf[i]->read(starts.data(), starts.size() * sizeof(int32_t));
      int64_t used = 0;
      for (size_t e = 0; e + 1 < starts.size(); ++e)
        used += starts[e + 1] > starts[e];
      weights *= static_cast<double>(used) / static_cast<double>(starts.size() - 1);
      break;
    }
  p.bytes += static_cast<double>(k.bytesPerToken) * T + weights;
}

/// The stacked routed-expert weights of a launch (MXFP4 payload and scales,
/// or dense [slots, ...] tensors): local slot i's bytes are at
/// [i * size / slots, (i + 1) * size / slots).

} // namespace k3c::rt::detail
