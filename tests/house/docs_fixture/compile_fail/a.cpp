// one
