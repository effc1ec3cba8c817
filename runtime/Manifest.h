//===- Manifest.h - the artifact manifest's schema, checked on read -*- C++ -*-===//
//
// manifest.json (docs/artifact.md) is the contract between k3-compile and the
// runtime. Before the runtime uses any of it, validateManifest checks its
// structure completely, so an edited, truncated or hostile manifest ends in
// one error naming the field instead of an out-of-range index, a huge
// allocation or a path outside the artifact:
//
//  * format and an integer format_version equal to this runtime's;
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
//    capacity.max_context.
//
// No LLVM or MLIR: the runtime-only build compiles it.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_RUNTIME_MANIFEST_H
#define K3C_RUNTIME_MANIFEST_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace k3c::rt {

/// The manifest format this runtime reads and k3-compile writes.
constexpr int kManifestFormatVersion = 1;

/// Bytes of one element of an artifact dtype (bf16, f16, f32, i32, i64, i8),
/// 0 for a name that is none of them. The runtime sizes its buffers with it.
int64_t dtypeSizeOrZero(const std::string &dtype);

/// The calling convention of one kernel entry of manifest.json (its args and
/// result aliases) as a compact string. k3-compile embeds it in the kernel
/// libraries next to each entry point (`<host_symbol>_sig`), and the runtime
/// compares it with the manifest's entry before it calls the symbol: an
/// edited or swapped kernel entry is an error, not a call with the wrong
/// arguments. Header-only: the writer (lowering) does not link the runtime.
inline std::string kernelSignature(const nlohmann::json &kernel) {
  std::string s = "k3c-sig-1;";
  auto num = [](const nlohmann::json &v) {
    return v.is_number_integer() ? std::to_string(v.get<int64_t>()) : std::string("?");
  };
  auto str = [](const nlohmann::json &v) { return v.is_string() ? v.get<std::string>() : "?"; };
  if (kernel.contains("args") && kernel["args"].is_array())
    for (const nlohmann::json &a : kernel["args"]) {
      if (!a.is_object()) {
        s += "?;";
        continue;
      }
      s += str(a.value("kind", nlohmann::json())) + ":" + num(a.value("index", nlohmann::json()));
      if (a.contains("component"))
        s += ":" + str(a["component"]);
      s += ":" + str(a.value("dtype", nlohmann::json())) + ":[";
      if (a.contains("shape") && a["shape"].is_array())
        for (const nlohmann::json &d : a["shape"])
          s += num(d) + ",";
      s += "]<";
      if (a.contains("dynamic_from") && a["dynamic_from"].is_array())
        for (const nlohmann::json &d : a["dynamic_from"])
          s += d.is_array() && d.size() == 2 ? num(d[0]) + "." + num(d[1]) + "," : "?,";
      if (a.contains("device_only"))
        s += a["device_only"].is_boolean() && a["device_only"].get<bool>() ? "@dev" : "@?";
      s += ";";
    }
  s += "aliases:";
  if (kernel.contains("result_aliases") && kernel["result_aliases"].is_array())
    for (const nlohmann::json &a : kernel["result_aliases"])
      s += num(a) + ",";
  return s;
}

/// Throws k3c::Error ("artifact 'DIR': manifest.json: <field>: <problem>")
/// at the first violation of the schema above.
void validateManifest(const nlohmann::json &manifest, const std::string &dir);

} // namespace k3c::rt

#endif // K3C_RUNTIME_MANIFEST_H
