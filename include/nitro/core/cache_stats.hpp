// nitro/core/cache_stats.hpp — what is compiled in, what this process has entered, and the
// run-time caches' hits and misses.
//
//   auto s = nitro::cache_stats();
//   s.compiled        programs compiled into the binary: one per experiment instantiation a handle
//                     was instantiated for (FashionMLP<128>, FashionMLP<256>, ...), registered by
//                     static initialisation before main runs
//   s.entered         programs this process has built a handle for, with how many handles
//   s.caches          run-time caches (GEMM packing workspaces, the data-set cache, metric
//                     buffers, ...): hits and misses
//   std::puts(s.to_text().c_str());
//
// In C++ a program is a template instantiation made at build time, so "recompiling" cannot happen
// at run time: a GraphConst value that was not compiled in is simply absent from `compiled`.
// Building a second handle of an instantiation already entered — a Device value changed, a
// keyword changed — enters no new program: its entry count goes up, the program count does not.
//
// Wiring (train/nitro.hpp and the caches' owners):
//   handle constructor      nitro::enter_program<E, Nitro>();     // also registers it at static init
//   a cache lookup          static auto& c = nitro::runtime_cache("cpu.gemm.workspace");
//                           found ? c.hit() : c.miss();           // lock-free after the first call
#pragma once

#include "nitro/core/reflect.hpp"

#include <atomic>       // counters
#include <cstdint>      // int64_t
#include <cstdio>       // snprintf
#include <functional>   // less<>
#include <map>          // registries by name
#include <memory>       // unique_ptr: counters never move
#include <mutex>        // registration
#include <sstream>      // graph-const values as text
#include <string>       // keys
#include <string_view>  // type names
#include <vector>       // report rows

namespace nitro {

// A run-time cache's counters. Increments are relaxed atomics: safe from any thread, no lock.
struct cache_counter {
  std::atomic<std::int64_t> hits{0};
  std::atomic<std::int64_t> misses{0};
  void hit() noexcept { hits.fetch_add(1, std::memory_order_relaxed); }
  void miss() noexcept { misses.fetch_add(1, std::memory_order_relaxed); }
};

struct compiled_program_info {
  std::string key;          // the experiment instantiation, e.g. "FashionMLP<256>"
  std::string graph_consts; // its GraphConst values, e.g. "width=256"
  int handle_types = 0;     // handle instantiations for it (keyword combinations) compiled in
};
struct entered_program_info {
  std::string key;
  std::int64_t handles = 0;  // handles built for it in this process
};
struct cache_line {
  std::string name;
  std::int64_t hits = 0, misses = 0;
};

struct cache_report {
  std::vector<compiled_program_info> compiled;
  std::vector<entered_program_info> entered;
  std::vector<cache_line> caches;

  std::int64_t entries_of(std::string_view key) const {
    for (auto const& e : entered) if (e.key == key) return e.handles;
    return 0;
  }
  cache_line cache(std::string_view name) const {
    for (auto const& c : caches) if (c.name == name) return c;
    return {std::string(name), 0, 0};
  }
  std::string to_text() const {
    std::string s = "programs compiled in: " + std::to_string(compiled.size()) + "\n";
    for (auto const& c : compiled) s += "  " + c.key + (c.graph_consts.empty() ? "" : "  [" + c.graph_consts + "]") + "\n";
    s += "programs entered in this process: " + std::to_string(entered.size()) + "\n";
    for (auto const& e : entered) s += "  " + e.key + "  " + std::to_string(e.handles) + (e.handles == 1 ? " handle\n" : " handles\n");
    s += "run-time caches:\n";
    if (caches.empty()) s += "  (none used yet)\n";
    for (auto const& c : caches) {
      char buf[64];
      const std::int64_t n = c.hits + c.misses;
      std::snprintf(buf, sizeof buf, "%5.1f%%", n ? 100.0 * double(c.hits) / double(n) : 0.0);
      s += "  " + c.name + "  hits " + std::to_string(c.hits) + "  misses " + std::to_string(c.misses) + "  (" + buf + " hit)\n";
    }
    return s;
  }
};

namespace detail {

class cache_registry {
 public:
  static cache_registry& instance() {
    static cache_registry r;
    return r;
  }
  bool add_compiled(std::string key, std::string graph_consts) {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto [it, fresh] = m_compiled.try_emplace(key, compiled_program_info{key, std::move(graph_consts), 0});
    ++it->second.handle_types;
    return fresh;
  }
  // True when `key` had not been entered before in this process.
  bool enter(std::string const& key) {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto [it, fresh] = m_entered.try_emplace(key, 0);
    ++it->second;
    return fresh;
  }
  cache_counter& counter(std::string_view name) {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_counters.find(name);
    if (it == m_counters.end()) it = m_counters.emplace(std::string(name), std::make_unique<cache_counter>()).first;
    return *it->second;
  }
  cache_report report() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    cache_report r;
    for (auto const& [k, v] : m_compiled) r.compiled.push_back(v);
    for (auto const& [k, n] : m_entered) r.entered.push_back({k, n});
    for (auto const& [k, c] : m_counters) r.caches.push_back({k, c->hits.load(), c->misses.load()});
    return r;
  }

