// FloatBuffer: the kernels' large float arrays (parameters, moments,
// gradients, gathered blocks, activations). Arrays of 2 MiB and more are
// aligned to 2 MiB and advised as transparent huge pages, so touching a
// fresh gigabyte takes hundreds of page faults instead of hundreds of
// thousands (a new worker's first step, a re-formed group's first step).
// Smaller ones come from the ordinary heap; from 64 KiB up their pages are
// mapped in one call when allocated rather than by a fault each.
//
//   FloatBuffer grad(n);             // zero-filled, as std::vector
//   FloatBuffer scratch(n, kUninitialized);  // left as the allocator gives it
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace manta::train {

#ifdef MADV_POPULATE_WRITE
inline constexpr int kMadvPopulateWrite = MADV_POPULATE_WRITE;
#else
inline constexpr int kMadvPopulateWrite = 23;  // Linux 5.14
#endif

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;
  static constexpr size_t kHuge = 2u << 20;
  static constexpr size_t kPopulate = 64u << 10;

  // Maps the whole pages of [p, p + bytes) in one call: a page touched for
  // the first time costs a fault each (microseconds apiece in a VM), and a
  // new worker's first step would pay one for every page of its working
  // set. Pages already mapped (memory the allocator reuses) cost nothing
  // more. Advice only: kernels before 5.14 refuse it and the faults come
  // as before.
  static void Populate(void* p, size_t bytes) {
    constexpr uintptr_t kPage = 4096;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kPage - 1);
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, kMadvPopulateWrite);
  }

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHuge) {
      T* p = static_cast<T*>(::operator new(bytes));
      if (bytes >= kPopulate) Populate(p, bytes);
      return p;
    }
    void* p = std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
    if (p == nullptr) throw std::bad_alloc();
    ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: failure changes nothing
    Populate(p, bytes);
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
using DoubleBuffer = std::vector<double, HugePageAllocator<double>>;  // exact sums

}  // namespace manta::train
