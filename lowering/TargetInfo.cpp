//===- TargetInfo.cpp - the host and sm_90a target descriptions -----------===//

#include "lowering/TargetInfo.h"

namespace k3c::lowering {

const TargetInfo &TargetInfo::get(Target t) {
  static const TargetInfo host = [] {
    TargetInfo h;
    h.kind = Target::Host;
    return h;
  }();
  static const TargetInfo sm90a = [] {
    TargetInfo g;
    g.kind = Target::Gpu;
    g.chip = "sm_90a";
    g.features = "+ptx80";
    g.ptxVersion = 80;
    g.smCount = 132;          // H200 SXM (H100 SXM: 132 too)
    g.warpSize = 32;
    g.staticSharedPerBlock = 48 * 1024;
    g.maxSharedPerBlock = 227 * 1024; // cudaDevAttrMaxSharedMemoryPerBlockOptin
    g.sharedPerSM = 228 * 1024;
    g.registersPerSM = 64 * 1024;
    g.maxRegistersPerThread = 255;
    g.mmaSync = true;
    g.wgmma = true;
    g.mmaM = 16;
    g.mmaN = 8;
    g.mmaK = 16;
    return g;
  }();
  return t == Target::Gpu ? sm90a : host;
}

std::string TargetInfo::nvvmAttachOptions() const {
  return "chip=" + chip + " features=" + features + " O=3";
}

} // namespace k3c::lowering
