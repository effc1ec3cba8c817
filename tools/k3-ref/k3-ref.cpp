//===- k3-ref.cpp - run the reference executor on a checkpoint ------------===//

#include "support/Npy.h"
#include "models/Reference.h"
#include "tools/common/Args.h"
#include "tools/common/TextPrompts.h"

#include <chrono>
#include <cstdio>
#include <fstream>

static const char *kHelp = R"(k3-ref: run a checkpoint through the k3c reference executor (CPU, fp64 accumulation)

usage: k3-ref CHECKPOINT_DIR (--prompt TEXT | --prompt-file FILE | --prompt-ids 1,2,3 |
              --batch FILE) [options]

Greedy generation with the golden reference (spec math, token-by-token KDA,
plain softmax MLA). Every other k3c stage is checked against it.

options:
  --prompt TEXT         the prompt as text (the checkpoint's tokenizer); the generated text is
                        printed after the ids, up to EOS / <|im_end|>
  --prompt-file FILE    the prompt text from FILE
  --chat                wrap the prompt in the model's chat format
  --system TEXT         the system message of --chat
  --tokenizer DIR       tokenizer files from DIR (default: the checkpoint)
  --prompt-ids IDS      comma-separated prompt token ids
  --batch FILE          several prompts: one comma-separated id line each, or JSONL
                        ({"prompt": ...} or {"messages": [...]} a line)
  --max-new-tokens N    tokens to generate per prompt (default 8)
  --precision P         bf16 (spec rounding points, default), f32 (every
                        intermediate in fp32) or f64 (nothing rounded)
  --dump-logits FILE    write float32 .npy [steps, batch, vocab]
  --quiet               no progress line
  --help                this text
)";

int main(int argc, char **argv) {
  try {
    k3c::Args args(argc, argv,
                   {"prompt-ids", "batch", "max-new-tokens", "precision", "dump-logits", "prompt",
                    "prompt-file", "system", "tokenizer"},
                   {"help", "quiet", "chat"});
    if (args.has("help")) {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (args.positional.size() != 1)
      throw k3c::Error("need exactly one checkpoint directory (see --help)");
    std::unique_ptr<k3c::tok::Tokenizer> tokenizer;
    std::vector<std::vector<int64_t>> prompts;
    if (k3c::textPrompts(args)) {
      tokenizer = k3c::tok::Tokenizer::load(args.get("tokenizer", args.positional[0]));
      prompts = k3c::encodeTextPrompts(args, *tokenizer);
    } else {
      prompts = k3c::readPrompts(args);
    }
    int64_t steps = args.getInt("max-new-tokens", 8);
    if (steps < 1)
      throw k3c::Error("--max-new-tokens must be >= 1, got " + std::to_string(steps));
    std::string p = args.get("precision", "bf16");
    if (p != "bf16" && p != "f32" && p != "f64")
      throw k3c::Error("--precision must be bf16, f32 or f64, got '" + p + "'");
    k3c::Reference ref = k3c::loadReference(args.positional[0],
                                          p == "bf16"  ? k3c::Precision::BF16
                                          : p == "f32" ? k3c::Precision::F32
                                                       : k3c::Precision::F64,
                                          !args.has("quiet"));
    const int64_t V = ref.config().vocabSize;
    std::vector<float> dump(steps * prompts.size() * V);
    for (size_t b = 0; b < prompts.size(); ++b) {
      auto t0 = std::chrono::steady_clock::now();
      std::vector<std::vector<float>> logits;
      std::vector<int64_t> out = ref.generateGreedy(prompts[b], steps, &logits);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::printf("sequence %zu: prompt %zu tokens -> generated", b, prompts[b].size());
      for (int64_t id : out)
        std::printf(" %lld", static_cast<long long>(id));
      std::printf("   (%.1f ms)\n", ms);
      if (tokenizer)
        std::printf("text %zu: %s\n", b, k3c::generatedText(*tokenizer, out).c_str());
      for (int64_t s = 0; s < steps; ++s)
        std::copy(logits[s].begin(), logits[s].end(), dump.begin() + (s * prompts.size() + b) * V);
    }
    if (args.has("dump-logits"))
      k3c::writeNpyF32(args.get("dump-logits"),
                      {steps, static_cast<int64_t>(prompts.size()), V}, dump);
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "k3-ref: error: %s\n", e.what());
    return 1;
  }
}
