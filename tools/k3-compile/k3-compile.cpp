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
#include "models/Config.h"
#include "models/ModelBuilder.h"
#include "models/Safetensors.h"
#include "models/Weights.h"
#include "passes/Passes.h"

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
#include <filesystem>

using namespace mlir;
namespace cl = llvm::cl;
namespace fs = std::filesystem;

static cl::opt<std::string> inputPath(cl::Positional,
                                      cl::desc("<config.json | checkpoint dir | file.mlir>"),
                                      cl::Required);
static cl::opt<std::string> outputPath("o", cl::desc("Output file (default: stdout)"),
                                       cl::value_desc("file"), cl::init("-"));
enum class Emit { K3, Core, Fused };
static cl::opt<Emit> emit(
    "emit", cl::desc("What to emit"), cl::init(Emit::K3),
    cl::values(clEnumValN(Emit::K3, "k3", "whole-model k3 IR (@prefill, @decode)"),
               clEnumValN(Emit::Core, "core",
                          "core ops after decomposition, KDA tiling and MXFP4 layout"),
               clEnumValN(Emit::Fused, "fused", "fused k3.kernel regions")));
static cl::opt<bool> report("report",
                            cl::desc("Print the fusion report (kernels per layer with "
                                     "estimated FLOPs and bytes); implies fusion"),
                            cl::init(false));
static cl::opt<int64_t> kdaChunk("kda-chunk-size",
                                 cl::desc("Force the KDA chunk size (0: largest legal)"),
                                 cl::init(0));
static cl::opt<std::string> gammaType("kda-gamma-type",
                                      cl::desc("Dtype holding the KDA decay factors Γ: "
                                               "bf16, f16 or f32"),
                                      cl::init("bf16"));
static cl::opt<int64_t> maxContext("max-context",
                                   cl::desc("MLA cache capacity per sequence (0: dynamic)"),
                                   cl::init(0));
static cl::opt<bool> quiet("quiet", cl::desc("No progress lines"), cl::init(false));

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

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  cl::ParseCommandLineOptions(
      argc, argv,
      "k3-compile: the k3c ahead-of-time compiler for Kimi K3 / Kimi Linear\n\n"
      "  Input: a HF config.json, a checkpoint directory (config.json +\n"
      "  safetensors; tensors are checked against the config), or k3 IR (.mlir).\n");

  MLIRContext ctx;
  ::k3c::loadBuilderDialects(ctx);
  // Print every diagnostic (errors, warnings and the passes' remarks) with
  // its location; a .mlir input installs a handler that also shows source lines.
  llvm::SourceMgr emptySm;
  SourceMgrDiagnosticHandler diagHandler(emptySm, &ctx);
  Progress progress;
  OwningOpRef<ModuleOp> module;
  try {
    std::string configPath;
    if (fs::is_directory(inputPath.getValue())) {
      configPath = (fs::path(inputPath.getValue()) / "config.json").string();
      ::k3c::ModelConfig c = ::k3c::loadConfig(configPath);
      ::k3c::CheckpointFiles ckpt = ::k3c::CheckpointFiles::open(inputPath);
      ::k3c::bindCheckpoint(c, ckpt);
      progress.line("checkpoint " + inputPath + ": " + std::to_string(ckpt.names().size()) +
                    " tensors match the config");
    } else if (llvm::StringRef(inputPath).ends_with(".mlir")) {
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
      progress.line("config " + configPath + ": " + c.modelType + ", " +
                    std::to_string(c.numLayers) + " layers (" +
                    std::to_string(c.count(::k3c::AttnKind::KDA)) + " KDA, " +
                    std::to_string(c.count(::k3c::AttnKind::MLA)) + " MLA), " +
                    std::to_string(::k3c::parameterCount(c)) + " parameters");
      ::k3c::BuildOptions opts;
      opts.maxContext = maxContext;
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

  if (emit != Emit::K3 || report) {
    PassManager pm(&ctx);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
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
      mlir::k3::buildK3Pipeline(pm, o);
    }
    if (failed(pm.run(*module))) {
      llvm::errs() << "k3-compile: error: the k3c pipeline failed (see the diagnostics above)\n";
      return 1;
    }
    progress.line(emit == Emit::Core ? "decomposed, tiled and laid out"
                                     : "fused into kernels");
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
  }
  if (!(report && emit == Emit::K3)) {
    module->print(out->os());
    out->os() << "\n";
  }
  out->keep();
  progress.line("wrote " + outputPath);
  return 0;
}
