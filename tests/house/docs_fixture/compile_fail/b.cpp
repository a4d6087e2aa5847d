// two
