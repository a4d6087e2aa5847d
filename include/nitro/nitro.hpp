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
#include "nitro/nn/layers/conv2d.hpp"
#include "nitro/nn/layers/dense.hpp"
#include "nitro/nn/layers/dropout.hpp"
#include "nitro/nn/layers/embedding.hpp"
#include "nitro/nn/layers/flatten.hpp"
#include "nitro/nn/layers/norm.hpp"
#include "nitro/nn/layers/pool.hpp"
#include "nitro/nn/losses.hpp"

#include "nitro/optim/anchor.hpp"
#include "nitro/optim/group.hpp"
#include "nitro/optim/hooks.hpp"
#include "nitro/optim/param_store.hpp"
#include "nitro/optim/program.hpp"
#include "nitro/optim/rule.hpp"
#include "nitro/optim/rules/adam.hpp"
#include "nitro/optim/rules/decayed_weights.hpp"
#include "nitro/optim/rules/lion.hpp"
#include "nitro/optim/rules/sgd.hpp"
#include "nitro/optim/sam.hpp"
#include "nitro/optim/schedule.hpp"
#include "nitro/optim/schedule_map.hpp"

#include "nitro/io/dataset.hpp"
#include "nitro/io/fashion_mnist.hpp"
#include "nitro/io/loader.hpp"

#include "nitro/io/atomic_file.hpp"
#include "nitro/io/checkpoint.hpp"
#include "nitro/io/safetensors.hpp"
#include "nitro/io/weights_ref.hpp"

#include "nitro/train/cache_stats.hpp"
#include "nitro/train/divergence.hpp"
#include "nitro/train/early_stop.hpp"
#include "nitro/train/ema.hpp"
#include "nitro/train/history.hpp"
#include "nitro/train/keywords.hpp"
#include "nitro/train/logger.hpp"
#include "nitro/train/metrics.hpp"
#include "nitro/train/nitro.hpp"
#include "nitro/train/run_control.hpp"
#include "nitro/train/show.hpp"

#include "nitro/knobs/catalog.hpp"
#include "nitro/knobs/declarations.hpp"
#include "nitro/knobs/declare.hpp"
#include "nitro/knobs/records.hpp"
#include "nitro/knobs/selection.hpp"
#include "nitro/knobs/sweep_points.hpp"

#include "nitro/cli/main.hpp"

#include "nitro/io/loggers/console.hpp"
#include "nitro/io/loggers/csv.hpp"
#include "nitro/io/loggers/defaults.hpp"
#include "nitro/io/loggers/jsonl.hpp"
#include "nitro/io/loggers/tensorboard.hpp"

#include <boost/hana/define_struct.hpp>  // BOOST_HANA_DEFINE_STRUCT for batch and hook-input structs
