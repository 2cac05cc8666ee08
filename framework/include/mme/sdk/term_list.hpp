// TermList: a fixed-capacity list of named terms, filled without allocating. Layer-memory
// models report their parameters and activations through it on the estimator's hot path, so
// the storage is left uninitialised until a term is pushed (an engine pass holds tens of these
// lists, and zeroing their capacity cost more than filling them).
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <stdexcept>
#include <type_traits>

namespace mme {

template <class T, std::size_t N>
class TermList {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "TermList holds plain terms: copied bytewise, never destroyed");

 public:
  TermList() noexcept {}  // the storage stays uninitialised: only the first size() items live
  TermList(const TermList& other) noexcept : size_(other.size_) { copy_from(other); }
  TermList& operator=(const TermList& other) noexcept {
    if (this != &other) {
      size_ = other.size_;
      copy_from(other);
    }
    return *this;
  }
  ~TermList() = default;

  void push(const T& item) {
    if (size_ == N) throw std::length_error("TermList: more terms than its capacity");
    ::new (static_cast<void*>(&items_[size_])) T(item);
    ++size_;
  }
  void clear() noexcept { size_ = 0; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const T* begin() const noexcept { return items_; }
  const T* end() const noexcept { return items_ + size_; }
  T* begin() noexcept { return items_; }
  T* end() noexcept { return items_ + size_; }
  const T& operator[](std::size_t i) const { return items_[i]; }

 private:
  void copy_from(const TermList& other) noexcept {
    if (size_ > 0) std::memcpy(static_cast<void*>(items_), static_cast<const void*>(other.items_), size_ * sizeof(T));
  }

  union {
    T items_[N];
  };
  std::size_t size_ = 0;
};

}  // namespace mme
