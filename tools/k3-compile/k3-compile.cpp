//===- k3-compile.cpp - the k3c ahead-of-time compiler driver -------------===//
//
// k3-compile <config.json | checkpoint dir | file.mlir> --emit=k3 [-o FILE]
//
// Stage 1 (this file today): read the model (config, or checkpoint whose
// tensors are checked against the config by name, shape and dtype), build the
// whole-model k3 module and verify it. All standard --mlir-* flags apply.
//
//===----------------------------------------------------------------------===//

#include "dialects/K3/IR/K3Dialect.h"
#include "support/Common.h"
#include "models/Config.h"
#include "models/ModelBuilder.h"
#include "models/Safetensors.h"
#include "models/Weights.h"
#include "passes/DeploymentPlan.h"
#include "passes/Passes.h"
#include "lowering/Artifact.h"
#include "lowering/Lowering.h"
#include "lowering/TargetInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <fstream>
#include <limits>
#include <unistd.h>
#include "llvm/Support/FileSystem.h"

#include <fcntl.h>
#include <filesystem>
#include <set>
#include <stdio.h>
#include <tuple>

using namespace mlir;
namespace cl = llvm::cl;
namespace fs = std::filesystem;

static cl::opt<std::string> inputPath(cl::Positional,
                                      cl::desc("<config.json | checkpoint dir | file.mlir>"),
                                      cl::Required);
static cl::opt<std::string> outputPath("o", cl::desc("Output file (default: stdout)"),
                                       cl::value_desc("file"), cl::init("-"));
enum class Emit { K3, Core, Fused, Loops, LLVM, Gpu, Ptx, Artifact };
static cl::opt<Emit> emit(
    "emit",
    cl::desc("What to emit (default: an artifact directory when -o names one, else k3)"),
    cl::init(Emit::K3),
    cl::values(clEnumValN(Emit::K3, "k3", "whole-model k3 IR (@prefill, @decode)"),
               clEnumValN(Emit::Core, "core",
                          "core ops after decomposition, KDA tiling and MXFP4 layout"),
               clEnumValN(Emit::Fused, "fused", "fused k3.kernel regions"),
               clEnumValN(Emit::Loops, "loops", "each distinct kernel as loops over memrefs"),
               clEnumValN(Emit::LLVM, "llvm", "host kernels as LLVM IR"),
               clEnumValN(Emit::Gpu, "gpu", "kernels as gpu.module/NVVM with host launches"),
               clEnumValN(Emit::Ptx, "ptx", "PTX (sm_90a) of every kernel"),
               clEnumValN(Emit::Artifact, "artifact",
                          "the ahead-of-time artifact directory (manifest + kernels)")));
static cl::opt<std::string> target(
    "target",
    cl::desc("Code generation target: host (x86-64 shared library), sm_90a (PTX kernels + "
             "x86-64 launchers; cubins checked with ptxas when present) or both"),
    cl::init("both"));
static cl::opt<int64_t> maxTokens("max-tokens", cl::desc("Artifact capacity: tokens per step"),
                                  cl::init(512));
static cl::opt<int64_t> maxSeqs("max-seqs", cl::desc("Artifact capacity: sequences per batch"),
                                cl::init(16));
static cl::opt<bool> report("report",
                            cl::desc("Print the fusion report (kernels per layer with "
                                     "estimated FLOPs and bytes); implies fusion"),
                            cl::init(false));
static cl::opt<int64_t> kdaChunk("kda-chunk-size",
                                 cl::desc("KDA chunk size: 16, 32 or 64 (0: 16, the tensor-core recurrence's; 32 and 64 run the exact FMA recurrence)"),
                                 cl::init(0));
static cl::opt<std::string> gammaType("kda-gamma-type",
                                      cl::desc("Dtype holding the KDA decay factors Γ: "
                                               "bf16, f16 or f32"),
                                      cl::init("bf16"));
static cl::opt<bool> kdaNormInChunk(
    "kda-norm-in-chunk",
    cl::desc("Normalize KDA's q and k (L2) in the delta rule's kernel as it loads the "
             "convolutions' rows, which then cross in the activation dtype (default: the "
             "convolutions store the normalized fp32 rows; K3C_KDA_NORM_IN_CHUNK=1 sets it too)"),
    cl::init(false));
static cl::opt<bool> kdaOutNormInChunk(
    "kda-out-norm-in-chunk",
    cl::desc("KDA's gated output norm in the delta rule's kernel: at decode the token "
             "recurrence's last block of each head normalizes it (one launch fewer a KDA "
             "layer); K3C_KDA_OUT_NORM_IN_CHUNK=1 sets it too"),
    cl::init(false));
