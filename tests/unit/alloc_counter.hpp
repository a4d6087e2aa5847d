// tests/unit/alloc_counter.hpp — counts every heap allocation of the process (malloc and its
// relatives, hence every operator new) while a test asks, for the "nothing allocated per step"
// checks (DESIGN.md §6). It defines malloc: include it in one translation unit of a test executable.
//
//   g_allocations = 0; g_counting = true;  ... steps ...  g_counting = false;  CHECK(g_allocations == 0);
//   { counting c; ... CHECK(c.count() == 0); }
//
// Under AddressSanitizer or ThreadSanitizer (each owns malloc) NITRO_TEST_ALLOC_COUNTING is 0: the
// counting checks skip (the g++ build counts them).
#pragma once

#include <atomic>   // the counter: the loader's and the GEMM's threads allocate too
#include <cstddef>  // size_t

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NITRO_TEST_ALLOC_COUNTING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NITRO_TEST_ALLOC_COUNTING 0
#endif
#endif
#ifndef NITRO_TEST_ALLOC_COUNTING
#define NITRO_TEST_ALLOC_COUNTING 1
#endif

namespace {
std::atomic<long> g_allocations{0};
std::atomic<bool> g_counting{false};
inline void note_alloc() noexcept {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
}
// Counts for its lifetime, from zero.
struct counting {
  counting() { g_allocations = 0; g_counting = true; }
  ~counting() { g_counting = false; }
  long count() const { return g_allocations.load(); }
};
}  // namespace

#if NITRO_TEST_ALLOC_COUNTING
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
void* malloc(std::size_t n) { note_alloc(); return __libc_malloc(n); }
void* calloc(std::size_t a, std::size_t b) { note_alloc(); return __libc_calloc(a, b); }
void* realloc(void* p, std::size_t n) { note_alloc(); return __libc_realloc(p, n); }
void free(void* p) { __libc_free(p); }
void* aligned_alloc(std::size_t a, std::size_t n) { note_alloc(); return __libc_memalign(a, n); }
void* memalign(std::size_t a, std::size_t n) { note_alloc(); return __libc_memalign(a, n); }
int posix_memalign(void** out, std::size_t a, std::size_t n) {
  note_alloc();
  *out = __libc_memalign(a, n);
  return *out ? 0 : 12;  // ENOMEM
}
}
#endif
