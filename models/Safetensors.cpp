//===- Safetensors.cpp - safetensors reader/writer ------------------------===//

#include "models/Safetensors.h"
#include "support/Common.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace k3c {

namespace {
struct DTypeEntry {
  DType d;
  const char *name;
  int64_t size;
};
const DTypeEntry kDTypes[] = {
    {DType::BF16, "BF16", 2}, {DType::F16, "F16", 2},         {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},   {DType::U8, "U8", 1},           {DType::I8, "I8", 1},
    {DType::I16, "I16", 2},   {DType::I32, "I32", 4},         {DType::I64, "I64", 8},
    {DType::BOOL, "BOOL", 1}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};
constexpr uint64_t kMaxHeader = 100u << 20; // the format's own limit: 100 MB
} // namespace

const char *dtypeName(DType d) {
  for (const auto &e : kDTypes)
    if (e.d == d)
      return e.name;
  return "?";
}

int64_t dtypeSize(DType d) {
  for (const auto &e : kDTypes)
    if (e.d == d)
      return e.size;
  return 0;
}

bool parseDType(const std::string &s, DType &out) {
  for (const auto &e : kDTypes)
    if (s == e.name) {
      out = e.d;
      return true;
    }
  return false;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string &path) {
  auto fail = [&](const std::string &msg) -> Error {
    return Error("safetensors file '" + path + "': " + msg);
  };
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw fail("cannot open");
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    throw fail("cannot stat");
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    throw fail("truncated: " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  }
  void *base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED)
    throw fail("mmap failed");
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->filePath = path;
  f->mapBase = base;
  f->mapSize = size;
  const uint8_t *bytes = static_cast<const uint8_t *>(base);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | bytes[i];
  if (n > kMaxHeader)
    throw fail("header length " + std::to_string(n) + " exceeds the 100 MB limit");
  if (n > size - 8)
    throw fail("header length " + std::to_string(n) + " runs past the end of the file (" +
               std::to_string(size) + " bytes)");
  uint64_t dataSize = size - 8 - n;
  f->dataBase = bytes + 8 + n;

  // Parse, rejecting duplicate top-level names (a plain parse keeps the last).
  std::set<std::string> keys;
  std::string dup;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json &parsed) {
    if (ev == json::parse_event_t::key && depth == 1) {
      std::string k = parsed.get<std::string>();
      if (!keys.insert(k).second && dup.empty())
        dup = k;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(bytes + 8, bytes + 8 + n, cb);
  } catch (const json::exception &e) {
    throw fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!dup.empty())
    throw fail("tensor name '" + dup + "' appears twice in the header");
  if (!header.is_object())
    throw fail("header must be a JSON object");
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    const json &v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        throw fail("__metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw fail("__metadata__ entry '" + m.key() + "' must be a string");
        f->meta[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string &msg) { return fail("tensor '" + name + "': " + msg); };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      throw bad("entry needs dtype, shape and data_offsets");
    TensorInfo t;
    t.name = name;
    if (!v["dtype"].is_string() || !parseDType(v["dtype"].get<std::string>(), t.dtype))
      throw bad("unknown dtype " + v["dtype"].dump());
    if (!v["shape"].is_array())
      throw bad("shape must be a list");
    for (const json &d : v["shape"]) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
        throw bad("shape entries must be non-negative integers, got " + d.dump());
      t.shape.push_back(d.get<int64_t>());
    }
    const json &off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      throw bad("data_offsets must be [begin, end] with non-negative integers");
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.begin > t.end || t.end > dataSize)
      throw bad("data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                "] outside the data buffer of " + std::to_string(dataSize) + " bytes");
    // dtype x shape must equal the byte length (overflow-checked).
    unsigned __int128 want = static_cast<unsigned __int128>(dtypeSize(t.dtype));
    bool huge = false;
    for (int64_t d : t.shape) {
      want *= static_cast<unsigned __int128>(d);
      if (want >> 64) {
        huge = true;
        break;
      }
    }
    if (huge || want != static_cast<unsigned __int128>(t.end - t.begin))
      throw bad(std::string(dtypeName(t.dtype)) + " " + shapeStr(t.shape) + " needs " +
                (huge ? std::string("more bytes than any file holds")
                      : std::to_string(static_cast<uint64_t>(want)) + " bytes") +
                " but data_offsets span " + std::to_string(t.end - t.begin));
    f->byName[name] = f->infos.size();
    f->infos.push_back(std::move(t));
  }
  // Tensors must tile the data buffer: sorted by offset, no overlap, no hole.
  std::vector<const TensorInfo *> sorted;
  for (const auto &t : f->infos)
    sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](const TensorInfo *a, const TensorInfo *b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t pos = 0;
  for (const TensorInfo *t : sorted) {
    if (t->begin < pos)
      throw fail("tensor '" + t->name + "' overlaps the tensor before it (offset " +
                 std::to_string(t->begin) + " < " + std::to_string(pos) + ")");
    if (t->begin > pos)
      throw fail("gap in the data buffer before tensor '" + t->name + "' (offset " +
                 std::to_string(pos) + " to " + std::to_string(t->begin) + ")");
    pos = t->end;
  }
  if (pos != dataSize)
    throw fail("data buffer has " + std::to_string(dataSize) + " bytes but the tensors cover " +
               std::to_string(pos));
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapBase)
    munmap(mapBase, mapSize);
}

const TensorInfo *SafetensorsFile::find(const std::string &name) const {
  auto it = byName.find(name);
  return it == byName.end() ? nullptr : &infos[it->second];
}