static cl::opt<bool> kdaGateInChunk(
    "kda-gate-in-chunk",
    cl::desc("Form KDA's gate values in the delta rule's kernel as it loads f_b's logits, "
             "which then cross in the activation dtype (default: f_b's store writes the "
             "fp32 gates); K3C_KDA_GATE_IN_CHUNK=1 sets it too"),
    cl::init(false));
static cl::opt<bool> kdaSplitNorms(
    "kda-split-norms",
    cl::desc("Split KDA's q/k L2 norms (k3-split-l2norms) in bf16 builds: the convolutions' "
             "kernel computes the per-head inverse norms, the delta rule scales the bf16 rows "
             "as it loads them (K3C_KDA_SPLIT_NORMS=0|1 overrides)"),
    cl::init(false));
static cl::opt<int64_t> maxContext("max-context",
                                   cl::desc("MLA cache capacity per sequence (0: dynamic)"),
                                   cl::init(0));
/// The MLA cache's page when --mla-page is not given: the GPU decode tile.
constexpr int64_t kDefaultMlaPage = 64;
static cl::opt<int64_t> mlaPage(
    "mla-page",
    cl::desc("Paged MLA cache: P tokens a page (0: one contiguous cache of --max-context tokens "
             "a sequence). The caches are page pools shared by all sequences and k3-run "
             "hands out pages as sequences grow, so memory follows the tokens held. Default: "
             "64 (the GPU decode tile) for artifacts whose context holds a page, else 0"),
    cl::init(0));
static cl::opt<int64_t> cacheTokens(
    "cache-tokens",
    cl::desc("Paged MLA cache: the default pool in tokens (0: every sequence's whole context, "
             "--max-seqs x --max-context); k3-run --cache-tokens overrides it"),
    cl::init(0));
static cl::opt<std::string> activationDtype(
    "activation-dtype",
    cl::desc("Activation, conv-window and MLA-cache dtype: bf16 (the model's contract) or f32 "
             "(checks kernels against the fp32 reference at 1e-5)"),
    cl::init("bf16"));
static cl::opt<std::string> kdaStateDtype(
    "kda-state-dtype",
    cl::desc("KDA recurrent state dtype: auto (default: bf16 in bf16 builds, f32 in f32 "
             "builds), f32 (the reference's) or bf16 (FlashKDA's: half the bytes a decode "
             "step reads and writes, and half the state memory a sequence; updated in f32, "
             "rounded where stored; needs bf16 activations)"),
    cl::init("auto"));
static cl::opt<std::string> dumpKernelsTo(
    "dump-kernels-to",
    cl::desc("Write every distinct kernel's stages to DIR: <kernel>.loops.mlir (and, for "
             "sm_90a, the PTX of its modules; a module identical in several kernels is "
             "compiled once and written under the first)"),
    cl::value_desc("dir"), cl::init(""));
static cl::opt<std::string> ptxasAdvice(
    "ptxas-advisories",
    cl::desc("What ptxas's performance advisories (e.g. C7514: wgmma serialized) and "
             "warnings on accepted sm_90a modules do: warn (print each, the default), "
             "error (print each and fail the compile) or ignore"),
    cl::value_desc("warn|error|ignore"), cl::init("warn"));
static cl::opt<bool> quiet("quiet", cl::desc("No progress lines"), cl::init(false));
static cl::opt<bool> plan(
    "plan",
    cl::desc("Print only the deployment plan and exit (no IR, no compilation): per-rank bytes "
             "of an expert-parallel group for --ep R (home experts, replica slots, the "
             "replicated embedding/lm_head/attention/dense weights, KDA state, conv window, "
             "MLA cache for --max-seqs sequences x --max-context tokens per rank) and the "
             "summary for --plan-ranks (default 8,16,32,64 without --ep); says which R fits "
             "--gpu-memory"),
    cl::init(false));
static cl::opt<int64_t> epRanks(
    "ep",
    cl::desc("Expert-parallel ranks of the deployment plan; with --report the plan follows the "
             "fusion report"),
    cl::value_desc("R"), cl::init(0));
static cl::list<int64_t> planRanks(
    "plan-ranks",
    cl::desc("Also print the deployment plan's summary table for these rank counts "
             "(comma-separated)"),
    cl::value_desc("R,R,..."), cl::CommaSeparated);
static cl::opt<double> gpuMemory(
    "gpu-memory",
    cl::desc("Bytes per GPU for the deployment plan's fit (default 141e9: an H200)"),
    cl::value_desc("bytes"), cl::init(141e9));

namespace {
struct Progress {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  void line(const std::string &msg) {
    if (quiet)
      return;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    llvm::errs() << llvm::format("[k3-compile %6.2fs] ", s) << msg << "\n";
  }
};
} // namespace

