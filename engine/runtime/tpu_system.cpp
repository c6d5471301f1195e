#include "runtime/tpu_system.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "runtime/executable.h"

namespace tpu {

namespace {
constexpr double GiB = 1024.0 * 1024 * 1024;
// Published per-chip figures split per core (v2, v3: two cores a chip; v4: one megacore).
const std::array<TpuVersion, 3> kVersions = {{
    {"v2", uint64_t(8 * GiB), 22.5e12, 300e9},
    {"v3", uint64_t(16 * GiB), 61.5e12, 450e9},
    {"v4", uint64_t(32 * GiB), 275e12, 1200e9},
}};
}  // namespace

const TpuVersion* find_tpu_version(std::string_view name) {
  for (const TpuVersion& v : kVersions)
    if (v.name == name) return &v;
  return nullptr;
}

namespace {

struct Held {
  std::string type, what;  // what: empty for a parameter until it is reported
  size_t bytes;
  size_t param = 0;
};

std::vector<Held> held_buffers(const Executable& exe) {
  const Graph& g = exe.graph();
  std::vector<Held> all;
  auto where = [&](NodeId n) {
    std::string loc = g.location_of(n);
    const Node& node = g.at(n);
    // A fusion is named by the op whose result it stores.
    std::string op = node.op == Op::fusion
                         ? std::string(op_name(node.attrs.body()->at(node.attrs.body()->outputs[0]).op)) + " (fused)"
                         : std::string(op_name(node.op));
    return loc.empty() ? op : op + " at " + loc;
  };
  for (size_t i = 0; i < g.params.size(); ++i) {
    const Node& p = g.at(g.params[i]);
    all.push_back({type_str(p.dtype, p.shape), "", tpu_padded_bytes(p.dtype, p.shape), i});
  }
  for (NodeId n = 0; n < NodeId(g.nodes.size()); ++n) {
    const Node& c = g.at(n);
    if (held_constant(c)) all.push_back({type_str(c.dtype, c.shape), where(n), tpu_padded_bytes(c.dtype, c.shape)});
  }
  for (const MemoryPlan* plan : {&exe.memory_plan(), &exe.shared_memory_plan()})
    for (const Buffer& b : plan->buffers)  // a storage passed on is listed once, under its last holder
      if (!b.passed_on) all.push_back({type_str(g.at(b.node).dtype, g.at(b.node).shape), where(b.node), b.tpu_bytes});
  std::stable_sort(all.begin(), all.end(), [](const Held& a, const Held& b) { return a.bytes > b.bytes; });
  return all;
}

}  // namespace

void hbm_check(const Executable& exe, const TpuVersion& v, const ParamLabel& param_label) {
  const double need = double(exe.hbm_bytes()), have = double(v.hbm_bytes);
  if (need <= have) return;
  std::string s = "ResourceExhausted: '" + exe.graph().name + "' needs " + format_bytes(need) +
                  " of HBM on core 0 but a TPU " + std::string(v.name) + " core has " + format_bytes(have) +
                  " (over by " + format_bytes(need - have) + ")\n  largest buffers (sizes padded to TPU tiles of 8x128):";
  std::vector<Held> held = held_buffers(exe);
  for (size_t i = 0; i < held.size() && i < 5; ++i) {
    if (held[i].what.empty() && param_label) held[i].what = param_label(held[i].param);
    if (held[i].what.empty()) held[i].what = "argument " + std::to_string(held[i].param + 1);
    char line[512];
    std::snprintf(line, sizeof line, "\n    %-24s %10s  %s", held[i].type.c_str(), format_bytes(double(held[i].bytes)).c_str(),
                  held[i].what.c_str());
    s += line;
  }
  throw ResourceExhausted(s);
}

}  // namespace tpu
