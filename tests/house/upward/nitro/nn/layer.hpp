// a layer naming the CPU backend: the room checker must refuse it (only tensor/ may include tensor/cpu/)
#pragma once
#include "nitro/tensor/cpu/gemm.hpp"
