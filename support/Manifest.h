//===- Manifest.h - the artifact manifest: one schema, writer and reader -*- C++ -*-===//
//
// manifest.json (docs/artifact.md) is the contract between k3-compile and the
// runtime. Both sides use these structs: the writer (lowering/Artifact.cpp)
// fills them and calls toJson; the reader (runtime/ArtifactLoad.cpp) calls
// Manifest::fromJson, which checks the whole document before it returns, so an
// edited, truncated or hostile manifest ends in one error naming the field
// ("artifact 'DIR': manifest.json: <field>: <problem>") instead of an
// out-of-range index, a huge allocation or a path outside the artifact:
//
//  * format and an integer format_version equal to this k3c's;
//  * files: relative paths inside the artifact directory (no "..", not
//    absolute), 64-hex-digit SHA-256s; checkpoint hash entries likewise;
//  * model and capacity: integers in bounds (vocabulary, tokens, sequences,
//    context), max_seqs <= max_tokens, every value's capacity-sized buffer
//    computed with checked arithmetic and bounded;
//  * kernels: unique names, k3k_ symbols, argument kinds, dtypes, shapes,
//    dynamic_from pairs naming existing arguments and dimensions (one per
//    dynamic dimension), result aliases naming inputs;
//  * entries prefill and decode: value ids equal to their positions, known
//    kinds and dtypes; launches naming known kernels with as many inputs and
//    outputs as the kernel takes, every index in range, each activation
//    written once and only read after the launch that writes it; non-empty
//    returns of written values; a dimension marked "context" equal to
//    capacity.max_context; a "pages" dimension (a paged MLA cache's pool)
//    only with capacity.cache_page, the pool's dim 1 equal to it and the
//    block table's pages per sequence ceil(max_context / cache_page);
//  * weights: the binding table, one entry per weight value (same dtype,
//    shape and MXFP4 layout as the value), a known transform with the
//    sources it takes, each source's accepted checkpoint shapes consistent
//    with the value's shape.
//
// No LLVM or MLIR: the runtime-only build compiles it.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_SUPPORT_MANIFEST_H
#define K3C_SUPPORT_MANIFEST_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace k3c::artifact {

/// The manifest format this k3c writes and reads. 2: the weight-binding
/// table (`weights`) replaced the runtime's checkpoint naming rules. 3: the
/// MXFP4 kernel layout holds a fragment register's two nibbles 16 bits apart
/// (models/MXFP4Layout.h); kernels built for version 2 would decode the
/// runtime's repacked experts wrongly. 4: each MXFP4 code's magnitude and
/// sign bits at per-pair positions that tile the run word (11 instead of 16
/// decode operations a word); kernels built for version 3 would misread it.
/// 5: the code bits at per-pair rotations of the run word (9 decode
/// operations a word, models/MXFP4Layout.h); kernels built for version 4
/// would misread it.
constexpr int kFormatVersion = 5;

/// Bytes of one element of an artifact dtype (bf16, f16, f32, i32, i64, i8),
/// 0 for a name that is none of them. The runtime sizes its buffers with it.
int64_t dtypeSizeOrZero(const std::string &dtype);

/// A kernel library inside the artifact directory.
struct FileEntry {
  std::string path;   ///< relative to the artifact directory
  std::string sha256; ///< 64 lowercase hex digits
  std::string arch;   ///< the GPU architecture ("" for the host library)
  /// cuda_library only ("grid_dependency": true): every device kernel
  /// starts with griddepcontrol.wait, so the runtime may launch it with
  /// programmatic stream serialization (it starts while the kernel before it
  /// finishes). Absent: plain launches.
  bool gridDependency = false;
};

struct ModelInfo {
  std::string modelType;
  int64_t vocabSize = 0, hiddenSize = 0, numLayers = 0;
  std::string weightPrefix;
  int64_t eosTokenId = -1;
  std::string activationDtype = "bf16";
  int64_t maxPositionEmbeddings = 0;
};

struct Capacity {
  int64_t maxTokens = 0, maxSeqs = 0, maxContext = 0;
  /// A paged MLA cache (0 for contiguous caches): tokens a page, and the
  /// pool's pages by default (the runtime's zero page included).
  int64_t cachePage = 0, cachePages = 0;
};

/// Where the weights come from, and the hashes that pin them.
struct CheckpointRef {
  std::string path; ///< "" for an artifact compiled from config.json alone
  bool hasSha256 = false;
  std::map<std::string, std::string> sha256; ///< file inside the checkpoint -> hash
  bool fromConfig = false;
};

/// One argument of a kernel's calling convention.
struct KernelArg {
  std::string kind; ///< input, output, scratch
  int64_t index = 0;
  int component = -1; ///< MXFP4 input: 0 payload bytes, 1 scale bytes
  std::string dtype;
  std::vector<int64_t> shape; ///< -1 for a dynamic dimension
  std::vector<std::pair<int64_t, int64_t>> dynamicFrom; ///< (argument, dim) per dynamic dim
  bool deviceOnly = false; ///< scratch only the GPU kernels use
};

