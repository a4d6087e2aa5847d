// fashion_mlp_cuda — fashion_mlp on the GPU: the same experiment struct, its GraphConst width
// compiled into the fused MLP kernels, its Device field read by the fused loss on the device.
//
//   ./fashion_mlp_cuda                       one epoch on GPU 0, the fused MLP (TF32 tensor cores)
//   ./fashion_mlp_cuda --epochs 3 --path cublaslt
//   ./fashion_mlp_cuda --cpu-reference       also trains the same run on the CPU backend (same
//                                            initial weights, batches and optimizer) and compares
//   ./fashion_mlp_cuda --n-devs 2           data parallel over two GPUs (NCCL all-reduce of the
//                                            flat gradient buffer; each GPU trains on half the batch)
//   mpirun -np 2 ./fashion_mlp_cuda --n-devs 4   (built with MPI and NCCL) one run over 2 processes
//                                            x 4 GPUs, on one host or several: the NCCL communicator
//                                            is bootstrapped through MPI; --n-devs stays devices per
//                                            process; rank 0 prints (docs/mpi.md, "GPUs across hosts")
//   options: --epochs N  --batch N  --seed N  --train-limit N  --data DIR  --n-devs N
//            --path fused | fused-fp32 | cublaslt   --cpu-reference
//
// What runs where: the loader gathers batches on the host; only the fields a hook declares (img,
// label — never idx) move, through pinned buffers on the copy stream; forward, the loss with its
// smoothing read from the device-scalar block, backward and one fused AdamW update per group run
// on the compute stream; the loss and accuracy sums stay on the device until the epoch ends. This
// is the step the handle runs on the CUDA backend (docs/cuda-integration.md); the example drives it
// directly so that it builds today.
#include <nitro/cuda.cuh>

#include <nitro/core/markers.hpp>
#include <nitro/core/reflect.hpp>
#include <nitro/core/rng.hpp>
#include <nitro/data/fashion_mnist.hpp>
#include <nitro/data/loader.hpp>
#include <nitro/nn/layers/chain.hpp>
#include <nitro/nn/layers/dense.hpp>
#include <nitro/nn/losses.hpp>
#include <nitro/optim/param_store.hpp>
#include <nitro/optim/rules/adam.hpp>
#include <nitro/tensor/cuda/optimizer_math.hpp>
#include <nitro/tensor/ops.hpp>

#include <boost/hana/define_struct.hpp>

#include <nitro/dist/replicas.hpp>
#if defined(NITRO_WITH_MPI) && NITRO_HAVE_NCCL
#include <nitro/dist.hpp>
#endif

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };

// examples/fashion_mlp.cpp's experiment, at a width the fused kernel takes (16..128).
template <int Width = 128>
struct FashionMLP {
  nitro::GraphConst<int, Width> width;       // compiled in: selects the fused kernel's instantiation
  nitro::Device<float> smoothing{0.05f};     // read by the fused loss from the device-scalar block
  float lr = 1e-3f;                          // host knob: the base learning rate
  int max_epochs = 5;
  std::int64_t batch_size = 128;

  auto build_model() const {
    constexpr int W = decltype(width)::value;
    return nitro::nn::chain(nitro::nn::dense<784, W>(nitro::nn::relu), nitro::nn::dense<W, W>(nitro::nn::relu), nitro::nn::dense<W, 10>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label, smoothing); }
};
NITRO_EXPERIMENT(FashionMLP, width, smoothing, lr, max_epochs, batch_size);

