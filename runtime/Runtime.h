//===- Runtime.h - the k3c runtime: load an artifact and run it -*- C++ -*-===//
//
// No LLVM/MLIR: reads manifest.json, verifies versions and hashes, loads the
// host kernel library (dlopen), maps weights from the checkpoint (MXFP4
// experts repacked into the kernel layout with models/MXFP4Layout.h), plans
// memory (weights, activations, per-sequence KDA/conv state and MLA cache)
// and executes the prefill and decode schedules. Errors are k3c::Error with
// the artifact file, kernel or tensor named.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_RUNTIME_RUNTIME_H
#define K3C_RUNTIME_RUNTIME_H

#include "support/Common.h"

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

namespace k3c::rt {

class Transport;

struct LoadOptions {
  std::string device = "auto"; ///< auto, cpu, cuda
  bool progress = false;
  int64_t maxSeqs = 0;         ///< 0: the artifact's capacity
  /// A paged MLA cache's pool in tokens (0: the artifact's default,
  /// capacity.cache_pages); ignored by artifacts with contiguous caches.
  int64_t cacheTokens = 0;
  /// Weights from this checkpoint instead of the compile-time path (an
  /// artifact moved to another machine); its config and index must still
  /// match the hashes in the manifest.
  std::string checkpoint;
  /// Expert parallelism: this model is one rank of the group `ep` connects
  /// (not owned). Routed experts live on their home ranks; each MoE layer
  /// exchanges its routed pairs through `ep` (docs/runtime.md).
  Transport *ep = nullptr;
  bool epBalance = true; ///< balanced placement (replicas of hot experts)
  /// The smallest share of an expert's pairs worth a replica (its weights
  /// fetched from the home rank). 0: on the GPU, the break-even of the
  /// expert's bytes over the link (250 GB/s) against its pairs' math (200
  /// TFLOP/s), ~200 pairs at K3's expert shapes; on the CPU (ranks are
  /// threads sharing memory) 1.
  int64_t epReplicaMinPairs = 0;
  /// Load weights holding NaN/Inf (otherwise loading stops at the first one,
  /// naming the tensor and the element).
  bool allowNonFinite = false;
};

/// What expert parallelism did so far on one rank.
struct EpStats {
  int64_t layers = 0;           ///< MoE layer executions
  int64_t pairsSent = 0;        ///< routed pairs dispatched to other ranks
  int64_t pairsComputed = 0;    ///< pairs this rank's experts computed
  int64_t replicasFetched = 0;  ///< expert weights fetched from home ranks
  int64_t bytesSent = 0;        ///< through the transport
  double exchangeSeconds = 0, planSeconds = 0, expertSeconds = 0;
  /// Wall time of the routed-expert part of MoE layers (counts to combine),
  /// all of them and those of decode steps.
  double moeSeconds = 0, decodeMoeSeconds = 0;
  int64_t decodeLayers = 0; ///< MoE layer executions in decode steps
  int64_t replicaMinPairs = 0; ///< the smallest share worth a replica (last layer)
};

struct MemoryPlan {
  int64_t weightBytes = 0, activationBytes = 0, stateBytes = 0, scratchBytes = 0;
  int64_t stateBytesPerSeq = 0;
  /// The KDA recurrent state's dtype ("f32", or "bf16" from k3-compile
  /// --kda-state-dtype=bf16); empty without KDA layers.
  std::string kdaStateDtype;
  int64_t maxTokens = 0, maxSeqs = 0, maxContext = 0;
  /// A paged MLA cache (cachePage > 0): tokens a page, the pool's pages
  /// (page 0 the zero page no sequence gets), the bytes of one page over all
  /// MLA layers (counted in stateBytes, not in stateBytesPerSeq).
  int64_t cachePage = 0, cachePages = 0, cachePageBytes = 0;
  /// Pages the sequences hold now, and at most since the last reset;
  /// pagesSpan: the highest held page + 1 (at least 1, the zero page), what
  /// a growable pool keeps mapped at most once it is trimmed.
  int64_t pagesInUse = 0, pagesPeak = 0, pagesSpan = 1;
};

/// The expert ids one router launch chose ([tokens, topK], in token order).
struct RoutingRecord {
  int64_t tokens = 0, topK = 0;
  std::vector<int32_t> ids;
};

struct KernelProfile {
  std::string name, family;
  int64_t launches = 0;
  double seconds = 0;
  double flops = 0, bytes = 0;
};

class Model {
public:
  static std::unique_ptr<Model> load(const std::string &artifactDir, const LoadOptions &o);
  virtual ~Model() = default;

  virtual int64_t vocabSize() const = 0;
  virtual int64_t eosTokenId() const = 0;
  virtual std::string checkpointPath() const = 0;
  /// bf16 (the model's contract) or f32 (kernels checked at fp32 tolerance).
  virtual std::string activationDtype() const = 0;
  virtual std::string deviceName() const = 0;
  virtual const MemoryPlan &memoryPlan() const = 0;

