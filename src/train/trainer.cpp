// The single-rank training loop.
#include "train/trainer.hpp"

#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "comm/traffic.hpp"
#include "dp/finalize_gradients.hpp"
#include "dp/gpt2_segments.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "comm/agreement.hpp"
#include "core/version.hpp"
#include "data/batches.hpp"
#include "deck/validate.hpp"
#include "train/evaluate.hpp"
#include "model/hf_model.hpp"
#include "model/llmc_io.hpp"
#include "job/deck_tokenizer.hpp"
#include "job/memory_plan.hpp"
#include "job/model_setup.hpp"
#include "job/signals.hpp"
#include "ckpt/resume.hpp"

namespace trident {
namespace {

std::unique_ptr<data::TokenData> open_data(const deck::Record& deck, const std::string& key,
                                           const std::string& pattern, const DataSettings& data) {
  if (pattern.empty())
    fatal_all(deck.file_name() + ": " + key + " is empty; give the token file (or a glob) to " +
              "read, e.g. data/default/train.bin made by `trident prepare`");
  try {
    return std::make_unique<data::TokenData>(pattern, data::parse_token_format(data.format), data.vocab);
  } catch (const std::runtime_error& e) {
    fatal_all(std::string(e.what()) + " (" + deck.cite(key) + ")");
  }
}

// The processors a step's FLOPs are spread over, each as fast as the GEMM peak rank 0 measures
// (StepLog's MFU): the ranks where each computes on threads of its own (the CPU, the guard); the
// GPUs on CUDA, where rank 0 measures a whole GPU that ranks sharing it through MPI take turns on.
// Collective.
int peak_holders(comm::Communicator& world, const ModelMemory& memory, const kernels::Context& device) {
  const bool gpu = kernels::backend_of(device).device().kind == DeviceKind::cuda;
  const int gpus = memories_in_job(world, memory);  // every rank calls it: a collective
  return gpu && memory.device ? gpus : world.size();
}

// The training data, once model.vocab is known to cover the data directory's tokenizer.
std::unique_ptr<data::TokenData> open_training_data(const Job& job, const DataSettings& data) {
  const deck::Record& deck = job.record;
  require_vocab_covers_tokenizer(job.settings, deck);
  return open_data(deck, "data.train", data.train, data);
}

// The validation windows of train.eval_tokens, once the training data is known to hold a window.
int64_t checked_windows(const data::TokenData& train, const data::TokenData& val, const TrainSettings& settings) {
  const int64_t windows = validation_windows(val, settings.eval_tokens, settings.seq_len);
  const int T = settings.seq_len;
  if (train.size() < T + 1)
    fatal_all(train.files().front() + " has " + std::to_string(train.size()) +
              " tokens, fewer than model.seq_len + 1 = " + std::to_string(T + 1));
  return windows;
}

// Before the first buffer of the model: a shape that cannot be allocated is a deck error.
RecomputeChoice checked_recompute(comm::Communicator& world, const Job& job, const model::GptConfig& config) {
  const RecomputeChoice recompute =
      choose_recompute(job.device, job.settings, job.record, job.grid, config, &job.topology);
  check_memory_fits(world, job.device, job.settings, job.record, job.grid, config, &job.topology, recompute);
  return recompute;
}

// The ZeRO stage a run's data group of `data_size` replicas has: none with one replica (nothing
// to shard over) — what the model's slots, the reducer and the shards are made for.
int zero_stage(const RunSettings& settings, int data_size) { return data_size > 1 ? settings.step.zero : 0; }

// This rank's part of the model (world rank `rank`), its kernels prepared and its parameters
// initialised.
std::unique_ptr<model::Transformer> build_model(const Job& job, int rank, const model::GptConfig& config,
                                         const RecomputeChoice& recompute, const std::vector<int>& split,
                                         kernels::Context& ctx, comm::Communicator& tensor,
                                         comm::Communicator& context) {
  const deck::Record& deck = job.record;
  model::TensorGroup tensor_group;
  tensor_group.slice = partition_for_rank(split, job.grid, rank);
  tensor_group.collectives = &tensor;
  tensor_group.sequence_parallel = job.settings.parallel.sequence_parallel;
  tensor_group.overlap = job.settings.parallel.tp_comm_overlap;
  if (config.padded_vocab % tensor_group.slice.size != 0)
    fatal_all(deck.file_name() + ": the padded vocabulary (" + std::to_string(config.padded_vocab) +
              " rows) must be divisible by parallel.tensor for the vocabulary-parallel embedding (" +
              deck.cite("parallel.tensor") + "); use a power of two up to 128");
  // ZeRO-2 and 3: the block gradients in two one-block slots (one filled by backward while the
  // other's reduce-scatter runs), which the reducer empties and the model waits for; ZeRO-3: the
  // block parameters in two slots too (dp::ParameterShards gathers them).
  const int zero = zero_stage(job.settings, job.grid.dp_size());
  auto model = std::make_unique<model::Transformer>(config, ctx, tensor_group, job.settings.precision.precision,
                                                    zero >= 2 ? 2 : 0, zero == 3 ? 2 : 0);
  model->set_recompute_interval(recompute.mode == "full" || recompute.mode == "every_k" ? recompute.interval : 0);
  model->set_attention_recompute(recompute.mode == "selective");
  set_attention_and_classifier(*model, job.settings.model);
  if (context.size() > 1) model->set_context_group(model::ContextGroup{&context, context.rank(), context.size(), {}});
  model->set_graphs(job.settings.kernels.graphs);
  // Every GEMM primitive, also in --check.
  model->prepare_kernels(job.settings.train.micro_batch,
                         job.settings.parallel.rows_per_sequence(job.settings.train.seq_len));
  return model;  // its parameters set by the trainer (set_parameters), or by a checkpoint read
}

// ZeRO-2 and 3: the segments in the model's gradient slots, and the model waits for the reducer.
std::unique_ptr<dp::GradientReducer> make_reducer(const RunSettings& settings, model::Transformer& model,
                                                  comm::Communicator& data) {
  const int zero = zero_stage(settings, data.size());
  dp::Gradients gradients;
  if (zero >= 2) {
    gradients.segments = dp::gpt2_slot_segments(model.config(), model.partition(), model.gradient_views(),
                                                [&model](int l) { return model.block_gradients(l); });
    gradients.slots = model.gradient_slots();
  } else {
    gradients.segments = dp::gpt2_gradient_segments(model.config(), model.partition(), model.grads());
  }
  gradients.count = model.num_parameters();
  gradients.device = model.context();
  gradients.device.stream = model.stream();
  auto reducer = std::make_unique<dp::GradientReducer>(data, std::move(gradients), settings.reduce.bucket_mb,
                                                       settings.reduce.overlap, zero, settings.reduce.grad_dtype);
  if (zero >= 2) model.set_slot_reuse_hook([r = reducer.get()](int slot) { r->before_slot_reuse(slot); });
  return reducer;
}

// ZeRO-3: the parameters' own parts, gathered into the model's slots before a block's passes.
std::unique_ptr<dp::ParameterShards> make_shards(const RunSettings& settings, model::Transformer& model,
                                                 dp::GradientReducer& reducer, comm::Communicator& data) {
  if (model.parameter_slots() == 0) return nullptr;
  std::vector<dp::GradientSegment> parameters = dp::gpt2_parameter_segments(
      model.config(), model.partition(), kernels::storage_dtype(model.precision()),
      [&model](int layer, int t) { return model.parameter_memory(layer, t); });
  kernels::Context device = model.context();
  device.stream = model.stream();
  auto shards = std::make_unique<dp::ParameterShards>(data, reducer, std::move(parameters), settings.reduce.bucket_mb,
                                                      model.parameter_slots(), device);
  model.set_block_gather([s = shards.get()](int layer, int next) { return s->gather_block(layer, next); },
                         [s = shards.get()] { return s->fence(); });
  return shards;
}

// ZeRO: each replica keeps the AdamW moments (and a 16-bit model's fp32 master) of the ranges
// it owns only (its part of every gradient bucket); ZeRO-2 updates from its own gradients.
std::unique_ptr<optim::AdamW> make_optimizer(const StepSettings& settings, const model::Transformer& model,
                                             const dp::GradientReducer& reducer, const dp::ParameterShards* shards) {
  return std::make_unique<optim::AdamW>(model.context(), model.config(), settings.adamw, model.partition(),
                                        reducer.owned(), model.precision(), reducer.owned_gradients() != nullptr,
                                        shards != nullptr);
}

// `micro_batches` of `micro_batch` sequences a step (the deck's, or balance.micro_batches');
// debug.slowdown's factor of world rank `rank`.
std::unique_ptr<pipeline::PipelineRunner> make_runner(const RunSettings& settings, int rank, model::Transformer& model,
                                                      comm::Communicator& pipeline, int64_t micro_batches,
                                                      int micro_batch) {
  auto runner = std::make_unique<pipeline::PipelineRunner>(
      model, pipeline, pipeline::parse_schedule(settings.step.schedule), static_cast<int>(micro_batches), micro_batch,
      settings.parallel.rows_per_sequence(settings.train.seq_len));
  runner->set_slowdown(settings.debug.slowdown_of(rank));
  return runner;
}

// The resolved deck and the lineage of the run that wrote (or last continued) the history.
std::vector<std::pair<std::string, std::string>> deck_attributes(const Job& job, const std::string& run_id,
                                                                 const ckpt::Lineage& lineage) {
  std::vector<std::pair<std::string, std::string>> attributes{
      {"trident_version", TRIDENT_VERSION}, {"deck", job.record.to_ini("resolved deck")},
      {"run_id", run_id}, {"lineage.branch", lineage.branch}, {"lineage.parent", lineage.parent},
      {"gemm_path", kernels::gemm_path_summary(job.device, job.settings.precision.precision)}};
  attributes.insert(attributes.end(), job.record.values().begin(), job.record.values().end());
  return attributes;
}

// FNV-1a over the bytes of the parameters: replicas that got the same gradients hold the same
// bits, so one 64-bit digest per replica checks the whole model.
uint64_t digest(const float* data, int64_t n) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(data);
  uint64_t hash = 1469598103934665603ULL;
  for (int64_t i = 0; i < n * int64_t(sizeof(float)); ++i) hash = (hash ^ bytes[i]) * 1099511628211ULL;
  return hash;
}

}  // namespace

