// nitro/tensor/arena.hpp — the per-step memory every intermediate tensor comes from.
//
// A bump allocator. The first step grows it chunk by chunk; at reset the chunks are merged into one
// block of the high-water size, so every later step of the same shapes allocates nothing from the
// heap (DESIGN.md §6). Memory handed out is 64-byte aligned (a cache line, an AVX-512 register).
// The chunks come from a device_memory (memory.hpp): the heap by default, the backend's device
// memory for a step's tensors.
#pragma once

#include "nitro/tensor/memory.hpp"

#include <algorithm>  // max
#include <cstddef>    // size_t, byte
#include <vector>     // chunks

namespace nitro {

class arena {
 public:
  static constexpr std::size_t alignment = 64;

  arena() = default;
  explicit arena(std::size_t initial_bytes) { if (initial_bytes) add_chunk(initial_bytes); }
  explicit arena(device_memory& memory, std::size_t initial_bytes = 0) : m_memory(&memory) {
    if (initial_bytes) add_chunk(initial_bytes);
  }
  arena(arena const&) = delete;
  arena& operator=(arena const&) = delete;
  arena(arena&& o) noexcept { swap(o); }
  arena& operator=(arena&& o) noexcept { if (this != &o) { release(); swap(o); } return *this; }
  ~arena() { release(); }

  void* allocate(std::size_t bytes, std::size_t align = alignment) {
    bytes = round_up(std::max<std::size_t>(bytes, 1), align);
    if (!m_chunks.empty()) {
      chunk& c = m_chunks[m_current];
      std::size_t at = round_up(c.used, align);
      if (at + bytes <= c.size) { m_in_use += at + bytes - c.used; c.used = at + bytes; note_peak(); return c.data + at; }
      // try later chunks kept from an earlier step
      for (std::size_t i = m_current + 1; i < m_chunks.size(); ++i) {
        if (m_chunks[i].size >= bytes) { m_current = i; m_chunks[i].used = bytes; m_in_use += bytes; note_peak(); return m_chunks[i].data; }
      }
    }
    std::size_t grow = std::max<std::size_t>(bytes, std::max<std::size_t>(m_total / 2, std::size_t(1) << 20));
    add_chunk(grow);
    m_current = m_chunks.size() - 1;
    m_chunks[m_current].used = bytes;
    m_in_use += bytes;
    note_peak();
    return m_chunks[m_current].data;
  }
  template <class T>
  T* allocate_n(std::size_t n) { return static_cast<T*>(allocate(n * sizeof(T), std::max(alignof(T), alignment))); }

  // Frees everything handed out. When the step needed more than one chunk, the chunks become one
  // block big enough for the whole step, so the next step of the same shapes does not allocate.
  void reset() {
    if (m_chunks.size() > 1) {
      std::size_t need = round_up(m_peak + m_peak / 8, alignment);
      release();
      add_chunk(need);
    }
    for (auto& c : m_chunks) c.used = 0;
    m_current = 0;
    m_in_use = 0;
  }

  std::size_t bytes_in_use() const noexcept { return m_in_use; }
  std::size_t capacity() const noexcept { return m_total; }
  std::size_t peak() const noexcept { return m_peak; }
  std::size_t chunk_count() const noexcept { return m_chunks.size(); }
  // Where the chunks are, and what zeroes, fills and copies them.
  device_memory& memory() const noexcept { return *m_memory; }
  device_kind device() const noexcept { return m_memory->device(); }

 private:
  struct chunk { std::byte* data; std::size_t size; std::size_t used; };

  static std::size_t round_up(std::size_t n, std::size_t a) noexcept { return (n + a - 1) / a * a; }
  void note_peak() noexcept { m_peak = std::max(m_peak, m_in_use); }
  void add_chunk(std::size_t bytes) {
    bytes = round_up(bytes, alignment);
    m_chunks.reserve(m_chunks.size() + 1);  // so that a chunk allocated is always recorded (and freed)
    auto* p = static_cast<std::byte*>(m_memory->allocate(bytes, alignment));
    m_chunks.push_back({p, bytes, 0});
    m_total += bytes;
  }
  void release() noexcept {
    for (auto& c : m_chunks) m_memory->deallocate(c.data, c.size);
    m_chunks.clear();
    m_total = 0;
    m_current = 0;
    m_in_use = 0;
  }
  void swap(arena& o) noexcept {
    std::swap(m_memory, o.m_memory); std::swap(m_chunks, o.m_chunks); std::swap(m_current, o.m_current); std::swap(m_total, o.m_total);
    std::swap(m_in_use, o.m_in_use); std::swap(m_peak, o.m_peak);
  }

  device_memory* m_memory = &host_memory::instance();
  std::vector<chunk> m_chunks;
  std::size_t m_current = 0;
  std::size_t m_total = 0;
  std::size_t m_in_use = 0;
  std::size_t m_peak = 0;
};

}  // namespace nitro
