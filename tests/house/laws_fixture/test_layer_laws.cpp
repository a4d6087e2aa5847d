// a law suite that covers dense_layer only
struct law_dense_layer {};
TEST_CASE_TEMPLATE("laws", Case, laws::law_dense_layer) {}