Trainer::Trainer(const Job& job, comm::Communicator& world, const comm::JobGroups& groups)
    : job_(job),
      settings_(job.settings),
      world_(world),
      collectives_(groups, job.topology, job.settings.comm.collectives),
      rank_(collectives_.world->rank()),
      dp_rank_(collectives_.dp_rank()),
      dp_size_(collectives_.dp_size()),
      pp_rank_(collectives_.pp_rank()),
      pp_size_(collectives_.pp_size()),
      train_data_(open_training_data(job, settings_.data)),
      val_data_(open_data(job.record, "data.val", settings_.data.val, settings_.data)),
      val_windows_(checked_windows(*train_data_, *val_data_, settings_.train)),
      config_(model_config(job.settings.model, job.record)),
      recompute_(checked_recompute(world, job, config_)),
      ctx_(model_context(job.device, job.settings.kernels)),
      split_(layer_split(job.settings)),
      model_(build_model(job, rank_, config_, recompute_, split_, ctx_, *collectives_.tensor,
                         *collectives_.context)),
      loss_scaler_(model_->precision() == kernels::Precision::fp16
                       ? std::make_unique<optim::LossScaler>(settings_.precision.loss_scale)
                       : nullptr),
      reducer_(make_reducer(settings_, *model_, *collectives_.data)),
      shards_(make_shards(settings_, *model_, *reducer_, *collectives_.data)),
      optimizer_(make_optimizer(settings_.step, *model_, *reducer_, shards_.get())),
      runner_(make_runner(settings_, rank_, *model_, *collectives_.pipeline, settings_.train.micro_batches,
                          settings_.train.micro_batch)),
      hooks_(FaultHooks::install(world, settings_.debug)),
      B_(settings_.train.micro_batch),
      T_(settings_.parallel.rows_per_sequence(settings_.train.seq_len)),
      seq_len_(settings_.train.seq_len),
      context_(collectives_.context->size()),
      replica_(dp_rank_ / context_),
      steps_(settings_.train.steps),
      micro_batches_(settings_.train.micro_batches),
      flops_per_token_(model::training_flops_per_token(config_, settings_.train.seq_len)),
      figures_(job.grid, pp_size_, kernels::backend_of(job.device)),
      balancer_(settings_.balance, job.grid, settings_.parallel.virtual_stages, *this),
      memory_(model_memory(world, job.device, job.settings.kernels)),
      log_(steps_, settings_.log_interval, loss_scaler_ != nullptr, peak_holders(world, memory_, job.device),
           flops_per_token_),
      shares_(dp_size_, static_cast<int>(micro_batches_)),
      first_micro_batch_(replica_ * micro_batches_),
      step_scalars_(kernels::kStepScalars, MemoryCategory::Activations, kernels::backend_of(ctx_), MemoryKind::device) {
  initialise_parameters();
}

