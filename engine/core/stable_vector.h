// An append-only sequence whose elements never move: they live in chunks of doubling size
// (8, 16, 32, ... elements), so references stay valid while elements are appended, indexing is
// a little bit arithmetic, and a graph of n nodes takes about log2(n) allocations (a deque of
// graph nodes took one for every two).
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

namespace tpu {

template <class T>
class StableVector {
  static constexpr size_t kFirstBits = 3;  // the first chunk holds 2^3 elements

 public:
  StableVector() = default;
  StableVector(const StableVector& o) {
    for (const T& v : o) push_back(v);
  }
  StableVector(StableVector&& o) noexcept : chunks_(std::move(o.chunks_)), size_(std::exchange(o.size_, 0)) {}
  StableVector& operator=(const StableVector& o) {
    if (this != &o) {
      StableVector copy(o);
      swap(copy);
    }
    return *this;
  }
  StableVector& operator=(StableVector&& o) noexcept {
    if (this != &o) {
      StableVector gone(std::move(*this));
      swap(o);
    }
    return *this;
  }
  ~StableVector() { clear(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  T& operator[](size_t i) { return chunks_[chunk_of(i)][offset_in_chunk(i)]; }
  const T& operator[](size_t i) const { return chunks_[chunk_of(i)][offset_in_chunk(i)]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }

  template <class... Args>
  T& emplace_back(Args&&... args) {
    const size_t chunk = chunk_of(size_);
    if (chunk == chunks_.size()) chunks_.push_back(Allocator().allocate(chunk_capacity(chunk)));
    T* slot = chunks_[chunk] + offset_in_chunk(size_);
    std::construct_at(slot, std::forward<Args>(args)...);
    ++size_;
    return *slot;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void pop_back() { std::destroy_at(&back()), --size_; }
  // Shrinks to `count` elements (growing takes push_back).
  void truncate(size_t count) {
    while (size_ > count) pop_back();
  }
  // Frees the chunks past the last element (truncate keeps them, for appends to come).
  void release_unused() {
    const size_t used = size_ == 0 ? 0 : chunk_of(size_ - 1) + 1;
    for (size_t c = used; c < chunks_.size(); ++c) Allocator().deallocate(chunks_[c], chunk_capacity(c));
    chunks_.resize(used);
  }
  void clear() {
    for (size_t c = 0; c < chunks_.size(); ++c) {
      const size_t first = chunk_capacity(c) - chunk_capacity(0);  // index of the chunk's first element
      if (first < size_) std::destroy_n(chunks_[c], std::min(chunk_capacity(c), size_ - first));
      Allocator().deallocate(chunks_[c], chunk_capacity(c));
    }
    chunks_.clear();
    size_ = 0;
  }
  void swap(StableVector& o) noexcept {
    chunks_.swap(o.chunks_);
    std::swap(size_, o.size_);
  }

  template <class V>
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;
    Iterator() = default;
    Iterator(V* owner, size_t i) : owner_(owner), i_(i) {}
    auto& operator*() const { return (*owner_)[i_]; }
    auto* operator->() const { return &(*owner_)[i_]; }
    Iterator& operator++() { return ++i_, *this; }
    Iterator operator++(int) { return Iterator(owner_, i_++); }
    bool operator==(const Iterator& o) const { return i_ == o.i_; }

   private:
    V* owner_ = nullptr;
    size_t i_ = 0;
  };
  Iterator<StableVector> begin() { return {this, 0}; }
  Iterator<StableVector> end() { return {this, size_}; }
  Iterator<const StableVector> begin() const { return {this, 0}; }
  Iterator<const StableVector> end() const { return {this, size_}; }

 private:
  using Allocator = std::allocator<T>;
  // Chunk c holds elements [2^(c+b) - 2^b, 2^(c+b+1) - 2^b), b = kFirstBits.
  static size_t chunk_of(size_t i) { return size_t(std::bit_width(i + (size_t(1) << kFirstBits))) - 1 - kFirstBits; }
  static size_t offset_in_chunk(size_t i) {
    const size_t shifted = i + (size_t(1) << kFirstBits);
    return shifted - std::bit_floor(shifted);
  }
  static size_t chunk_capacity(size_t c) { return size_t(1) << (c + kFirstBits); }

  std::vector<T*> chunks_;
  size_t size_ = 0;
};

}  // namespace tpu
