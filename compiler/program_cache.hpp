// The compile cache: programs by exact key (tessel/core/key.hpp), least
// recently used first out when the bounds given at each insert are exceeded.
// Generic over the program type it keeps (the user's layer keeps a Program
// extended with user shardings).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessel/core/key.hpp"

namespace tessel::compiler {

// Programs in the compile cache and the bytes they are counted at.
struct CacheStats {
  std::size_t entries = 0, bytes = 0;
};

// A program leaves the cache; those who hold it keep it alive, and its
// machine code goes when the last of them does. P has `executable`.
template <class P>
class ProgramCache {
 public:
  // The program for k; with need_executable, only one that was compiled.
  std::shared_ptr<P> find(const Key& k, bool need_executable) {
    std::lock_guard<std::mutex> lk(m_);
    auto it = index_.find(k);
    if (it == index_.end()) return nullptr;
    if (need_executable && !it->second->program->executable) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);  // most recent first
    return it->second->program;
  }
  // Keeps p (counted at `bytes`) under k, then drops the least recently used
  // programs while more than max_entries or max_bytes are kept (the newest stays).
  void insert(Key k, std::shared_ptr<P> p, std::size_t bytes, std::size_t max_entries, std::size_t max_bytes) {
    std::vector<std::shared_ptr<P>> evicted;  // destroyed after the lock is released
    std::lock_guard<std::mutex> lk(m_);
    auto it = index_.find(k);
    if (it != index_.end()) {
      bytes_ -= it->second->bytes;
      evicted.push_back(std::move(it->second->program));
      lru_.erase(it->second);
      index_.erase(it);
    }
    lru_.push_front({k, std::move(p), bytes});
    index_.emplace(std::move(k), lru_.begin());
    bytes_ += bytes;
    while (lru_.size() > 1 && (lru_.size() > max_entries || bytes_ > max_bytes)) {
      bytes_ -= lru_.back().bytes;
      evicted.push_back(std::move(lru_.back().program));
      index_.erase(lru_.back().key);
      lru_.pop_back();
    }
  }
  CacheStats stats() {
    std::lock_guard<std::mutex> lk(m_);
    return {lru_.size(), bytes_};
  }

 private:
  struct Entry {
    Key key;
    std::shared_ptr<P> program;
    std::size_t bytes = 0;
  };
  std::mutex m_;
  std::list<Entry> lru_;
  std::unordered_map<Key, typename std::list<Entry>::iterator, Key::Hash> index_;
  std::size_t bytes_ = 0;
};

}  // namespace tessel::compiler