struct Kernel {
  std::string name, family, hostSymbol;
  int64_t flopsPerToken = 0, bytesPerToken = 0, weightBytes = 0;
  std::vector<int64_t> resultAliases; ///< per result: -1 or the input updated in place
  std::vector<KernelArg> args;
  /// Inputs and results the kernel takes (from args and result_aliases).
  int64_t numInputs() const;
  int64_t numResults() const { return static_cast<int64_t>(resultAliases.size()); }
};

/// #k3.mxfp4_layout: the kernel byte layout of an MXFP4 weight.
struct Mxfp4Layout {
  int64_t nTile = 0, kTile = 0;
  bool operator==(const Mxfp4Layout &o) const { return nTile == o.nTile && kTile == o.kTile; }
};

/// A value of an entry: an input, a state, a weight or an activation.
struct Value {
  int64_t id = 0;
  std::string kind = "activation"; ///< input, state, weight, activation
  std::string name;                ///< inputs, states and weights
  std::string trace;               ///< "layers.N": the residual stream after layer N
  std::string dtype;               ///< an artifact dtype, or mxfp4 (weights)
  std::vector<int64_t> shape;      ///< -1 for a dynamic dimension
  std::vector<std::string> dims;   ///< per dim: "", tokens, seqs, context (inputs, states, weights)
  std::optional<Mxfp4Layout> layout;
};

struct Launch {
  std::string kernel;
  std::vector<int64_t> inputs, outputs; ///< value ids
};

struct Entry {
  std::vector<Value> values;
  std::vector<Launch> launches;
  std::vector<int64_t> returns; ///< logits first, then the new states
};

/// One checkpoint tensor a weight binding reads. For a stacked binding the
/// name holds "{expert}", which the runtime replaces with each expert's
/// number.
struct WeightSource {
  std::string tensor;                     ///< the full checkpoint name (prefix included)
  std::vector<std::string> dtypes;        ///< accepted checkpoint dtypes (bf16, f16, f32, u8)
  std::vector<std::vector<int64_t>> shapes; ///< accepted checkpoint shapes, first canonical
};

/// How the runtime builds one weight value from the checkpoint.
struct WeightBinding {
  /// convert: one tensor of exactly the value's shape, converted element
  ///   by element to the value's dtype.
  /// flatten: one tensor of any accepted shape, its elements in row-major
  ///   order filling the value from the start (zeros after a shorter tensor,
  ///   a longer one's tail unused: A_log's padded and [1, 1, H, 1] forms).
  /// stack: dim 0 of the value is the expert; expert e is the tensor
  ///   sources[0] with "{expert}" = e, of the value's shape without dim 0.
  /// mxfp4_stack: like stack, from payload (sources[0], [N, K/2] u8) and
  ///   scale bytes (sources[1], [N, K/32] u8) of an [E, N, K] mxfp4 value,
  ///   repacked into the value's layout (models/MXFP4Layout.h) when it has one.
  std::string transform;
  std::string name; ///< the weight value's name in the entries
  std::string dtype;
  std::vector<int64_t> shape;
  std::optional<Mxfp4Layout> layout;
  /// "experts": dim 0 is the expert, and under expert parallelism a rank
  /// loads only its own experts (runtime/ExpertParallel.h); "" otherwise.
  std::string shard;
  std::vector<WeightSource> sources;
};

struct Manifest {
  std::string format = "k3c-artifact";
  int64_t formatVersion = kFormatVersion;
  std::string compiler, target;
  ModelInfo model;
  Capacity capacity;
  CheckpointRef checkpoint;
  std::optional<FileEntry> hostLibrary, cudaLibrary;
  std::vector<Kernel> kernels;
  Entry prefill, decode;
  std::vector<WeightBinding> weights;

  const Kernel *findKernel(const std::string &name) const;
  const WeightBinding *findWeight(const std::string &name) const;

  /// The JSON document (key order fixed, as k3-compile writes it).
  nlohmann::ordered_json toJson() const;
  /// Reads and checks a manifest (the schema above). Throws k3c::Error
  /// ("artifact 'DIR': manifest.json: <field>: <problem>") at the first
  /// violation; a format_version other than kFormatVersion is "built by an
  /// incompatible k3c".
  static Manifest fromJson(const nlohmann::json &json, const std::string &dir);
  /// Checks the structs as fromJson does (the writer calls it before it
  /// writes, so k3-compile never emits a manifest its runtime refuses).
  void validate(const std::string &dir) const;
};

nlohmann::ordered_json toJson(const Kernel &k);

/// The calling convention of one kernel (its args and result aliases) as a
/// compact string. k3-compile embeds it in the kernel libraries next to each
/// entry point (`<host_symbol>_sig`), and the runtime compares it with the
/// manifest's entry before it calls the symbol: an edited or swapped kernel
/// entry is an error, not a call with the wrong arguments.
std::string kernelSignature(const Kernel &k);

} // namespace k3c::artifact

#endif // K3C_SUPPORT_MANIFEST_H
