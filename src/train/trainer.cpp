// The single-rank training loop.
#include "train/trainer.hpp"

#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "comm/traffic.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/mpi_util.hpp"
#include "core/version.hpp"
#include "data/batches.hpp"
#include "deck/validate.hpp"
#include "train/evaluate.hpp"
#include "model/llmc_io.hpp"
#include "train/deck_tokenizer.hpp"
#include "train/memory_plan.hpp"
#include "train/model_setup.hpp"
#include "train/signals.hpp"
#include "ckpt/resume.hpp"

namespace trident {
namespace {

std::unique_ptr<data::TokenData> open_data(const deck::Deck& deck, const std::string& key) {
  const std::string pattern = deck.get_string(key);
  if (pattern.empty())
    fatal_all(deck.file_name() + ": " + key + " is empty; give the token file (or a glob) to " +
              "read, e.g. data/default/train.bin made by `trident prepare`");
  try {
    return std::make_unique<data::TokenData>(pattern, data::parse_token_format(deck.get_string("data.format")),
                                             static_cast<int>(deck.get_int("model.vocab")));
  } catch (const std::runtime_error& e) {
    fatal_all(std::string(e.what()) + " (" + deck.cite(key) + ")");
  }
}

// The resolved deck and the lineage of the run that wrote (or last continued) the history.
std::vector<std::pair<std::string, std::string>> deck_attributes(const deck::Deck& deck, const std::string& run_id,
                                                                 const ckpt::Lineage& lineage) {
  std::vector<std::pair<std::string, std::string>> attributes{
      {"trident_version", TRIDENT_VERSION}, {"deck", deck.to_ini("resolved deck")},
      {"run_id", run_id}, {"lineage.branch", lineage.branch}, {"lineage.parent", lineage.parent},
      {"gemm_path", kernels::gemm_path_summary(kernels::Context{}, precision_from_deck(deck))}};
  for (const deck::KeySpec& spec : deck::schema())
    attributes.emplace_back(spec.key, deck::canonical_value(spec, deck.text(spec.key)));
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

Trainer::Trainer(const Job& job, const comm::ProcessGroups& groups) : job_(job), groups_(groups) {
  const deck::Deck& deck = job.deck;
  MPI_CHECK(MPI_Comm_rank(groups.data(), &dp_rank_));
  MPI_CHECK(MPI_Comm_size(groups.data(), &dp_size_));
  MPI_CHECK(MPI_Comm_rank(groups.pipeline(), &pp_rank_));
  MPI_CHECK(MPI_Comm_size(groups.pipeline(), &pp_size_));
  steps_ = deck.get_int("train.steps");
  micro_batches_ = deck::micro_batches_per_step(deck);
  B_ = static_cast<int>(deck.get_int("train.micro_batch"));
  T_ = static_cast<int>(deck.get_int("model.seq_len"));
  require_vocab_covers_tokenizer(deck);
  train_data_ = open_data(deck, "data.train");
  val_data_ = open_data(deck, "data.val");
  val_windows_ = validation_windows(*val_data_, deck.get_int("train.eval_tokens"), T_);
  if (train_data_->size() < T_ + 1)
    fatal_all(train_data_->files().front() + " has " + std::to_string(train_data_->size()) +
              " tokens, fewer than model.seq_len + 1 = " + std::to_string(T_ + 1));
  const model::GptConfig config = model_config_from_deck(deck);
  // Before the first buffer of the model: a shape that cannot be allocated is a deck error.
  recompute_ = choose_recompute(deck, job.grid, config, &job.topology);  // memory.recompute, or auto by the budget
  check_memory_fits(deck, job.grid, config, &job.topology, recompute_);
  const comm::CollectiveSettings collective = collective_settings(deck);
  tensor_collectives_ = std::make_unique<comm::GroupCollectives>(groups.tensor(), job.topology, "tensor", collective,
                                                                 comm::Traffic::Tensor);
  model::TensorGroup tensor_group;
  tensor_group.slice = partition_for_rank(deck, job.grid, world_rank());
  tensor_group.collectives = tensor_collectives_.get();
  if (config.padded_vocab % tensor_group.slice.size != 0)
    fatal_all(deck.file_name() + ": the padded vocabulary (" + std::to_string(config.padded_vocab) +
              " rows) must be divisible by parallel.tensor for the vocabulary-parallel embedding (" +
              deck.cite("parallel.tensor") + "); use a power of two up to 128");
  model_ = std::make_unique<model::Gpt2>(config, ctx_, tensor_group, precision_from_deck(deck));
  if (model_->precision() == kernels::Precision::fp16) loss_scaler_ = make_loss_scaler(deck);
  model_->set_recompute_interval(recompute_.mode == "full" || recompute_.mode == "every_k" ? recompute_.interval : 0);
  model_->set_attention_recompute(recompute_.mode == "selective");
  model_->prepare_kernels(B_, T_);  // every GEMM primitive, also in --check
  initialise_parameters(deck, *model_);
  optim::AdamWSettings settings;
  settings.beta1 = static_cast<float>(deck.get_float("optim.beta1"));
  settings.beta2 = static_cast<float>(deck.get_float("optim.beta2"));
  settings.eps = static_cast<float>(deck.get_float("optim.eps"));
  settings.weight_decay = static_cast<float>(deck.get_float("optim.weight_decay"));
  data_collectives_ = std::make_unique<comm::GroupCollectives>(groups.data(), job.topology, "data", collective,
                                                               comm::Traffic::Data);
  reducer_ = std::make_unique<comm::GradientReducer>(config, tensor_group.slice, *data_collectives_,
                                                     deck.get_float("comm.bucket_mb"),
                                                     deck.get_bool("comm.overlap"),
                                                     deck.get_int("optim.zero") == 1);
  // ZeRO-1: each replica keeps the AdamW moments of its own shard only.
  const comm::Shard shard = reducer_->shard();
  optimizer_ = std::make_unique<optim::AdamW>(config, settings, tensor_group.slice, shard.begin, shard.end);
  flops_per_token_ = model::training_flops_per_token(config, T_);
  bubble_busy_.assign(pp_size_, 0.0);
  bubble_wait_.assign(pp_size_, 0.0);
  // The step-boundary agreements (NaN skip, stop signal, checkpoint due) over all ranks, under
  // the watchdog: a rank that died must not leave the others waiting in them.
  world_collectives_ = std::make_unique<comm::GroupCollectives>(MPI_COMM_WORLD, job.topology, "world", collective);
  pipeline_collectives_ = std::make_unique<comm::GroupCollectives>(groups.pipeline(), job.topology, "pipeline", collective,
                                                                   comm::Traffic::Pipeline);
  if (groups.embedding() != MPI_COMM_NULL)  // the first and last stage's ranks only
    embedding_collectives_ = std::make_unique<comm::GroupCollectives>(groups.embedding(), job.topology, "embedding", collective,
                                                                    comm::Traffic::Embedding);
  runner_ = std::make_unique<pipeline::PipelineRunner>(
      *model_, pipeline_collectives_->flat(), pipeline::parse_schedule(deck.get_string("parallel.schedule")),
      static_cast<int>(micro_batches_), B_, T_);
}

StepResult Trainer::train_step(int64_t step) {
  const deck::Deck& deck = job_.deck;
  const auto start = std::chrono::steady_clock::now();
  const uint64_t seed = static_cast<uint64_t>(deck.get_int("train.seed"));
  model_->zero_grad();
  // This replica's slice of the global batch: sequences [dp_rank · G/dp, (dp_rank+1) · G/dp).
  const int64_t first_sequence = dp_rank_ * micro_batches_ * B_;
  // fp16: the loss scale S multiplies every gradient; the norm and the update divide it out.
  const double fp16_scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  const float loss_scale = static_cast<float>(fp16_scale / static_cast<double>(micro_batches_ * dp_size_));
  auto batch = [&](int micro, int32_t* inputs, int32_t* targets) {
    data::training_batch(*train_data_, seed, step, first_sequence + int64_t(micro) * B_, B_, T_,
                         inputs, targets);
  };
  // The last backward makes the gradients final: each finished block goes to the data-parallel
  // reducer at once. The embedding and final LayerNorm (event -1) wait until the schedule is
  // done and the tied wte's two copies are summed — a collective of the first and last stage
  // that must not start before the last stage has sent its last input gradient.
  auto on_final = [this](int layer) {
    if (layer >= 0) reducer_->on_final(layer);
  };
  StepResult result;
  inject_fault(deck, step + 1);
  if (step == 0 && world_rank() == deck.get_int("debug.hang_rank"))
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // the watchdog test: never answer
  reducer_->begin(model_->grads());
  double loss_sum = runner_->train_step(batch, loss_scale, on_final, &result.pipeline);
  tie_embedding_gradients();
  for (int64_t poisoned : deck.get_int_list("debug.nan_steps"))  // the NaN-skipping tests: a NaN
    if (poisoned == step + 1 && world_rank() == 0)               // in wte's gradient, before its reduction
      model_->grads()[0] = std::nanf("");
  reducer_->on_final(-1);
  result.exposed_comm_seconds = reducer_->finish();
  result.comm_seconds = reducer_->communication_seconds();

  data_collectives_->flat().all_reduce_scalars(&loss_sum, 1);
  result.loss = static_cast<float>(from_last_stage(loss_sum) / (micro_batches_ * dp_size_));
  const auto optimizer_start = std::chrono::steady_clock::now();
  const optim::GradNorm norm = global_grad_norm(static_cast<float>(deck.get_float("optim.grad_clip")), fp16_scale);
  result.grad_norm = norm.norm;
  result.lr = optim::learning_rate(step, steps_, deck.get_int("optim.warmup_steps"),
                                   static_cast<float>(deck.get_float("optim.lr")),
                                   static_cast<float>(deck.get_float("optim.min_lr")));
  // Every rank sees the same loss (from the last stage) and norm (summed over all groups), so
  // all skip together: a NaN or Inf anywhere leaves the parameters and moments as they were.
  // The flag is agreed on as well, so that a fault confined to one rank cannot split them.
  double bad = !std::isfinite(result.loss) || !std::isfinite(result.grad_norm);
  world_collectives_->flat().all_reduce_scalars(&bad, 1, comm::Op::Max);
  result.skipped = bad != 0.0;
  result.loss_scale = fp16_scale;
  if (loss_scaler_) loss_scaler_->update(result.skipped);  // an overflow reduces the scale
  if (!result.skipped) {
    optimizer_->step(ctx_, model_->params(), model_->grads(), result.lr, ++optimizer_updates_,
                     static_cast<float>(norm.clip_factor / fp16_scale));
    reducer_->all_gather_params(model_->params());  // ZeRO-1: every shard to every replica
  }
  result.optimizer_seconds = seconds_since(optimizer_start);
  result.seconds = seconds_since(start);
  return result;
}

// Every rank's timings and traffic of the step, gathered to rank 0, which records the maximum
// over all ranks and, with pipeline stages, the maximum over each stage's ranks.
void Trainer::record_rank_figures(const StepResult& r) {
  const comm::TrafficTotals traffic = comm::take_traffic();
  std::vector<double> mine = {r.pipeline.forward_seconds * 1e3, r.pipeline.backward_seconds * 1e3,
                              r.optimizer_seconds * 1e3,       r.exposed_comm_seconds * 1e3,
                              r.comm_seconds * 1e3,            r.pipeline.wait_seconds * 1e3,
                              r.pipeline.schedule_seconds * 1e3};
  for (double bytes : traffic.bytes) mine.push_back(bytes);
  const int level_begin = static_cast<int>(mine.size());
  // The data, tensor and pipeline groups' bytes per level since the last step.
  const comm::GroupCollectives* groups[] = {data_collectives_.get(), tensor_collectives_.get(),
                                            pipeline_collectives_.get()};
  for (int g = 0; g < 3; ++g) {
    const comm::LevelBytes now = groups[g]->traffic();
    for (int l = 0; l < 3; ++l) mine.push_back(now.sent[l] - last_group_bytes_[g].sent[l]);
    last_group_bytes_[g] = now;
  }
  const MemoryUsage memory = memory_usage();  // tracked bytes per category, current and peak
  for (int c = 0; c < static_cast<int>(MemoryCategory::Count); ++c) mine.push_back(double(memory.current[c]));
  for (int c = 0; c < static_cast<int>(MemoryCategory::Count); ++c) mine.push_back(double(memory.peak[c]));
  const int world = job_.grid.world_size(), n = static_cast<int>(mine.size());
  std::vector<double> all(world_rank() == 0 ? static_cast<size_t>(world) * n : 0);
  MPI_CHECK(MPI_Gather(mine.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  if (!metrics_) return;
  std::vector<std::string> names = {"forward_ms", "backward_ms", "optimizer_ms", "comm_exposed_ms",
                                    "comm_ms", "pipeline_wait_ms", "schedule_ms"};
  for (int g = 0; g < static_cast<int>(comm::Traffic::Count); ++g)
    names.push_back(std::string("bytes_") + comm::traffic_name(static_cast<comm::Traffic>(g)));
  for (const char* level : {"node", "rack", "cross_rack"}) names.push_back(std::string("data_bytes_") + level);
  for (const char* level : {"node", "rack", "cross_rack"}) names.push_back(std::string("tensor_bytes_") + level);
  for (const char* level : {"node", "rack", "cross_rack"}) names.push_back(std::string("pipeline_bytes_") + level);
  for (const char* kind : {"_bytes", "_peak_bytes"})
    for (int c = 0; c < static_cast<int>(MemoryCategory::Count); ++c)
      names.push_back(std::string("memory/") + memory_category_name(static_cast<MemoryCategory>(c)) + kind);
  std::vector<std::vector<double>> stage_max(pp_size_, std::vector<double>(n, 0.0));
  for (int rank = 0; rank < world; ++rank)
    for (int k = 0; k < n; ++k) {
      double& m = stage_max[job_.grid.coord_of(rank).pp][k];
      m = std::max(m, all[static_cast<size_t>(rank) * n + k]);
    }
  for (int k = 0; k < n; ++k) {
    double overall = 0.0;
    for (int stage = 0; stage < pp_size_; ++stage) {
      overall = std::max(overall, stage_max[stage][k]);
      if (pp_size_ > 1) metrics_->append("stage" + std::to_string(stage) + "/" + names[k], stage_max[stage][k]);
    }
    metrics_->append(names[k], overall);
    const int level_column = k - level_begin;  // nine: data, tensor, pipeline × 3 levels
    if (level_column >= 0 && level_column < 9) level_totals_[level_column % 3] += overall;
    if (k >= n - static_cast<int>(MemoryCategory::Count))  // peaks: the run's maximum
      memory_peaks_[k - (n - static_cast<int>(MemoryCategory::Count))] =
          std::max(memory_peaks_[k - (n - static_cast<int>(MemoryCategory::Count))], overall);
  }
  // A stage is idle for the part of the pipeline phase — as long as the slowest stage's
  // schedule — that it does not compute: waiting for inputs, and before and after its work.
  double phase = 0.0;
  for (int stage = 0; stage < pp_size_; ++stage) phase = std::max(phase, stage_max[stage][6]);
  for (int stage = 0; stage < pp_size_; ++stage) {
    const double busy = stage_max[stage][0] + stage_max[stage][1];
    bubble_busy_[stage] += busy;
    bubble_wait_[stage] += std::max(0.0, phase - busy);
    metrics_->append(pp_size_ > 1 ? "stage" + std::to_string(stage) + "/bubble_ms" : "bubble_ms",
                     std::max(0.0, phase - busy));
  }
}

void Trainer::record_step(int64_t step, const StepResult& r) {
  const double tokens = static_cast<double>(micro_batches_) * dp_size_ * B_ * T_;
  record_rank_figures(r);
  if (!metrics_) return;  // only rank 0 writes metrics and prints
  const double tokens_per_s = tokens / r.seconds;
  const double tflops = tokens_per_s * flops_per_token_ / 1e12;
  progress_->step_done(step + 1, tokens, r.seconds);
  const MemoryUsage memory = memory_usage();
  metrics_->append_int("step", step + 1);
  metrics_->append("loss", r.loss);
  metrics_->append("lr", r.lr);
  metrics_->append("grad_norm", r.grad_norm);
  metrics_->append("tokens_per_s", tokens_per_s);
  metrics_->append("tflops", tflops);
  metrics_->append("step_ms", r.seconds * 1e3);
  metrics_->append("memory_mb", memory.total_current() / 1048576.0);
  metrics_->append_int("skipped", r.skipped ? 1 : 0);
  if (loss_scaler_) metrics_->append("loss_scale", r.loss_scale);
  const int64_t interval = job_.deck.get_int("metrics.log_interval");
  if ((step + 1) % interval != 0 && step + 1 != steps_ && step != start_step_ && !r.skipped) return;
  char line[256];
  std::snprintf(line, sizeof line,
                "step %6lld/%lld | loss %.4f | lr %.2e | norm %7.3f | %8.0f tok/s | %6.3f TFLOP/s | %8.1f ms",
                static_cast<long long>(step + 1), static_cast<long long>(steps_), r.loss, r.lr,
                r.grad_norm, tokens_per_s, tflops, r.seconds * 1e3);
  std::string text = line;
  if (loss_scaler_) {
    std::snprintf(line, sizeof line, " | scale %g", r.loss_scale);
    text += line;
  }
  // MFU per rank (the job's FLOPs are shared by its ranks) against this rank's measured peak.
  const double eta = progress_->eta_seconds();
  std::snprintf(line, sizeof line, " | MFU %4.1f%% | ETA %s", 100.0 * tflops / job_.grid.world_size() / peak_tflops_,
                eta < 0 ? "-" : metrics::format_duration(eta).c_str());
  text += line;
  if (r.skipped) text += loss_scaler_ ? " | skipped (overflow)" : " | skipped (NaN/Inf)";
  print0(text);
  metrics_->flush();
}

// The end-of-run summary: the pipeline bubble measured (per stage, the share of the pipeline
// phase it spent not computing, over the steps after the first) beside its theory
// (p − 1)/(m + p − 1), which assumes equal stages.
void Trainer::print_summary() const {
  char traffic[256];
  std::snprintf(traffic, sizeof traffic,
                "traffic of the busiest rank per group, whole run: node %.1f MB, rack %.1f MB, "
                "cross-rack %.1f MB (data, tensor and pipeline groups; metrics.h5 has each per step)",
                level_totals_[0] / 1e6, level_totals_[1] / 1e6, level_totals_[2] / 1e6);
  if (job_.grid.world_size() > 1) print0(traffic);
  std::string peaks = "peak tracked memory of the busiest rank:";
  for (int c = 0; c < static_cast<int>(MemoryCategory::Count); ++c) {
    char part[64];
    std::snprintf(part, sizeof part, " %s %.1f MiB", memory_category_name(static_cast<MemoryCategory>(c)),
                  memory_peaks_[c] / 1048576.0);
    peaks += part;
  }
  print0(peaks);
  if (pp_size_ == 1) return;
  double mean = 0.0;
  std::string per_stage;
  for (int stage = 0; stage < pp_size_; ++stage) {
    const double fraction = bubble_wait_[stage] / std::max(1e-12, bubble_wait_[stage] + bubble_busy_[stage]);
    mean += fraction / pp_size_;
    char part[32];
    std::snprintf(part, sizeof part, "%s%.1f%%", stage ? ", " : "", 100.0 * fraction);
    per_stage += part;
  }
  const double theory = double(pp_size_ - 1) / double(micro_batches_ + pp_size_ - 1);
  char line[256];
  std::snprintf(line, sizeof line,
                "pipeline bubble: measured %.1f%% (mean of stages: %s), theoretical (p-1)/(m+p-1) = %.1f%% (p = %d, m = %lld)",
                100.0 * mean, per_stage.c_str(), 100.0 * theory, pp_size_, static_cast<long long>(micro_batches_));
  print0(line);
}

void Trainer::record_validation(int64_t step, double loss) {
  if (!metrics_) return;
  metrics_->append_int("val_step", step);
  metrics_->append("val_loss", loss);
  metrics_->flush();
  char line[128];
  std::snprintf(line, sizeof line, "step %6lld | val_loss %.6g", static_cast<long long>(step), loss);
  print0(line);
}

// ‖g‖² over the whole model: the tensors split over the tensor group add their parts over it,
// the replicated ones count once; with ZeRO-1 each replica holds the final gradients of its
// shard only, and the shards add up over the data group.
optim::GradNorm Trainer::global_grad_norm(float clip, double gradient_scale) {
  const comm::Shard shard = reducer_->shard();
  double squares[2] = {0.0, 0.0};  // split over the tensor group, replicated on it
  int64_t offset = 0;
  const model::Partition& part = model_->partition();
  for (const model::ParamSpec& spec : model::param_specs(model_->config(), part)) {
    const int64_t begin = std::max(offset, shard.begin), end = std::min(offset + spec.count(), shard.end);
    const bool tied_copy = spec.name == "wte" && part.last_stage && !part.first_stage;  // counted on the first stage
    if (begin < end && !tied_copy)
      squares[spec.sharded ? 0 : 1] +=
          kernels::sum_of_squares(ctx_, model_->grads() + begin, static_cast<size_t>(end - begin));
    offset += spec.count();
  }
  if (shard.count() != model_->num_parameters())
    data_collectives_->flat().all_reduce_scalars(squares, 2);
  if (job_.grid.tp_size() > 1)
    tensor_collectives_->flat().all_reduce_scalars(squares, 1);
  if (pp_size_ > 1)  // every stage holds different tensors
    pipeline_collectives_->flat().all_reduce_scalars(squares, 2);
  optim::GradNorm result;
  result.norm = static_cast<float>(std::sqrt(squares[0] + squares[1]) / gradient_scale);
  if (clip > 0.0f && result.norm > clip) result.clip_factor = clip / result.norm;
  return result;
}

std::string Trainer::memory_report(bool bytes) const {
  plan::MemoryInputs in = memory_inputs(job_.deck, job_.grid, model_->config(), &job_.topology);
  in.recompute = recompute_.mode;
  in.recompute_interval = recompute_.interval;
  int64_t total = 0;
  const plan::MemoryEstimate estimate = plan::estimate_busiest(in, &total);
  if (bytes)
    return "memory_estimate_bytes: " + describe_estimate(estimate, total, true) +
           " block_activations=" + std::to_string(plan::block_activation_bytes(in));
  std::string recompute = recompute_.mode + (recompute_.mode == "every_k" ? " K = " + std::to_string(recompute_.interval) : "");
  return "memory per rank by the model (busiest rank per category): " + describe_estimate(estimate, total, false) +
         "; recompute " + recompute + " (" + recompute_.why + ")";
}

void Trainer::check_replicas_agree() {
  uint64_t mine = digest(model_->params(), model_->num_parameters());
  std::vector<uint64_t> all(dp_size_);
  MPI_CHECK(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, groups_.data()));
  for (int r = 1; r < dp_size_; ++r)
    if (all[r] != all[0] && dp_rank_ == 0)
      fatal_one("data-parallel replica " + std::to_string(r) + " holds different parameters "
                "than replica 0 after training: the gradient reduction is not identical on "
                "every replica");
  MPI_CHECK(MPI_Barrier(groups_.data()));
}

void Trainer::tie_embedding_gradients() {
  if (pp_size_ == 1 || !embedding_collectives_) return;
  const model::ParamViews grads = model::param_views(model_->config(), model_->grads(), model_->partition());
  const size_t count = static_cast<size_t>(model::param_specs(model_->config(), model_->partition())[0].count());
  embedding_collectives_->all_reduce(grads.wte, count);
}

double Trainer::from_last_stage(double value) {
  pipeline_collectives_->flat().broadcast_scalars(&value, 1, pp_size_ - 1);
  return value;
}

double Trainer::evaluate() {
  const ValidationShare share = validation_share(val_windows_, dp_rank_, dp_size_);
  std::vector<int> used(share.batches(B_));
  auto batch = [&](int k, int32_t* inputs, int32_t* targets) {
    used[k] = share.fill(*val_data_, k, B_, T_, inputs, targets);
  };
  double sum = 0.0;
  auto consume = [&](int k, const float* losses) {
    for (int i = 0; i < used[k] * T_; ++i) sum += losses[i];
  };
  runner_->forward_only(share.batches(B_), batch, consume);
  data_collectives_->flat().all_reduce_scalars(&sum, 1);
  return from_last_stage(sum) / static_cast<double>(val_windows_ * T_);
}

// Collective: rank 0's failure to write a file of the run directory (a full disk, an I/O
// error), agreed by every rank and ended as one "error:" line with exit status 1 — not
// fatal_one's abort, whose launcher noise would bury the one line that says what to do.
void Trainer::end_if_root_failed(std::string problem, const std::string& hint) const {
  broadcast_string(problem, 0, MPI_COMM_WORLD);
  if (!problem.empty()) throw RunFailure(problem + "; " + hint, kExitFault);
}

int Trainer::run(const std::string& run_dir) {
  const deck::Deck& deck = job_.deck;
  checkpointer_ = std::make_unique<ckpt::Checkpointer>(checkpoint_settings(deck), MPI_COMM_WORLD);
  checkpointer_->begin_lineage(lineage_);
  std::string problem;
  if (world_rank() == 0) {
    try {
      const auto attributes = deck_attributes(deck, run_id_, lineage_);
      metrics_ = start_step_ > 0 ? std::make_unique<metrics::MetricsFile>(run_dir + "/metrics.h5", attributes, start_step_)
                                 : std::make_unique<metrics::MetricsFile>(run_dir + "/metrics.h5", attributes);
      for (const std::string& note : metrics_->recovery_notes()) warn0(note);
    } catch (const std::runtime_error& e) {
      problem = e.what();
    }
  }
  end_if_root_failed(problem, "free space in " + run_dir + " or choose another train.run_dir");
  const int64_t eval_interval = deck.get_int("train.eval_interval");
  print0("model: " + std::to_string(model::num_parameters(model_->config())) + " parameters (" +
         std::to_string(model_->num_parameters()) + " on this rank); " +
         std::to_string(micro_batches_) + " micro-batches of " + std::to_string(B_) + " x " +
         std::to_string(T_) + " tokens per step; train " + std::to_string(train_data_->size()) +
         " tokens, validation " + std::to_string(val_windows_ * T_) + " tokens");
  if (metrics_) {
    peak_tflops_ = metrics::measure_gemm_peak_tflops(model_->precision());
    progress_ = std::make_unique<metrics::RunProgress>(steps_, start_step_);
    char peak[160];
    std::snprintf(peak, sizeof peak, "MFU against the measured %s GEMM peak of rank 0: %.1f GFLOP/s (1024^3)",
                  kernels::precision_name(model_->precision()), peak_tflops_ * 1e3);
    print0(peak);
  }
  // Evaluation and checkpoints, timed for the end-of-run summary.
  auto validate = [&](int64_t step) {
    const auto start = SteadyClock::now();
    record_validation(step, evaluate());
    if (progress_) progress_->add_evaluation(seconds_since(start));
  };
  auto checkpoint = [&](int64_t completed) {
    const auto start = SteadyClock::now();
    const bool stop = checkpoint_boundary(completed);
    if (progress_) progress_->add_checkpoint(seconds_since(start));
    return stop;
  };
  if (start_step_ == 0) validate(0);
  for (int64_t step = start_step_; step < steps_; ++step) {
    const StepResult result = train_step(step);
    record_step(step, result);
    if (result.skipped) count_bad_step(step, result);
    else bad_in_a_row_ = 0;
    if (step == start_step_) {  // the first step warms up (primitive creation, first touches): not counted
      std::fill(bubble_busy_.begin(), bubble_busy_.end(), 0.0);
      std::fill(bubble_wait_.begin(), bubble_wait_.end(), 0.0);
    }
    const bool last = step + 1 == steps_;
    if (last || (eval_interval > 0 && (step + 1) % eval_interval == 0))
      validate(step + 1);
    if (checkpoint(step + 1)) return kExitStopped;
  }
  if (deck.get_bool("checkpoint.at_end") && last_full_step_ != steps_) {
    if (metrics_) metrics_->sync();
    const auto start = SteadyClock::now();
    checkpointer_->save("full", state_view(), metadata(steps_));
    last_full_step_ = steps_;
    if (progress_) progress_->add_checkpoint(seconds_since(start));
  }
  const auto wait_start = SteadyClock::now();
  checkpointer_->wait();
  if (progress_) progress_->add_checkpoint(seconds_since(wait_start));
  record_checkpoints();
  check_replicas_agree();
  const std::vector<float> whole = gather_whole_model(*model_, job_.deck, job_.grid);
  if (world_rank() == 0) {
    try {
      metrics_->close();  // metrics.h5 alone holds the whole history
      model::write_llmc_model(run_dir + "/model.bin", model_->config(), whole.data());
    } catch (const std::runtime_error& e) {
      problem = e.what();
    }
  }
  // Also the barrier after which the files exist when any rank returns.
  end_if_root_failed(problem, "the checkpoints written are intact; free space in " + run_dir + " and resume with "
                     "--checkpoint.resume=auto");
  print_summary();
  if (progress_) print0(progress_->summary());
  print0("wrote " + run_dir + "/model.bin (llm.c format) and " + run_dir + "/metrics.h5");
  check_final_checkpoint();
  return kExitOk;
}

}  // namespace trident