// ZeRO-3 from the seed: this replica's owned ranges and the tensors outside the blocks only,
// never the whole slice in host memory (the initialisation is a function of each element's
// place, model::init_params). From a file, and without ZeRO-3: the whole slice.
void Trainer::initialise_parameters() {
  if (!shards_ || settings_.model.from_file()) return set_parameters(initial_parameters(job_.settings, *model_));
  const model::Partition& slice = model_->partition();
  const auto specs = model::param_specs(config_, slice);
  const auto flat = model::param_offsets(config_, slice);
  model::FlatRanges outside;
  for (int t = 0; t < model::kNumParamTensors; ++t)
    if (!model::is_block_tensor(t)) outside.push_back({flat[t], flat[t] + specs[t].count()});
  outside = model::normalized(outside);
  std::vector<float> values(static_cast<size_t>(model::total_count(outside)));
  model::init_param_ranges(config_, outside, values.data(), settings_.train.seed, slice);
  model_->upload_outside(values.data());
  values.assign(static_cast<size_t>(model::total_count(optimizer_->owned())), 0.0f);
  model::init_param_ranges(config_, optimizer_->owned(), values.data(), settings_.train.seed, slice);
  load_owned(values.data());
}

void Trainer::set_parameters(const std::vector<float>& host_slice) {
  model_->upload_params(host_slice.data());  // ZeRO-3: the tensors outside the blocks
  if (!shards_) return optimizer_->load_master(ctx_, host_slice.data());
  std::vector<float> owned;
  for (const model::FlatRange& r : optimizer_->owned())
    owned.insert(owned.end(), host_slice.begin() + r.begin, host_slice.begin() + r.end);
  load_owned(owned.data());
}

