//===- k3-run.cpp - execute a compiled k3c artifact -----------------------===//

#include "support/Npy.h"
#include "models/Reference.h"
#include "runtime/Cuda.h"
#include "runtime/ExpertParallel.h"
#include "runtime/Launcher.h"
#include "runtime/Nccl.h"
#include "runtime/Runtime.h"
#include "tokenizer/Tokenizer.h"
#include "tools/common/Args.h"
#include "tools/common/TextPrompts.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sys/wait.h>
#include <unistd.h>
#include <sstream>
#include <thread>

static const char *kHelp = R"(k3-run: execute a compiled k3c artifact (prefill + decode)

usage: k3-run ARTIFACT_DIR (--prompt TEXT | --prompt-file FILE | --prompt-ids 1,2,3 | --batch FILE)
              [options]

options:
  --prompt TEXT          the prompt as text, encoded with the checkpoint's tokenizer
                         (tiktoken.model + tokenizer_config.json); the generated text is
                         printed as it is produced (valid UTF-8 at every flush) and generation
                         stops at EOS or <|im_end|>
  --prompt-file FILE     the prompt text from FILE
  --chat                 wrap the prompt in the model's chat format (system turn, user turn,
                         then the assistant's turn is generated)
  --system TEXT          the system message of --chat (default: Kimi's)
  --interactive          a multi-turn chat on one sequence: each stdin line is a user turn (the
                         first may come from --prompt / --prompt-file), prefilled onto the
                         conversation the model holds (nothing is prefilled twice), the answer
                         streamed (at most --max-new-tokens, up to <|im_end|>); an empty line
                         or EOF ends it and prints the conversation's ids. Implies --chat
  --tokenizer DIR        tokenizer files from DIR (default: --checkpoint, else the artifact's
                         checkpoint)
  --prompt-ids IDS       comma-separated prompt token ids
  --batch FILE           several prompts, decoded together: one comma-separated id line each,
                         or JSONL (one {"prompt": "..."} or {"messages": [{"role": ...,
                         "content": ...}]} object a line; the texts print at the end). More
                         prompts than the artifact's sequences (--max-seqs) are batched
                         continuously: a finished sequence's slot takes the next prompt while
                         the others decode (not with --check, --dump-logits, --profile)
  --max-new-tokens N     tokens to generate per sequence (default 8)
  --device D             auto (default: the GPU when the artifact has sm_90a kernels and a GPU
                         is present, else the CPU), cpu or cuda
  --checkpoint DIR       weights from DIR instead of the path recorded at compile time (the
                         config and index must match the artifact's SHA-256)
  --temperature T        0 (default) = greedy; > 0 samples. Greedy runs without --check or
                         --dump-logits pick the next tokens where the logits are (the
                         artifact's argmax kernel: N ids come back a step, not N x vocab
                         floats; K3C_HOST_GREEDY=1 copies the logits and picks on the host)
  --top-p P              nucleus sampling mass (default 1.0)
  --samples N            N completions of the one prompt, sampled independently (the prompt is
                         prefilled once and forked; at temperature 0 they are all the same)
  --seed S               sampling seed (default 0)
  --dump-logits FILE     float32 .npy [steps, batch, vocab], one row per generated position
  --check                also run the reference executor on the same inputs and print the
                         logits error per step (max abs, max rel, mean abs); exits 1 if
                         NaN/inf positions differ, and for f32 builds if the greedy tokens
                         differ or the error exceeds 1e-5 of the logits' scale (against
                         the exact reference: fp64, nothing rounded); bf16 builds
                         run the f32 reference too and fail where the compiled logits are
                         further from it than 2 x the bf16 reference's distance + 1e-2;
                         for a step that fails, also the residual stream's error after
                         each layer of the forward call that gave its logits; the
                         references follow the compiled expert choice at near ties
                         (--check-tie)
  --check-layers         --check: those per-layer lines for every step
  --check-factor F       bf16 --check: the factor on the bf16 reference's distance (default 2)
  --check-floor T        --check: the tolerance floor of the logits' scale (default 1e-2 for
                         bf16 builds, 1e-5 for f32)
  --check-tie W          --check: where the compiled model's expert set differs from the
                         reference's, the reference takes the compiled one if every compiled
                         expert scores within W (relative) of its own k-th best score: a
                         tie the build's rounding may flip (default 5e-2 for bf16 builds,
                         1e-4 for f32; 0 never follows)
  --profile              per-kernel time, bytes, FLOPs and achieved rates
  --ep R                 expert parallelism over R ranks: the prompts are split into R
                         contiguous groups, the routed experts of every MoE layer are sharded
                         over the ranks and the routed pairs exchanged each layer
                         (docs/runtime.md); prints per-rank EP statistics and decodes exactly
                         --max-new-tokens steps. On the CPU: R threads of this process. With
                         --device cuda: NCCL, one process per GPU: k3-run starts R processes
                         (rank r on GPU r) on this host. On several hosts, start one process
                         per GPU with a launcher: torchrun (RANK, WORLD_SIZE, LOCAL_RANK), Open
                         MPI (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK), Slurm's srun
                         (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) or K3C_EP_RANK and
                         K3C_EP_WORLD; the world size must equal R, and the local rank picks
                         the GPU. Rank 0 sends NCCL's id to the others over TCP: it listens on
                         MASTER_ADDR:MASTER_PORT (K3C_EP_ADDR / K3C_EP_PORT override them;
                         under torchrun's agent store, MASTER_PORT + 1), or through
                         K3C_EP_ID_FILE (a path all ranks see) when that is set. Each GPU rank
                         writes its own --dump-logits FILE.rank<r>.npy. K3C_EP_TIMEOUT_S
                         (default 120): how long a rank waits for the others (rendezvous and
                         every exchange) before it aborts with an error.
  --ep-no-balance        keep every expert on its home rank (no replicas of hot experts)
  --ep-replica-min-pairs N
                         balanced placement makes a replica (fetches the expert's weights from
                         its home rank) only for a share of at least N pairs; default on the
                         GPU: the break-even of the expert's bytes over the link against its
                         pairs' math (213 pairs for MXFP4 experts, so decode steps keep
                         experts home), on the CPU 1
  --max-seqs N           use N of the artifact's sequence slots (states, logits and the paged
                         cache's pool sized for N: an artifact built for a larger GPU); more
                         prompts than N are batched continuously
  --cache-tokens N       artifacts with a paged MLA cache (k3-compile --mla-page): the page pool
                         in tokens shared by all sequences (default: the artifact's, every
                         sequence's whole context unless compiled with --cache-tokens); pages
                         are handed out as sequences grow, and a step that finds the pool
                         full stops with an error naming it
  --no-shared-prefix     prefill every prompt whole: by default a prefix of at least 16 tokens
                         that all prompts of a batch share (a system prompt) is prefilled once
                         and every sequence continues from a copy of its states (a paged MLA
                         cache shares the prefix's pages); batched continuously (4+ slots),
                         the prefix is kept in the last slot for every next prompt; not
                         under --ep
  --allow-nonfinite      load weights that hold NaN/Inf (by default loading stops at the first,
                         naming the tensor and the element)
  --quiet                no progress lines
  --help                 this text
)";

namespace {

struct Err {
  double maxAbs = 0, maxRel = 0, meanAbs = 0;
  bool nanMismatch = false;
};

Err compare(const float *a, const float *ref, int64_t n) {
  Err e;
  double scale = 0;
  for (int64_t i = 0; i < n; ++i)
    scale = std::max(scale, static_cast<double>(std::fabs(ref[i])));
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) != std::isnan(ref[i]) || std::isinf(a[i]) != std::isinf(ref[i])) {
      e.nanMismatch = true;
      continue;
    }
    if (!std::isfinite(ref[i]))
      continue;
    double d = std::fabs(static_cast<double>(a[i]) - ref[i]);
    e.maxAbs = std::max(e.maxAbs, d);
    e.maxRel = std::max(e.maxRel, d / std::max(scale, 1e-30));
    e.meanAbs += d / n;
  }
  return e;
}

