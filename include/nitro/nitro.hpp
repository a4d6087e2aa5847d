// nitro/nitro.hpp — the one include a user needs.
//
// An experiment is a C++ struct; its fields say where each value lives (GraphConst, Device,
// Host) and its member functions are hooks found by name at compile time. See README.md.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/fixed_string.hpp"
#include "nitro/core/markers.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/core/rng.hpp"
#include "nitro/core/tree.hpp"

#include "nitro/bind/binding.hpp"
#include "nitro/bind/hook.hpp"
#include "nitro/bind/kwargs.hpp"

#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/ops.hpp"
#include "nitro/tensor/tensor.hpp"

#include "nitro/nn/gradcheck.hpp"
#include "nitro/nn/init.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/nn/layers/activation.hpp"
#include "nitro/nn/layers/chain.hpp"
#include "nitro/nn/layers/dense.hpp"
#include "nitro/nn/losses.hpp"

#include "nitro/io/dataset.hpp"
#include "nitro/io/fashion_mnist.hpp"
#include "nitro/io/loader.hpp"

#include "nitro/io/atomic_file.hpp"
#include "nitro/io/checkpoint.hpp"
#include "nitro/io/safetensors.hpp"
#include "nitro/io/weights_ref.hpp"

#include "nitro/train/keywords.hpp"
#include "nitro/train/metrics.hpp"
#include "nitro/train/nitro.hpp"

#include <boost/hana/define_struct.hpp>  // BOOST_HANA_DEFINE_STRUCT for batch and hook-input structs