void Trainer::load_owned(const float* owned_values) {
  optimizer_->load_owned_master(ctx_, owned_values);
  shards_->load(owned_values);
  shards_changed();
}

void Trainer::shards_changed() {
  shards_->after_update();
  model_->parameters_changed();
}

// Each replica's owned values (state order) to data replica 0, which places them by the ranges
// the replica owns: exact (no sum of zero-padded slices), and the whole slice in one replica's
// host memory only.
std::vector<float> Trainer::master_on_data_root() {
  const bool sharded = optimizer_->keeps_master() || shards_;  // else the model holds the fp32 values whole
  if (!sharded) return dp_rank_ == 0 ? model_->host_params() : std::vector<float>{};
  // Without ZeRO a 16-bit run's replicas each keep the whole master, the same values
  // (check_replicas_agree): replica 0's own is the slice, and nothing crosses the data group.
  const bool replicated = !settings_.step.zero && !shards_;
  if (replicated && dp_rank_ != 0) return {};
  std::vector<float> own(static_cast<size_t>(optimizer_->state_size()));
  const Tensor stored = optimizer_->keeps_master() ? view(optimizer_->master(), own.size(), model_->device())
                                                   : shards_->shard();
  kernels::download(ctx_, own.data(), stored);
  if (replicated) {
    REQUIRE(static_cast<int64_t>(own.size()) == model_->num_parameters(),
            "master_on_data_root: a replicated master of " << own.size() << " values for " << model_->num_parameters());
    return own;
  }
  const int tag = 78;
  if (dp_rank_ != 0) {
    collectives_.data->send(own.data(), own.size(), DType::f32, 0, tag, Stream{}).wait();
    return {};
  }
  std::vector<float> slice(static_cast<size_t>(model_->num_parameters()));
  for (int r = 0; r < dp_size_; ++r) {
    const model::FlatRanges ranges = reducer_->owned_by(r);
    if (r > 0) {
      own.resize(static_cast<size_t>(model::total_count(ranges)));
      collectives_.data->recv(own.data(), own.size(), DType::f32, r, tag, Stream{}).wait();
    }
    int64_t at = 0;
    for (const model::FlatRange& range : ranges) {
      std::copy(own.begin() + at, own.begin() + at + range.count(), slice.begin() + range.begin);
      at += range.count();
    }
  }
  return slice;
}

void Trainer::state_was_read() {
  if (shards_) {  // ZeRO-3 read its shard (fp32) or the master's
    optimizer_->write_master_into(ctx_, shards_->shard());
    return shards_changed();
  }
  if (!optimizer_->keeps_master()) return;  // an fp32 model read its parameters whole
  const Tensor params = model_->parameters_to_write();
  optimizer_->write_master_into(ctx_, params);
  reducer_->all_gather_params(params);
}

