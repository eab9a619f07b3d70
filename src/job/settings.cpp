// The deck's keys, read once into the typed settings of the run.
#include "job/settings.hpp"

#include "comm/nccl/nccl.hpp"
#include "core/error.hpp"
#include "deck/validate.hpp"
#include "topo/topology.hpp"

namespace trident {
namespace {

TrainSettings train_settings(const deck::Deck& deck) {
  TrainSettings s;
  s.steps = deck.get_int("train.steps");
  s.global_batch = deck.get_int("train.global_batch");
  s.micro_batch = static_cast<int>(deck.get_int("train.micro_batch"));
  s.micro_batches = deck::micro_batches_per_step(deck);
  s.seq_len = static_cast<int>(deck.get_int("model.seq_len"));
  s.seed = static_cast<uint64_t>(deck.get_int("train.seed"));
  s.eval_interval = deck.get_int("train.eval_interval");
  s.eval_tokens = deck.get_int("train.eval_tokens");
  s.run_dir = deck.get_string("train.run_dir");
  return s;
}

StepSettings step_settings(const deck::Deck& deck) {
  StepSettings s;
  s.lr = static_cast<float>(deck.get_float("optim.lr"));
  s.min_lr = static_cast<float>(deck.get_float("optim.min_lr"));
  s.warmup_steps = deck.get_int("optim.warmup_steps");
  s.grad_clip = static_cast<float>(deck.get_float("optim.grad_clip"));
  s.max_bad_steps = deck.get_int("optim.max_bad_steps");
  s.zero = static_cast<int>(deck.get_int("optim.zero"));
  s.schedule = deck.get_string("parallel.schedule");
  s.adamw.beta1 = static_cast<float>(deck.get_float("optim.beta1"));
  s.adamw.beta2 = static_cast<float>(deck.get_float("optim.beta2"));
  s.adamw.eps = static_cast<float>(deck.get_float("optim.eps"));
  s.adamw.weight_decay = static_cast<float>(deck.get_float("optim.weight_decay"));
  return s;
}

DebugSettings debug_settings(const deck::Deck& deck) {
  DebugSettings s;
  s.fail_rank = static_cast<int>(deck.get_int("debug.fail_rank"));
  s.fail_cite = deck.cite("debug.fail_rank");
  s.fail_step = deck.get_int("debug.fail_step");
  s.fail_mode = deck.get_string("debug.fail_mode");
  s.hang_rank = static_cast<int>(deck.get_int("debug.hang_rank"));
  s.nan_steps = deck.get_int_list("debug.nan_steps");
  s.slowdown = deck::parse_slowdown(deck.get_string("debug.slowdown"));  // validated by validate_layout
  return s;
}

ModelSettings model_settings(const deck::Deck& deck) {
  ModelSettings s;
  s.layers = static_cast<int>(deck.get_int("model.layers"));
  s.heads = static_cast<int>(deck.get_int("model.heads"));
  s.hidden = static_cast<int>(deck.get_int("model.hidden"));
  s.vocab = static_cast<int>(deck.get_int("model.vocab"));
  s.seq_len = static_cast<int>(deck.get_int("model.seq_len"));
  s.arch = deck.get_string("model.arch") == "llama" ? model::Arch::llama : model::Arch::gpt2;
  if (s.arch == model::Arch::llama) {
    s.kv_heads = deck.get_int("model.kv_heads") > 0 ? static_cast<int>(deck.get_int("model.kv_heads")) : s.heads;
    s.ffn_hidden = deck.get_int("model.ffn_hidden") > 0
                       ? static_cast<int>(deck.get_int("model.ffn_hidden"))
                       : model::llama_ffn_hidden(s.hidden, deck.get_float("model.ffn_multiplier"),
                                                 static_cast<int>(deck.get_int("model.ffn_multiple_of")));
    s.rope_theta = static_cast<float>(deck.get_float("model.rope_theta"));
    s.norm_eps = static_cast<float>(deck.get_float("model.norm_eps"));
    if (deck.get_string("model.rope_scaling") == "llama3") {
      s.rope_factor = static_cast<float>(deck.get_float("model.rope_factor"));
      s.rope_low_freq_factor = static_cast<float>(deck.get_float("model.rope_low_freq_factor"));
      s.rope_high_freq_factor = static_cast<float>(deck.get_float("model.rope_high_freq_factor"));
      s.rope_original_context = static_cast<float>(deck.get_float("model.rope_original_context"));
    }
  }
  s.tie_embeddings = deck.get_string("model.tie_embeddings") == "true" ||
                     (deck.get_string("model.tie_embeddings") == "auto" && s.arch == model::Arch::gpt2);
  s.init = deck.get_string("model.init");
  s.flash_attention = deck.get_string("model.attention") == "flash";
  s.classifier_chunk = static_cast<int>(deck.get_int("model.classifier_chunk"));
  return s;
}

PrecisionSettings precision_settings(const deck::Deck& deck) {
  PrecisionSettings s;
  s.name = deck.get_string("optim.precision");
  s.precision = precision_from_name(s.name);
  optim::LossScaleSettings& scale = s.loss_scale;
  const double fixed = deck.get_float("optim.loss_scale");
  if (fixed > 0) {  // a fixed scale: no growth, no backoff
    scale.initial_scale = scale.min_scale = fixed;
    scale.growth = scale.backoff = 1;
    return s;
  }
  scale.initial_scale = deck.get_float("optim.initial_loss_scale");
  scale.min_scale = deck.get_float("optim.min_loss_scale");
  scale.window = deck.get_int("optim.loss_scale_window");
  scale.growth = deck.get_float("optim.loss_scale_growth");
  scale.backoff = deck.get_float("optim.loss_scale_backoff");
  scale.hysteresis = deck.get_int("optim.hysteresis");
  return s;
}

KernelSettings kernel_settings(const deck::Deck& deck) {
  KernelSettings s;
  s.device = deck.get_string("kernels.device");
  s.guard_memory_gb = deck.get_float("kernels.guard_memory_gb");
  s.low16_gemm = deck.get_string("kernels.low16_gemm");
  s.arithmetic = deck.get_string("kernels.arithmetic") == "portable" ? kernels::Arithmetic::portable
                                                                    : kernels::Arithmetic::native;
  s.graphs = deck.get_bool("cuda.graphs");
  s.attention_f32 = deck.get_string("cuda.attention_products") == "f32";
  s.gelu_epilogues = deck.get_string("cuda.gelu_epilogues") == "auto";
  s.library_attention = deck.get_string("cuda.attention_kernel") == "auto";
  return s;
}

// The collectives' settings from [comm] and the link model from [topology]; the device staging
// is the job's to attach (load_job).
comm::CollectiveSettings collective_settings(const deck::Deck& deck) {
  comm::CollectiveSettings settings;
  settings.algo = deck.get_string("comm.algo");
  settings.node_algo = comm::parse_algo(deck.get_string("comm.node_algo"));
  settings.rack_algo = comm::parse_algo(deck.get_string("comm.rack_algo"));
  settings.cross_rack_algo = comm::parse_algo(deck.get_string("comm.cross_rack_algo"));
  settings.timeout_s = deck.get_float("comm.timeout_s");
  try {
    settings.backend = comm::resolve_backend(deck.get_string("comm.backend"), deck.get_string("kernels.device"),
                                             comm::nccl_built_in());
  } catch (const std::invalid_argument& e) {
    fatal_all(deck.cite("comm.backend") + ", but " + e.what());
  }
  for (int level = 0; level < 3; ++level) {
    const std::string key = std::string("comm.nccl_") + topo::level_key(static_cast<topo::Level>(level));
    settings.nccl.level[level].algo = deck.get_string(key + "_algo");
    settings.nccl.level[level].proto = deck.get_string(key + "_proto");
    settings.nccl.level[level].collnet = deck.get_bool(key + "_collnet");
  }
  for (int level = 0; level < 3; ++level) {
    const std::string key = std::string("topology.link.") + topo::level_key(static_cast<topo::Level>(level));
    try {
      comm::parse_link(deck.get_string(key), settings.links, level);
    } catch (const std::invalid_argument& e) {
      fatal_all(deck.origin(key).describe() + ": " + key + " = " + e.what());
    }
  }
  return settings;
}

CommSettings comm_settings(const deck::Deck& deck) {
  CommSettings s;
  s.collectives = collective_settings(deck);
  s.requested_backend = deck.get_string("comm.backend");
  s.heartbeat_s = deck.get_float("comm.heartbeat_s");
  s.heartbeat_timeout_s = deck.get_float("comm.heartbeat_timeout_s");
  return s;
}

topo::TopologySettings topology_settings(const deck::Deck& deck) {
  topo::TopologySettings settings;
  settings.ranks_per_node = static_cast<int>(deck.get_int("topology.ranks_per_node"));
  settings.nodes_per_rack = static_cast<int>(deck.get_int("topology.nodes_per_rack"));
  settings.file = deck.get_string("topology.file");
  settings.file_cite = deck.cite("topology.file");
  return settings;
}

// checkpoint.dir, or train.run_dir/checkpoints.
std::string checkpoint_dir(const deck::Deck& deck) {
  const std::string given = deck.get_string("checkpoint.dir");
  return given.empty() ? deck.get_string("train.run_dir") + "/checkpoints" : given;
}

// The checkpoint.* keys as the checkpointer's settings.
ckpt::Settings checkpoint_settings(const deck::Deck& deck) {
  ckpt::Settings settings;
  settings.dir = checkpoint_dir(deck);
  for (auto [key, interval] : {std::pair{"checkpoint.fast_interval", &settings.fast},
                               std::pair{"checkpoint.full_interval", &settings.full}}) {
    const deck::Interval given = deck.get_interval(key);
    if (given.unit == deck::Interval::Unit::Steps) interval->steps = static_cast<int64_t>(given.count);
    if (given.unit == deck::Interval::Unit::Seconds) interval->seconds = given.count;
  }
  settings.keep_fast = static_cast<int>(deck.get_int("checkpoint.keep_fast"));
  settings.keep_full = static_cast<int>(deck.get_int("checkpoint.keep_full"));
  settings.async = deck.get_bool("checkpoint.async");
  settings.timeout_s = deck.get_float("checkpoint.timeout_s");
  settings.check_space = !deck.get_bool("debug.skip_space_check");
  return settings;
}

}  // namespace

kernels::Precision precision_from_name(const std::string& name) {
  return name == "bf16" ? kernels::Precision::bf16 : name == "fp16" ? kernels::Precision::fp16
                                                                    : kernels::Precision::fp32;
}

double DebugSettings::slowdown_of(int world_rank) const {
  for (const auto& [rank, factor] : slowdown)
    if (rank == world_rank) return factor;
  return 1.0;
}

bool chooses_layout(const deck::Deck& deck) { return deck.get_string("parallel.layout") == "auto"; }

RunSettings read_settings(const deck::Deck& deck) {
  RunSettings s;
  s.model = model_settings(deck);
  s.parallel = {static_cast<int>(deck.get_int("parallel.tensor")), static_cast<int>(deck.get_int("parallel.pipeline")),
                static_cast<int>(deck.get_int("parallel.data")), deck.get_int_list("parallel.stage_layers"),
                static_cast<int>(deck.get_int("parallel.virtual_stages")), deck.get_bool("parallel.sequence_parallel"),
                static_cast<int>(deck.get_int("parallel.context")), deck.get_bool("parallel.tp_comm_overlap"),
                deck.get_string("parallel.hardware")};
  s.precision = precision_settings(deck);
  s.memory = {deck.get_string("memory.recompute"), static_cast<int>(deck.get_int("memory.recompute_interval")),
              deck.get_float("memory.budget_gb")};
  s.kernels = kernel_settings(deck);
  s.comm = comm_settings(deck);
  s.topology = topology_settings(deck);
  s.lock = {deck.get_float("train.lock_wait_s"), deck.get_float("train.lock_heartbeat_s"),
            deck.get_float("train.lock_stale_s")};
  s.train = train_settings(deck);
  s.step = step_settings(deck);
  s.reduce = {deck.get_float("comm.bucket_mb"), deck.get_bool("comm.overlap"),
              deck.get_string("comm.grad_dtype") == "bf16" ? DType::bf16 : DType::f32};
  s.data = {deck.get_string("data.train"), deck.get_string("data.val"), deck.get_string("data.format"),
            static_cast<int>(deck.get_int("model.vocab"))};
  s.debug = debug_settings(deck);
  s.balance = {deck.get_int("balance.interval"), deck.get_float("balance.threshold"), deck.get_bool("balance.pipeline"),
               deck.get_bool("balance.replicas"),  deck.get_float("balance.margin"),       deck.get_int("balance.cooldown"),
               deck.get_string("balance.micro_batches")};
  s.checkpoint = checkpoint_settings(deck);
  s.checkpoint_resume = deck.get_string("checkpoint.resume");
  s.checkpoint_dir_given = deck.get_string("checkpoint.dir");
  s.checkpoint_at_end = deck.get_bool("checkpoint.at_end");
  s.log_interval = deck.get_int("metrics.log_interval");
  return s;
}

}  // namespace trident