/// printf into the end of `out`.
static void appendf(std::string &out, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0)
    out.append(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
}

/// Greedy decoding that keeps no logits (no --check, --dump-logits or
/// sampling) picks each next token where the logits are (the artifact's
/// argmax kernel): N ids come back a step instead of N x vocab floats.
/// K3C_HOST_GREEDY=1 copies the logits and picks on the host instead.
static bool greedyWhereLogitsAre(const k3c::Args &args, double temperature) {
  return temperature <= 0 && !args.has("check") && !args.has("dump-logits") &&
         !k3c::envSwitch("K3C_HOST_GREEDY", false);
}

/// --interactive: a multi-turn chat on one sequence. Each user turn (the
/// first from --prompt / --prompt-file when given, then one stdin line each
/// until an empty line or EOF) is encoded in the chat format and prefilled
/// onto the conversation the model already holds (its states and MLA cache
/// carry over: nothing is prefilled twice); the previous answer's turn is
/// closed by its last sampled token and <|im_end|>. The answer streams as
/// text; a line per turn gives the tokens prefilled, reused and generated.
int runInteractive(const k3c::Args &args, k3c::rt::Model &model, const k3c::tok::Tokenizer &tok,
                   int64_t steps, double temperature, double topP) {
  const int64_t V = model.vocabSize(), context = model.memoryPlan().maxContext;
  k3c::rt::Sampler sampler(temperature, topP, static_cast<uint64_t>(args.getInt("seed", 0)));
  const std::vector<int64_t> stops = tok.stopIds();
  const int64_t imEnd = tok.specialId("<|im_end|>");
  if (imEnd < 0)
    throw k3c::Error("--interactive needs the chat format's <|im_end|>, which the tokenizer lacks");
  std::string first;
  if (args.has("prompt-file")) {
    std::ifstream in(args.get("prompt-file"), std::ios::binary);
    if (!in)
      throw k3c::Error("cannot open --prompt-file '" + args.get("prompt-file") + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    first = ss.str();
  } else {
    first = args.get("prompt");
  }
  const bool tty = isatty(STDIN_FILENO);
  const bool deviceGreedy = greedyWhereLogitsAre(args, temperature);
  model.reset(1);
  std::vector<int64_t> convo;  // every token the model holds
  int64_t pending = -1;        // the last sampled token, not fed yet
  for (int64_t turn = 0;; ++turn) {
    std::string line;
    if (turn == 0 && !first.empty()) {
      line = first;
    } else {
      if (tty)
        std::fputs("> ", stderr);
      if (!std::getline(std::cin, line) || line.empty())
        break;
    }
    std::vector<k3c::tok::Message> msgs;
    if (turn == 0 && args.has("system"))
      msgs.push_back({"system", args.get("system")});
    msgs.push_back({"user", line});
    std::vector<int64_t> ids = turn == 0 ? tok.encodeChat(msgs) : tok.encodeChatContinuation(msgs);
    if (turn > 0) { // close the answer's turn
      std::vector<int64_t> close;
      if (pending >= 0)
        close.push_back(pending);
      if (pending != imEnd)
        close.push_back(imEnd);
      ids.insert(ids.begin(), close.begin(), close.end());
    }
    const int64_t held = static_cast<int64_t>(convo.size());
    if (held + static_cast<int64_t>(ids.size()) + steps - 1 > context)
      throw k3c::Error("turn " + std::to_string(turn + 1) + ": the conversation would hold " +
                       std::to_string(held + static_cast<int64_t>(ids.size()) + steps - 1) +
                       " tokens, more than the artifact's context of " + std::to_string(context) +
                       " (compile with --max-context, or lower --max-new-tokens)");
    auto t0 = std::chrono::steady_clock::now();
    // Greedy turns pick where the logits are (the argmax kernel), as k3-run
    // does without --interactive.
    std::vector<float> logits;
    std::vector<int64_t> greedy;
    if (deviceGreedy)
      greedy = model.prefillGreedy({ids}, 0);
    else
      logits = model.prefill({ids}, 0);
    const double ttft =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    convo.insert(convo.end(), ids.begin(), ids.end());
    const int64_t promptEnd = static_cast<int64_t>(convo.size());
    k3c::tok::Utf8Stream stream;
    std::vector<int64_t> generated;
    pending = -1;
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t next = deviceGreedy ? greedy[0] : sampler.sample(logits.data(), V);
      generated.push_back(next);
      if (std::find(stops.begin(), stops.end(), next) != stops.end()) {
        pending = next;
        break;
      }
      std::string bytes;
      try {
        bytes = tok.tokenBytes(next);
      } catch (const k3c::Error &) {
        bytes = "\xEF\xBF\xBD"; // an id the vocabulary lacks (a random model)
      }
      std::fputs(stream.push(bytes).c_str(), stdout);
      std::fflush(stdout);
      if (s + 1 == steps) {
        pending = next;
        break;
      }
      if (deviceGreedy)
        greedy = model.decodeGreedy({next});
      else
        logits = model.decode({next});
      convo.push_back(next);
    }
    std::fputs((stream.finish() + "\n").c_str(), stdout);
    std::printf("turn %lld: %zu tokens prefilled onto %lld held (context %lld), time to first "
                "token %.2f ms; generated",
                static_cast<long long>(turn + 1), ids.size(), static_cast<long long>(held),
                static_cast<long long>(promptEnd), ttft * 1e3);
    for (int64_t id : generated)
      std::printf(" %lld", static_cast<long long>(id));
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("conversation: %zu tokens held:", convo.size());
  for (int64_t id : convo)
    std::printf(" %lld", static_cast<long long>(id));
  std::printf("\n");
  return 0;
}

/// --ep R: R ranks as threads, one model each, connected in-process.
/// --ep R --device cuda on one host: R processes of this program, rank r on
/// GPU r (the r-th entry of CUDA_VISIBLE_DEVICES when set), meeting through a
/// rendezvous file. A rank that fails stops the others.
int launchRanks(int64_t R, char **argv) {
  std::string idFile = (std::filesystem::temp_directory_path() /
                        ("k3c-ep-" + std::to_string(::getpid()) + ".id"))
                           .string();
  std::filesystem::remove(idFile);
  std::vector<std::string> devices;
  if (const char *vis = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string v = vis;
    for (size_t a = 0, b; a <= v.size(); a = b + 1) {
      b = v.find(',', a);
      if (b == std::string::npos)
        b = v.size();
      if (b > a)
        devices.push_back(v.substr(a, b - a));
    }
  }
  std::vector<pid_t> pids;
  for (int64_t r = 0; r < R; ++r) {
    pid_t pid = ::fork();
    if (pid < 0)
      throw k3c::Error("--ep: cannot start rank " + std::to_string(r));
    if (pid == 0) {
      ::setenv("K3C_EP_RANK", std::to_string(r).c_str(), 1);
      ::setenv("K3C_EP_WORLD", std::to_string(R).c_str(), 1);
      ::setenv("K3C_EP_ID_FILE", idFile.c_str(), 1);
      std::string dev = r < static_cast<int64_t>(devices.size()) ? devices[r] : std::to_string(r);
      ::setenv("CUDA_VISIBLE_DEVICES", dev.c_str(), 1);
      ::execv("/proc/self/exe", argv);
      std::fprintf(stderr, "k3-run: error: EP rank %lld: cannot exec: %s\n",
                   static_cast<long long>(r), std::strerror(errno));
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  int failedRank = -1, failedStatus = 0;
  for (size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    pid_t pid = ::wait(&status);
    if (pid < 0)
      break;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    auto it = std::find(pids.begin(), pids.end(), pid);
    if (!ok && failedRank < 0 && it != pids.end()) {
      failedRank = static_cast<int>(it - pids.begin());
      failedStatus = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      for (pid_t other : pids) // the others must not wait for it forever
        if (other != pid)
          ::kill(other, SIGTERM);
    }
  }
  std::filesystem::remove(idFile);
  if (failedRank >= 0) {
    std::fprintf(stderr,
                 "k3-run: error: EP rank %d failed (exit status %d); stopped the other ranks\n",
                 failedRank, failedStatus);
    return 1;
  }
  return 0;
}


/// The "sequence b: prompt N tokens -> generated ..." lines of sequences
/// [from, prompts.size()).
void printSequences(const std::vector<std::vector<int64_t>> &prompts,
                    const std::vector<std::vector<int64_t>> &generated, size_t from = 0) {
  for (size_t b = from; b < prompts.size(); ++b) {
    std::printf("sequence %zu: prompt %zu tokens -> generated", b, prompts[b].size());
    for (int64_t id : generated[b])
      std::printf(" %lld", static_cast<long long>(id));
    std::printf("\n");
  }
}

/// The longest prefix of at least 16 tokens that every prompt shares (each
/// keeping one token of its own), 0 for none or with --no-shared-prefix.
int64_t sharedPrefixLength(const k3c::Args &args,
                           const std::vector<std::vector<int64_t>> &prompts) {
  if (prompts.size() < 2 || args.has("no-shared-prefix"))
    return 0;
  size_t L = prompts[0].size() - 1;
  for (const auto &p : prompts) {
    L = std::min(L, p.size() - 1);
    size_t i = 0;
    while (i < L && p[i] == prompts[0][i])
      ++i;
    L = i;
  }
  return L >= 16 ? static_cast<int64_t>(L) : 0;
}

/// A batch of more prompts than the artifact's sequences (max_seqs):
/// continuous batching over max_seqs slots. A slot whose sequence finishes
/// (--max-new-tokens, or a stop token in text mode) restarts empty
/// (Model::restartSequence) and takes the next prompt in the next step,
/// while the other slots decode: a step gives every decoding slot its next
/// token and the slots still reading a prompt the rest of the step's
/// capacity (max_tokens; a prompt longer than that runs over several steps,
/// its logits unused until it is read). Steps where every slot has one token
/// run the decode entry (a CUDA graph on the GPU). Once no prompt is left,
/// finished slots leave the batch (Model::retireSequence). Prompts sharing
/// a prefix of 16+ tokens (sharedPrefixLength) with 4+ slots: the prefix is
/// prefilled once and kept in the last slot (Model::keepPrefix), every
/// prompt starts from its copy (Model::restartFromPrefix), one slot fewer
/// decodes. Not with --check, --dump-logits or --profile (those need one
/// batch).
int runContinuous(const k3c::Args &args, k3c::rt::Model &model,
                  const std::vector<std::vector<int64_t>> &prompts,
                  const k3c::tok::Tokenizer *tok, int64_t steps, double temperature,
                  double topP) {
  const auto &plan = model.memoryPlan();
  const int64_t shared = plan.maxSeqs >= 4 ? sharedPrefixLength(args, prompts) : 0;
  const int64_t B = static_cast<int64_t>(prompts.size()),
                N = std::min(plan.maxSeqs - (shared ? 1 : 0), B), V = model.vocabSize();
  k3c::rt::Sampler sampler(temperature, topP, static_cast<uint64_t>(args.getInt("seed", 0)));
  const bool deviceGreedy = greedyWhereLogitsAre(args, temperature);
  const std::vector<int64_t> stops = tok ? tok->stopIds() : std::vector<int64_t>{};
  struct Slot {
    int64_t prompt = -1;
    size_t fed = 0;       // prompt tokens read so far
    int64_t pending = -1; // the last sampled token, fed next step
  };
  std::vector<Slot> slots(N);
  std::vector<std::vector<int64_t>> generated(B);
  int64_t nextPrompt = 0, stepsRun = 0, tokensRun = 0;
  auto t0 = std::chrono::steady_clock::now();
  model.reset(N);
  if (shared) {
    model.prefillPrefix(std::vector<int64_t>(prompts[0].begin(), prompts[0].begin() + shared));
    model.keepPrefix();
    tokensRun += shared;
  }
  for (Slot &s : slots)
    s = Slot{nextPrompt++, static_cast<size_t>(shared), -1};
  std::vector<float> logits;
  std::vector<int64_t> greedy;
  while (true) {
    // Every slot one token; the capacity left goes to the prompts being read.
    const int64_t live = static_cast<int64_t>(slots.size());
    int64_t extra = plan.maxTokens - live;
    std::vector<std::vector<int64_t>> step(live);
    bool ones = true;
    for (int64_t n = 0; n < live; ++n) {
      Slot &s = slots[n];
      if (s.fed < prompts[s.prompt].size()) {
        const auto &p = prompts[s.prompt];
        const int64_t take =
            1 + std::min<int64_t>(static_cast<int64_t>(p.size() - s.fed) - 1, extra);
        extra -= take - 1;
        step[n].assign(p.begin() + s.fed, p.begin() + s.fed + take);
      } else {
        step[n] = {s.pending};
      }
      ones &= step[n].size() == 1;
      tokensRun += static_cast<int64_t>(step[n].size());
    }
    if (ones) {
      std::vector<int64_t> t(live);
      for (int64_t n = 0; n < live; ++n)
        t[n] = step[n][0];
      if (deviceGreedy)
        greedy = model.decodeGreedy(t);
      else
        logits = model.decode(t);
    } else if (deviceGreedy) {
      greedy = model.prefillGreedy(step, 0);
    } else {
      logits = model.prefill(step, 0);
    }
    ++stepsRun;
    // Sample where a slot has read its whole prompt; then the finished
    // slots take the next prompts, and without any left leave the batch
    // (the last slot moves into their place: retired from the back).
    std::vector<int64_t> retire;
    for (int64_t n = 0; n < static_cast<int64_t>(slots.size()); ++n) {
      Slot &s = slots[n];
      const auto &p = prompts[s.prompt];
      if (s.fed < p.size()) {
        s.fed += step[n].size();
        if (s.fed < p.size())
          continue; // still reading its prompt
      }
      const int64_t id = deviceGreedy ? greedy[n] : sampler.sample(&logits[n * V], V);
      auto &out = generated[s.prompt];
      out.push_back(id);
      const bool done = static_cast<int64_t>(out.size()) == steps ||
                        std::find(stops.begin(), stops.end(), id) != stops.end();
      if (!done) {
        s.pending = id;
      } else if (nextPrompt < B) {
        if (shared)
          model.restartFromPrefix(n);
        else
          model.restartSequence(n);
        s = Slot{nextPrompt++, static_cast<size_t>(shared), -1};
      } else {
        retire.push_back(n);
      }
    }
    for (auto it = retire.rbegin(); it != retire.rend(); ++it) {
      model.retireSequence(*it);
      slots[*it] = slots.back();
      slots.pop_back();
    }
    if (slots.empty())
      break;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (tok)
    for (int64_t b = 0; b < B; ++b)
      std::printf("text %lld: %s\n", static_cast<long long>(b),
                  k3c::generatedText(*tok, generated[b]).c_str());
  printSequences(prompts, generated);
  std::printf("%lld sequences over %lld slots (continuous batching; the artifact holds %lld "
              "sequences): %lld steps, %lld tokens run, %.2f s\n",
              static_cast<long long>(B), static_cast<long long>(N),
              static_cast<long long>(plan.maxSeqs),
              static_cast<long long>(stepsRun), static_cast<long long>(tokensRun), secs);
  if (shared)
    std::printf("shared prefix: %lld tokens, prefilled once and kept in slot %lld for %lld "
                "sequences\n",
                static_cast<long long>(shared), static_cast<long long>(plan.maxSeqs - 1),
                static_cast<long long>(B));
  if (plan.cachePage)
    std::printf("paged MLA cache: %lld of %lld pages held at the end, within the pool's first "
                "%lld, at most %lld\n",
                static_cast<long long>(plan.pagesInUse),
                static_cast<long long>(plan.cachePages - 1),
                static_cast<long long>(plan.pagesSpan),
                static_cast<long long>(plan.pagesPeak));
  return 0;
}

int runExpertParallel(const k3c::Args &args, const std::vector<std::vector<int64_t>> &prompts,
                      int64_t steps, double temperature, double topP, k3c::rt::LoadOptions lo,
                      char **argv) {
  int64_t R = args.getInt("ep", 1);
  const int64_t B = static_cast<int64_t>(prompts.size());
  // (A bound on the group: each rank is a thread on the CPU, a process with
  // its GPU on the device, and holds the replicated weights; --ep 999999
  // would otherwise start that many before any other check.)
  constexpr int64_t kMaxRanks = 1024;
  if (R < 1 || R > kMaxRanks)
    throw k3c::Error("--ep must be in [1, " + std::to_string(kMaxRanks) +
                     "] (the ranks of one expert-parallel group), got " + std::to_string(R));
  if (args.has("check") || args.has("profile"))
    throw k3c::Error("--ep runs do not support --check or --profile (compare --dump-logits "
                     "with a run without --ep)");
  if (lo.device == "auto")
    lo.device = "cpu";
  // A launcher's variables (torchrun, Open MPI, Slurm or K3C_EP_*) make this
  // process one rank of a multi-process group (runtime/Launcher.h).
  const k3c::rt::LaunchEnv launch = k3c::rt::readLaunchEnv();
  k3c::rt::checkLaunch(launch, R);
  bool nccl = lo.device == "cuda";
  int64_t only = -1; // multi-process: the one rank this process runs
  if (launch.launched() && launch.world > 1) {
    if (!nccl)
      throw k3c::Error(launch.describe() + ": multi-process EP runs over NCCL (--device cuda); "
                       "on the CPU --ep R runs R threads of one process");
    only = launch.rank;
    // The local rank picks this process's GPU (the driver reads the variable
    // when it initializes, later).
    std::string dev =
        k3c::rt::deviceForLocalRank(launch.localRank, std::getenv("CUDA_VISIBLE_DEVICES"));
    if (!dev.empty())
      ::setenv("CUDA_VISIBLE_DEVICES", dev.c_str(), 1);
  } else if (nccl && R > 1) {
    return launchRanks(R, argv);
  }
  lo.epBalance = !args.has("ep-no-balance");
  if (args.has("ep-replica-min-pairs")) {
    lo.epReplicaMinPairs = args.getInt("ep-replica-min-pairs", 0);
    if (lo.epReplicaMinPairs < 1)
      throw k3c::Error("--ep-replica-min-pairs must be at least 1, got " +
                       std::to_string(lo.epReplicaMinPairs));
  }
  std::unique_ptr<k3c::rt::InProcessHub> hub;
  if (!nccl)
    hub = std::make_unique<k3c::rt::InProcessHub>(R);
  const bool deviceGreedy = greedyWhereLogitsAre(args, temperature);
  struct RankResult {
    std::vector<std::vector<float>> stepLogits;
    std::vector<std::vector<int64_t>> generated;
    std::string error;
    k3c::rt::EpStats stats;
    int64_t first = 0, count = 0, vocab = 0;
    double seconds = 0, weightMB = 0;
  };
  std::vector<RankResult> res(R);
  auto rankMain = [&](int64_t r) {
    RankResult &out = res[r];
    std::unique_ptr<k3c::rt::Transport> transport;
    try {
      if (hub) {
        transport = hub->transport(r);
      } else {
        // NCCL needs this process's CUDA context first.
        std::string why;
        if (!k3c::rt::cuda::initialize(why))
          throw k3c::Error("--device cuda: " + why);
        const char *timeoutEnv = std::getenv("K3C_EP_TIMEOUT_S");
        int64_t timeoutS = timeoutEnv ? std::atoll(timeoutEnv) : 120;
        transport = k3c::rt::makeNcclTransport(r, R, launch.rendezvous,
                                               std::chrono::seconds(std::max<int64_t>(1, timeoutS)));
      }
      out.first = r * B / R;
      out.count = (r + 1) * B / R - out.first;
      k3c::rt::LoadOptions o = lo;
      o.ep = transport.get();
      o.progress = lo.progress && r == 0;
      auto model = k3c::rt::Model::load(args.positional[0], o);
      out.vocab = model->vocabSize();
      out.weightMB = model->memoryPlan().weightBytes / 1e6;
      std::vector<std::vector<int64_t>> mine(prompts.begin() + out.first,
                                             prompts.begin() + out.first + out.count);
      k3c::rt::Sampler sampler(temperature, topP,
                               static_cast<uint64_t>(args.getInt("seed", 0)) + r);
      // Every rank runs the same steps (the exchanges are collective): as many
      // prefill steps as the rank whose prompts need the most; a rank
      // without prompts runs steps without sequences, serving its experts.
      int64_t rounds = 0;
      for (int64_t q = 0; q < R; ++q) {
        int64_t a = q * B / R, b = (q + 1) * B / R;
        rounds = std::max(rounds, model->prefillRounds(std::vector<std::vector<int64_t>>(
                                      prompts.begin() + a, prompts.begin() + b)));
      }
      // The ranks load at different speeds: start the steps together.
      transport->barrier();
      auto t0 = std::chrono::steady_clock::now();
      if (out.count == 0) {
        for (int64_t i = 0; i < rounds; ++i)
          model->idle(/*prefillStep=*/true);
        for (int64_t s = 0; s < steps; ++s) {
          out.stepLogits.emplace_back();
          if (s + 1 < steps)
            model->idle(/*prefillStep=*/false);
        }
        out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        out.stats = model->epStats();
        return;
      }
      model->reset(out.count);
      // Greedy without --dump-logits: the ids from the argmax kernel (as below).
      std::vector<float> logits;
      std::vector<int64_t> greedy;
      if (deviceGreedy)
        greedy = model->prefillGreedy(mine, rounds);
      else
        logits = model->prefill(mine, rounds);
      out.generated.resize(out.count);
      for (int64_t s = 0; s < steps; ++s) {
        if (!deviceGreedy)
          out.stepLogits.push_back(logits);
        std::vector<int64_t> next(out.count);
        for (int64_t b = 0; b < out.count; ++b) {
          next[b] = deviceGreedy ? greedy[b] : sampler.sample(&logits[b * out.vocab], out.vocab);
          out.generated[b].push_back(next[b]);
        }
        if (s + 1 < steps) {
          if (deviceGreedy)
            greedy = model->decodeGreedy(next);
          else
            logits = model->decode(next);
        }
      }
      out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      out.stats = model->epStats();
    } catch (const std::exception &e) {
      out.error = e.what();
      if (transport)
        transport->abort(e.what()); // the other ranks stop instead of waiting
    }
  };
  std::vector<int64_t> mineRanks;
  if (only >= 0) {
    mineRanks = {only};
    rankMain(only);
  } else {
    std::vector<std::thread> threads;
    for (int64_t r = 1; r < R; ++r)
      threads.emplace_back(rankMain, r);
    rankMain(0);
    for (auto &t : threads)
      t.join();
    for (int64_t r = 0; r < R; ++r)
      mineRanks.push_back(r);
  }
  bool failed = false;
  for (int64_t r : mineRanks)
    if (!res[r].error.empty()) {
      std::fprintf(stderr, "k3-run: error: EP rank %lld: %s\n", static_cast<long long>(r),
                   res[r].error.c_str());
      failed = true;
    }
  if (failed)
    return 1;
  const int64_t V = res[mineRanks[0]].vocab;
  std::printf("expert parallelism: %lld ranks (%s), placement %s\n", static_cast<long long>(R),
              nccl ? (only >= 0 ? "NCCL, one process per rank" : "NCCL") : "in-process",
              lo.epBalance ? "balanced" : "home experts only");
  if (lo.epBalance)
    std::printf("replicas only for shares of >= %lld pairs\n",
                static_cast<long long>(res[mineRanks[0]].stats.replicaMinPairs));
  for (int64_t r : mineRanks)
    for (int64_t b = 0; b < res[r].count; ++b) {
      std::printf("sequence %lld: prompt %zu tokens -> generated",
                  static_cast<long long>(res[r].first + b), prompts[res[r].first + b].size());
      for (int64_t id : res[r].generated[b])
        std::printf(" %lld", static_cast<long long>(id));
      std::printf("\n");
    }
  std::printf("%-6s %6s %10s %10s %10s %10s %12s %12s %10s %11s %10s %10s %16s %15s\n", "rank",
              "seqs", "moe-layers", "computed", "sent", "replicas", "bytes", "exchange-ms",
              "plan-ms", "weights-MB", "expert-ms", "moe-ms", "prefill-layer-ms",
              "decode-layer-us");
  for (int64_t r : mineRanks) {
    const auto &st = res[r].stats;
    const int64_t prefillLayers = st.layers - st.decodeLayers;
    std::printf("%-6lld %6lld %10lld %10lld %10lld %10lld %12lld %12.3f %10.3f %11.2f %10.3f "
                "%10.3f %16.3f %15.1f\n",
                static_cast<long long>(r), static_cast<long long>(res[r].count),
                static_cast<long long>(st.layers), static_cast<long long>(st.pairsComputed),
                static_cast<long long>(st.pairsSent), static_cast<long long>(st.replicasFetched),
                static_cast<long long>(st.bytesSent), st.exchangeSeconds * 1e3,
                st.planSeconds * 1e3, res[r].weightMB, st.expertSeconds * 1e3,
                st.moeSeconds * 1e3,
                prefillLayers ? (st.moeSeconds - st.decodeMoeSeconds) * 1e3 / prefillLayers : 0.0,
                st.decodeLayers ? st.decodeMoeSeconds * 1e6 / st.decodeLayers : 0.0);
  }
  if (args.has("dump-logits") && only >= 0) {
    const RankResult &rr = res[only];
    std::vector<float> dump(steps * rr.count * V);
    for (int64_t s = 0; s < steps; ++s)
      std::copy(rr.stepLogits[s].begin(), rr.stepLogits[s].end(), dump.begin() + s * rr.count * V);
    k3c::writeNpyF32(args.get("dump-logits") + ".rank" + std::to_string(only) + ".npy",
                     {steps, rr.count, V}, dump);
  } else if (args.has("dump-logits")) {
    std::vector<float> dump(steps * B * V);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t s = 0; s < steps; ++s)
        std::copy(res[r].stepLogits[s].begin(), res[r].stepLogits[s].end(),
                  dump.begin() + (s * B + res[r].first) * V);
    k3c::writeNpyF32(args.get("dump-logits"), {steps, B, V}, dump);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    k3c::Args args(argc, argv,
                   {"prompt-ids", "batch", "max-new-tokens", "device", "temperature", "top-p",
                    "seed", "dump-logits", "checkpoint", "ep", "ep-replica-min-pairs", "prompt",
                    "prompt-file", "system",
                    "tokenizer", "check-factor", "check-floor", "check-tie", "cache-tokens", "samples",
                    "max-seqs"},
                   {"help", "check", "check-layers", "profile", "quiet", "ep-no-balance", "chat",
                    "allow-nonfinite", "no-shared-prefix", "interactive"});
    if (args.has("help")) {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (args.positional.size() != 1)
      throw k3c::Error("need exactly one artifact directory (see --help)");
    // Text in, text out: the prompts are encoded once the tokenizer's
    // directory is known (the artifact records its checkpoint).
    const bool text = k3c::textPrompts(args);
    std::unique_ptr<k3c::tok::Tokenizer> tokenizer;
    std::vector<std::vector<int64_t>> prompts;
    // --samples N: N sequences of the one prompt (a shared prefix: prefilled
    // once), sampled independently.
    const int64_t samples = args.getInt("samples", 1);
    if (samples < 1 || samples > 65536)
      throw k3c::Error("--samples must be in [1, 65536], got " + std::to_string(samples));
    if (samples > 1 && args.has("interactive"))
      throw k3c::Error("--samples does not go with --interactive");
    auto replicate = [&] {
      if (samples == 1)
        return;
      if (prompts.size() != 1)
        throw k3c::Error("--samples needs one prompt, got " + std::to_string(prompts.size()));
      prompts.assign(static_cast<size_t>(samples), prompts[0]);
    };
    auto encodePrompt = [&](const std::string &dir) {
      tokenizer = k3c::tok::Tokenizer::load(dir);
      prompts = k3c::encodeTextPrompts(args, *tokenizer);
      replicate();
    };
    if (!text) {
      prompts = k3c::readPrompts(args);
      replicate();
    }
    int64_t steps = args.getInt("max-new-tokens", 8);
    if (steps < 1)
      throw k3c::Error("--max-new-tokens must be >= 1, got " + std::to_string(steps));
    if (!(args.getDouble("check-floor", 0.0) >= 0) || !(args.getDouble("check-factor", 0.0) >= 0) ||
        !(args.getDouble("check-tie", 0.0) >= 0))
      throw k3c::Error("--check-floor, --check-factor and --check-tie must be >= 0");
    if (args.has("check-layers") && !args.has("check"))
      throw k3c::Error("--check-layers needs --check");
    double temperature = args.getDouble("temperature", 0.0), topP = args.getDouble("top-p", 1.0);
    if (!(temperature >= 0) || !std::isfinite(temperature) || !(topP > 0 && topP <= 1))
      throw k3c::Error("--temperature must be a finite number >= 0 and --top-p in (0, 1]");

    k3c::rt::LoadOptions lo;
    lo.device = args.get("device", "auto");
    lo.progress = !args.has("quiet");
    lo.checkpoint = args.get("checkpoint");
    lo.allowNonFinite = args.has("allow-nonfinite");
    lo.maxSeqs = k3c::maxSeqsOption(args);
    lo.cacheTokens = args.getInt("cache-tokens", 0);
    if (args.has("cache-tokens") && (lo.cacheTokens < 1 || lo.cacheTokens > (int64_t(1) << 32)))
      throw k3c::Error("--cache-tokens must be in [1, 2^32], got " +
                       std::to_string(lo.cacheTokens));
    if (args.has("interactive") && (args.has("check") || args.has("dump-logits") ||
                                    args.has("profile") || args.has("ep")))
      throw k3c::Error("--interactive does not take --check, --dump-logits, --profile or --ep");
    if (args.has("ep")) {
      if (text) {
        if (!args.has("tokenizer") && !args.has("checkpoint"))
          throw k3c::Error("--prompt with --ep needs --tokenizer DIR or --checkpoint DIR");
        encodePrompt(args.get("tokenizer", args.get("checkpoint")));
      }
      return runExpertParallel(args, prompts, steps, temperature, topP, lo, argv);
    }
    auto t0 = std::chrono::steady_clock::now();
    auto model = k3c::rt::Model::load(args.positional[0], lo);
    if (args.has("interactive")) {
      tokenizer = k3c::tok::Tokenizer::load(args.get("tokenizer", model->checkpointPath()));
      std::printf("device: %s\n", model->deviceName().c_str());
      std::fflush(stdout);
      return runInteractive(args, *model, *tokenizer, steps, temperature, topP);
    }
    if (text)
      encodePrompt(args.get("tokenizer", model->checkpointPath()));
    // Every sequence must fit the cache before any work is done (the last
    // sampled token is not fed back).
    for (size_t b = 0; b < prompts.size(); ++b)
      if (static_cast<int64_t>(prompts[b].size()) + steps - 1 > model->memoryPlan().maxContext)
        throw k3c::Error("prompt " + std::to_string(b) + " (" + std::to_string(prompts[b].size()) +
                         " tokens) + " + std::to_string(steps) +
                         " new tokens exceed the artifact's context of " +
                         std::to_string(model->memoryPlan().maxContext) +
                         " tokens (compile with --max-context, or lower --max-new-tokens)");
    double loadS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto &plan = model->memoryPlan();
    std::printf("device: %s\n", model->deviceName().c_str());
    std::printf("memory plan: weights %.2f MB, activations %.2f MB, states %.2f MB (%.3f MB per "
                "sequence; KDA state%s, conv window, %s), scratch %.2f MB; "
                "capacity %lld tokens/step, %lld sequences\n",
                plan.weightBytes / 1e6, plan.activationBytes / 1e6, plan.stateBytes / 1e6,
                plan.stateBytesPerSeq / 1e6,
                plan.kdaStateDtype.empty() ? "" : (" " + plan.kdaStateDtype).c_str(),
                (plan.cachePage ? "the paged MLA cache's pool below"
                                : "MLA cache of " + std::to_string(plan.maxContext) + " tokens")
                    .c_str(),
                plan.scratchBytes / 1e6, static_cast<long long>(plan.maxTokens),
                static_cast<long long>(plan.maxSeqs));
    if (plan.cachePage)
      std::printf("paged MLA cache: %lld pages of %lld tokens (%.3f MB a page over the MLA "
                  "layers; %lld tokens for the sequences), pages handed out as they grow\n",
                  static_cast<long long>(plan.cachePages), static_cast<long long>(plan.cachePage),
                  plan.cachePageBytes / 1e6,
                  static_cast<long long>((plan.cachePages - 1) * plan.cachePage));
    std::printf("loaded in %.2f s\n", loadS);
    model->enableProfiling(args.has("profile"));
    model->enableTracing(args.has("check"));
    // Checks let the reference follow the compiled routing at near ties
    // (--check-tie).
    const bool routingHints = args.has("check");
    model->recordRouting(routingHints);

    const int64_t B = static_cast<int64_t>(prompts.size()), V = model->vocabSize();
    if (B > plan.maxSeqs) {
      if (args.has("check") || args.has("dump-logits") || args.has("profile"))
        throw k3c::Error(std::to_string(B) + " prompts exceed the artifact's " +
                         std::to_string(plan.maxSeqs) +
                         " sequences: they would run by continuous batching, and --check, "
                         "--dump-logits and --profile need one batch (compile with --max-seqs)");
      return runContinuous(args, *model, prompts, tokenizer.get(), steps, temperature, topP);
    }
    k3c::rt::Sampler sampler(temperature, topP, static_cast<uint64_t>(args.getInt("seed", 0)));
    model->reset(B);
    std::vector<std::vector<int64_t>> generated(B);
    std::vector<float> dump;
    const bool deviceGreedy = greedyWhereLogitsAre(args, temperature);
    // A prefix every prompt of the batch shares (a system prompt, a few-shot
    // preamble) of at least 16 tokens is prefilled once and forked
    // (Model::prefillPrefix); every prompt keeps at least one token of its own.
    const int64_t shared = sharedPrefixLength(args, prompts);
    std::vector<std::vector<int64_t>> rests = prompts;
    auto tp = std::chrono::steady_clock::now();
    if (shared) {
      model->prefillPrefix(std::vector<int64_t>(prompts[0].begin(), prompts[0].begin() + shared));
      for (auto &r : rests)
        r.erase(r.begin(), r.begin() + shared);
    }
    std::vector<float> logits;
    std::vector<int64_t> greedy;
    if (deviceGreedy)
      greedy = model->prefillGreedy(rests);
    else
      logits = model->prefill(rests);
    rests.clear();
    double ttft = std::chrono::duration<double>(std::chrono::steady_clock::now() - tp).count();
    if (shared)
      std::printf("shared prefix: %lld tokens, prefilled once for %lld sequences\n",
                  static_cast<long long>(shared), static_cast<long long>(B));
    std::map<std::string, std::vector<float>> prefillTrace = model->trace();
    // --check keeps tracing on through decode: stepTrace[s] holds the
    // residual stream after each layer of the call that gave step s's logits
    // (one row a sequence; step 0's came from the prefill).
    std::vector<std::map<std::string, std::vector<float>>> stepTrace(1);
    // The router launches of the prefill, then of each decode step.
    std::vector<std::vector<k3c::rt::RoutingRecord>> stepRouting;
    if (routingHints)
      stepRouting.push_back(model->takeRouting());
    std::vector<std::vector<float>> stepLogits;
    auto td = std::chrono::steady_clock::now();
    // Text mode streams the text of a single sequence as it is produced
    // (valid UTF-8 at every flush); generation ends when every sequence has
    // produced a stop token (EOS, <|im_end|>).
    k3c::tok::Utf8Stream stream;
    std::vector<int64_t> stops = tokenizer ? tokenizer->stopIds() : std::vector<int64_t>{};
    std::vector<bool> finished(B, false);
    auto emit = [&](const std::string &bytes) {
      std::fputs(bytes.c_str(), stdout);
      std::fflush(stdout);
    };
    // Ids mode with one sequence streams its ids line too: a later failure
    // loses nothing already generated.
    const bool streamIds = !tokenizer && B == 1;
    if (streamIds)
      std::printf("sequence 0: prompt %zu tokens -> generated", prompts[0].size());
    for (int64_t s = 0; s < steps; ++s) {
      if (!deviceGreedy)
        stepLogits.push_back(logits);
      std::vector<int64_t> next(B);
      for (int64_t b = 0; b < B; ++b) {
        next[b] = deviceGreedy ? greedy[b] : sampler.sample(&logits[b * V], V);
        generated[b].push_back(next[b]);
      }
      if (streamIds) {
        std::printf(" %lld", static_cast<long long>(next[0]));
        std::fflush(stdout);
      }
      if (tokenizer) {
        for (int64_t b = 0; b < B; ++b)
          if (std::find(stops.begin(), stops.end(), next[b]) != stops.end())
            finished[b] = true;
        if (B == 1 && !finished[0]) {
          std::string bytes;
          try {
            bytes = tokenizer->tokenBytes(next[0]);
          } catch (const k3c::Error &) {
            bytes = "\xEF\xBF\xBD"; // an id the vocabulary lacks (a random model)
          }
          emit(stream.push(bytes));
        }
        if (std::all_of(finished.begin(), finished.end(), [](bool f) { return f; })) {
          steps = s + 1; // every answer has ended
          break;
        }
      }
      if (s + 1 < steps) {
        if (deviceGreedy)
          greedy = model->decodeGreedy(next);
        else
          logits = model->decode(next);
        if (args.has("check"))
          stepTrace.push_back(model->trace());
        if (routingHints)
          stepRouting.push_back(model->takeRouting());
      }
    }
    if (tokenizer && B == 1)
      emit(stream.finish() + "\n");
    if (tokenizer && B > 1)
      for (int64_t b = 0; b < B; ++b)
        std::printf("text %lld: %s\n", static_cast<long long>(b),
                    k3c::generatedText(*tokenizer, generated[b]).c_str());
    double decodeS = std::chrono::duration<double>(std::chrono::steady_clock::now() - td).count();
    if (streamIds)
      std::printf("\n");
    printSequences(prompts, generated, streamIds ? 1 : 0);
    std::printf("time to first token: %.2f ms; decode: %.1f tokens/s (%lld steps x %lld "
                "sequences)\n",
                ttft * 1e3, steps > 1 ? (steps - 1) * B / decodeS : 0.0,
                static_cast<long long>(steps - 1), static_cast<long long>(B));
    if (plan.cachePage)
      std::printf("paged MLA cache: %lld of %lld pages held (%.2f MB), at most %lld\n",
                  static_cast<long long>(plan.pagesInUse),
                  static_cast<long long>(plan.cachePages - 1),
                  plan.pagesInUse * plan.cachePageBytes / 1e6,
                  static_cast<long long>(plan.pagesPeak));
    if (args.has("dump-logits")) {
      dump.resize(steps * B * V);
      for (int64_t s = 0; s < steps; ++s)
        std::copy(stepLogits[s].begin(), stepLogits[s].end(), dump.begin() + s * B * V);
      k3c::writeNpyF32(args.get("dump-logits"), {steps, B, V}, dump);
    }
    if (args.has("profile")) {
      // Fractions of the H200's measured limits (docs/perf.md): 4.3 TB/s copy,
      // 790 TFLOP/s dense bf16. On the CPU only the rates are printed.
      bool gpu = model->deviceName().rfind("cuda", 0) == 0;
      std::printf("%-34s %-14s %8s %10s %10s %10s %8s %8s\n", "kernel", "family", "launches", "ms",
                  "GB/s", "GFLOP/s", "%BW", "%FLOP");
      double total = 0;
      for (const auto &p : model->profile()) {
        double s = std::max(p.seconds, 1e-12), bw = p.bytes / s / 1e9, fl = p.flops / s / 1e9;
        total += p.seconds;
        if (gpu)
          std::printf("%-34s %-14s %8lld %10.3f %10.3f %10.3f %7.3f%% %7.4f%%\n", p.name.c_str(),
                      p.family.c_str(), static_cast<long long>(p.launches), p.seconds * 1e3, bw,
                      fl, 100 * bw / 4300.0, 100 * fl / 790000.0);
        else
          std::printf("%-34s %-14s %8lld %10.3f %10.3f %10.3f %8s %8s\n", p.name.c_str(),
                      p.family.c_str(), static_cast<long long>(p.launches), p.seconds * 1e3, bw,
                      fl, "-", "-");
      }
      std::printf("total kernel time: %.3f ms\n", total * 1e3);
    }
    if (args.has("check")) {
      // The reference executor on the same inputs (its own loader and math).
      // f32 activations are checked against the exact (fp64, nothing
      // rounded) reference at fp32 tolerance (1e-5 of the logits' scale)
      // and identical greedy tokens: an fp32 reference would put its own
      // rounding, amplified like the build's by the layers, into the
      // difference (k3-tiny's 13 random layers take either to ~1e-5 on a
      // 150-token prompt). bf16 activations: rounding flips
      // from different accumulation orders compound through the layers
      // (AttnRes, a random router's near ties), by ~20x on k3-tiny's 13
      // random layers, so no fixed tolerance separates a correct bf16 build
      // from a wrong one. The bf16 rule measures that amplification on the
      // same inputs instead (as FlashAttention's tests do): the f32
      // reference runs too, and the compiled logits may be at most twice as
      // far from it as the bf16 reference (the model's rounding contract) is,
      // plus 1e-2 of the logits' scale. Both references follow the compiled
      // expert choice at near ties.
      bool f32 = model->activationDtype() == "f32";
      const bool showLayers = args.has("check-layers");
      k3c::Reference ref = k3c::loadReference(
          model->checkpointPath(), f32 ? k3c::Precision::F64 : k3c::Precision::BF16, false);
      // The bf16 reference holds the KDA state as the artifact does (the
      // model's rounding contract: --kda-state-dtype=bf16 rounds it where
      // stored); the f32 reference keeps it in f32.
      const bool bf16State = model->memoryPlan().kdaStateDtype == "bf16";
      ref.setKdaStateBf16(bf16State);
      bool ok = true;
      const double tol = args.getDouble("check-floor", f32 ? 1e-5 : 1e-2),
                   factor = args.getDouble("check-factor", 2.0),
                   tie = args.getDouble("check-tie", f32 ? 1e-4 : 5e-2);
      // Routing hints: step `hintStep`'s records hold every sequence's rows
      // (prefill: all prompt tokens in order; decode: one row a sequence);
      // rows [hintRow, hintRow + T) are this forward call's. A record whose
      // token count does not match (chunked prefill) gives no hint.
      int64_t hintStep = 0, hintRow = 0, promptRows = 0;
      for (const auto &p : prompts)
        promptRows += static_cast<int64_t>(p.size());
      if (routingHints)
        ref.setRoutingHint([&](int64_t call, int64_t T) -> std::vector<int32_t> {
          if (hintStep >= static_cast<int64_t>(stepRouting.size()))
            return {};
          const auto &recs = stepRouting[hintStep];
          const int64_t rows = hintStep == 0 ? promptRows : B;
          if (call >= static_cast<int64_t>(recs.size()) || recs[call].tokens != rows ||
              hintRow + T > rows)
            return {};
          const auto &r = recs[call];
          return std::vector<int32_t>(r.ids.begin() + hintRow * r.topK,
                                      r.ids.begin() + (hintRow + T) * r.topK);
        }, tie);
      // One sequence through the reference: its prompt, then the compiled
      // model's tokens; the logits of every step. `stream` receives the
      // residual stream after each layer of the prefill, and `decodeStream`
      // (if set) that of each decode step's forward call (step s + 1 at s).
      using Stream = std::vector<std::pair<int64_t, std::vector<float>>>;
      auto referenceSteps = [&](int64_t b, int64_t tokenOffset, Stream *stream,
                                std::vector<Stream> *decodeStream = nullptr) {
        k3c::SequenceState st = ref.newSequence();
        hintStep = 0;
        hintRow = tokenOffset;
        std::vector<float> l = ref.forward(prompts[b], st,
                                           [&](int64_t li, const char *what,
                                               const std::vector<float> &v) {
                                             if (stream && std::string(what) == "stream")
                                               stream->push_back({li, v});
                                           });
        std::vector<std::vector<float>> out;
        out.emplace_back(l.end() - V, l.end());
        for (int64_t s = 0; s + 1 < steps; ++s) {
          hintStep = s + 1;
          hintRow = b;
          if (!decodeStream) {
            out.push_back(ref.forward({generated[b][s]}, st));
            continue;
          }
          decodeStream->emplace_back();
          Stream &ds = decodeStream->back();
          out.push_back(ref.forward({generated[b][s]}, st,
                                    [&](int64_t li, const char *what,
                                        const std::vector<float> &v) {
                                      if (std::string(what) == "stream")
                                        ds.push_back({li, v});
                                    }));
        }
        return out;
      };
      int64_t tokenOffset = 0, hiForced = 0, hiRefused = 0;
      double worst = 0; // the largest step error as a fraction of its bound
      for (int64_t b = 0; b < B; ++b) {
        // Per layer (prefill): the residual stream after each layer.
        Stream refStream;
        std::vector<Stream> refDecodeStream;
        std::vector<std::vector<float>> refLogits =
            referenceSteps(b, tokenOffset, &refStream, &refDecodeStream);
        std::vector<std::vector<float>> hiLogits;
        if (!f32) {
          const int64_t f0 = ref.routingForced(), r0 = ref.routingRefused();
          ref.setPrecision(k3c::Precision::F32);
          hiLogits = referenceSteps(b, tokenOffset, nullptr);
          ref.setPrecision(k3c::Precision::BF16);
          hiForced += ref.routingForced() - f0;
          hiRefused += ref.routingRefused() - r0;
        }
        const int64_t T = static_cast<int64_t>(prompts[b].size());
        // Per-layer lines wait for their step's verdict: printed with
        // --check-layers, or where the step fails (to find the layer where
        // the streams part).
        std::string layerLines;
        bool layersOk = true;
        for (const auto &[li, rv] : refStream) {
          auto it = prefillTrace.find("layers." + std::to_string(li));
          if (it == prefillTrace.end())
            continue;
          const int64_t D = static_cast<int64_t>(rv.size()) / T;
          Err e = compare(it->second.data() + tokenOffset * D, rv.data(), T * D);
          appendf(layerLines,
                  "check seq %lld layer %2lld (prefill, residual stream): max abs %.3e, "
                  "max rel %.3e, mean abs %.3e%s\n",
                  static_cast<long long>(b), static_cast<long long>(li), e.maxAbs, e.maxRel,
                  e.meanAbs, e.nanMismatch ? ", NaN/inf positions differ" : "");
          layersOk &= !e.nanMismatch;
        }
        tokenOffset += T;
        for (int64_t s = 0; s < steps; ++s) {
          // Per layer (the decode call that gave this step's logits): this
          // sequence's row of the residual stream after each layer.
          if (s > 0 && s < static_cast<int64_t>(stepTrace.size()))
            for (const auto &[li, rv] : refDecodeStream[s - 1]) {
              auto it = stepTrace[s].find("layers." + std::to_string(li));
              const int64_t D = static_cast<int64_t>(rv.size());
              if (it == stepTrace[s].end() ||
                  static_cast<int64_t>(it->second.size()) != B * D)
                continue;
              Err e = compare(it->second.data() + b * D, rv.data(), D);
              appendf(layerLines,
                      "check seq %lld layer %2lld (decode step %lld, residual stream): max "
                      "abs %.3e, max rel %.3e, mean abs %.3e%s\n",
                      static_cast<long long>(b), static_cast<long long>(li),
                      static_cast<long long>(s), e.maxAbs, e.maxRel, e.meanAbs,
                      e.nanMismatch ? ", NaN/inf positions differ" : "");
              layersOk &= !e.nanMismatch;
            }
          const std::vector<float> &last = refLogits[s];
          Err e = compare(&stepLogits[s][b * V], last.data(), V);
          int64_t refTok = std::max_element(last.begin(), last.end()) - last.begin();
          bool sameTok = temperature > 0 || !f32 || refTok == generated[b][s];
          std::string line;
          appendf(line, "check seq %lld step %lld: max abs %.3e, max rel %.3e, mean abs %.3e%s%s",
                  static_cast<long long>(b), static_cast<long long>(s), e.maxAbs, e.maxRel,
                  e.meanAbs, e.nanMismatch ? ", NaN/inf positions differ" : "",
                  sameTok ? "" : ", greedy token differs");
          bool stepOk = layersOk && !e.nanMismatch && sameTok;
          if (f32) {
            line += "\n";
            stepOk &= e.maxRel <= tol;
          } else {
            // Against the f32 reference: the compiled build and the bf16
            // reference, each relative to the f32 logits' scale.
            Err ec = compare(&stepLogits[s][b * V], hiLogits[s].data(), V);
            Err er = compare(last.data(), hiLogits[s].data(), V);
            const double bound = factor * er.maxRel + tol;
            appendf(line,
                    "; vs the f32 reference: compiled %.3e, bf16 reference %.3e (bound "
                    "%.3e)%s\n",
                    ec.maxRel, er.maxRel, bound, ec.maxRel <= bound ? "" : " EXCEEDED");
            stepOk &= !ec.nanMismatch && ec.maxRel <= bound;
            worst = std::max(worst, ec.maxRel / bound);
          }
          if (showLayers || !stepOk)
            std::fputs(layerLines.c_str(), stdout);
          std::fputs(line.c_str(), stdout);
          layerLines.clear();
          layersOk = true;
          ok &= stepOk;
        }
      }
      if (routingHints && (ref.routingForced() || ref.routingRefused())) {
        std::printf("check: routing: %lld token choices at near ties (within %g of the k-th "
                    "score) followed the compiled model, %lld compiled choices were further "
                    "apart and were not; the widest tie followed: %.2e\n",
                    static_cast<long long>(ref.routingForced() - hiForced), tie,
                    static_cast<long long>(ref.routingRefused() - hiRefused),
                    ref.routingWidestTie());
        if (!f32)
          std::printf("check: routing of the f32 reference: %lld followed, %lld not\n",
                      static_cast<long long>(hiForced), static_cast<long long>(hiRefused));
      }
      if (!f32 && bf16State)
        std::printf("check: the bf16 reference holds the KDA state in bf16, as the artifact "
                    "does (rounded where the kernels store it)\n");
      if (f32)
        std::printf("check: %s (f32 activations; tolerance: max rel %.0e of the logits' "
                    "scale, against the fp64 reference)\n",
                    ok ? "PASSED" : "FAILED", tol);
      else
        std::printf("check: %s (bf16 activations; tolerance: max rel vs the f32 reference "
                    "<= %g x the bf16 reference's + %.0e of the logits' scale; the worst "
                    "step at %.2f of its bound)\n",
                    ok ? "PASSED" : "FAILED", factor, tol, worst);
      if (!ok)
        return 1;
    }
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "k3-run: error: %s\n", e.what());
    return 1;
  }
}