/// A sibling directory of the artifact's (`<dir>.k3c-tmp-XXXXXX`, created
/// with a random name) that becomes `<dir>` on commit(): an exchange of the
/// two directories in one renameat2(RENAME_EXCHANGE) when `<dir>` exists
/// (then the old artifact is removed), a rename otherwise. Removed if never
/// committed.
struct StagedDir {
  std::string path, target;
  bool committed = false;
  bool create(const std::string &dir, std::string &err) {
    target = dir;
    std::filesystem::path t(dir);
    std::filesystem::path parent = t.parent_path().empty() ? "." : t.parent_path();
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    // createUniqueDirectory puts a relative model under the system temp
    // directory: name the sibling by its absolute path.
    if (std::filesystem::path abs = std::filesystem::absolute(parent, ec); !ec)
      parent = abs;
    llvm::SmallString<256> made;
    std::string model = (parent / (t.filename().string() + ".k3c-tmp-%%%%%%")).string();
    if (std::error_code e = llvm::sys::fs::createUniqueDirectory(model, made)) {
      err = "cannot create a directory next to '" + dir + "': " + e.message();
      return false;
    }
    // createUniqueDirectory appends its own suffix to the model name.
    path = made.str().str();
    return true;
  }
  bool commit(std::string &err) {
    std::error_code ec;
    if (std::filesystem::exists(target, ec)) {
      if (::renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
        committed = true;
        std::filesystem::remove_all(path, ec); // the old artifact
        return true;
      }
      // No exchange on this file system: remove the old one, then rename.
      std::filesystem::remove_all(target, ec);
    }
    std::filesystem::rename(path, target, ec);
    if (ec) {
      err = "cannot move the new artifact to '" + target + "': " + ec.message();
      return false;
    }
    committed = true;
    return true;
  }
  ~StagedDir() {
    if (!committed && !path.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  }
};

/// The manifest describes each kernel's arguments once, from the host
/// lowering; the sm_90a lowering must agree (scratch dtypes and shapes
/// included), or the runtime would size buffers for the wrong kernel.
/// Returns what differs, empty when they agree.
static std::string conventionMismatch(const std::vector<::k3c::lowering::KernelInfo> &host,
                                      const std::vector<::k3c::lowering::KernelInfo> &gpu) {
  if (host.size() != gpu.size())
    return std::to_string(host.size()) + " host kernels but " + std::to_string(gpu.size()) +
           " sm_90a kernels";
  for (size_t i = 0; i < host.size(); ++i) {
    const auto &h = host[i], &g = gpu[i];
    if (h.name != g.name)
      return "kernel " + std::to_string(i) + " is " + h.name + " on the host but " + g.name +
             " for sm_90a";
    if (h.args.size() != g.args.size())
      return h.name + ": " + std::to_string(h.args.size()) + " arguments on the host but " +
             std::to_string(g.args.size()) + " for sm_90a";
    for (size_t a = 0; a < h.args.size(); ++a) {
      const auto &x = h.args[a], &y = g.args[a];
      if (x.kind != y.kind || x.index != y.index || x.component != y.component ||
          x.dtype != y.dtype || x.shape != y.shape || x.deviceOnly != y.deviceOnly)
        return h.name + ": argument " + std::to_string(a) + " differs (host " + x.dtype +
               ", sm_90a " + y.dtype + ")";
    }
  }
  return "";
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  // --help shows k3-compile's own options, not every LLVM backend's.
  static cl::OptionCategory k3cCategory("k3-compile options");
  for (const char *name : {"o", "emit", "target", "max-tokens", "max-seqs", "report",
                           "kda-chunk-size", "kda-gamma-type", "max-context", "mla-page",
                           "cache-tokens", "activation-dtype", "kda-state-dtype",
                           "dump-kernels-to", "quiet", "plan", "ep", "plan-ranks", "gpu-memory"}) {
    auto &opts = cl::getRegisteredOptions();
    if (auto it = opts.find(name); it != opts.end())
      it->second->addCategory(k3cCategory);
  }
  inputPath.addCategory(k3cCategory);
  cl::HideUnrelatedOptions(k3cCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "k3-compile: the k3c ahead-of-time compiler for Kimi K3 / Kimi Linear\n\n"
      "  Input: a HF config.json, a checkpoint directory (config.json +\n"
      "  safetensors; tensors are checked against the config), or k3 IR (.mlir).\n");

  if (emit.getNumOccurrences() == 0 && outputPath != "-" &&
      !llvm::StringRef(outputPath).ends_with(".mlir") &&
      !llvm::StringRef(outputPath).ends_with(".ll"))
    emit = Emit::Artifact;
  if (target != "host" && target != "sm_90a" && target != "both") {
    llvm::errs() << "k3-compile: error: --target must be host, sm_90a or both, got '" << target
                 << "'\n";
    return 1;
  }
  if (emit == Emit::Artifact && outputPath == "-") {
    llvm::errs() << "k3-compile: error: --emit=artifact needs -o DIR\n";
    return 1;
  }
  // Capacities: at least 1, and small enough that buffer sizes cannot overflow.
  for (auto [name, v, lo, hi] :
       {std::tuple<const char *, int64_t, int64_t, int64_t>{"max-tokens", maxTokens, 1,
                                                            int64_t(1) << 24},
        {"max-seqs", maxSeqs, 1, int64_t(1) << 20},
        {"max-context", maxContext, 0, int64_t(1) << 24}, // 0: dynamic
        {"mla-page", mlaPage, 0, int64_t(1) << 16},
        {"cache-tokens", cacheTokens, 0, int64_t(1) << 32}})
    if (v < lo || v > hi) {
      llvm::errs() << "k3-compile: error: --" << name << " must be in [" << lo << ", " << hi
                   << "], got " << v
                   << "\n";
      return 1;
    }
  // The deployment plan: --plan alone, or --ep / --plan-ranks with --report.
  const bool wantPlan = plan || ((epRanks.getNumOccurrences() || planRanks.getNumOccurrences()) &&
                                 report);
  if ((epRanks.getNumOccurrences() || planRanks.getNumOccurrences()) && !plan && !report) {
    llvm::errs() << "k3-compile: error: --ep and --plan-ranks print a deployment plan: add "
                    "--plan (the plan alone) or --report\n";
    return 1;
  }
  if (epRanks.getNumOccurrences() && epRanks < 1) {
    llvm::errs() << "k3-compile: error: --ep must be >= 1, got " << epRanks << "\n";
    return 1;
  }
  for (int64_t r : planRanks)
    if (r < 1) {
      llvm::errs() << "k3-compile: error: --plan-ranks must be >= 1, got " << r << "\n";
      return 1;
    }
  if (!(gpuMemory > 0)) {
    llvm::errs() << "k3-compile: error: --gpu-memory must be > 0 bytes, got " << gpuMemory
                 << "\n";
    return 1;
  }
  if (emit == Emit::Artifact && !plan) {
    // The artifact is a directory: never over a file, and into a non-empty
    // directory only when it holds a k3c artifact (which is replaced).
    std::error_code ec;
    std::filesystem::path out(outputPath.getValue());
    if (std::filesystem::exists(out, ec) && !std::filesystem::is_directory(out, ec)) {
      llvm::errs() << "k3-compile: error: -o '" << outputPath
                   << "' is an existing file; an artifact is a directory\n";
      return 1;
    }
    if (std::filesystem::is_directory(out, ec) && !std::filesystem::is_empty(out, ec) &&
        !std::filesystem::exists(out / "manifest.json", ec)) {
      llvm::errs() << "k3-compile: error: -o '" << outputPath
                   << "' is a non-empty directory that holds no k3c artifact (no manifest.json)\n";
      return 1;
    }
  }
  MLIRContext ctx;
  ::k3c::loadBuilderDialects(ctx);
  // Print every diagnostic (errors, warnings and the passes' remarks) with
  // its location; a .mlir input installs a handler that also shows source lines.
  llvm::SourceMgr emptySm;
  SourceMgrDiagnosticHandler diagHandler(emptySm, &ctx);
  // Remarks (the passes' decisions, such as each KDA layer's chunk path):
  // each distinct one printed once, without the operation dump MLIR attaches
  // to an operation's diagnostics (one remark and one IR line a layer
  // before); how many repeats were folded is said at exit.
  struct RemarkFolder {
    std::set<std::string> seen;
    int64_t folded = 0;
    ~RemarkFolder() {
      if (folded)
        llvm::errs() << "k3-compile: " << folded << " repeated remark"
                     << (folded == 1 ? "" : "s") << " not shown\n";
    }
  } remarks;
  ctx.getDiagEngine().registerHandler([&](Diagnostic &d) -> LogicalResult {
    if (d.getSeverity() != DiagnosticSeverity::Remark)
      return failure(); // errors and warnings: the handler above
    std::string text;
    llvm::raw_string_ostream os(text);
    d.getLocation()->walk([&](Location l) {
      auto fl = dyn_cast<FileLineColLoc>(l);
      if (!fl)
        return WalkResult::advance();
      os << fl.getFilename().getValue() << ":" << fl.getLine() << ":" << fl.getColumn() << ": ";
      return WalkResult::interrupt();
    });
    os << "remark: " << d.str();
    if (remarks.seen.insert(text).second)
      llvm::errs() << text << "\n";
    else
      ++remarks.folded;
    return success();
  });
  Progress progress;
  OwningOpRef<ModuleOp> module;
  ::k3c::ModelConfig config;
  std::string checkpointDir;
  try {
    std::string configPath;
    if (fs::is_directory(inputPath.getValue())) {
      configPath = (fs::path(inputPath.getValue()) / "config.json").string();
      ::k3c::ModelConfig c = ::k3c::loadConfig(configPath);
      ::k3c::CheckpointFiles ckpt = ::k3c::CheckpointFiles::open(inputPath);
      ::k3c::bindCheckpoint(c, ckpt);
      checkpointDir = inputPath;
      progress.line("checkpoint " + inputPath + ": " + std::to_string(ckpt.names().size()) +
                    " tensors match the config");
    } else if (llvm::StringRef(inputPath).ends_with(".mlir")) {
      // A module's types are already set: the options that choose them
      // would be ignored.
      for (const cl::opt<std::string> *o : {&activationDtype, &kdaStateDtype})
        if (o->getNumOccurrences())
          throw ::k3c::Error("--" + o->ArgStr.str() + " applies where k3-compile builds the "
                             "model (a config or a checkpoint); " + inputPath.getValue() +
                             " is a module whose types are already set");
      llvm::SourceMgr sm;
      std::string err;
      auto file = openInputFile(inputPath, &err);
      if (!file) {
        llvm::errs() << "k3-compile: error: " << err << "\n";
        return 1;
      }
      sm.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
      SourceMgrDiagnosticHandler handler(sm, &ctx);
      module = parseSourceFile<ModuleOp>(sm, &ctx);
      if (!module)
        return 1;
      progress.line("parsed and verified " + inputPath);
    } else {
      configPath = inputPath;
    }
    if (!module) {
      ::k3c::ModelConfig c = ::k3c::loadConfig(configPath);
      config = c;
      progress.line("config " + configPath + ": " + c.modelType + ", " +
                    std::to_string(c.numLayers) + " layers (" +
                    std::to_string(c.count(::k3c::AttnKind::KDA)) + " KDA, " +
                    std::to_string(c.count(::k3c::AttnKind::MLA)) + " MLA), " +
                    std::to_string(::k3c::parameterCount(c)) + " parameters");
      ::k3c::BuildOptions opts;
      if (activationDtype != "bf16" && activationDtype != "f32")
        throw ::k3c::Error("--activation-dtype must be bf16 or f32, got '" + activationDtype + "'");
      if (ptxasAdvice != "warn" && ptxasAdvice != "error" && ptxasAdvice != "ignore")
        throw ::k3c::Error("--ptxas-advisories must be warn, error or ignore, got '" +
                           ptxasAdvice + "'");
      opts.f32Activations = activationDtype == "f32";
      if (kdaStateDtype != "auto" && kdaStateDtype != "f32" && kdaStateDtype != "bf16")
        throw ::k3c::Error("--kda-state-dtype must be auto, f32 or bf16, got '" + kdaStateDtype +
                           "'");
      if (kdaStateDtype == "bf16" && opts.f32Activations)
        throw ::k3c::Error("--kda-state-dtype=bf16 needs bf16 activations: the f32 build "
                           "keeps the reference's f32 state for its 1e-5 checks");
      // auto: the state in the activations' dtype (the f32 build keeps the
      // reference's f32 state; the bf16 build holds it in bf16, FlashKDA's).
      opts.bf16KdaState =
          kdaStateDtype == "bf16" || (kdaStateDtype == "auto" && !opts.f32Activations);
      // Artifacts and paged caches need a static context: the config's, at
      // most 4096, unless --max-context gives one.
      opts.maxContext = maxContext > 0 ? maxContext
                        : emit == Emit::Artifact || mlaPage > 0
                            ? std::min<int64_t>(c.maxPositions > 0 ? c.maxPositions : 4096, 4096)
                            : 0;
      if (mlaPage.getNumOccurrences() == 0 && emit == Emit::Artifact &&
          opts.maxContext >= kDefaultMlaPage)
        mlaPage = kDefaultMlaPage;
      opts.mlaPage = mlaPage;
      if (mlaPage > opts.maxContext && opts.maxContext > 0)
        throw ::k3c::Error("--mla-page " + std::to_string(mlaPage) +
                           " exceeds the context of " + std::to_string(opts.maxContext) +
                           " tokens a sequence (--max-context)");
      module = ::k3c::buildModel(ctx, c, opts);
      if (!module) {
        llvm::errs() << "k3-compile: error: the built module failed to verify\n";
        return 1;
      }
      progress.line("built and verified the k3 module");
    }
  } catch (const std::exception &e) {
    llvm::errs() << "k3-compile: error: " << e.what() << "\n";
    return 1;
  }

  // The plan reads the entry arguments: the weights and states the runtime
  // gets, as the builder typed them (the passes keep them).
  auto printPlan = [&](llvm::raw_ostream &os) {
    ::mlir::k3::PlanOptions po;
    po.ranks = epRanks;
    po.table.assign(planRanks.begin(), planRanks.end());
    if (plan && po.ranks == 0 && po.table.empty())
      po.table = {8, 16, 32, 64};
    po.seqs = maxSeqs;
    ::mlir::k3::ModelMemory mm;
    std::string err;
    if (failed(::mlir::k3::measureModel(*module, mm, err))) {
      llvm::errs() << "k3-compile: error: deployment plan: " << err << "\n";
      return false;
    }
    // The artifact's context: --max-context, else what the module was
    // built with, else the artifact default (the config's, at most 4096).
    po.context = maxContext > 0       ? static_cast<int64_t>(maxContext)
                 : mm.staticContext   ? mm.staticContext
                 : config.maxPositions > 0 ? std::min<int64_t>(config.maxPositions, 4096)
                                           : 4096;
    po.capacity = gpuMemory;
    if (mlaPage > 0 && cacheTokens > 0)
      po.cacheTokens = cacheTokens;
    if (failed(::mlir::k3::printDeploymentPlan(*module, po, os, err))) {
      llvm::errs() << "k3-compile: error: deployment plan: " << err << "\n";
      return false;
    }
    return true;
  };
  if (plan) {
    std::string err;
    auto out = openOutputFile(outputPath, &err);
    if (!out) {
      llvm::errs() << "k3-compile: error: " << err << "\n";
      return 1;
    }
    if (!printPlan(out->os()))
      return 1;
    out->keep();
    return 0;
  }

  if (emit != Emit::K3 || report) {
    PassManager pm(&ctx);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
    if (emit == Emit::Artifact && config.modelType.empty()) {
      llvm::errs() << "k3-compile: error: an artifact needs a config.json or checkpoint input\n";
      return 1;
    }
    if (emit == Emit::Core) {
      pm.addPass(mlir::k3::createK3DecomposeLayersPass());
      mlir::k3::K3KdaTilingLegalityPassOptions t;
      t.chunkSize = kdaChunk;
      t.gammaType = gammaType;
      pm.addPass(mlir::k3::createK3KdaTilingLegalityPass(t));
      pm.addPass(mlir::k3::createK3MXFP4LayoutPass());
    } else {
      mlir::k3::PipelineOptions o;
      o.chunkSize = kdaChunk;
      o.gammaType = gammaType;
      // 0/1 environment overrides of the flags (kUnset: not set); other
      // values are refused by name.
      constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();
      auto env01 = [](const char *name, int64_t &v) {
        v = ::k3c::lowering::intFromEnv(name, kUnset);
        if (v == kUnset || v == 0 || v == 1)
          return true;
        llvm::errs() << "k3-compile: error: " << name << " must be 0 or 1, got " << v << "\n";
        return false;
      };
      int64_t normEnv, outNormEnv, gateEnv, splitEnv;
      if (!env01("K3C_KDA_NORM_IN_CHUNK", normEnv) ||
          !env01("K3C_KDA_OUT_NORM_IN_CHUNK", outNormEnv) ||
          !env01("K3C_KDA_GATE_IN_CHUNK", gateEnv) ||
          !env01("K3C_KDA_SPLIT_NORMS", splitEnv))
        return 1;
      o.kdaNormInChunk = kdaNormInChunk || normEnv == 1;
      o.kdaOutNormInChunk = kdaOutNormInChunk || outNormEnv == 1;
      o.kdaGateInChunk = kdaGateInChunk || gateEnv == 1;
      o.splitL2Norms = splitEnv == kUnset ? kdaSplitNorms.getValue() : splitEnv == 1;
      mlir::k3::buildK3Pipeline(pm, o);
    }
    if (failed(pm.run(*module))) {
      llvm::errs() << "k3-compile: error: the k3c pipeline failed (see the diagnostics above)\n";
      return 1;
    }
    progress.line(emit == Emit::Core ? "decomposed, tiled and laid out"
                                     : "fused into kernels");
  }

  if (emit == Emit::Gpu || emit == Emit::Ptx) {
    std::vector<::k3c::lowering::KernelInfo> kernels;
    auto loops =
        ::k3c::lowering::lowerKernelsToLoops(*module, kernels, ::k3c::lowering::Target::Gpu);
    std::string err;
    const bool exactExp = activationDtype == "f32"; // the f32 build's exact exp
    if (failed(loops) || failed(::k3c::lowering::lowerLoopsToGpu(**loops, err, exactExp))) {
      llvm::errs() << "k3-compile: error: " << (err.empty() ? "lowering the kernels failed" : err)
                   << "\n";
      return 1;
    }
    progress.line("lowered " + std::to_string(kernels.size()) + " kernels to NVVM (sm_90a)");
    auto out = openOutputFile(outputPath, &err);
    if (!out) {
      llvm::errs() << "k3-compile: error: " << err << "\n";
      return 1;
    }
    if (emit == Emit::Gpu) {
      (*loops)->print(out->os());
    } else {
      std::map<std::string, std::string> ptx;
      if (failed(::k3c::lowering::emitPtx(**loops, ptx, err))) {
        llvm::errs() << "k3-compile: error: " << err << "\n";
        return 1;
      }
      for (auto &[name, text] : ptx)
        out->os() << "// ===== kernel module " << name << "\n" << text << "\n";
      progress.line("emitted PTX for " + std::to_string(ptx.size()) + " kernel modules");
    }
    out->keep();
    return 0;
  }
  if (emit == Emit::Loops || emit == Emit::LLVM || emit == Emit::Artifact) {
    std::vector<::k3c::lowering::KernelInfo> kernels;
    auto loops = ::k3c::lowering::lowerKernelsToLoops(*module, kernels);
    if (failed(loops)) {
      llvm::errs() << "k3-compile: error: lowering the kernels failed\n";
      return 1;
    }
    progress.line("lowered " + std::to_string(kernels.size()) + " distinct kernels to loops");
    std::string err;
    if (!dumpKernelsTo.empty()) {
      std::filesystem::create_directories(dumpKernelsTo.getValue());
      for (auto fn : (*loops)->getOps<func::FuncOp>()) {
        std::string path =
            (std::filesystem::path(dumpKernelsTo.getValue()) / (fn.getName().str() + ".loops.mlir"))
                .string();
        auto f = openOutputFile(path, &err);
        if (!f) {
          llvm::errs() << "k3-compile: error: " << err << "\n";
          return 1;
        }
        fn->print(f->os());
        f->os() << "\n";
        f->keep();
      }
      progress.line("dumped " + std::to_string(kernels.size()) + " kernels to " + dumpKernelsTo);
    }
    if (emit == Emit::Loops || emit == Emit::LLVM) {
      auto out = openOutputFile(outputPath, &err);
      if (!out) {
        llvm::errs() << "k3-compile: error: " << err << "\n";
        return 1;
      }
      if (emit == Emit::Loops) {
        (*loops)->print(out->os());
      } else {
        std::string ir;
        // A fresh private directory (random name, created atomically): no
        // predictable path a planted symlink could redirect.
        llvm::SmallString<128> dir;
        if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("k3c-emit-llvm", dir)) {
          llvm::errs() << "k3-compile: error: cannot create a temporary directory: "
                       << ec.message() << "\n";
          return 1;
        }
        std::string tmp = (std::filesystem::path(dir.str().str()) / "kernels.so").string();
        bool ok = succeeded(::k3c::lowering::buildHostLibrary(**loops, kernels, tmp, &ir, err));
        std::error_code rmEc;
        std::filesystem::remove_all(dir.str().str(), rmEc);
        if (!ok) {
          llvm::errs() << "k3-compile: error: " << err << "\n";
          return 1;
        }
        out->os() << ir;
      }
      out->keep();
      return 0;
    }
    // The artifact is written into a fresh sibling directory and swapped in
    // at the end, so an existing artifact at -o stays whole until the new
    // one is complete (and stays as it was if this compile fails).
    StagedDir staged;
    if (!staged.create(outputPath.getValue(), err)) {
      llvm::errs() << "k3-compile: error: " << err << "\n";
      return 1;
    }
    const std::string artDir = staged.path;
    std::string lib, cudaLib;
    if (target == "sm_90a" || target == "both") {
      std::vector<::k3c::lowering::KernelInfo> gpuKernels; // same calling convention
      auto gpuLowered = ::k3c::lowering::lowerKernelsToLoops(*module, gpuKernels,
                                                              ::k3c::lowering::Target::Gpu);
      if (failed(gpuLowered)) {
        llvm::errs() << "k3-compile: error: lowering the kernels for sm_90a failed\n";
        return 1;
      }
      if (std::string why = conventionMismatch(kernels, gpuKernels); !why.empty()) {
        llvm::errs() << "k3-compile: internal error: the host and sm_90a kernels disagree on "
                        "their calling convention: "
                     << why << "\n";
        return 1;
      }
      OwningOpRef<ModuleOp> gpuLoops = std::move(*gpuLowered);
      cudaLib = (std::filesystem::path(artDir) / "kernels_cuda.so").string();
      std::map<std::string, std::string> ptx;
      bool ranPtxas = false;
      const bool exactExp = activationDtype == "f32"; // the f32 build's exact exp
      if (failed(::k3c::lowering::lowerLoopsToGpu(*gpuLoops, err, exactExp)) ||
          failed(::k3c::lowering::emitPtx(*gpuLoops, ptx, err, /*inPlace=*/true))) {
        llvm::errs() << "k3-compile: error: " << err << "\n";
        return 1;
      }
      std::string ptxDir = (std::filesystem::path(artDir) / "ptx").string();
      std::filesystem::create_directories(ptxDir);
      std::vector<std::string> advisories;
      if (failed(::k3c::lowering::validateWithPtxas(ptx, ptxDir, err, ranPtxas, &advisories))) {
        llvm::errs() << "k3-compile: error: " << err << "\n";
        return 1;
      }
      if (ptxasAdvice != "ignore") {
        const bool fatal = ptxasAdvice == "error";
        for (const std::string &a : advisories)
          llvm::errs() << "k3-compile: " << (fatal ? "error" : "warning") << ": ptxas on " << a
                       << "\n";
        if (fatal && !advisories.empty()) {
          llvm::errs() << "k3-compile: error: " << advisories.size()
                       << " ptxas advisories (--ptxas-advisories=error)\n";
          return 1;
        }
      }
      for (auto &[name, text] : ptx) {
        std::ofstream(ptxDir + "/" + name + ".ptx") << text;
        if (!dumpKernelsTo.empty())
          std::ofstream((std::filesystem::path(dumpKernelsTo.getValue()) / (name + ".ptx")).string())
              << text;
      }
      progress.line(std::to_string(ptx.size()) + " PTX modules for sm_90a" +
                    (ranPtxas ? ", assembled by ptxas (cubins in ptx/)" : " (no ptxas: PTX only)"));
      // With ptxas, the launch library carries the cubins (no JIT at load);
      // without, the PTX (the driver compiles it when the artifact loads).
      if (ranPtxas && failed(::k3c::lowering::embedCubins(*gpuLoops, ptxDir, err))) {
        llvm::errs() << "k3-compile: error: " << err << "\n";
        return 1;
      }
      if (failed(::k3c::lowering::buildHostLibrary(*gpuLoops, kernels, cudaLib, nullptr, err))) {
        llvm::errs() << "k3-compile: error: " << err << "\n";
        return 1;
      }
      progress.line("compiled the CUDA launch library " + cudaLib);
    }
    if (target == "host" || target == "both") {
      lib = (std::filesystem::path(artDir) / "kernels_host.so").string();
      if (failed(::k3c::lowering::buildHostLibrary(**loops, kernels, lib, nullptr, err))) {
        llvm::errs() << "k3-compile: error: " << err << "\n";
        return 1;
      }
      progress.line("compiled the host kernel library " + lib);
    }
    {
      auto fusedOut = openOutputFile(
          (std::filesystem::path(artDir) / "model.fused.mlir").string(), &err);
      if (fusedOut) {
        module->print(fusedOut->os());
        fusedOut->keep();
      }
    }
    ::k3c::lowering::ArtifactOptions ao;
    ao.dir = artDir;
    ao.target = target;
    ao.checkpointDir = checkpointDir;
    ao.hostLibrary = lib;
    ao.cudaLibrary = cudaLib;
    ao.config = config;
    ao.maxTokens = maxTokens;
    ao.activationDtype = activationDtype;
    ao.maxSeqs = maxSeqs;
    ao.maxContext = maxContext > 0 ? maxContext
                                   : std::min<int64_t>(config.maxPositions > 0 ? config.maxPositions : 4096, 4096);
    ao.cacheTokens = cacheTokens;
    if (failed(::k3c::lowering::writeArtifact(*module, kernels, ao, err)) ||
        !staged.commit(err)) {
      llvm::errs() << "k3-compile: error: " << err << "\n";
      return 1;
    }
    if (report)
      mlir::k3::printFusionReport(*module, llvm::outs());
    if (wantPlan && !printPlan(llvm::outs()))
      return 1;
    progress.line("wrote the artifact " + outputPath);
    return 0;
  }

  std::string err;
  auto out = openOutputFile(outputPath, &err);
  if (!out) {
    llvm::errs() << "k3-compile: error: " << err << "\n";
    return 1;
  }
  if (report) {
    // The report goes with the output when that is a file, else to stderr.
    mlir::k3::printFusionReport(*module, outputPath == "-" ? llvm::errs() : llvm::outs());
    if (wantPlan && !printPlan(outputPath == "-" ? llvm::errs() : llvm::outs()))
      return 1;
  }
  if (!(report && emit == Emit::K3)) {
    module->print(out->os());
    out->os() << "\n";
  }
  out->keep();
  progress.line("wrote " + outputPath);
  return 0;
}
