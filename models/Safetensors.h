//===- Safetensors.h - safetensors reader/writer, sharded checkpoints -*- C++ -*-===//
//
// The real format: 8-byte little-endian header length N, N bytes of JSON
// header ({name: {dtype, shape, data_offsets}, "__metadata__": {...}}), then
// the data buffer. Files are memory-mapped; every header is validated
// (length bounds, offsets inside the buffer, contiguous and non-overlapping,
// dtype x shape = byte length, duplicate names) before any data is touched.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_MODELS_SAFETENSORS_H
#define K3C_MODELS_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace k3c {

enum class DType { BF16, F16, F32, F64, U8, I8, I16, I32, I64, BOOL, F8_E4M3, F8_E5M2 };

const char *dtypeName(DType d);
int64_t dtypeSize(DType d);
/// Parses a safetensors dtype string; false when unknown.
bool parseDType(const std::string &s, DType &out);

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; ///< offsets into the data buffer
  int64_t numel() const;
};

std::string shapeStr(const std::vector<int64_t> &shape);

/// One memory-mapped, validated .safetensors file.
class SafetensorsFile {
public:
  static std::unique_ptr<SafetensorsFile> open(const std::string &path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  const std::string &path() const { return filePath; }
  const std::vector<TensorInfo> &tensors() const { return infos; }
  const std::map<std::string, std::string> &metadata() const { return meta; }
  const TensorInfo *find(const std::string &name) const;
  const uint8_t *data(const TensorInfo &t) const { return dataBase + t.begin; }

private:
  SafetensorsFile() = default;
  std::string filePath;
  void *mapBase = nullptr;
  size_t mapSize = 0;
  const uint8_t *dataBase = nullptr;
  std::vector<TensorInfo> infos;
  std::map<std::string, size_t> byName;
  std::map<std::string, std::string> meta;
};

/// A tensor to write: raw little-endian bytes of the given dtype and shape.
struct TensorData {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Writes one .safetensors file (header padded to 8 bytes).
void writeSafetensors(const std::string &path, const std::vector<const TensorData *> &tensors,
                      const std::map<std::string, std::string> &metadata);

/// A checkpoint directory: config.json plus one model.safetensors or shards
/// listed by model.safetensors.index.json. A single .safetensors path works
/// too. Tensor names are unique across shards.
class CheckpointFiles {
public:
  static CheckpointFiles open(const std::string &path);

  const TensorInfo *find(const std::string &name) const;
  const uint8_t *data(const TensorInfo &t) const;
  /// All tensor names, in shard order.
  std::vector<std::string> names() const;
  const std::string &directory() const { return dir; }

private:
  std::string dir;
  std::vector<std::shared_ptr<SafetensorsFile>> files;
  std::map<std::string, std::pair<size_t, const TensorInfo *>> index;
  std::map<const TensorInfo *, size_t> owner;
};

/// Writes tensors as a checkpoint: `shards` files named
/// model-0000i-of-0000n.safetensors plus model.safetensors.index.json.
void writeCheckpointShards(const std::string &dir, const std::vector<TensorData> &tensors,
                           int shards);

} // namespace k3c

#endif // K3C_MODELS_SAFETENSORS_H
