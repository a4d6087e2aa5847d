// a layer that landed without its law case: the checker must refuse it
struct dense_layer {};
struct shiny_layer {};