void writeSafetensors(const std::string &path, const std::vector<const TensorData *> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  // nlohmann's ordered_json keeps insertion order, like real writers do.
  nlohmann::ordered_json header;
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const TensorData *t : tensors) {
    int64_t n = dtypeSize(t->dtype);
    for (int64_t d : t->shape)
      n *= d;
    if (static_cast<uint64_t>(n) != t->bytes.size())
      throw Error("writing '" + path + "': tensor '" + t->name + "' has " +
                  std::to_string(t->bytes.size()) + " bytes, its dtype and shape need " +
                  std::to_string(n));
    header[t->name] = {{"dtype", dtypeName(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {off, off + t->bytes.size()}}};
    off += t->bytes.size();
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8)
    h.push_back(' ');
  std::ofstream out(path, std::ios::binary);
  if (!out)
    throw Error("cannot create '" + path + "'");
  uint64_t n = h.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(reinterpret_cast<const char *>(len), 8);
  out.write(h.data(), h.size());
  for (const TensorData *t : tensors)
    out.write(reinterpret_cast<const char *>(t->bytes.data()), t->bytes.size());
  if (!out)
    throw Error("write failed for '" + path + "'");
}

CheckpointFiles CheckpointFiles::open(const std::string &path) {
  CheckpointFiles c;
  std::vector<std::string> shardPaths;
  std::map<std::string, std::string> weightMap;
  if (fs::is_regular_file(path)) {
    c.dir = fs::path(path).parent_path().string();
    shardPaths.push_back(path);
  } else if (fs::is_directory(path)) {
    c.dir = path;
    fs::path idx = fs::path(path) / "model.safetensors.index.json";
    if (fs::exists(idx)) {
      std::ifstream in(idx);
      json j;
      try {
        j = json::parse(in);
      } catch (const json::exception &e) {
        throw Error("'" + idx.string() + "' is not valid JSON: " + e.what());
      }
      if (!j.contains("weight_map") || !j["weight_map"].is_object())
        throw Error("'" + idx.string() + "' has no weight_map object");
      std::set<std::string> files;
      for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
        if (!it.value().is_string())
          throw Error("'" + idx.string() + "': weight_map entry '" + it.key() +
                      "' must name a file");
        std::string file = it.value().get<std::string>();
        if (file.find('/') != std::string::npos || file == "..")
          throw Error("'" + idx.string() + "': weight_map entry '" + it.key() +
                      "' names a file outside the checkpoint: '" + file + "'");
        weightMap[it.key()] = file;
        if (files.insert(file).second)
          shardPaths.push_back((fs::path(path) / file).string());
      }
    } else if (fs::exists(fs::path(path) / "model.safetensors")) {
      shardPaths.push_back((fs::path(path) / "model.safetensors").string());
    } else {
      throw Error("checkpoint '" + path +
                  "' has neither model.safetensors.index.json nor model.safetensors");
    }
  } else {
    throw Error("checkpoint '" + path + "' does not exist");
  }
  for (size_t i = 0; i < shardPaths.size(); ++i) {
    if (!fs::exists(shardPaths[i]))
      throw Error("checkpoint shard '" + shardPaths[i] + "' (named by the index) is missing");
    auto f = std::shared_ptr<SafetensorsFile>(SafetensorsFile::open(shardPaths[i]));
    for (const TensorInfo &t : f->tensors()) {
      if (c.index.count(t.name))
        throw Error("tensor '" + t.name + "' appears in two shards: '" +
                    c.files[c.index[t.name].first]->path() + "' and '" + shardPaths[i] + "'");
      c.index[t.name] = {i, &t};
      c.owner[&t] = i;
    }
    c.files.push_back(std::move(f));
  }
  for (const auto &[name, file] : weightMap) {
    auto it = c.index.find(name);
    if (it == c.index.end())
      throw Error("index names tensor '" + name + "' in '" + file + "' but that shard lacks it");
    if (fs::path(c.files[it->second.first]->path()).filename() != file)
      throw Error("index puts tensor '" + name + "' in '" + file + "' but it is in '" +
                  c.files[it->second.first]->path() + "'");
  }
  if (!weightMap.empty())
    for (const auto &[name, loc] : c.index)
      if (!weightMap.count(name))
        throw Error("tensor '" + name + "' in shard '" + c.files[loc.first]->path() +
                    "' is missing from the index weight_map");
  return c;
}

const TensorInfo *CheckpointFiles::find(const std::string &name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second.second;
}

const uint8_t *CheckpointFiles::data(const TensorInfo &t) const {
  return files[owner.at(&t)]->data(t);
}

std::vector<std::string> CheckpointFiles::names() const {
  std::vector<std::string> out;
  for (const auto &f : files)
    for (const TensorInfo &t : f->tensors())
      out.push_back(t.name);
  return out;
}

void writeCheckpointShards(const std::string &dir, const std::vector<TensorData> &tensors,
                           int shards) {
  fs::create_directories(dir);
  if (shards < 1)
    shards = 1;
  uint64_t total = 0;
  for (const auto &t : tensors)
    total += t.bytes.size();
  uint64_t per = (total + shards - 1) / shards;
  std::vector<std::vector<const TensorData *>> groups(shards);
  uint64_t acc = 0;
  for (const auto &t : tensors) {
    size_t g = std::min<uint64_t>(per ? acc / per : 0, shards - 1);
    groups[g].push_back(&t);
    acc += t.bytes.size();
  }
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total}};
  char name[64];
  for (int s = 0; s < shards; ++s) {
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1, shards);
    writeSafetensors((fs::path(dir) / name).string(), groups[s], {{"format", "pt"}});
    for (const TensorData *t : groups[s])
      index["weight_map"][t->name] = name;
  }
  std::ofstream out(fs::path(dir) / "model.safetensors.index.json");
  out << index.dump(2) << "\n";
}

} // namespace k3c
