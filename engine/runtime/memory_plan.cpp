#include "runtime/memory_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace tpu {

size_t tpu_padded_bytes(DType t, const Shape& s) { return size_t(tpu_padded_elements(s)) * size_of(t); }

namespace {

// Free ranges of the arena, merged on release; allocation takes the smallest range that fits
// (log time through the by-size index), else grows the top.
class Arena {
 public:
  size_t allocate(size_t bytes) {
    auto fit = by_size_.lower_bound({bytes, 0, 0});
    if (fit == by_size_.end()) {
      // Reuse a free range that ends at the top, growing it.
      if (!by_offset_.empty()) {
        auto last = std::prev(by_offset_.end());
        if (last->first + last->second.size == top_) {
          size_t off = last->first;
          erase(last);
          top_ = off + bytes;
          return off;
        }
      }
      size_t off = top_;
      top_ += bytes;
      return off;
    }
    auto [size, seq, off] = *fit;
    erase(by_offset_.find(off));
    if (size > bytes) insert(off + bytes, size - bytes);
    return off;
  }

  void release(size_t off, size_t bytes) {
    auto next = by_offset_.lower_bound(off);
    if (next != by_offset_.end() && off + bytes == next->first) {
      bytes += next->second.size;
      erase(next);
    }
    auto after = by_offset_.lower_bound(off);
    if (after != by_offset_.begin()) {
      auto prev = std::prev(after);
      if (prev->first + prev->second.size == off) {
        off = prev->first;
        bytes += prev->second.size;
        erase(prev);
      }
    }
    insert(off, bytes);
  }

  size_t top() const { return top_; }

 private:
  struct Range {
    size_t size;
    uint64_t seq;  // when it was freed: of two free ranges of one size, the older is taken
  };
  void insert(size_t off, size_t size) {
    by_offset_.emplace(off, Range{size, seq_});
    by_size_.insert({size, seq_++, off});
  }
  void erase(std::map<size_t, Range>::iterator it) {
    by_size_.erase({it->second.size, it->second.seq, it->first});
    by_offset_.erase(it);
  }

  std::map<size_t, Range> by_offset_;                       // offset -> its range
  std::set<std::tuple<size_t, uint64_t, size_t>> by_size_;  // (size, seq, offset): erased in log time
  uint64_t seq_ = 0;
  size_t top_ = 0;
};

}  // namespace

namespace {

// The buffers whose last read is at each schedule position, as buffer numbers (the order in
// which plan_memory creates them), in one flat array: a vector per position cost an allocation
// per node on deep graphs.
struct Endings {
  std::vector<int32_t> start;  // buffers ending at pos: ids[start[pos] .. start[pos + 1])
  std::vector<size_t> ids;
};

Endings endings_of(const std::vector<NodeId>& schedule, const std::vector<bool>& planned,
                   const std::vector<int32_t>& last_use) {
  const size_t count = schedule.size();
  auto last_of = [&](int32_t pos) { return std::max(pos, last_use[size_t(schedule[size_t(pos)])]); };
  Endings e{std::vector<int32_t>(count + 1, 0), {}};
  for (int32_t pos = 0; pos < int32_t(count); ++pos)
    if (planned[size_t(schedule[size_t(pos)])]) ++e.start[size_t(last_of(pos)) + 1];
  for (size_t k = 1; k <= count; ++k) e.start[k] += e.start[k - 1];
  e.ids.resize(size_t(e.start[count]));
  std::vector<int32_t> fill(e.start.begin(), e.start.end() - 1);
  size_t buffer = 0;
  for (int32_t pos = 0; pos < int32_t(count); ++pos)
    if (planned[size_t(schedule[size_t(pos)])]) e.ids[size_t(fill[size_t(last_of(pos))]++)] = buffer++;
  return e;
}

}  // namespace

MemoryPlan plan_memory(const Graph& g, const std::vector<NodeId>& schedule, const std::vector<bool>& planned,
                       const std::vector<int32_t>& last_use) {
  MemoryPlan plan;
  Arena arena;
  const Endings ending = endings_of(schedule, planned, last_use);
  plan.buffers.reserve(ending.ids.size());
  size_t live_tpu = 0;
  for (int32_t pos = 0; pos < int32_t(schedule.size()); ++pos) {
    NodeId n = schedule[size_t(pos)];
    if (planned[size_t(n)]) {
      const Node& node = g.at(n);
      Buffer b{n};
      b.bytes = (size_t(num_elements(node.shape)) * size_of(node.dtype) + 63) / 64 * 64;
      b.tpu_bytes = tpu_padded_bytes(node.dtype, node.shape);
      b.first = pos;
      b.last = std::max(pos, last_use[size_t(n)]);
      b.offset = arena.allocate(b.bytes);
      live_tpu += b.tpu_bytes;
      plan.peak_tpu_bytes = std::max(plan.peak_tpu_bytes, live_tpu);
      plan.buffers.push_back(b);
    }
    // Storage read for the last time here is free for the nodes after this one.
    for (int32_t k = ending.start[size_t(pos)]; k < ending.start[size_t(pos) + 1]; ++k) {
      const Buffer& b = plan.buffers[ending.ids[size_t(k)]];
      arena.release(b.offset, b.bytes);
      live_tpu -= b.tpu_bytes;
    }
  }
  plan.arena_bytes = arena.top();
  return plan;
}

}  // namespace tpu
