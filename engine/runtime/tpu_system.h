// The simulated TPU: versions with their per-core HBM, peak FLOP/s and bandwidth (for the
// capacity check and the roofline estimate), and the ResourceExhausted report.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/bytes.h"  // format_bytes, for the reports made from these figures

namespace tpu {

class Executable;

struct TpuVersion {
  std::string_view name;       // "v2"
  uint64_t hbm_bytes;          // per core
  double peak_flops;           // per core, bf16 on the MXU
  double hbm_bandwidth;        // per core, bytes/s
};

// v2, v3 or v4; nullptr otherwise.
const TpuVersion* find_tpu_version(std::string_view name);

// Returns when the executable fits one core of `v`; otherwise throws ResourceExhausted: needed
// vs capacity, the five largest buffers with their type, padded size and where they were made.
// `param_label` (optional) says what parameter i (0-based) is, e.g. "argument 2 (x)"; it is
// asked only for the parameters the report shows, and "" falls back to "argument i+1".
using ParamLabel = std::function<std::string(size_t)>;
void hbm_check(const Executable& exe, const TpuVersion& v, const ParamLabel& param_label = {});


}  // namespace tpu
