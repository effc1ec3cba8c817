//===- k3-mkcheckpoint.cpp - write a seeded random test checkpoint --------===//

#include "models/Config.h"
#include "models/Generator.h"
#include "tools/common/Args.h"

#include <cstdio>

static const char *kHelp = R"(k3-mkcheckpoint: write a deterministic random K3 / Kimi Linear checkpoint

usage: k3-mkcheckpoint --config CONFIG.json -o DIR [--seed S] [--shards N] [--router-skew S]

Writes DIR/config.json (a copy of CONFIG), N safetensors shards
(model-0000i-of-0000N.safetensors) and model.safetensors.index.json, with the
tensor names of the real checkpoint (MXFP4 experts when the config is
quantized). The same seed gives the same bytes on every machine; tensors are
generated in parallel, one random stream each.

options:
  --config FILE   model config.json (e.g. models/configs/k3-tiny.json)
  -o DIR          output directory (created)
  --seed S        random seed (default 0)
  --shards N      number of safetensors shards (default 2)
  --router-skew S skewed routing (EP benchmarks): lowers expert e's router
                  selection bias by S*ln(1+e)/ln(E+1), so low expert ids are
                  chosen more often; S in [0, 10] (default 0, no skew)
  --quiet         no progress line
  --help          this text
)";

int main(int argc, char **argv) {
  try {
    k3c::Args args(argc, argv, {"config", "seed", "shards", "router-skew"}, {"help", "quiet"});
    if (args.has("help")) {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (!args.has("config") || !args.has("o") || !args.positional.empty())
      throw k3c::Error("need --config FILE and -o DIR (see --help)");
    int64_t shards = args.getInt("shards", 2);
    if (shards < 1 || shards > 99999)
      throw k3c::Error("--shards must be in 1..99999, got " + std::to_string(shards));
    int64_t seed = args.getInt("seed", 0);
    k3c::ModelConfig c = k3c::loadConfig(args.get("config"));
    std::fprintf(stderr, "k3-mkcheckpoint: %s, %lld parameters, seed %lld\n",
                 args.get("config").c_str(), static_cast<long long>(k3c::parameterCount(c)),
                 static_cast<long long>(seed));
    k3c::GenerateOptions o;
    o.seed = static_cast<uint64_t>(seed);
    o.progress = !args.has("quiet");
    o.routerSkew = args.getDouble("router-skew", 0.0);
    k3c::writeGeneratedCheckpoint(args.get("config"), args.get("o"), o, static_cast<int>(shards));
    std::fprintf(stderr, "k3-mkcheckpoint: wrote %s\n", args.get("o").c_str());
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "k3-mkcheckpoint: error: %s\n", e.what());
    return 1;
  }
}