namespace {

using Exp = FashionMLP<128>;
using Model = decltype(Exp{}.build_model());
using Store = nitro::param_store<Model::param_spec>;
using Batch = nitro::data::image_batch;

struct options {
  int epochs = 1;
  std::int64_t batch = 128;
  std::uint64_t seed = 1;
  std::int64_t train_limit = 0;
  std::string data;  // empty: $NITRO_FASHION_MNIST_DIR, else /usr/share/datasets/fashion-mnist
  std::string path = "fused";
  bool cpu_reference = false;
  int n_devs = 1;
};

struct result {
  double train_loss = 0, valid_acc = 0, test_acc = 0, test_loss = 0, seconds = 0, samples_per_second = 0;
};

// The handle's initial weights: the model's init from the stream fold(seed, 1).
void init_weights(Model const& model, Store& store, std::uint64_t seed) {
  nitro::rng g(nitro::fold(seed, 1));
  auto ps = store.view();
  nitro::nn::layer_state<Model> st;
  model.init(ps, st, g);
}

// The decay mask of the note's default no_decay: leaves of rank 2 and more decay.
bool decays(std::int64_t i) {
  for (auto const& li : Store::leaves)
    if (i >= li.offset && i < li.offset + li.numel) return li.rank >= 2;
  return false;
}

// One replica per device (n_devs): its backend, its copy of the parameters, its optimizer.
template <class Program>
struct replica {
  std::unique_ptr<nitro::cuda_backend> be;
  std::unique_ptr<Program> prog;
  std::unique_ptr<nitro::cuda::dense_optimizer<Program, nitro::optim::adamw_rule>> opt;
};

// `job`: the processes of an MPI launch (null: this process alone). Every process runs the same
// loader (same seed, same permutation) and trains its replicas' slices of each global batch.
template <nitro::cuda::dense_path Path>
result train_on_gpu(Exp& e, nitro::data::dataset<Batch> const& data, options const& o, nitro::dist::replicas* job) {
  using Program = nitro::cuda::dense_program<Model, Store, Path>;
  nitro::cuda::scalar_block block;  // the handle's block: Device fields first, then scheduled values
  block.bind(e);
  const nitro::cuda::scalar_ref smoothing = nitro::cuda::device_scalar<Exp>("smoothing");
  const nitro::optim::adamw_rule rule = nitro::optim::adamw({.lambda = 1e-2});  // the CPU's AdamW, run by the kernel
  auto adamw = nitro::cuda::constant_refs(rule, e.lr, rule.default_lambda);
  adamw.eta = block.add(e.lr);  // a slot: a schedule would write it before each step

  const Model model = e.build_model();
  Store host(true);
  init_weights(model, host, o.seed);
#if NITRO_HAVE_NCCL
  // The devices first: across processes the plan says which GPUs this one drives.
  std::unique_ptr<nitro::cuda::data_parallel> dp;
  if (job) dp = std::make_unique<nitro::cuda::data_parallel>(*job, o.n_devs);  // under mpirun, even -np 1
  else if (o.n_devs > 1) dp = std::make_unique<nitro::cuda::data_parallel>(o.n_devs);
  const int world = dp ? dp->world_size() : 1, first = dp ? dp->first_replica() : 0;
  auto device_of = [&](int i) { return dp ? dp->device(i) : i; };
#else
  const int world = 1, first = 0;
  auto device_of = [](int i) { return i; };
#endif
  if (o.batch % world != 0)
    throw nitro::error("E-CUDA-013", "batch " + std::to_string(o.batch) + " does not split evenly over the " + std::to_string(world) + " replicas (processes x n_devs)",
                       "use a batch size divisible by the number of processes times n_devs");
  std::vector<replica<Program>> reps(static_cast<std::size_t>(o.n_devs));
  for (int i = 0; i < o.n_devs; ++i) {  // every replica starts from the same host weights
    auto& r = reps[static_cast<std::size_t>(i)];
    r.be = std::make_unique<nitro::cuda_backend>(device_of(i));
    r.prog = std::make_unique<Program>(*r.be);
    r.prog->upload(host.values());
    r.opt = std::make_unique<nitro::cuda::dense_optimizer<Program, nitro::optim::adamw_rule>>(*r.prog, rule);
  }
#if NITRO_HAVE_NCCL
  std::vector<float*> grads, params;
  std::vector<cudaStream_t> streams;
  for (auto& r : reps) {
    grads.push_back(r.prog->grads());
    params.push_back(r.prog->params());
    streams.push_back(r.be->compute());
  }
  if (dp) dp->broadcast(params.data(), Store::size, 0, streams.data());  // the job's replica 0's weights everywhere
#endif
  const bool prints = !job || job->writes();  // rank 0 reports
  Program& prog = *reps[0].prog;
  nitro::cuda_backend& be = *reps[0].be;

  auto evaluate = [&](char const* split) {
    nitro::data::loader<Batch> ld(data.split(split), {1000, false, false, 2, 0});
    ld.start_epoch(0);
    prog.reset_sums();
    while (auto b = ld.next()) {
      be.mirror_scalars(block.data(), block.bytes());
      auto x = be.to_device("img", b->img);
      auto y = be.to_device("label", b->label);
      prog.evaluate({x.data(), y.data(), false, b->img.batch()}, smoothing);
    }
    return prog.read_sums();
  };

  result r;
  nitro::data::loader<Batch> ld(data.split("train"), {o.batch, true, true, 2, nitro::fold(o.seed, 2)});
  long long step = 0;
  std::int64_t samples = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    ld.start_epoch(static_cast<std::uint64_t>(epoch));
    for (auto& rp : reps) rp.prog->reset_sums();
    while (auto b = ld.next()) {
      const long long B = b->img.batch();
      for (int i = 0; i < o.n_devs; ++i) {  // replica i: its columns of the batch (batch last: contiguous)
        auto& rp = reps[static_cast<std::size_t>(i)];
        const auto sl = nitro::cuda::slice_of(B, first + i, world);
        nitro::Tensor img(b->img.data() + sl.first * 784, b->img.shape().with_last(sl.count));
        nitro::Tensor label(b->label.data() + sl.first * 10, b->label.shape().with_last(sl.count));
        rp.be->mirror_scalars(block.data(), block.bytes());  // copies only when a value changed
        auto x = rp.be->to_device("img", img);               // prefetch: overlaps the previous step's kernels
        auto y = rp.be->to_device("label", label);
        rp.prog->zero_grads();
        rp.prog->loss_and_grads({x.data(), y.data(), false, sl.count}, smoothing);
      }
#if NITRO_HAVE_NCCL
      if (dp) dp->all_reduce_mean(grads.data(), Store::size, streams.data());  // one collective over the flat buffer
#endif
      ++step;
      for (auto& rp : reps) rp.opt->step(*rp.prog, {adamw}, step);
#if NITRO_HAVE_NCCL
      if (dp) dp->end_step(streams.data());  // at most two steps queued; a dead peer is a deadline, not a hang
#endif
      samples += B;
    }
#if NITRO_HAVE_NCCL
    if (dp) dp->synchronize(streams.data(), "the epoch's last steps");
#endif
    nitro::cuda::metric_sums sums;  // the first wait for the devices this epoch
    for (auto& rp : reps) {
      const auto s = rp.prog->read_sums();
      sums.loss += s.loss;
      sums.samples += s.samples;
    }
    if (job && job->size() > 1) {  // the whole global batch's loss
      double both[2] = {sums.loss, sums.samples};
      job->sum(both, 2, "the epoch's training loss");
      sums.loss = both[0];
      sums.samples = both[1];
    }
    r.train_loss = sums.mean_loss();
    if (prints) {  // the replicas are identical: rank 0 evaluates for the job
      const auto valid = evaluate("valid");
      r.valid_acc = valid.accuracy();
      std::printf("  gpu epoch %d/%d  train loss %.4f  valid acc %.4f\n", epoch + 1, o.epochs, r.train_loss, r.valid_acc);
    }
  }
  for (auto& rp : reps) rp.be->synchronize();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.samples_per_second = double(samples) / r.seconds;
  if (!prints) return r;
  const auto test = evaluate("test");
  r.test_acc = test.accuracy();
  r.test_loss = test.mean_loss();
  std::printf("  transfers (device %d):", be.device_id());
  for (auto const& [field, c] : be.transfers()) std::printf("  %s %lld batches, %.1f MB", field.c_str(), (long long)c.transfers, c.bytes / 1e6);
  std::printf("  (idx never moves: no hook declares it)\n");
  return r;
}

