// FloatBuffer: the kernels' large float arrays (parameters, moments,
// gradients, gathered blocks, activations). Arrays of 2 MiB and more are
// aligned to 2 MiB and advised as transparent huge pages, so touching a
// fresh gigabyte takes hundreds of page faults instead of hundreds of
// thousands (a new worker's first step, a re-formed group's first step).
// Smaller ones come from the ordinary heap.
//
//   FloatBuffer grad(n);             // zero-filled, as std::vector
//   FloatBuffer scratch(n, kUninitialized);  // left as the allocator gives it
#pragma once

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <vector>

namespace manta::train {

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;
  static constexpr size_t kHuge = 2u << 20;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHuge) return static_cast<T*>(::operator new(bytes));
    void* p = std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
    if (p == nullptr) throw std::bad_alloc();
    ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: failure changes nothing
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHuge) {
      ::operator delete(p);
    } else {
      std::free(p);
    }
  }
  // Elements are value-initialized only when asked (see FloatBuffer).
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
      ::new (static_cast<void*>(p)) U;  // default-initialized: no zero pass
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  }

  friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) { return true; }
  friend bool operator!=(const HugePageAllocator&, const HugePageAllocator&) { return false; }
};

// resize(n) leaves new elements uninitialized; assign(n, 0.0f) zero-fills.
using FloatBuffer = std::vector<float, HugePageAllocator<float>>;

}  // namespace manta::train