 private:
  cache_registry() = default;
  mutable std::mutex m_mutex;
  std::map<std::string, compiled_program_info> m_compiled;
  std::map<std::string, std::int64_t> m_entered;
  std::map<std::string, std::unique_ptr<cache_counter>, std::less<>> m_counters;
};

template <class T>
std::string_view pretty_function() noexcept {
  return __PRETTY_FUNCTION__;
}

}  // namespace detail

// The type's name as the compiler spells it: "FashionMLP<256>", "ns::Exp".
template <class T>
std::string type_name() {
  std::string_view p = detail::pretty_function<T>();
  auto at = p.find("T = ");
  if (at == std::string_view::npos) return std::string(p);
  at += 4;
  auto end = p.find(';', at);
  if (end == std::string_view::npos) end = p.rfind(']');
  if (end == std::string_view::npos || end < at) end = p.size();
  return std::string(p.substr(at, end - at));
}

// A program's key: the experiment instantiation (its GraphConst values are in the type).
template <class E>
std::string program_key() {
  return type_name<E>();
}
template <class E>
std::string graph_const_values() {
  std::string s;
  if constexpr (experiment<E>) {
    for_each_field<E>([&](auto d) {
      using D = decltype(d);
      if constexpr (D::residency == residency::graph_const) {
        std::ostringstream os;
        if constexpr (std::is_same_v<typename D::type::value_type, bool>) os << (D::type::value ? "true" : "false");
        else if constexpr (std::is_enum_v<typename D::type::value_type>) os << static_cast<long long>(D::type::value);
        else os << +D::type::value;
        s += (s.empty() ? "" : " ") + std::string(D::name.view()) + "=" + os.str();
      }
    });
  }
  return s;
}

// Registered by static initialisation for every handle instantiation Handle of experiment E
// (odr-use of `registered` from enter_program<E, Handle> is what instantiates it). Several handle
// instantiations of one E (keyword combinations) are one program, counted in handle_types.
template <class E, class Handle = E>
struct compiled_program {
  static inline const bool registered = detail::cache_registry::instance().add_compiled(program_key<E>(), graph_const_values<E>());
};

// Called by the handle's constructor: true when this process enters E's program for the first
// time; a second handle of E (another Device value, other keywords) returns false.
template <class E, class Handle = E>
bool enter_program() {
  (void)compiled_program<E, Handle>::registered;
  return detail::cache_registry::instance().enter(program_key<E>());
}

// The counter of a run-time cache, registered on first use. Keep the reference (a function-local
// static) so a lookup in a hot path costs one atomic increment.
inline cache_counter& runtime_cache(std::string_view name) { return detail::cache_registry::instance().counter(name); }

inline cache_report cache_stats() { return detail::cache_registry::instance().report(); }

}  // namespace nitro