void Trainer::rebuild_model(const std::vector<int>& split) {
  // The old parts go first (last built, first freed): the rank never holds two models.
  runner_.reset();
  optimizer_.reset();
  shards_.reset();
  reducer_.reset();
  model_.reset();
  split_ = split;
  model_ = build_model(job_, rank_, config_, recompute_, split_, ctx_, *collectives_.tensor,
                       *collectives_.context);
  reducer_ = make_reducer(settings_, *model_, *collectives_.data);
  shards_ = make_shards(settings_, *model_, *reducer_, *collectives_.data);
  optimizer_ = make_optimizer(settings_.step, *model_, *reducer_, shards_.get());
  rebuild_runner();
}

void Trainer::rebuild_runner() {
  runner_.reset();
  // The new runner re-sizes the model's activation slots for B_ (Transformer::prepare).
  runner_ = make_runner(settings_, rank_, *model_, *collectives_.pipeline, micro_batches_, B_);
  runner_->set_micro_batches(shares_[dp_rank_]);
}

StepResult Trainer::train_step(int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  const uint64_t seed = settings_.train.seed;
  model_->zero_grad();
  // This replica's slice of the global batch: its micro-batches [first, first + share) of the
  // m · dp, each of B sequences — [dp_rank · G/dp, (dp_rank+1) · G/dp) with equal shares. Every
  // micro-batch holds B · T tokens, so scaling each by 1/(m · dp) weights every token alike
  // whatever the shares: the same loss and the same gradient as equal shares.
  const int64_t first_sequence = first_micro_batch_ * B_;
  // fp16: the loss scale S multiplies every gradient; the norm and the update divide it out.
  const double fp16_scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  const float loss_scale = static_cast<float>(fp16_scale / static_cast<double>(micro_batches_ * dp_size_));
  auto batch = [&](int micro, int32_t* inputs, int32_t* targets) {
    fill_rows(inputs, targets, [&](int T, int32_t* sequences, int32_t* next) {
      data::training_batch(*train_data_, seed, step, first_sequence + int64_t(micro) * B_, B_, T, sequences, next);
    });
  };
  // The last backward makes the gradients final: each finished block goes to the data-parallel
  // reducer at once, the embedding and final LayerNorm (event -1) when the schedule is done.
  // Then the tied wte's two copies are summed (sum_tied) — a collective of the first and last
  // stage after both data groups' reductions.
  // Without overlap there is nothing to hand over, and a backward without a hook can be a
  // recorded graph (cuda.graphs).
  std::function<void(int)> on_final;
  if (reducer_->overlapping() || reducer_->every_micro_batch())
    on_final = [this](int layer) {
      if (layer >= 0) reducer_->on_final(layer);
    };
  StepResult result;
  const int64_t reads_before = kernels::backend_of(ctx_).host_reads();
  if (hooks_) hooks_->before_step(step + 1);
  reducer_->begin();
  runner_->train_step(batch, loss_scale, on_final, &result.pipeline, reducer_->every_micro_batch());
  if (hooks_) hooks_->after_backward(step + 1, model_->grads(), model_->context());
  reducer_->on_final(-1);
  result.exposed_comm_seconds = reducer_->finish();
  reducer_->sum_tied(collectives_.embedding.get());
  if (shards_) shards_->settle();  // no prefetch still reading the shard the optimizer writes
  model_->sum_replicated_kv_gradients();  // after the data-parallel reduction: nothing of it in flight
  result.tensor_exposed_seconds = model::take_tensor_wait_seconds();
  result.comm_seconds = reducer_->communication_seconds();

  const auto optimizer_start = std::chrono::steady_clock::now();
  result.lr = optim::learning_rate(step, steps_, settings_.step.warmup_steps, settings_.step.lr, settings_.step.min_lr);
  const double* scalars = finish_step_on_device(fp16_scale, result.lr);
  result.loss = static_cast<float>(scalars[kernels::kLoss]);
  result.grad_norm = static_cast<float>(scalars[kernels::kGradNorm]);
  // Every rank sees the same loss (from the last stage) and norm (summed over all groups), so
  // all skip together: a NaN or Inf anywhere left the parameters and moments as they were.
  result.skipped = scalars[kernels::kSkipStep] != 0.0;
  result.loss_scale = fp16_scale;
  if (loss_scaler_) loss_scaler_->update(result.skipped);  // an overflow reduces the scale
  if (!result.skipped) ++optimizer_updates_;
  result.optimizer_seconds = seconds_since(optimizer_start);
  result.seconds = seconds_since(start);
  if (reads_before >= 0) {  // the guard: a host all-reduce, outside the step's time
    double reads = static_cast<double>(kernels::backend_of(ctx_).host_reads() - reads_before);
    collectives_.world->all_reduce(&reads, 1, DType::f64, comm::Op::Max, Stream{}).wait();
    result.host_reads = static_cast<int64_t>(reads);
  }
  return result;
}

