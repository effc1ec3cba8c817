//===- Npy.h - NumPy .npy float32 writer/reader ------------------*- C++ -*-===//
//
// Version 1.0 .npy files of little-endian float32 ('<f4'), C order, so any
// tool (numpy.load) can read the logits k3c tools dump.
//
//===----------------------------------------------------------------------===//

#ifndef K3C_SUPPORT_NPY_H
#define K3C_SUPPORT_NPY_H

#include "support/Common.h"

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace k3c {

inline void writeNpyF32(const std::string &path, const std::vector<int64_t> &shape,
                        const std::vector<float> &data) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  if (n != static_cast<int64_t>(data.size()))
    throw Error("npy '" + path + "': shape holds " + std::to_string(n) + " values, data has " +
                std::to_string(data.size()));
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  dict += "), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out)
    throw Error("cannot create '" + path + "'");
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(dict.size());
  char l[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(l, 2);
  out.write(dict.data(), dict.size());
  out.write(reinterpret_cast<const char *>(data.data()), data.size() * 4);
  if (!out)
    throw Error("write failed for '" + path + "'");
}

} // namespace k3c

#endif // K3C_SUPPORT_NPY_H
