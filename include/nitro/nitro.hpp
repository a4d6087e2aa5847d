// nitro/nitro.hpp — the one include a user needs for an experiment and its handle.
//
// An experiment is a C++ struct; its fields say where each value lives (GraphConst, Device,
// Host) and its member functions are hooks found by name at compile time. See README.md.
// The command line (nitro::main) is nitro/main.hpp, apart, so a trainer with its own main compiles
// less. The rooms below come in their order (docs/architecture.md).
#pragma once

#include "nitro/core/cache_stats.hpp"
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

#include "nitro/nn/classification.hpp"
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
#include "nitro/nn/metrics.hpp"

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

#include "nitro/data/dataset.hpp"
#include "nitro/data/fashion_mnist.hpp"
#include "nitro/data/idx.hpp"
#include "nitro/data/loader.hpp"

#include "nitro/record/atomic_file.hpp"
#include "nitro/record/checkpoint.hpp"
#include "nitro/record/history.hpp"
#include "nitro/record/logger.hpp"
#include "nitro/record/loggers/console.hpp"
#include "nitro/record/loggers/csv.hpp"
#include "nitro/record/loggers/defaults.hpp"
#include "nitro/record/loggers/jsonl.hpp"
#include "nitro/record/loggers/tensorboard.hpp"
#include "nitro/record/safetensors.hpp"
#include "nitro/record/weights_ref.hpp"
#include "nitro/record/weights_resolve.hpp"

#include "nitro/train/divergence.hpp"
#include "nitro/train/early_stop.hpp"
#include "nitro/train/ema.hpp"
#include "nitro/train/keywords.hpp"
#include "nitro/train/nitro.hpp"
#include "nitro/train/run_control.hpp"
#include "nitro/train/show.hpp"

#include "nitro/knobs/catalog.hpp"
#include "nitro/knobs/declarations.hpp"
#include "nitro/knobs/declare.hpp"
#include "nitro/knobs/records.hpp"
#include "nitro/knobs/selection.hpp"
#include "nitro/knobs/sweep_points.hpp"

#include <boost/hana/define_struct.hpp>  // BOOST_HANA_DEFINE_STRUCT for batch and hook-input structs