  /// Starts a batch of `n` fresh sequences (states zeroed, caches empty).
  virtual void reset(int64_t n) = 0;
  /// Prefill: one prompt per sequence of the batch; returns last-token
  /// logits [n, vocab] (the model's buffer: valid until the next step).
  /// Prompts longer than a step's capacity run in prefillRounds(prompts)
  /// rounds; `rounds` > that adds steps without sequences at the end (under
  /// expert parallelism every rank must run the same number of steps).
  virtual const std::vector<float> &prefill(const std::vector<std::vector<int64_t>> &prompts,
                                            int64_t rounds = 0) = 0;
  /// A prompt prefix shared by every sequence of the batch (a system
  /// prompt): right after reset, runs `prefix` once, on sequence 0 alone,
  /// then starts every sequence from a copy of its states (KDA state, conv
  /// window, the prefix's MLA cache rows; a paged MLA cache shares the
  /// prefix's full pages and copies only its last, partial one). prefill()
  /// then takes the rest of each prompt; its per-layer trace and routing
  /// records cover the whole prompts, as without the prefix step. Not under
  /// expert parallelism (ranks would run different steps).
  virtual void prefillPrefix(const std::vector<int64_t> &prefix) = 0;
  /// Sequence `n` of the batch starts over, empty (its states zeroed, its
  /// MLA cache pages returned); the others keep theirs. The next prefill or
  /// decode step takes its first tokens (continuous batching: a finished
  /// sequence's slot takes the next prompt).
  virtual void restartSequence(int64_t n) = 0;
  /// Continuous batching over prompts sharing a prefix: right after
  /// prefillPrefix, keeps a copy of the prefix's states in the artifact's
  /// last sequence slot (the batch must leave it free: at most max_seqs - 1
  /// sequences) and, of a paged MLA cache, a hold on the prefix's pages;
  /// restartFromPrefix(n) then starts sequence n from that copy, holding
  /// the prefix's length, instead of empty. reset drops the copy.
  virtual void keepPrefix() = 0;
  virtual void restartFromPrefix(int64_t n) = 0;
  /// Sequence `n` leaves the batch: its pages are returned and the batch's
  /// last sequence moves into its place (states copied, pages and length
  /// taken over), so the batch is one smaller and keeps its order otherwise.
  virtual void retireSequence(int64_t n) = 0;
  /// The prefill steps `prompts` need (0 for none); throws when they cannot
  /// be cut into steps of the artifact's capacity.
  virtual int64_t prefillRounds(const std::vector<std::vector<int64_t>> &prompts) const = 0;
  /// One prefill or decode step with no sequences of this model: under
  /// expert parallelism the rank still serves its experts to the pairs the
  /// other ranks send (a rank without prompts runs only these).
  virtual void idle(bool prefillStep) = 0;
  /// Decode: one token per sequence; returns logits [n, vocab] (valid until
  /// the next step).
  virtual const std::vector<float> &decode(const std::vector<int64_t> &tokens) = 0;
  /// Greedy decoding without the logits' copy to the host: prefill or one
  /// decode step as above, then each sequence's next token as a greedy
  /// Sampler picks it (std::max_element: the first maximum; NaNs lose but in
  /// column 0), computed where the logits are by the artifact's argmax
  /// kernel, so N ids come back instead of N x vocab floats (84 MB a step at
  /// 128 sequences of K3's vocabulary). An artifact without that kernel
  /// (an older k3c) copies the logits and picks on the host: the same ids.
  virtual const std::vector<int64_t> &prefillGreedy(const std::vector<std::vector<int64_t>> &prompts,
                                                    int64_t rounds = 0) = 0;
  virtual const std::vector<int64_t> &decodeGreedy(const std::vector<int64_t> &tokens) = 0;
  /// Tokens each sequence holds so far.
  virtual const std::vector<int64_t> &lengths() const = 0;

  virtual void enableProfiling(bool on) = 0;
  /// Keeps, after each step, the residual stream after every layer
  /// ("layers.N" -> [T, hidden] fp32) for per-layer checks.
  virtual void enableTracing(bool on) = 0;
  virtual const std::map<std::string, std::vector<float>> &trace() const = 0;
  /// Keeps the expert ids of every MoE router launch, in launch order (for
  /// k3-run --check, which lets the reference follow the compiled model's
  /// choices at near ties); launches run eagerly while on.
  virtual void recordRouting(bool on) = 0;
  /// The records since the last call (moved out).
  virtual std::vector<RoutingRecord> takeRouting() = 0;
  virtual std::vector<KernelProfile> profile() const = 0;
  /// Ablation (k3-bench --ablate): from the next step on, the launches of
  /// these kernel families are left out (decode graphs are captured anew),
  /// so a step's time without a family, against the whole step's, is what
  /// the family costs the step where its launches overlap their neighbours
  /// (programmatic dependent launch), which per-kernel events cannot show.
  /// The left-out kernels' outputs keep stale values: tokens and states are
  /// meaningless while any family is left out and until the next reset.
  /// The MoE router's outputs index other kernels' loads: it cannot be left
  /// out (an Error naming it), and under expert parallelism no family can
  /// (the other ranks wait for this rank's exchanges); nor can a family no
  /// launch of the model has (an Error listing its families). An empty set
  /// restores every launch.
  virtual void skipFamilies(const std::set<std::string> &families) = 0;
  /// Device time of the last step when it replayed a CUDA graph (events
  /// around the replay: the kernels with their launch gaps, without the
  /// inputs' upload and the logits' copy to the host); 0 otherwise.
  virtual double lastGraphSeconds() const = 0;
  virtual const EpStats &epStats() const = 0;
};

/// Temperature / top-p sampling (temperature 0: greedy), seeded.
class Sampler {
public:
  Sampler(double temperature, double topP, uint64_t seed)
      : temperature(temperature), topP(topP), rng(seed) {}
  int64_t sample(const float *logits, int64_t vocab);

private:
  double temperature, topP;
  Rng rng;
};

} // namespace k3c::rt

#endif // K3C_RUNTIME_RUNTIME_H
