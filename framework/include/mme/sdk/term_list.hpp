// TermList: a fixed-capacity list of named terms, filled without allocating. Layer-memory
// models report their parameters and activations through it on the estimator's hot path.
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>

namespace mme {

template <class T, std::size_t N>
class TermList {
 public:
  void push(const T& item) {
    if (size_ == N) throw std::length_error("TermList: more terms than its capacity");
    items_[size_++] = item;
  }
  void clear() noexcept { size_ = 0; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const T* begin() const noexcept { return items_.data(); }
  const T* end() const noexcept { return items_.data() + size_; }
  T* begin() noexcept { return items_.data(); }
  T* end() noexcept { return items_.data() + size_; }
  const T& operator[](std::size_t i) const { return items_[i]; }

 private:
  std::array<T, N> items_{};
  std::size_t size_ = 0;
};

}  // namespace mme