// The same run on the CPU backend: same initial weights, same batches, the experiment's own
// forward and loss hooks, nitro's tape, and the same AdamW (optimizer_math.hpp's update of optim::adamw's element).
result train_on_cpu(Exp& e, nitro::data::dataset<Batch> const& data, options const& o) {
  const Model model = e.build_model();
  Store store(true);
  init_weights(model, store, o.seed);
  std::vector<float> m(Store::size, 0.0f), v(Store::size, 0.0f);
  std::vector<unsigned char> decay(Store::size);
  for (std::int64_t i = 0; i < Store::size; ++i) decay[static_cast<std::size_t>(i)] = decays(i) ? 1 : 0;
  const nitro::optim::adamw_rule rule = nitro::optim::adamw({.lambda = 1e-2});
  const auto h = nitro::cuda::constant_refs(rule, e.lr, rule.default_lambda);
  nitro::arena mem;
  nitro::tape tp(mem);
  nitro::nn::layer_state<Model> st;

  auto evaluate = [&](char const* split) {
    nitro::data::loader<Batch> ld(data.split(split), {1000, false, false, 2, 0});
    ld.start_epoch(0);
    double correct = 0, n = 0, loss = 0;
    while (auto b = ld.next()) {
      nitro::step_context ctx{&mem, nullptr, false, 0, 0};
      nitro::context_scope scope(ctx);
      auto ps = store.view();
      auto [logits, st_new] = e.forward(model, ps, st, FwdIn{b->img});
      loss += double(e.loss(logits, LossIn{b->label}).item()) * double(b->img.batch());
      correct += nitro::nn::correct_count(logits, b->label);
      n += double(b->img.batch());
      mem.reset();
    }
    return std::pair{correct / n, loss / n};
  };

  result r;
  nitro::data::loader<Batch> ld(data.split("train"), {o.batch, true, true, 2, nitro::fold(o.seed, 2)});
  long long step = 0;
  std::int64_t samples = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    ld.start_epoch(static_cast<std::uint64_t>(epoch));
    double loss_sum = 0;
    std::int64_t batches = 0;
    while (auto b = ld.next()) {
      nitro::step_context ctx{&mem, &tp, true, 0, 0};
      nitro::context_scope scope(ctx);
      store.zero_grads();
      auto ps = store.view(tp);
      auto [logits, st_new] = e.forward(model, ps, st, FwdIn{b->img});
      auto loss = e.loss(logits, LossIn{b->label});
      loss_sum += loss.item();
      tp.backward<float>(loss.var(), 1.0f);
      const auto k = nitro::cuda::rule_step_at(rule, h, nullptr, ++step);
      float* p = store.values();
      float const* g = store.grads();
      for (std::int64_t i = 0; i < Store::size; ++i) {
        const auto j = static_cast<std::size_t>(i);
        float s[2] = {m[j], v[j]};
        nitro::cuda::update_element<nitro::optim::adamw_rule, false>(k, p[i], g[i], s, 0.0f, decay[j] != 0);
        m[j] = s[0];
        v[j] = s[1];
      }
      tp.clear();
      mem.reset();
      ++batches;
      samples += b->img.batch();
    }
    r.train_loss = loss_sum / double(batches ? batches : 1);
    r.valid_acc = evaluate("valid").first;
    std::printf("  cpu epoch %d/%d  train loss %.4f  valid acc %.4f\n", epoch + 1, o.epochs, r.train_loss, r.valid_acc);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.samples_per_second = double(samples) / r.seconds;
  const auto test = evaluate("test");
  r.test_acc = test.first;
  r.test_loss = test.second;
  return r;
}

