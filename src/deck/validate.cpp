// Cross-key validation of a deck against the job.
#include "deck/validate.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "core/error.hpp"
#include "core/log.hpp"

namespace trident::deck {
namespace {

void check_world(const Deck& deck, int world_size) {
  const int64_t tp = deck.get_int("parallel.tensor");
  const int64_t pp = deck.get_int("parallel.pipeline");
  const int64_t dp = deck.get_int("parallel.data");
  const int64_t cp = deck.get_int("parallel.context");
  const int64_t product = tp * cp * pp * dp;
  if (product == world_size) return;
  std::string hint = "set them so that their product is " + std::to_string(world_size);
  if (world_size % (tp * cp * pp) == 0)
    hint += ", e.g. --parallel.data=" + std::to_string(world_size / (tp * cp * pp));
  const bool context = cp > 1;
  fatal_all(deck.file_name() + ": parallel.tensor x " + (context ? "parallel.context x " : "") +
            "parallel.pipeline x parallel.data = " + std::to_string(tp) + " x " +
            (context ? std::to_string(cp) + " x " : "") + std::to_string(pp) + " x " + std::to_string(dp) + " = " +
            std::to_string(product) + ", but the job has " + count_of(world_size, "rank") + " (" +
            deck.cite("parallel.tensor") + ", " +
            (context ? deck.cite("parallel.context") + ", " : "") + deck.cite("parallel.pipeline") + ", " +
            deck.cite("parallel.data") + "); " + hint + ", or launch " + count_of(product, "rank"));
}

void check_model(const Deck& deck) {
  const int64_t tp = deck.get_int("parallel.tensor");
  const int64_t pp = deck.get_int("parallel.pipeline");
  const int64_t heads = deck.get_int("model.heads");
  const int64_t hidden = deck.get_int("model.hidden");
  const int64_t layers = deck.get_int("model.layers");
  if (heads % tp != 0)
    fatal_all(deck.file_name() + ": model.heads must be divisible by parallel.tensor (" +
              deck.cite("model.heads") + ", " + deck.cite("parallel.tensor") +
              "): each tensor rank holds whole heads; use a tensor size that divides " +
              std::to_string(heads));
  if (hidden % heads != 0)
    fatal_all(deck.file_name() + ": model.hidden must be divisible by model.heads (" +
              deck.cite("model.hidden") + ", " + deck.cite("model.heads") +
              "); choose heads dividing " + std::to_string(hidden));
  if (layers < pp)
    fatal_all(deck.file_name() + ": model.layers must be at least parallel.pipeline (" +
              deck.cite("model.layers") + ", " + deck.cite("parallel.pipeline") +
              "): every pipeline stage needs a block; use at most " + std::to_string(layers) +
              " stages");
}

// The Llama family's keys (model.arch = llama): only for llama, and shapes it can split.
void check_llama(const Deck& deck) {
  const std::string here = deck.file_name() + ": ";
  if (deck.get_string("model.arch") != "llama") {
    for (const char* key : {"model.kv_heads", "model.ffn_hidden"})
      if (deck.get_int(key) != 0)
        fatal_all(here + deck.cite(key) + " is a llama key, but " + deck.cite("model.arch") +
                  "; leave it at 0, or set model.arch = llama");
    if (deck.get_string("model.rope_scaling") != "none")
      fatal_all(here + deck.cite("model.rope_scaling") + " is a llama key, but " + deck.cite("model.arch") +
                " (learned positions); leave it at none, or set model.arch = llama");
    if (deck.get_string("model.tie_embeddings") == "false")
      fatal_all(here + deck.cite("model.tie_embeddings") + ", but GPT-2's head is its token embedding (" +
                deck.cite("model.arch") + "); use auto or true");
    return;
  }
  const int64_t heads = deck.get_int("model.heads"), hidden = deck.get_int("model.hidden");
  const int64_t kv = deck.get_int("model.kv_heads") > 0 ? deck.get_int("model.kv_heads") : heads;
  const int64_t tp = deck.get_int("parallel.tensor");
  if (heads % kv != 0)
    fatal_all(here + "model.heads must be a multiple of model.kv_heads (" + deck.cite("model.heads") + ", " +
              deck.cite("model.kv_heads") + "): each key/value head serves a group of query heads");
  if (kv % tp != 0 && tp % kv != 0)
    fatal_all(here + "model.kv_heads and parallel.tensor must divide one another (" + deck.cite("model.kv_heads") +
              ", " + deck.cite("parallel.tensor") + "): each tensor rank holds whole key/value heads, or with fewer "
              "heads than ranks one head on tensor / kv_heads ranks; use a tensor size that divides " +
              std::to_string(kv) + " or a multiple of it");
  if (hidden % heads == 0 && (hidden / heads) % 2 != 0)
    fatal_all(here + "model.hidden / model.heads must be even for llama (" + deck.cite("model.hidden") + ", " +
              deck.cite("model.heads") + "): rotary positions rotate pairs of a head's values");
  const int64_t ffn = deck.get_int("model.ffn_hidden");
  if (ffn > 0 && ffn % tp != 0)
    fatal_all(here + "model.ffn_hidden must be divisible by parallel.tensor (" + deck.cite("model.ffn_hidden") + ", " +
              deck.cite("parallel.tensor") + ")");
  if (deck.get_string("model.rope_scaling") == "llama3" &&
      deck.get_float("model.rope_low_freq_factor") >= deck.get_float("model.rope_high_freq_factor"))
    fatal_all(here + "model.rope_low_freq_factor must be below model.rope_high_freq_factor (" +
              deck.cite("model.rope_low_freq_factor") + ", " + deck.cite("model.rope_high_freq_factor") +
              "): the frequencies between the two bounds are interpolated (Llama 3.1: 1 and 4)");
}

// One entry per pipeline stage, or with parallel.virtual_stages = v one per virtual stage
// (pipeline·v, in the model's order: stage s's chunks are entries s, s + pipeline, ...).
void check_stage_layers(const Deck& deck) {
  const auto stages = deck.get_int_list("parallel.stage_layers");
  if (stages.empty()) return;
  const int64_t pp = deck.get_int("parallel.pipeline"), v = deck.get_int("parallel.virtual_stages");
  const int64_t layers = deck.get_int("model.layers");
  if (static_cast<int64_t>(stages.size()) != pp * v)
    fatal_all(deck.file_name() + ": parallel.stage_layers has " + std::to_string(stages.size()) + " entries but there are " +
              std::to_string(pp * v) + (v > 1 ? " virtual stages (pipeline x virtual_stages)" : " pipeline stages") + " (" +
              deck.cite("parallel.stage_layers") + ", " + deck.cite("parallel.pipeline") +
              (v > 1 ? ", " + deck.cite("parallel.virtual_stages") : std::string()) + "); give one block count per " +
              (v > 1 ? "virtual stage" : "stage") + ", or leave it empty for an even split");
  const int64_t sum = std::accumulate(stages.begin(), stages.end(), int64_t{0});
  if (sum != layers)
    fatal_all(deck.file_name() + ": parallel.stage_layers sums to " + std::to_string(sum) +
              " but the model has " + std::to_string(layers) + " blocks (" +
              deck.cite("parallel.stage_layers") + ", " + deck.cite("model.layers") +
              "); make the entries sum to model.layers");
}

void check_batch(const Deck& deck) {
  const int64_t global = deck.get_int("train.global_batch");
  const int64_t micro = deck.get_int("train.micro_batch");
  const int64_t dp = deck.get_int("parallel.data");
  if (global % (micro * dp) != 0)
    fatal_all(deck.file_name() + ": train.global_batch must be divisible by train.micro_batch x "
              "parallel.data = " + std::to_string(micro * dp) + " (" +
              deck.cite("train.global_batch") + ", " + deck.cite("train.micro_batch") + ", " +
              deck.cite("parallel.data") + "); use a multiple of " + std::to_string(micro * dp));
  const int64_t pp = deck.get_int("parallel.pipeline");
  const int64_t micro_batches = global / (micro * dp);
  const std::string schedule = deck.get_string("parallel.schedule");
  if (schedule == "gpipe" || micro_batches >= pp) return;
  // GPipe takes no virtual stages (check_virtual_stages): the interleaved schedule's way out is both keys.
  const bool interleaved = deck.get_int("parallel.virtual_stages") > 1;
  const std::string name = interleaved ? "interleaved 1F1B" : schedule == "1f1b" ? "1F1B" : "ZB-H1";
  fatal_all(deck.file_name() + ": the " + name + " schedule needs at least as many micro-batches per "
            "step as pipeline stages, but global_batch / (micro_batch x data) = " +
            std::to_string(micro_batches) + " < " + std::to_string(pp) + " (" +
            deck.cite("train.global_batch") + ", " + deck.cite("parallel.pipeline") +
            (interleaved ? ", " + deck.cite("parallel.virtual_stages") : std::string()) +
            "); raise train.global_batch to at least " + std::to_string(pp * micro * dp) + " or use " +
            (interleaved ? "parallel.virtual_stages = 1 and " : "") + "parallel.schedule = gpipe");
}

// parallel.virtual_stages > 1: Megatron-LM's interleaved 1F1B, with its constraints: a block or
// more per chunk and micro-batches in groups of the stages (the balance features keep both).
void check_virtual_stages(const Deck& deck) {
  const int64_t v = deck.get_int("parallel.virtual_stages");
  if (v == 1) return;
  const int64_t pp = deck.get_int("parallel.pipeline"), layers = deck.get_int("model.layers");
  const std::string here = deck.file_name() + ": " + deck.cite("parallel.virtual_stages") +
                           " is the interleaved 1F1B schedule";
  auto refuse = [&](const std::string& what) { fatal_all(here + ", " + what); };
  if (deck.get_string("parallel.schedule") != "1f1b")
    refuse("and parallel.schedule is " + deck.get_string("parallel.schedule") + " (" + deck.cite("parallel.schedule") +
           "); use parallel.schedule = 1f1b or parallel.virtual_stages = 1");
  if (pp < 2)
    refuse("of pipeline stages, and parallel.pipeline is 1 (" + deck.cite("parallel.pipeline") +
           "); use parallel.pipeline >= 2 or parallel.virtual_stages = 1");
  if (layers < pp * v)
    refuse("of a block or more per chunk: model.layers " + std::to_string(layers) + " must be at least parallel.pipeline "
           "x parallel.virtual_stages = " + std::to_string(pp * v) + " (" + deck.cite("model.layers") + ")");
  if (micro_batches_per_step(deck) % pp != 0)
    refuse("over groups of parallel.pipeline micro-batches: global_batch / (micro_batch x data) = " +
           std::to_string(micro_batches_per_step(deck)) + " must be a multiple of " + std::to_string(pp) + " (" +
           deck.cite("train.global_batch") + "); use a multiple of " + std::to_string(pp) + " micro-batches");
}

// ZB-H1's weight-gradient pass reads each block's GEMM inputs after the input-gradient pass:
// recompute every K blocks keeps only segment inputs, and recomputes the rest for the backward.
void check_schedule(const Deck& deck) {
  check_virtual_stages(deck);
  const std::string recompute = deck.get_string("memory.recompute");
  if (deck.get_string("parallel.schedule") == "zb-h1" && (recompute == "full" || recompute == "every_k"))
    fatal_all(deck.file_name() + ": parallel.schedule = zb-h1 keeps each block's GEMM inputs until its weight "
              "gradients, and memory.recompute = " + recompute + " keeps only some blocks' inputs (" +
              deck.cite("parallel.schedule") + ", " + deck.cite("memory.recompute") +
              "); use memory.recompute = none, selective or auto, or parallel.schedule = 1f1b");
  const int64_t zero = deck.get_int("optim.zero");
  if (deck.get_string("parallel.schedule") == "zb-h1" && zero >= 2)
    fatal_all(deck.file_name() + ": parallel.schedule = zb-h1 defers each block's weight gradients past other "
              "blocks' backward, and optim.zero = " + std::to_string(zero) + " reuses a block's gradient buffer "
              "as soon as its backward is done (" + deck.cite("parallel.schedule") + ", " + deck.cite("optim.zero") +
              "); use optim.zero = 1, or parallel.schedule = 1f1b or gpipe");
}

// Sequence parallelism splits the B·T token rows of a micro-batch evenly over the tensor group,
// and keeps no (B·T, C) output gradient for a deferred weight gradient.
void check_sequence_parallel(const Deck& deck) {
  if (deck.get_bool("parallel.tp_comm_overlap") && !deck.get_bool("parallel.sequence_parallel"))
    fatal_all(deck.file_name() + ": " + deck.cite("parallel.tp_comm_overlap") + " overlaps sequence parallelism's "
              "all-gathers and reduce-scatters with the GEMMs, and " + deck.cite("parallel.sequence_parallel") +
              "; set parallel.sequence_parallel = true too");
  if (!deck.get_bool("parallel.sequence_parallel")) return;
  const int64_t t = deck.get_int("parallel.tensor");
  const int64_t rows = deck.get_int("train.micro_batch") * deck.get_int("model.seq_len") /
                       deck.get_int("parallel.context");  // this rank's rows of each sequence
  const std::string here = deck.file_name() + ": " + deck.cite("parallel.sequence_parallel");
  if (rows % t != 0)
    fatal_all(here + " splits a micro-batch's micro_batch x seq_len / context = " + std::to_string(rows) + " token rows over "
              "parallel.tensor = " + std::to_string(t) + " ranks, which does not divide them (" +
              deck.cite("train.micro_batch") + ", " + deck.cite("model.seq_len") + "); use a seq_len divisible by " +
              std::to_string(t));
  if (deck.get_string("parallel.schedule") == "zb-h1")
    fatal_all(here + " keeps each rank's rows of the blocks' output gradients only, and parallel.schedule = zb-h1 "
              "defers weight gradients that need all of them (" + deck.cite("parallel.schedule") +
              "); use parallel.schedule = 1f1b or parallel.sequence_parallel = false");
}

// Context parallelism: 2·context equal chunks of each sequence, attention through the ring of
// flash-attention blocks, and replicas that each keep their sequences (the balance features move
// micro-batches between data ranks, which are replicas × context ranks here).
void check_context(const Deck& deck) {
  const int64_t c = deck.get_int("parallel.context");
  if (c == 1) return;
  const int64_t T = deck.get_int("model.seq_len");
  const std::string here = deck.file_name() + ": " + deck.cite("parallel.context") + " splits each sequence into " +
                           std::to_string(2 * c) + " chunks";
  if (T % (2 * c) != 0)
    fatal_all(here + ", and model.seq_len = " + std::to_string(T) + " is not divisible by " + std::to_string(2 * c) +
              " (" + deck.cite("model.seq_len") + "); use a seq_len divisible by 2 x parallel.context");
  if (deck.get_string("model.rope_scaling") == "llama3" &&
      deck.get_float("model.rope_low_freq_factor") >= deck.get_float("model.rope_high_freq_factor"))
    fatal_all(here + "model.rope_low_freq_factor must be below model.rope_high_freq_factor (" +
              deck.cite("model.rope_low_freq_factor") + ", " + deck.cite("model.rope_high_freq_factor") +
              "): the frequencies between the two bounds are interpolated (Llama 3.1: 1 and 4)");
  if (deck.get_string("model.attention") != "flash")
    fatal_all(here + " whose attention is a ring of flash-attention blocks, and model.attention = " +
              deck.get_string("model.attention") + " (" + deck.cite("model.attention") + "); use model.attention = flash");
  for (const char* key : {"balance.pipeline", "balance.replicas"})
    if (deck.get_bool(key))
      fatal_all(here + " over ranks that must keep the same blocks and micro-batches, and " + key + " = true (" +
                deck.cite(key) + "); set it to false");
  if (deck.get_string("balance.micro_batches") != "fixed")
    fatal_all(here + " over ranks that must keep the same micro-batches, and balance.micro_batches = " +
              deck.get_string("balance.micro_batches") + " (" + deck.cite("balance.micro_batches") + "); set it to fixed");
}

void check_topology(const Deck& deck, int world_size) {
  const int64_t ranks_per_node = deck.get_int("topology.ranks_per_node");
  if (ranks_per_node > 0 && world_size % ranks_per_node != 0)
    fatal_all(deck.file_name() + ": topology.ranks_per_node must divide the number of ranks " +
              std::to_string(world_size) + " (" + deck.cite("topology.ranks_per_node") +
              "); emulated nodes are all the same size");
  if (deck.get_int("topology.nodes_per_rack") > 0 && !deck.get_string("topology.file").empty())
    fatal_all(deck.file_name() + ": topology.nodes_per_rack and topology.file both define the "
              "racks (" + deck.cite("topology.nodes_per_rack") + ", " +
              deck.cite("topology.file") + "); set only one of them");
}

// A fixed loss scale only means something in fp16 (bf16 has fp32's range): a scale given with
// another precision is a mistake rather than something to ignore.
void check_precision(const Deck& deck) {
  const std::string precision = deck.get_string("optim.precision");
  if (deck.get_float("optim.loss_scale") > 0 && precision != "fp16")
    fatal_all(deck.file_name() + ": optim.loss_scale applies to fp16 training only (" +
              deck.cite("optim.loss_scale") + ", " + deck.cite("optim.precision") +
              "); set optim.precision = fp16, or remove optim.loss_scale");
}

// A timeout within a few intervals would blame a rank for ordinary scheduling jitter.
void check_heartbeat(const Deck& deck) {
  const double interval = deck.get_float("comm.heartbeat_s"), timeout = deck.get_float("comm.heartbeat_timeout_s");
  if (timeout > 0 && timeout < 3 * interval)
    fatal_all(deck.file_name() + ": comm.heartbeat_timeout_s must be at least 3 x comm.heartbeat_s (" +
              deck.cite("comm.heartbeat_timeout_s") + ", " + deck.cite("comm.heartbeat_s") +
              "); raise the timeout, lower the interval, or set the timeout to 0 for no heartbeat");
}

// A fault injected on a rank the job does not have would silently test nothing.
void check_debug_ranks(const Deck& deck, int world_size) {
  for (const char* key : {"debug.fail_rank", "debug.hang_rank"}) {
    const int64_t rank = deck.get_int(key);
    if (rank >= world_size)
      fatal_all(deck.file_name() + ": " + key + " is not a rank of this job of " + std::to_string(world_size) +
                (world_size == 1 ? " rank (" : " ranks (") + deck.cite(key) + "); use -1 (none) or a rank from 0 to " +
                std::to_string(world_size - 1));
  }
}

// A slowdown named for a rank the job lacks would silently leave the run balanced.
void check_slowdown(const Deck& deck, int world_size) {
  std::vector<std::pair<int, double>> slowdown;
  try {
    slowdown = parse_slowdown(deck.get_string("debug.slowdown"));
  } catch (const std::invalid_argument& e) {
    fatal_all(deck.file_name() + ": debug.slowdown: " + e.what() + " (" + deck.cite("debug.slowdown") +
              "); write RANK:FACTOR pairs separated by commas, e.g. 1:2 or 0:1.5,3:2");
  }
  // The slowdown sleeps on the host after each pass for its time × (factor − 1): on a GPU the
  // passes are timed on the stream, which a host sleep neither lengthens nor is seen by.
  if (!slowdown.empty() && deck.get_string("kernels.device") == "cuda")
    fatal_all(deck.file_name() + ": debug.slowdown with " + deck.cite("kernels.device") +
              ", but the slowdown is a host sleep after each pass, which the GPU's stream and its timing do not "
              "see; emulate a slow rank on kernels.device = cpu or guard");
  for (const auto& [rank, factor] : slowdown)
    if (rank >= world_size)
      fatal_all(deck.file_name() + ": debug.slowdown names rank " + std::to_string(rank) + ", not a rank of this job of " +
                std::to_string(world_size) + (world_size == 1 ? " rank (" : " ranks (") + deck.cite("debug.slowdown") +
                "); name ranks from 0 to " + std::to_string(world_size - 1));
}

// A balance key that acts on measurements, with the measurements off, would silently do nothing.
// ZeRO-2 reduce-scatters every micro-batch's block gradients over the data group: every replica
// must run as many micro-batches, which balance.replicas changes.
void check_balance(const Deck& deck) {
  const int64_t zero = deck.get_int("optim.zero");
  if (deck.get_bool("balance.replicas") && zero >= 2)
    fatal_all(deck.file_name() + ": balance.replicas = true gives the data replicas different numbers of micro-batches, "
              "and optim.zero = " + std::to_string(zero) + " " +
              (zero == 3 ? "gathers each block's parameters and " : "") +
              "reduce-scatters each micro-batch's gradients over all of them together (" +
              deck.cite("balance.replicas") + ", " + deck.cite("optim.zero") +
              "); use optim.zero = 1, or balance.replicas = false");
  if (deck.get_bool("cuda.graphs") && zero == 3)
    fatal_all(deck.file_name() + ": cuda.graphs = true replays recorded forwards and backwards, and optim.zero = 3 "
              "gathers each block's parameters from the data group before its passes, which a replay would skip (" +
              deck.cite("cuda.graphs") + ", " + deck.cite("optim.zero") +
              "); use cuda.graphs = false, or optim.zero = 2");
  if (deck.get_int("balance.interval") > 0) return;
  for (const char* key : {"balance.pipeline", "balance.replicas"})
    if (deck.get_bool(key))
      fatal_all(deck.file_name() + ": " + key + " = true acts on the balance measurements, and balance.interval is 0 (" +
                deck.cite("balance.interval") + "); measure every few steps, e.g. balance.interval = 10, or set " + key +
                " = false");
  if (deck.get_string("balance.micro_batches") != "fixed")
    fatal_all(deck.file_name() + ": balance.micro_batches = " + deck.get_string("balance.micro_batches") +
              " acts on the balance measurements, and balance.interval is 0 (" + deck.cite("balance.interval") +
              "); measure every few steps, e.g. balance.interval = 10, or set balance.micro_batches = fixed");
}

}  // namespace

std::vector<std::pair<int, double>> parse_slowdown(const std::string& text) {
  std::vector<std::pair<int, double>> pairs;
  if (text.empty()) return pairs;
  for (size_t begin = 0; begin <= text.size();) {  // "1:2," ends in an empty item: malformed
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const size_t colon = item.find(':');
    size_t rank_end = 0, factor_end = 0;
    long rank = -1;
    double factor = 0;
    try {
      rank = std::stol(item.substr(0, colon), &rank_end);
      factor = std::stod(item.substr(colon + 1), &factor_end);
    } catch (const std::exception&) {
      rank_end = 0;
    }
    if (colon == std::string::npos || rank_end != colon || factor_end != item.size() - colon - 1 || rank < 0)
      throw std::invalid_argument("'" + item + "' is not RANK:FACTOR with a rank >= 0");
    if (!(factor >= 1.0) || factor > 1e6)
      throw std::invalid_argument("the factor of rank " + std::to_string(rank) + " is " + item.substr(colon + 1) +
                                  "; it must be at least 1 (and at most 1e6)");
    for (const auto& pair : pairs)
      if (pair.first == rank) throw std::invalid_argument("rank " + std::to_string(rank) + " is named twice");
    pairs.emplace_back(static_cast<int>(rank), factor);
    begin = end + 1;
  }
  return pairs;
}

int64_t micro_batches_per_step(const Deck& deck) {
  return deck.get_int("train.global_batch") /
         (deck.get_int("train.micro_batch") * deck.get_int("parallel.data"));
}

void validate_layout(const Deck& deck, int world_size) {
  check_world(deck, world_size);
  check_model(deck);
  check_llama(deck);
  check_stage_layers(deck);
  check_batch(deck);
  check_schedule(deck);
  check_context(deck);
  check_sequence_parallel(deck);
  check_topology(deck, world_size);
  check_precision(deck);
  check_heartbeat(deck);
  check_debug_ranks(deck, world_size);
  check_slowdown(deck, world_size);
  check_balance(deck);
}

}  // namespace trident::deck