void Trainer::record_step(int64_t step, const StepResult& r) {
  figures_.record(r, collectives_, log_.metrics());
  const double tokens = static_cast<double>(micro_batches_) * dp_size_ * B_ * T_;
  log_.step(step, r, tokens);
}

// The end-of-run summary: traffic, peak memory, and the pipeline bubble measured (per stage,
// the share of the pipeline phase it spent not computing, over the steps after the first)
// beside its theory (p − 1)/(m + p − 1), which assumes equal stages.
void Trainer::print_summary() const {
  for (const std::string& line : figures_.summary(micro_batches_, pipeline::parse_schedule(settings_.step.schedule),
                                                  settings_.parallel.virtual_stages)) print0(line);
}

std::string Trainer::memory_report(bool bytes) const {
  plan::MemoryInputs in = memory_inputs(job_.device, job_.settings, job_.grid, model_->config(), &job_.topology);
  in.recompute = recompute_.mode;
  in.recompute_interval = recompute_.interval;
  int64_t total = 0;
  const plan::MemoryEstimate estimate = plan::estimate_busiest(in, &total);
  if (bytes)
    return "memory_estimate_bytes: " + describe_estimate(estimate, total, true) +
           " block_activations=" + std::to_string(plan::block_activation_bytes(in)) +
           " buffers=" + std::to_string(estimate.buffers);
  std::string recompute = recompute_.mode + (recompute_.mode == "every_k" ? " K = " + std::to_string(recompute_.interval) : "");
  return "memory per rank by the model (busiest rank per category): " + describe_estimate(estimate, total, false) +
         "; recompute " + recompute + " (" + recompute_.why + ")";
}

void Trainer::check_replicas_agree() {
  if (shards_) return;  // ZeRO-3's replicas hold different parts: what they gather is alike by construction
  uint64_t mine = digest(model_->host_params().data(), model_->num_parameters());
  std::vector<uint64_t> all(dp_size_);
  static_assert(sizeof(uint64_t) == 2 * dtype_size(DType::i32), "a digest travels as two i32");
  collectives_.data->all_gather_values(&mine, all.data(), 2, DType::i32, Stream{}).wait();
  for (int r = 1; r < dp_size_; ++r)
    if (all[r] != all[0] && dp_rank_ == 0)
      fatal_one("data-parallel replica " + std::to_string(r) + " holds different parameters "
                "than replica 0 after training: the gradient reduction is not identical on "
                "every replica");
  collectives_.data->barrier(Stream{}).wait();
}

// The step's end on the device (kernels::StepScalar): the loss (the last stage's micro-batches,
// summed over the replicas, from the last stage), the gradient norm and clip factor, the skip
// flag agreed over the world, and AdamW reading the factor and the flag where they are; then
// the one read the host waits for. The collectives are ordered on the model's stream.
const double* Trainer::finish_step_on_device(double fp16_scale, float lr) {
  using namespace kernels;
  const Tensor scalars = step_scalars_.view();
  double* values = scalars.as<double>();
  const Stream stream = model_->stream();
  clear(ctx_, scalars);
  if (pp_rank_ == pp_size_ - 1)  // this replica's share of the micro-batches (balance.micro_batches)
    mean_losses_into(ctx_, scalars.elements(kLossSum, 1), model_->kept_loss_sums(shares_[dp_rank_]),
                     static_cast<double>(B_) * T_);
  if (dp_size_ > 1) collectives_.data->all_reduce(values + kLossSum, 1, DType::f64, comm::Op::Sum, stream).wait();
  if (pp_size_ > 1) collectives_.pipeline->broadcast(values + kLossSum, 1, DType::f64, pp_size_ - 1, stream).wait();
  dp::sum_gradient_squares(*model_, reducer_->owned(), reducer_->owned_gradients(), scalars.elements(kSquaresSplit, 2), *collectives_.data,
                           *collectives_.tensor, *collectives_.pipeline);
  step_control(ctx_, scalars, settings_.step.grad_clip, fp16_scale, static_cast<double>(micro_batches_ * dp_size_));
  dp::agree_on_skip(*model_, values + kSkipStep, *collectives_.world);
  // ZeRO-3: the own parameters alone, gathered when they are used next.
  const Tensor params = shards_ ? shards_->shard() : model_->parameters_to_write();
  const float* grads = reducer_->owned_gradients() ? reducer_->owned_gradients() : model_->grads();  // ZeRO-2, 3: its own
  optimizer_->step(ctx_, params, grads, lr, optimizer_updates_ + 1, 1.0f,
                   scalars.elements(kUpdateScale, 2));
  if (shards_) shards_changed();
  else reducer_->all_gather_params(params);  // ZeRO-1, 2: every shard to every replica (unchanged ones after a skip)
  download(ctx_, step_scalars_host_.data(), scalars);
  return step_scalars_host_.data();
}

