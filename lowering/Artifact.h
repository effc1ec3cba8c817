//===- Artifact.h - the ahead-of-time artifact writer -----------*- C++ -*-===//

#ifndef K3C_LOWERING_ARTIFACT_H
#define K3C_LOWERING_ARTIFACT_H

#include "lowering/Lowering.h"
#include "models/Config.h"
#include "support/Manifest.h"

namespace k3c::lowering {

/// The manifest format (support/Manifest.h: the schema writer and reader share).
constexpr int kArtifactFormatVersion = ::k3c::artifact::kFormatVersion;
constexpr const char *kCompilerVersion = "0.1.0";

struct ArtifactOptions {
  std::string dir;           ///< the artifact directory
  std::string target;        ///< "host"
  std::string checkpointDir; ///< weights source ("" for config-only builds)
  std::string hostLibrary;   ///< path of kernels_host.so inside `dir` ("" if none)
  std::string cudaLibrary;   ///< path of kernels_cuda.so inside `dir` ("" if none)
  ModelConfig config;
  int64_t maxTokens = 512, maxSeqs = 16, maxContext = 4096;
  /// A paged MLA cache's default pool in tokens (0: every sequence's whole
  /// context); the runtime may choose another (k3-run --cache-tokens).
  int64_t cacheTokens = 0;
  std::string activationDtype = "bf16";
};

/// The manifest.json entry of one kernel, and its calling-convention
/// signature (support/Manifest.h), which the kernel libraries embed.
artifact::Kernel kernelManifestEntry(const KernelInfo &k);
std::string kernelSignatureOf(const KernelInfo &k);

/// Writes manifest.json (and manifest.sha256) for the fused module and its
/// lowered kernels, checked against the schema before it is written.
mlir::LogicalResult writeArtifact(mlir::ModuleOp fused, const std::vector<KernelInfo> &kernels,
                                  const ArtifactOptions &options, std::string &error);

} // namespace k3c::lowering

#endif // K3C_LOWERING_ARTIFACT_H
