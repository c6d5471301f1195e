// A vector of trivially copyable values that keeps up to N of them inside itself and only
// allocates beyond that. Shapes, attribute lists and operand lists are short: as std::vectors
// each graph node carried several heap blocks, and deep graphs spent much of their compile
// time allocating, chasing and freeing them.
#pragma once
#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace tpu {

template <class T, uint32_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T> && N > 0);

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVec() noexcept {}  // user-provided, so a `static const` one needs no initializer
  SmallVec(std::initializer_list<T> init) { append(init.begin(), init.size()); }
  explicit SmallVec(size_t count, const T& value = T()) { resize(count, value); }
  template <std::input_iterator It>
  SmallVec(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }
  SmallVec(std::span<const T> values) { append(values.data(), values.size()); }  // NOLINT: as vector
  SmallVec(const std::vector<T>& values) { append(values.data(), values.size()); }  // NOLINT
  SmallVec(const SmallVec& o) { append(o.data(), o.size()); }
  SmallVec(SmallVec&& o) noexcept { take(o); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) {
      size_ = 0;
      append(o.data(), o.size());
    }
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  SmallVec& operator=(std::initializer_list<T> init) {
    size_ = 0;
    append(init.begin(), init.size());
    return *this;
  }
  ~SmallVec() { release(); }

  T* data() { return on_heap() ? heap_ : inline_; }
  const T* data() const { return on_heap() ? heap_ : inline_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  bool is_inline() const { return !on_heap(); }  // owns no heap memory

  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  // Checked like std::vector::at: shape rules read operands by position before trusting them.
  T& at(size_t i) { return i < size_ ? data()[i] : throw std::out_of_range("SmallVec::at"); }
  const T& at(size_t i) const { return i < size_ ? data()[i] : throw std::out_of_range("SmallVec::at"); }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void reserve(size_t wanted) {
    if (wanted > capacity_) grow(wanted);
  }
  void push_back(const T& v) {
    if (size_ == capacity_) {
      const T copy = v;  // v may live in this vector
      grow(size_t(capacity_) * 2);
      data()[size_++] = copy;
    } else {
      data()[size_++] = v;
    }
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }
  void resize(size_t count, const T& value = T()) {
    reserve(count);
    std::fill(data() + size_, data() + std::max(count, size_t(size_)), value);
    size_ = uint32_t(count);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(*first);
  }

  iterator insert(const_iterator pos, const T& v) { return insert(pos, &v, &v + 1); }
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const std::vector<T> values(first, last);  // the range may alias this vector
    const size_t at = size_t(pos - begin());
    reserve(size_ + values.size());
    T* p = data() + at;
    std::memmove(p + values.size(), p, (size_ - at) * sizeof(T));
    std::copy(values.begin(), values.end(), p);
    size_ += uint32_t(values.size());
    return p;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    T* p = begin() + (first - begin());
    const size_t gone = size_t(last - first);
    std::memmove(p, p + gone, size_t(end() - last) * sizeof(T));
    size_ -= uint32_t(gone);
    return p;
  }

  friend bool operator==(const SmallVec& a, const SmallVec& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend auto operator<=>(const SmallVec& a, const SmallVec& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const { return capacity_ > N; }

  void append(const T* values, size_t count) {
    reserve(size_ + count);
    if (count) std::memcpy(data() + size_, values, count * sizeof(T));
    size_ += uint32_t(count);
  }

  void grow(size_t wanted) {
    const size_t cap = std::max(wanted, size_t(capacity_) * 2);
    T* fresh = std::allocator<T>().allocate(cap);
    if (size_) std::memcpy(fresh, data(), size_ * sizeof(T));
    release();
    heap_ = fresh;
    capacity_ = uint32_t(cap);
  }

  void release() {
    if (on_heap()) std::allocator<T>().deallocate(heap_, capacity_);
    capacity_ = N;
  }

  // Leaves o empty and inline.
  void take(SmallVec& o) {
    size_ = o.size_;
    capacity_ = o.capacity_;
    if (o.on_heap()) heap_ = o.heap_;
    else if (o.size_) std::memcpy(inline_, o.inline_, o.size_ * sizeof(T));
    o.size_ = 0;
    o.capacity_ = N;
  }

  uint32_t size_ = 0;
  uint32_t capacity_ = N;  // > N: the values are on the heap
  union {
    T inline_[N];
    T* heap_;
  };
};

}  // namespace tpu
