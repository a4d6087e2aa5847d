// nitro/tensor/ops.hpp — every tensor operation a hook can use; each records its gradient.
#pragma once

#include "nitro/tensor/ops/attention.hpp"
#include "nitro/tensor/ops/elementwise.hpp"
#include "nitro/tensor/ops/linalg.hpp"
#include "nitro/tensor/ops/reduce.hpp"
#include "nitro/tensor/ops/shape_ops.hpp"
#include "nitro/tensor/ops/softmax.hpp"