bool parse(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fashion_mlp_cuda: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--epochs") o.epochs = std::stoi(value());
    else if (a == "--batch") o.batch = std::stoll(value());
    else if (a == "--seed") o.seed = std::stoull(value());
    else if (a == "--train-limit") o.train_limit = std::stoll(value());
    else if (a == "--data") o.data = value();
    else if (a == "--path") o.path = value();
    else if (a == "--cpu-reference") o.cpu_reference = true;
    else if (a == "--n-devs") o.n_devs = std::stoi(value());
    else {
      std::fprintf(stderr, "fashion_mlp_cuda: unknown option %s (see the comment at the top of examples/fashion_mlp_cuda.cu)\n", a.c_str());
      return false;
    }
  }
#if !NITRO_HAVE_NCCL
  if (o.n_devs != 1) {
    std::fprintf(stderr, "fashion_mlp_cuda: --n-devs %d needs NCCL, which this build did not find\n", o.n_devs);
    return false;
  }
#endif
  if (o.n_devs < 1) {
    std::fprintf(stderr, "fashion_mlp_cuda: --n-devs takes 1 or more\n");
    return false;
  }
  if (o.path != "fused" && o.path != "fused-fp32" && o.path != "cublaslt") {
    std::fprintf(stderr, "fashion_mlp_cuda: --path takes fused, fused-fp32 or cublaslt, not %s\n", o.path.c_str());
    return false;
  }
  return true;
}

