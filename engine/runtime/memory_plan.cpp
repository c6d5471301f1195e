#include "runtime/memory_plan.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tpu {

size_t tpu_padded_bytes(DType t, const Shape& s) { return size_t(tpu_padded_elements(s)) * size_of(t); }

namespace {

// Free ranges of the arena, merged on release; allocation takes the smallest range that fits,
// the oldest of that size, else grows the top. A deep model leaves a free range per layer
// (10001 at 10000 layers): ordered trees of them missed the cache at every level of every
// lookup, where hashing finds a range's neighbours in one probe. Only the few distinct sizes
// are kept in order, each with its ranges in the order they were freed.
class Arena {
 public:
  // An empty tensor (a dimension of 0) takes no space: offset 0, nothing to free.
  size_t allocate(size_t bytes) {
    if (bytes == 0) return 0;
    for (auto fit = by_size_.lower_bound(bytes); fit != by_size_.end();) {
      Bucket& b = fit->second;
      while (b.head < b.ranges.size() && !current(fit->first, b.ranges[b.head])) ++b.head;
      if (b.head == b.ranges.size()) {  // only ranges merged or taken since: drop the size
        fit = by_size_.erase(fit);
        continue;
      }
      const auto [seq, off] = b.ranges[b.head];
      const size_t size = fit->first;
      b.drop_passed();
      erase(off);
      if (size > bytes) insert(off + bytes, size - bytes);
      return off;
    }
    // Reuse a free range that ends at the top, growing it.
    if (auto last = start_of_end_.find(top_); last != start_of_end_.end()) {
      const size_t off = last->second;
      erase(off);
      top_ = off + bytes;
      return off;
    }
    const size_t off = top_;
    top_ += bytes;
    return off;
  }

  void release(size_t off, size_t bytes) {
    if (bytes == 0) return;
    if (auto next = by_start_.find(off + bytes); next != by_start_.end()) {
      bytes += next->second.size;
      erase(next->first);
    }
    if (auto prev = start_of_end_.find(off); prev != start_of_end_.end()) {
      const size_t prev_off = prev->second;
      bytes += off - prev_off;
      off = prev_off;
      erase(prev_off);
    }
    insert(off, bytes);
  }

  size_t top() const { return top_; }

 private:
  struct Range {
    size_t size;
    uint64_t seq;  // when it was freed: of two free ranges of one size, the older is taken
  };
  // A size's ranges by seq: (seq, offset), oldest first from `head`. A range merged or taken
  // stays listed until it reaches the head; `current` tells it from a live one.
  struct Bucket {
    std::vector<std::pair<uint64_t, size_t>> ranges;
    size_t head = 0;
    void drop_passed() {  // the list does not keep every range ever freed
      if (head < 64 || head * 2 < ranges.size()) return;
      ranges.erase(ranges.begin(), ranges.begin() + std::ptrdiff_t(head));
      head = 0;
    }
  };

  bool current(size_t size, std::pair<uint64_t, size_t> listed) const {
    auto it = by_start_.find(listed.second);
    return it != by_start_.end() && it->second.seq == listed.first && it->second.size == size;
  }
  void insert(size_t off, size_t size) {
    by_start_.emplace(off, Range{size, seq_});
    start_of_end_.emplace(off + size, off);
    by_size_[size].ranges.emplace_back(seq_++, off);
  }
  void erase(size_t off) {
    auto it = by_start_.find(off);
    start_of_end_.erase(off + it->second.size);
    by_start_.erase(it);
  }

  std::unordered_map<size_t, Range> by_start_;       // offset -> its range
  std::unordered_map<size_t, size_t> start_of_end_;  // end offset -> start offset
  std::map<size_t, Bucket> by_size_;
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
                       const std::vector<int32_t>& last_use, const WritesOver& writes_over) {
  MemoryPlan plan;
  Arena arena;
  const Endings ending = endings_of(schedule, planned, last_use);
  plan.buffers.reserve(ending.ids.size());
  std::vector<int32_t> buffer_of(g.nodes.size(), -1);
  // The buffer of an operand of n that n writes over and outlives (b: n's own), or -1.
  auto to_write_over = [&](NodeId n, const Buffer& b) {
    if (!writes_over) return -1;
    for (NodeId i : g.at(n).in) {
      const int32_t k = buffer_of[size_t(i)];
      if (k < 0) continue;
      const Buffer& x = plan.buffers[size_t(k)];
      if (!x.passed_on && x.last <= b.last && x.bytes == b.bytes && writes_over(n, i)) return k;
    }
    return -1;
  };
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
      const int32_t over = to_write_over(n, b);
      if (over >= 0) {
        plan.buffers[size_t(over)].passed_on = true;
        b.offset = plan.buffers[size_t(over)].offset;
        live_tpu -= plan.buffers[size_t(over)].tpu_bytes;
      } else {
        b.offset = arena.allocate(b.bytes);
      }
      live_tpu += b.tpu_bytes;
      plan.peak_tpu_bytes = std::max(plan.peak_tpu_bytes, live_tpu);
      buffer_of[size_t(n)] = int32_t(plan.buffers.size());
      plan.buffers.push_back(b);
    }
    // Storage read for the last time here is free for the nodes after this one (unless one
    // took it over).
    for (int32_t k = ending.start[size_t(pos)]; k < ending.start[size_t(pos) + 1]; ++k) {
      const size_t id = ending.ids[size_t(k)];
      if (plan.buffers[id].passed_on) continue;
      const Buffer& b = plan.buffers[id];
      arena.release(b.offset, b.bytes);
      live_tpu -= b.tpu_bytes;
    }
  }
  plan.arena_bytes = arena.top();
  return plan;
}

}  // namespace tpu
