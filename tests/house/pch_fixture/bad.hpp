// A header the checker must refuse: a lambda inside decltype, in a template.
template <class... T> struct type_list {};
template <class L>
constexpr int count() {
  using R = decltype([]<class... F>(type_list<F...>) { return sizeof...(F); }(L{}));
  return sizeof(R);
}
