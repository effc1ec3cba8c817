//===- k3-bench.cpp - time a compiled artifact's kernels ------------------===//
//
// Prefill at several prompt lengths and decode at several batch sizes on one
// artifact: time to first token, decode step time and tokens/s (CUDA graphs
// when the artifact runs on the GPU; also the graph replay's device time, and
// the wall step of greedy decoding with the argmax where the logits are),
// and per kernel the time, TFLOP/s and GB/s of each phase (device events
// around each kernel's launches; in decode on the GPU, event nodes between
// the kernels of a replayed step graph). With --ablate, each decode batch's
// step again without each kernel family in turn: what the family costs the
// step where its launches overlap their neighbours. Warm-up
// runs come first; prompts are seeded pseudo-random token ids. Prints tables
// and, with --csv, one row per (phase, size, kernel) for bench/ scripts.
//
//===----------------------------------------------------------------------===//

#include "runtime/Runtime.h"
#include "tools/common/Args.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <utility>

static const char *kHelp = R"(k3-bench: time a compiled k3c artifact (prefill and decode, per kernel)

usage: k3-bench ARTIFACT_DIR [options]

options:
  --prefill LIST      prompt lengths to prefill, one sequence each (default 512,2048,8192;
                      each within the artifact's --max-context; longer than its --max-tokens:
                      several prefill steps, timed as one time to first token); none
  --decode LIST       batch sizes to decode (default 1,8,32,128; within --max-seqs); none
  --context N         prompt tokens per sequence before decoding (default 64; contexts of the
                      batch beyond a step's --max-tokens are prefilled in several steps)
  --steps N           timed decode steps per batch size (default 32)
  --reps N            timed prefills per length (default 3; the median is reported)
  --device D          auto (default), cpu or cuda
  --checkpoint DIR    weights from DIR instead of the path recorded at compile time
  --max-seqs N        use N of the artifact's sequence slots (states, logits and the paged
                      cache's pool sized for N: an artifact built for a larger GPU)
  --ablate            after each decode batch, the step again without each kernel family in
                      turn (its launches left out, the graph captured anew): the whole step
                      minus that step is what the family costs it, launch overlap included,
                      beside its event-timed share; GB/s of its counted bytes by both (the MoE
                      router stays in: its ids index the experts' loads). Leaves the model's
                      states meaningless until the next batch's reset
  --ablate-families F,G  with --ablate (implied), only these families, in this order; a
                      name no launch of the model has, or one that cannot be left out
                      (moe_router), is an error
  --csv FILE          also write phase,size,kernel,family,launches,ms,tflops,gbs rows
                      (--ablate: phase "ablate", ms the family's cost to the step, gbs its
                      bytes over that; a TOTAL row per batch, the whole step)
  --quiet             no progress lines
  --help              this text
)";

using Clock = std::chrono::steady_clock;
using Profile = std::map<std::string, k3c::rt::KernelProfile>;

static Profile snapshot(const k3c::rt::Model &m) {
  Profile p;
  for (auto &k : m.profile())
    p[k.name] = k;
  return p;
}

/// after - before, per kernel, divided by `div`.
static std::vector<k3c::rt::KernelProfile> delta(const Profile &before, const Profile &after,
                                                  double div) {
  std::vector<k3c::rt::KernelProfile> out;
  for (auto &[name, a] : after) {
    k3c::rt::KernelProfile d = a;
    if (auto it = before.find(name); it != before.end()) {
      d.launches -= it->second.launches;
      d.seconds -= it->second.seconds;
      d.flops -= it->second.flops;
      d.bytes -= it->second.bytes;
    }
    if (d.launches <= 0)
      continue;
    d.seconds /= div;
    d.flops /= div;
    d.bytes /= div;
    d.launches = static_cast<int64_t>(d.launches / div + 0.5);
    out.push_back(d);
  }
  std::sort(out.begin(), out.end(), [](auto &a, auto &b) { return a.seconds > b.seconds; });
  return out;
}

static std::vector<int64_t> list(const k3c::Args &args, const std::string &name,
                                 const std::string &dflt) {
  if (args.get(name, dflt) == "none")
    return {};
  std::vector<int64_t> v = k3c::parseIdList(args.get(name, dflt), "--" + name, "size");
  for (int64_t x : v)
    if (x < 1)
      throw k3c::Error("--" + name + " entries must be >= 1, got " + std::to_string(x));
  return v;
}

int main(int argc, char **argv) {
  try {
    k3c::Args args(argc, argv,
                   {"prefill", "decode", "context", "steps", "reps", "device", "checkpoint", "csv",
                    "max-seqs", "ablate-families"},
                   {"quiet", "help", "ablate"});
    if (args.has("help")) {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (args.positional.size() != 1)
      throw k3c::Error("need exactly one artifact directory (see --help)");
    std::vector<int64_t> prefill = list(args, "prefill", "512,2048,8192");
    std::vector<int64_t> decode = list(args, "decode", "1,8,32,128");
    std::vector<std::string> onlyFamilies; // --ablate-families, in the user's order
    if (args.has("ablate-families")) {
      const std::string v = args.get("ablate-families");
      for (size_t a = 0;;) {
        const size_t b = std::min(v.find(',', a), v.size());
        if (b == a)
          throw k3c::Error("--ablate-families: an empty family name in '" + v + "'");
        onlyFamilies.push_back(v.substr(a, b - a));
        if (b == v.size())
          break;
        a = b + 1;
      }
    }
    const bool ablate = args.has("ablate") || !onlyFamilies.empty();
    if (ablate && args.get("decode", "") == "none")
      throw k3c::Error("--ablate times decode steps: it needs --decode sizes");
    int64_t context = args.getInt("context", 64), steps = args.getInt("steps", 32),
            reps = args.getInt("reps", 3);
    if (context < 1 || steps < 1 || reps < 1)
      throw k3c::Error("--context, --steps and --reps must be >= 1");
    k3c::rt::LoadOptions lo;
    lo.device = args.get("device", "auto");
    lo.progress = !args.has("quiet");
    lo.checkpoint = args.get("checkpoint");
    lo.maxSeqs = k3c::maxSeqsOption(args);
    auto model = k3c::rt::Model::load(args.positional[0], lo);
    const auto &plan = model->memoryPlan();
    std::printf("device: %s\n", model->deviceName().c_str());
    std::FILE *csv = nullptr;
    if (args.has("csv")) {
      csv = std::fopen(args.get("csv").c_str(), "w");
      if (!csv)
        throw k3c::Error("cannot write --csv file '" + args.get("csv") + "'");
      std::fprintf(csv, "phase,size,kernel,family,launches,ms,tflops,gbs\n");
    }
    const int64_t V = model->vocabSize();
    k3c::Rng rng(1234);
    auto prompt = [&](int64_t n) {
      std::vector<int64_t> p(n);
      for (auto &t : p)
        t = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(V));
      return p;
    };
    auto table = [&](const char *phase, int64_t size,
                     const std::vector<k3c::rt::KernelProfile> &ks) {
      std::printf("  %-34s %-14s %8s %10s %9s %9s\n", "kernel", "family", "launches",
                  phase[0] == 'p' ? "ms" : "us/step", "TFLOP/s", "GB/s");
      for (auto &k : ks) {
        double tf = k.seconds > 0 ? k.flops / k.seconds / 1e12 : 0;
        double gbs = k.seconds > 0 ? k.bytes / k.seconds / 1e9 : 0;
        std::printf("  %-34s %-14s %8lld %10.3f %9.1f %9.0f\n", k.name.c_str(), k.family.c_str(),
                    static_cast<long long>(k.launches),
                    phase[0] == 'p' ? k.seconds * 1e3 : k.seconds * 1e6, tf, gbs);
        if (csv)
          std::fprintf(csv, "%s,%lld,%s,%s,%lld,%.6f,%.3f,%.1f\n", phase,
                       static_cast<long long>(size), k.name.c_str(), k.family.c_str(),
                       static_cast<long long>(k.launches), k.seconds * 1e3, tf, gbs);
      }
    };

    // `steps` timed decode steps of `tok` (the warm-ups are the caller's):
    // the wall step and the graph replay's device step (0 without a graph).
    auto timeSteps = [&](const std::vector<int64_t> &tok) {
      double graphS = 0;
      auto t0 = Clock::now();
      for (int64_t s = 0; s < steps; ++s) {
        model->decode(tok);
        graphS += model->lastGraphSeconds();
      }
      double wallS = std::chrono::duration<double>(Clock::now() - t0).count();
      return std::pair<double, double>{wallS / steps, graphS / static_cast<double>(steps)};
    };

    // --ablate: the decode step of the current batch with each family left
    // out in turn (Model::skipFamilies), timed as the step is (graph replay
    // on the GPU, else wall), against the whole step timed before and after
    // the families (their mean; both printed, so drift shows).
    auto ablation = [&](int64_t B, const std::vector<k3c::rt::KernelProfile> &ks,
                        const std::vector<std::vector<int64_t>> &p,
                        const std::vector<int64_t> &tok) {
      // The logits of a fresh step (prefill, one decode step): after the
      // families, every launch restored, a fresh step must give them again.
      auto freshStep = [&] {
        model->reset(B);
        model->prefill(p);
        return model->decode(tok); // (a copy)
      };
      const std::vector<float> reference = freshStep();
      auto stepTime = [&](bool &graphed) {
        model->decode(tok); // eager: the first step after a change of launches
        model->decode(tok); // the graph captured
        auto [wall, graph] = timeSteps(tok);
        graphed = graph > 0;
        return graphed ? graph : wall;
      };
      struct Fam {
        std::string name;
        int64_t launches = 0;
        double event = 0, bytes = 0;
      };
      std::vector<Fam> fams;
      for (auto &k : ks) {
        auto it = std::find_if(fams.begin(), fams.end(),
                               [&](const Fam &f) { return f.name == k.family; });
        if (it == fams.end())
          it = fams.insert(fams.end(), Fam{k.family});
        it->launches += k.launches;
        it->event += k.seconds;
        it->bytes += k.bytes;
      }
      std::sort(fams.begin(), fams.end(),
                [](const Fam &a, const Fam &b) { return a.event > b.event; });
      if (!onlyFamilies.empty()) { // the user's families, in the user's order
        std::vector<Fam> chosen;
        for (const std::string &n : onlyFamilies) {
          auto it = std::find_if(fams.begin(), fams.end(),
                                 [&](const Fam &f) { return f.name == n; });
          // A family without launches in this batch's profile still goes to
          // the runtime, which knows every launch of the model (an Error
          // names a family it has not).
          chosen.push_back(it == fams.end() ? Fam{n} : *it);
        }
        fams = std::move(chosen);
      }
      bool graphed = false;
      const double before = stepTime(graphed);
      std::vector<double> without(fams.size(), -1);
      std::vector<std::string> kept(fams.size()); // why a family stays in
      for (size_t i = 0; i < fams.size(); ++i) {
        if (fams[i].name.empty()) {
          kept[i] = "no family";
          continue;
        }
        if (!args.has("quiet"))
          std::fprintf(stderr, "k3-bench: batch %lld, the step without %s (%zu of %zu)\n",
                       static_cast<long long>(B), fams[i].name.c_str(), i + 1, fams.size());
        try {
          model->skipFamilies({fams[i].name});
        } catch (const k3c::Error &e) { // the runtime refuses it (the MoE router)
          if (!onlyFamilies.empty()) // asked for by name: the user's mistake
            throw k3c::Error(std::string("--ablate-families: ") + e.what());
          kept[i] = e.what();
          continue;
        }
        bool g = false;
        without[i] = stepTime(g);
        model->skipFamilies({});
      }
      const double after = stepTime(graphed), full = (before + after) / 2;
      const std::vector<float> again = freshStep();
      double diff = again.size() == reference.size() ? 0 : INFINITY, scale = 0;
      for (size_t i = 0; i < reference.size() && i < again.size(); ++i) {
        scale = std::max(scale, static_cast<double>(std::fabs(reference[i])));
        // (NaN positions must match: a NaN against a number is a difference)
        if (std::isnan(reference[i]) != std::isnan(again[i]))
          diff = INFINITY;
        else if (!std::isnan(reference[i]))
          diff = std::max(diff, static_cast<double>(std::fabs(reference[i] - again[i])));
      }
      if (!(diff <= 1e-2 * scale))
        throw k3c::Error("--ablate: after every family was restored, a fresh step's logits "
                         "differ from those before the ablation (max |diff| " +
                         std::to_string(diff) + ", logits' scale " + std::to_string(scale) +
                         "): the launches were not restored");
      std::printf("decode batch %lld, ablation (%s): the whole step %.3f / %.3f ms before / "
                  "after the families; each family's cost to the step is the mean minus the "
                  "step without it\n",
                  static_cast<long long>(B), graphed ? "graph replay" : "wall time",
                  before * 1e3, after * 1e3);
      std::printf("  restored: a fresh step's logits after the families against before them, "
                  "max |diff| %g (scale %g)\n", diff, scale);
      std::printf("  %-16s %8s %10s %10s %9s %9s %9s\n", "family", "launches", "events us",
                  "cost us", "cost/ev", "GB/s ev", "GB/s cost");
      for (size_t i = 0; i < fams.size(); ++i) {
        const Fam &f = fams[i];
        if (without[i] < 0) {
          std::printf("  %-16s %8lld %10.1f %10s   (not left out: %s)\n", f.name.c_str(),
                      static_cast<long long>(f.launches), f.event * 1e6, "-", kept[i].c_str());
          continue;
        }
        const double cost = full - without[i];
        std::printf("  %-16s %8lld %10.1f %10.1f %9.2f %9.0f", f.name.c_str(),
                    static_cast<long long>(f.launches), f.event * 1e6, cost * 1e6,
                    f.event > 0 ? cost / f.event : 0, f.event > 0 ? f.bytes / f.event / 1e9 : 0);
        if (cost > 0)
          std::printf(" %9.0f\n", f.bytes / cost / 1e9);
        else
          std::printf(" %9s\n", "-");
        if (csv)
          std::fprintf(csv, "ablate,%lld,%s,%s,%lld,%.6f,0,%.1f\n", static_cast<long long>(B),
                       f.name.c_str(), f.name.c_str(), static_cast<long long>(f.launches),
                       cost * 1e3, cost > 0 ? f.bytes / cost / 1e9 : 0.0);
      }
      if (csv)
        std::fprintf(csv, "ablate,%lld,TOTAL,%s,1,%.6f,0,0\n", static_cast<long long>(B),
                     graphed ? "graph" : "wall", full * 1e3);
    };

    // The prefill steps `p` needs (the runtime cuts prompts longer than a
    // step into rounds), or 0 with the reason printed when they cannot be
    // cut into the artifact's steps.
    auto roundsFor = [&](const std::vector<std::vector<int64_t>> &p, const std::string &what) {
      try {
        return model->prefillRounds(p);
      } catch (const k3c::Error &e) {
        std::printf("%s: skipped (%s)\n", what.c_str(), e.what());
        return int64_t{0};
      }
    };
    for (int64_t T : prefill) {
      const std::string what = "prefill T=" + std::to_string(T);
      if (T > plan.maxContext) {
        std::printf("%s: skipped (artifact context %lld)\n", what.c_str(),
                    static_cast<long long>(plan.maxContext));
        continue;
      }
      std::vector<std::vector<int64_t>> p = {prompt(T)};
      const int64_t rounds = roundsFor(p, what);
      if (!rounds)
        continue;
      if (rounds > 1)
        std::printf("%s: %lld prefill steps of at most %lld tokens\n", what.c_str(),
                    static_cast<long long>(rounds), static_cast<long long>(plan.maxTokens));
      model->enableProfiling(false);
      model->reset(1);
      model->prefill(p); // warm-up
      std::vector<double> wall;
      model->enableProfiling(true);
      Profile before = snapshot(*model);
      for (int64_t r = 0; r < reps; ++r) {
        model->reset(1);
        auto t0 = Clock::now();
        model->prefill(p);
        wall.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      model->enableProfiling(false);
      // Wall times without the per-kernel events.
      for (int64_t r = 0; r < reps; ++r) {
        model->reset(1);
        auto t0 = Clock::now();
        model->prefill(p);
        wall.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      std::vector<double> plain(wall.begin() + reps, wall.end());
      std::sort(plain.begin(), plain.end());
      auto ks = delta(before, snapshot(*model), static_cast<double>(reps));
      double kernelS = 0;
      for (auto &k : ks)
        kernelS += k.seconds;
      std::printf("prefill T=%lld: time to first token %.3f ms (median of %lld), kernels %.3f ms\n",
                  static_cast<long long>(T), plain[plain.size() / 2] * 1e3,
                  static_cast<long long>(reps), kernelS * 1e3);
      table("prefill", T, ks);
      if (csv)
        std::fprintf(csv, "prefill,%lld,TOTAL,ttft,1,%.6f,0,0\n", static_cast<long long>(T),
                     plain[plain.size() / 2] * 1e3);
    }

    // Each measured batch's wall and graph-replay steps, for the step ratios
    // against the smallest batch.
    struct StepTime {
      int64_t batch;
      double wall, graph; // graph 0: none
    };
    std::vector<StepTime> stepTimes;
    bool allGraph = true;
    for (int64_t B : decode) {
      const std::string what = "decode batch " + std::to_string(B);
      if (B > plan.maxSeqs || context + 3 * steps + 2 > plan.maxContext) {
        std::printf("%s: skipped (artifact capacity %lld sequences, context %lld; the "
                    "context and %lld steps need %lld)\n",
                    what.c_str(), static_cast<long long>(plan.maxSeqs),
                    static_cast<long long>(plan.maxContext), static_cast<long long>(steps),
                    static_cast<long long>(context + 3 * steps + 2));
        continue;
      }
      std::vector<std::vector<int64_t>> p;
      for (int64_t b = 0; b < B; ++b)
        p.push_back(prompt(context));
      // Contexts beyond a step's capacity are prefilled in several steps.
      const int64_t rounds = roundsFor(p, what);
      if (!rounds)
        continue;
      if (rounds > 1)
        std::printf("%s: the %lld-token contexts prefilled in %lld steps\n", what.c_str(),
                    static_cast<long long>(context), static_cast<long long>(rounds));
      model->enableProfiling(false);
      model->reset(B);
      model->prefill(p);
      std::vector<int64_t> tok(B);
      for (auto &t : tok)
        t = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(V));
      model->decode(tok); // warm-up (eager: a batch size's first step)
      model->decode(tok); // warm-up (the graph captured on the second)
      auto [stepS, graphS] = timeSteps(tok);
      // Greedy decoding with the argmax where the logits are (N ids back
      // instead of N x vocab floats): the wall step a greedy server sees.
      auto tg = Clock::now();
      for (int64_t s = 0; s < steps; ++s)
        model->decodeGreedy(tok);
      double greedyS = std::chrono::duration<double>(Clock::now() - tg).count() / steps;
      model->enableProfiling(true);
      Profile before = snapshot(*model);
      for (int64_t s = 0; s < steps; ++s)
        model->decode(tok);
      model->enableProfiling(false);
      auto ks = delta(before, snapshot(*model), static_cast<double>(steps));
      double kernelS = 0;
      for (auto &k : ks)
        kernelS += k.seconds;
      std::printf("decode batch %lld: %.3f ms/step, %.1f tokens/s (kernels %.3f ms/step",
                  static_cast<long long>(B), stepS * 1e3, B / stepS, kernelS * 1e3);
      if (graphS > 0)
        std::printf("; graph replay %.3f ms/step on the device", graphS * 1e3);
      std::printf("; greedy on the device %.3f ms/step, %.1f tokens/s)\n", greedyS * 1e3,
                  B / greedyS);
      table("decode", B, ks);
      stepTimes.push_back({B, stepS, graphS});
      allGraph = allGraph && graphS > 0;
      if (csv)
        std::fprintf(csv, "decode,%lld,TOTAL,step,1,%.6f,0,0\n", static_cast<long long>(B),
                     stepS * 1e3);
      if (csv && graphS > 0)
        std::fprintf(csv, "decode,%lld,TOTAL,graph,1,%.6f,0,0\n", static_cast<long long>(B),
                     graphS * 1e3);
      if (csv)
        std::fprintf(csv, "decode,%lld,TOTAL,greedy,1,%.6f,0,0\n", static_cast<long long>(B),
                     greedyS * 1e3);
      if (ablate)
        ablation(B, ks, p, tok);
    }
    // The decode step of each larger batch against the smallest one's (the
    // cost of batching: 1.0 would be a free batch).
    // (graph replay where every batch has one, else the wall steps)
    if (stepTimes.size() > 1) {
      auto time = [&](const StepTime &s) { return allGraph ? s.graph : s.wall; };
      const StepTime &least = *std::min_element(
          stepTimes.begin(), stepTimes.end(),
          [](const StepTime &a, const StepTime &b) { return a.batch < b.batch; });
      for (const StepTime &s : stepTimes)
        if (s.batch != least.batch)
          std::printf("decode step at batch %lld against batch %lld: %.3fx (%s)\n",
                      static_cast<long long>(s.batch), static_cast<long long>(least.batch),
                      time(s) / time(least), allGraph ? "graph replay" : "wall time");
    }
    if (csv)
      std::fclose(csv);
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "k3-bench: error: %s\n", e.what());
    return 1;
  }
}