double Trainer::from_last_stage(double value) {
  collectives_.pipeline->broadcast(&value, 1, DType::f64, pp_size_ - 1, Stream{}).wait();
  return value;
}

// Without context parallelism `fill` writes the micro-batch's B sequences of T_ tokens into
// inputs and targets; with it, the whole sequences (seq_len_) into host scratch, of which this
// rank takes its chunks.
void Trainer::fill_rows(int32_t* inputs, int32_t* targets,
                        const std::function<void(int, int32_t*, int32_t*)>& fill) {
  if (context_ == 1) return fill(T_, inputs, targets);
  const size_t whole = static_cast<size_t>(B_) * seq_len_;
  sequences_.resize(2 * whole);
  fill(seq_len_, sequences_.data(), sequences_.data() + whole);
  model::take_chunks(model_->context_group(), sequences_.data(), inputs, B_, seq_len_);
  model::take_chunks(model_->context_group(), sequences_.data() + whole, targets, B_, seq_len_);
}

double Trainer::evaluate() {
  const ValidationShare share = validation_share(val_windows_, replica_, dp_size_ / context_);
  // ZeRO-3: every replica runs as many forwards as the first (the most windows), each of which
  // gathers the blocks — the data group's collectives; a batch past its windows counts nothing.
  const int batches = shards_ ? validation_share(val_windows_, 0, dp_size_ / context_).batches(B_) : share.batches(B_);
  std::vector<int> used(batches);
  auto batch = [&](int k, int32_t* inputs, int32_t* targets) {
    fill_rows(inputs, targets, [&](int T, int32_t* sequences, int32_t* next) {
      used[k] = share.fill(*val_data_, k, B_, T, sequences, next);
    });
  };
  double sum = 0.0;
  auto consume = [&](int k, const float* losses) {
    for (int i = 0; i < used[k] * T_; ++i) sum += losses[i];
  };
  runner_->forward_only(batches, batch, consume);
  collectives_.data->all_reduce(&sum, 1, DType::f64, comm::Op::Sum, Stream{}).wait();
  return from_last_stage(sum) / static_cast<double>(val_windows_ * seq_len_);
}

// Collective: rank 0's failure to write a file of the run directory (a full disk, an I/O
// error), agreed by every rank and ended as one "error:" line with exit status 1 — not
// fatal_one's abort, whose launcher noise would bury the one line that says what to do.
void Trainer::end_if_root_failed(std::string problem, const std::string& hint) const {
  comm::broadcast_string(*collectives_.world, problem, 0);
  if (!problem.empty()) throw RunFailure(problem + "; " + hint, kExitFault);
}

