// The deck's keys, read once into the typed settings of the run.
#include "job/settings.hpp"

#include "deck/validate.hpp"

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
  s.zero = deck.get_int("optim.zero") == 1;
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

}  // namespace

double DebugSettings::slowdown_of(int world_rank) const {
  for (const auto& [rank, factor] : slowdown)
    if (rank == world_rank) return factor;
  return 1.0;
}

std::string checkpoint_dir(const deck::Deck& deck) {
  const std::string given = deck.get_string("checkpoint.dir");
  return given.empty() ? deck.get_string("train.run_dir") + "/checkpoints" : given;
}

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

RunSettings read_settings(const deck::Deck& deck) {
  RunSettings s;
  s.train = train_settings(deck);
  s.step = step_settings(deck);
  s.reduce = {deck.get_float("comm.bucket_mb"), deck.get_bool("comm.overlap")};
  s.data = {deck.get_string("data.train"), deck.get_string("data.val"), deck.get_string("data.format"),
            static_cast<int>(deck.get_int("model.vocab"))};
  s.debug = debug_settings(deck);
  s.balance = {deck.get_int("balance.interval"), deck.get_float("balance.threshold"), deck.get_bool("balance.pipeline"),
               deck.get_bool("balance.replicas"),  deck.get_float("balance.margin"),       deck.get_int("balance.cooldown"),
               deck.get_string("balance.micro_batches")};
  s.checkpoint = checkpoint_settings(deck);
  s.checkpoint_resume = deck.get_string("checkpoint.resume");
  s.checkpoint_at_end = deck.get_bool("checkpoint.at_end");
  s.log_interval = deck.get_int("metrics.log_interval");
  return s;
}

}  // namespace trident
