// bind/: hooks found by name, batch fields resolved by the compiler, the transfer set.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>

#include <optional>

namespace bind_test {
// A field type that counts copies and moves, to see how a batch reaches a hook.
struct Counted {
  static inline int copies = 0, moves = 0;
  int v = 0;
  Counted() = default;
  Counted(int x) : v(x) {}
  Counted(Counted const& o) : v(o.v) { ++copies; }
  Counted(Counted&& o) noexcept : v(o.v) { ++moves; }
  Counted& operator=(Counted const& o) { v = o.v; ++copies; return *this; }
  Counted& operator=(Counted&& o) noexcept { v = o.v; ++moves; return *this; }
};
struct Batch { BOOST_HANA_DEFINE_STRUCT(Batch, (Counted, img), (Counted, label), (Counted, idx)); };
struct Unlabelled { BOOST_HANA_DEFINE_STRUCT(Unlabelled, (Counted, img), (Counted, idx)); };
struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (Counted, img), (std::optional<Counted>, mask)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (Counted, label)); };

struct E {
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const {
    return std::pair{in.img.v + model + ps + st + (in.mask ? 1000 : 0), st};
  }
  int loss(int const& out, LossIn const& in) const { return out - in.label.v; }
  int metrics(int const& out, auto const& whole) const { return out + whole.idx.v; }  // takes the whole batch
};
struct OnlyFields {
  auto forward(auto const&, auto const&, auto const& st, FwdIn const& in) const { return std::pair{in.img.v, st}; }
  int loss(int const& out, LossIn const& in) const { return out - in.label.v; }
};
struct NoMetrics {
  int forward(int const&, int const&, int const&, Batch const& b) const { return b.img.v; }  // the batch type itself
};
}  // namespace bind_test

using namespace bind_test;
using nitro::hook_input_kind;

TEST_CASE("a hook's last parameter says which batch fields it wants") {
  using F = nitro::hook_input<nitro::hook::forward, E, Batch, int, int, int>;
  CHECK(F::kind == hook_input_kind::fields);
  CHECK(std::is_same_v<F::input, FwdIn>);
  using L = nitro::hook_input<nitro::hook::loss, E, Batch, int>;
  CHECK(L::kind == hook_input_kind::fields);
  CHECK(std::is_same_v<L::input, LossIn>);
  using M = nitro::hook_input<nitro::hook::metrics, E, Batch, int>;
  CHECK(M::kind == hook_input_kind::whole_batch);
  using N = nitro::hook_input<nitro::hook::forward, NoMetrics, Batch, int, int, int>;
  CHECK(N::kind == hook_input_kind::whole_batch);
  using A = nitro::hook_input<nitro::hook::metrics, NoMetrics, Batch, int>;
  CHECK(A::kind == hook_input_kind::absent);
  CHECK(nitro::hook::forward::present<E>);
  CHECK_FALSE(nitro::hook::build_model::present<E>);
}

TEST_CASE("fields are filled by name; optional ones are keywords with defaults") {
  E e;
  Batch b{{1}, {2}, {3}};
  CHECK(nitro::call_hook<nitro::hook::forward>(e, b, 10, 20, 30).first == 61);
  CHECK(nitro::call_hook<nitro::hook::loss>(e, b, 61) == 59);
  CHECK(nitro::call_hook<nitro::hook::metrics>(e, b, 61) == 64);
  struct Masked { BOOST_HANA_DEFINE_STRUCT(Masked, (Counted, img), (Counted, mask)); };
  Masked m{{1}, {0}};
  CHECK(nitro::call_hook<nitro::hook::forward>(e, m, 0, 0, 0).first == 1001);  // the optional field was filled
}

TEST_CASE("an rvalue batch is moved into the hook's input, an lvalue one copied") {
  Counted::copies = Counted::moves = 0;
  Batch b{{1}, {2}, {3}};
  auto in = nitro::bind_input<nitro::hook::forward, FwdIn>(std::move(b));
  CHECK(in.img.v == 1);
  CHECK(Counted::copies == 0);
  CHECK(Counted::moves >= 1);
  Counted::copies = Counted::moves = 0;
  Batch c{{1}, {2}, {3}};
  auto in2 = nitro::bind_input<nitro::hook::forward, FwdIn>(c);
  CHECK(in2.img.v == 1);
  CHECK(Counted::copies == 1);
}

TEST_CASE("forward declares inputs only: it binds on a batch without labels") {
  E e;
  Unlabelled u{{5}, {6}};
  CHECK(nitro::call_hook<nitro::hook::forward>(e, u, 0, 0, 0).first == 5);
}

TEST_CASE("the transfer set is the union of declared fields") {
  using B = nitro::binding<E, Batch, int, int, int>;
  CHECK(B::transferred<nitro::field_key<"img">>);
  CHECK(B::transferred<nitro::field_key<"label">>);
  CHECK(B::transferred<nitro::field_key<"idx">>);  // metrics takes the whole batch
  CHECK(B::needed_by_forward<nitro::field_key<"img">>);
  CHECK_FALSE(B::needed_by_forward<nitro::field_key<"label">>);
  using O = nitro::binding<OnlyFields, Batch, int, int, int>;
  CHECK(O::transferred<nitro::field_key<"img">>);
  CHECK_FALSE(O::transferred<nitro::field_key<"idx">>);
}