int Trainer::run(const std::string& run_dir, const std::vector<std::pair<std::string, std::string>>& facts) {
  run_dir_ = run_dir;
  balancer_.start(start_step_);
  checkpointer_ = std::make_unique<ckpt::Checkpointer>(settings_.checkpoint, world_);
  checkpointer_->begin_lineage(lineage_);
  std::string problem;
  if (rank_ == 0) {
    try {
      auto attributes = deck_attributes(job_, run_id_, lineage_);
      // The memory rank 0's model shares (its host's, or its device's) and with how many ranks:
      // the doctor's default budget per rank.
      attributes.emplace_back("memory.capacity_bytes", std::to_string(static_cast<int64_t>(memory_.bytes)));
      attributes.emplace_back("memory.capacity_ranks", std::to_string(memory_.ranks.size()));
      attributes.emplace_back("memory.capacity_of", memory_.name);
      attributes.insert(attributes.end(), facts.begin(), facts.end());
      log_.open(run_dir + "/metrics.h5", attributes, start_step_);
    } catch (const std::runtime_error& e) {
      problem = e.what();
    }
  }
  end_if_root_failed(problem, "free space in " + run_dir + " or choose another train.run_dir");
  const int64_t eval_interval = settings_.train.eval_interval;
  print0("model: " + std::to_string(model::num_parameters(model_->config())) + " parameters (" +
         std::to_string(model_->num_parameters()) + " on this rank); " +
         std::to_string(micro_batches_) + " micro-batches of " + std::to_string(B_) + " x " +
         std::to_string(seq_len_) + " tokens per step" +
         (context_ > 1 ? " (" + std::to_string(T_) + " per sequence on each of " + std::to_string(context_) +
                             " context ranks)" : std::string()) +
         "; train " + std::to_string(train_data_->size()) + " tokens, validation " +
         std::to_string(val_windows_ * seq_len_) + " tokens");
  if (log_.metrics())
    log_.start(metrics::measure_gemm_peak(model_->context(), model_->precision()),
               kernels::precision_name(model_->precision()));
  // The peak measured alone: ranks sharing rank 0's GPU (or its cores) wait, not evaluate beside it.
  world_.barrier(Stream{}).wait();
  // Evaluation and checkpoints, timed for the end-of-run summary.
  auto validate = [&](int64_t step) {
    const auto start = SteadyClock::now();
    log_.validation(step, evaluate());
    log_.add_evaluation(seconds_since(start));
  };
  auto checkpoint = [&](int64_t completed) {
    const auto start = SteadyClock::now();
    const bool stop = checkpoint_boundary(completed);
    log_.add_checkpoint(seconds_since(start));
    return stop;
  };
  if (start_step_ == 0) validate(0);
  for (int64_t step = start_step_; step < steps_; ++step) {
    const StepResult result = train_step(step);
    record_step(step, result);
    if (result.skipped) count_bad_step(step, result);
    else bad_in_a_row_ = 0;
    if (step == start_step_) figures_.forget_bubble();  // the first step warms up: not counted
    balancer_.after_step(step + 1, result.pipeline, runner_->micro_batches(), *collectives_.world, log_.metrics());
    const bool last = step + 1 == steps_;
    if (last || (eval_interval > 0 && (step + 1) % eval_interval == 0))
      validate(step + 1);
    if (checkpoint(step + 1)) return kExitStopped;
  }
  if (settings_.checkpoint_at_end && last_full_step_ != steps_) {
    if (log_.metrics()) log_.metrics()->sync();
    const auto start = SteadyClock::now();
    checkpointer_->save("full", state_view(), metadata(steps_));
    last_full_step_ = steps_;
    log_.add_checkpoint(seconds_since(start));
  }
  const auto wait_start = SteadyClock::now();
  checkpointer_->wait();
  log_.add_checkpoint(seconds_since(wait_start));
  record_checkpoints();
  check_replicas_agree();
  const std::vector<float> whole =
      gather_whole_model(model_->config(), model_->partition(), master_on_data_root(), split_, job_.grid, *collectives_.world);
  if (rank_ == 0) {
    try {
      log_.metrics()->close();  // metrics.h5 alone holds the whole history
      if (model::is_llama(model_->config()))  // llm.c's file holds GPT-2 alone
        model::write_hf_model(run_dir + "/model", model_->config(), whole.data(), DType::f32);
      else
        model::write_llmc_model(run_dir + "/model.bin", model_->config(), whole.data());
    } catch (const std::runtime_error& e) {
      problem = e.what();
    }
  }
  // Also the barrier after which the files exist when any rank returns.
  end_if_root_failed(problem, "the checkpoints written are intact; free space in " + run_dir + " and resume with "
                     "--checkpoint.resume=auto");
  print_summary();
  if (log_.metrics()) print0(log_.progress_summary());
  if (settings_.kernels.graphs)  // the model rebuilt by a move counts from its rebuild
    print0("cuda.graphs: " + std::to_string(model_->graph_replays()) +
           " micro-batch forwards and backwards replayed from recorded graphs on rank 0");
  if (model::is_llama(model_->config()))
    print0("wrote " + run_dir + "/model (Hugging Face LlamaForCausalLM, f32) and " + run_dir + "/metrics.h5");
  else
    print0("wrote " + run_dir + "/model.bin (llm.c format) and " + run_dir + "/metrics.h5");
  check_final_checkpoint();
  return kExitOk;
}

}  // namespace trident