// The run of this process; `job`: the processes of an MPI launch, or null.
int run(options const& o, nitro::dist::replicas* job) {
  const bool across = job != nullptr;  // under a launcher: the job's communicator, whatever its size
  const bool prints = !job || job->writes();
  const bool have_gpu = nitro::cuda::device_count() > 0;
  if (!have_gpu && !o.cpu_reference && !across) {  // across processes: E-CUDA-006 names the rank and host
    std::printf("fashion_mlp_cuda: SKIPPED: no CUDA device on this machine (cudaGetDeviceCount reports none)\n");
    return 77;
  }
  Exp e;
  const auto data = nitro::data::fashion_mnist({.dir = o.data, .train_limit = o.train_limit});
  if (!have_gpu && !across) {  // the CPU reference alone: what the GPU run is compared with
    const result cpu = train_on_cpu(e, data, o);
    std::printf("cpu: test accuracy %.4f  test loss %.4f  %.2f s  %.0f samples/s\n", cpu.test_acc, cpu.test_loss, cpu.seconds, cpu.samples_per_second);
    std::printf("fashion_mlp_cuda: GPU run SKIPPED: no CUDA device on this machine\n");
    return 77;
  }
  if (prints)
    std::printf("fashion_mlp_cuda: width %d, %s, %d epoch(s), batch %lld, %d device(s)%s\n", Exp{}.width.get(),
                o.path == "fused" ? nitro::cuda::to_string(nitro::cuda::dense_path::fused_tf32)
                : o.path == "fused-fp32" ? nitro::cuda::to_string(nitro::cuda::dense_path::fused_fp32)
                                         : nitro::cuda::to_string(nitro::cuda::dense_path::cublaslt_fp32),
                o.epochs, (long long)o.batch, o.n_devs, across ? (" per process x " + std::to_string(job->size()) + " process(es)").c_str() : "");
  result gpu;
  if (o.path == "fused") gpu = train_on_gpu<nitro::cuda::dense_path::fused_tf32>(e, data, o, job);
  else if (o.path == "fused-fp32") gpu = train_on_gpu<nitro::cuda::dense_path::fused_fp32>(e, data, o, job);
  else gpu = train_on_gpu<nitro::cuda::dense_path::cublaslt_fp32>(e, data, o, job);
  if (!prints) return 0;
  std::printf("gpu: test accuracy %.4f  test loss %.4f  %.2f s  %.0f samples/s\n", gpu.test_acc, gpu.test_loss, gpu.seconds, gpu.samples_per_second);
  if (o.cpu_reference) {
    Exp ec;
    const result cpu = train_on_cpu(ec, data, o);
    std::printf("cpu: test accuracy %.4f  test loss %.4f  %.2f s  %.0f samples/s\n", cpu.test_acc, cpu.test_loss, cpu.seconds, cpu.samples_per_second);
    const double diff = std::fabs(gpu.test_acc - cpu.test_acc);
    std::printf("gpu - cpu test accuracy: %+.4f (%s)\n", gpu.test_acc - cpu.test_acc, diff <= 0.02 ? "as on CPU" : "DIFFERS by more than 0.02");
    if (diff > 0.02) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, o)) return 2;
#if defined(NITRO_WITH_MPI) && NITRO_HAVE_NCCL
  if (nitro::dist::launched_by_mpi()) {  // mpirun / srun: one run over every process's GPUs
    nitro::dist::session mpi(argc, argv);
    int code = 1;
    try {
      code = run(o, &mpi.world());
    } catch (std::exception const& err) {
      std::fprintf(stderr, "fashion_mlp_cuda (rank %d): %s\n", mpi.rank(), err.what());
      return mpi.finish(2, err.what());  // the other ranks end too, naming this one
    }
    return mpi.finish(code);
  }
#endif
  try {
    return run(o, nullptr);
  } catch (nitro::error const& err) {
    std::fprintf(stderr, "%s\n", err.what());
    return 2;
  }
}
