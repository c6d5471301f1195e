// Values by key, each made once and kept as long as the cache lives. A thread asking for a key
// being made waits for it; a thread asking for another key makes that one meanwhile. The oneDNN
// kernels keep their primitives here: the two threads of a product's panels each need their own
// tile's primitive, and making one (with its check) takes milliseconds.
//
//   OnceCache<Key, Entry> cache;
//   std::shared_ptr<const Entry> e = cache.get(key, make_entry);  // make_entry(key) at most once
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace tpu {

template <class Key, class Value>
class OnceCache {
 public:
  using Make = std::function<std::shared_ptr<const Value>(const Key&)>;

  // make(key) the first time, under no lock but the key's own; if it throws, the next get of
  // the key makes it again. make must not return null, nor get its own key from this cache.
  // Once made, a get takes one lock, the cache's (a product's every tile asks for its primitive).
  std::shared_ptr<const Value> get(const Key& key, const Make& make) {
    std::shared_ptr<Slot> slot;
    {
      std::lock_guard lock(mutex_);
      std::shared_ptr<Slot>& at = slots_[key];
      if (!at) at = std::make_shared<Slot>();
      if (at->made.load(std::memory_order_acquire)) return at->value;
      slot = at;
    }
    std::lock_guard making(slot->mutex);  // a mutex, not std::call_once: make may throw
    if (!slot->value) {
      slot->value = make(key);
      slot->made.store(true, std::memory_order_release);
    }
    return slot->value;
  }

 private:
  struct Slot {
    std::mutex mutex;
    std::shared_ptr<const Value> value;  // written once, under mutex, before made is set
    std::atomic<bool> made{false};
  };
  std::mutex mutex_;
  std::map<Key, std::shared_ptr<Slot>> slots_;  // guarded by mutex_
};

}  // namespace tpu
