// The table of deck keys. Add a key here and it is parsed, validated, listed by --help, written
// into deck.resolved.ini and must be documented in docs/DECK.md (a test checks).
#include "deck/schema.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace trident::deck {
namespace {

constexpr double kIntMax = 9.0e15;  // below 2^53, so the bound is exact as a double
constexpr double kInf = HUGE_VAL;
// NCCL's algorithms (NCCL_ALGO), in the deck's spelling (comm/nccl/nccl_settings.cpp maps them).
const std::vector<std::string> kNcclAlgos = {"auto", "ring", "tree", "collnet_direct", "collnet_chain",
                                             "nvls", "nvls_tree", "pat"};

KeySpec integer(const char* key, std::optional<std::string> def, double lo, double hi,
                const char* help) {
  return {key, KeyType::Int, std::move(def), lo, hi, {}, help};
}
KeySpec real(const char* key, const char* def, double lo, double hi, const char* help) {
  return {key, KeyType::Float, std::string(def), lo, hi, {}, help};
}
KeySpec boolean(const char* key, const char* def, const char* help) {
  return {key, KeyType::Bool, std::string(def), 0, 0, {}, help};
}
KeySpec choice(const char* key, const char* def, std::vector<std::string> choices,
               const char* help) {
  return {key, KeyType::Enum, std::string(def), 0, 0, std::move(choices), help};
}
KeySpec text(const char* key, KeyType type, const char* def, const char* help) {
  return {key, type, std::string(def), 0, 0, {}, help};
}

std::vector<KeySpec> build_schema() {
  const auto required = std::nullopt;
  return {
      // [model] — GPT-2 shape.
      integer("model.layers", required, 1, 1024, "number of transformer blocks L"),
      integer("model.heads", required, 1, 1024, "attention heads per block"),
      integer("model.hidden", required, 1, 65536, "model width C; a multiple of model.heads"),
      integer("model.vocab", required, 2, 16777216, "vocabulary size V (256 for byte-level data)"),
      integer("model.seq_len", required, 1, 1048576, "context length T in tokens"),
      choice("model.arch", "gpt2", {"gpt2", "llama"},
             "the architecture (docs/MODEL.md): gpt2 (LayerNorm, learned positions, GELU MLP of 4 x hidden, biases, "
             "tied embeddings) or llama (RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention, no biases, "
             "an untied head by default)"),
      integer("model.kv_heads", std::string("0"), 0, 1024,
              "llama: key/value heads of grouped-query attention, a divisor of model.heads; split over "
              "parallel.tensor where it is a multiple of it, each head on tensor / kv_heads ranks where fewer; 0: "
              "model.heads (multi-head attention)"),
      integer("model.ffn_hidden", std::string("0"), 0, 1048576,
              "llama: SwiGLU's width F (down(silu(gate(x)) * up(x))); 0: Llama's rule, 2/3 of 4 x hidden times "
              "model.ffn_multiplier rounded up to a multiple of model.ffn_multiple_of"),
      real("model.ffn_multiplier", "1.0", 0.01, 100, "llama: the multiplier of Llama's width rule (Llama 3: 1.3)"),
      integer("model.ffn_multiple_of", std::string("256"), 1, 65536,
              "llama: the width rule rounds up to a multiple of this (Llama 3: 1024)"),
      real("model.rope_theta", "10000", 1, 1e12, "llama: the rotary positions' base θ (Llama 3: 500000)"),
      choice("model.rope_scaling", "none", {"none", "llama3"},
             "llama: the rotary frequencies scaled for a long context as Llama 3.1 does (Hugging Face's rope_type "
             "llama3, with the four keys below), or none"),
      real("model.rope_factor", "8", 1, 1e6,
           "llama, rope_scaling = llama3: the low frequencies are divided by this (Llama 3.1: 8)"),
      real("model.rope_low_freq_factor", "1", 1e-6, 1e6,
           "llama, rope_scaling = llama3: wavelengths above original_context / this are scaled fully (Llama 3.1: 1)"),
      real("model.rope_high_freq_factor", "4", 1e-6, 1e6,
           "llama, rope_scaling = llama3: wavelengths below original_context / this are kept; between the two bounds "
           "the frequency is interpolated (Llama 3.1: 4)"),
      real("model.rope_original_context", "8192", 1, 1e9,
           "llama, rope_scaling = llama3: the context the model was first trained at (Llama 3.1: 8192)"),
      real("model.norm_eps", "1e-5", 1e-12, 1, "llama: RMSNorm's ε"),
      choice("model.tie_embeddings", "auto", {"auto", "true", "false"},
             "the head is the token embedding: auto = true for gpt2 (always), false for llama"),
      text("model.init", KeyType::String, "random",
           "random (N(0, 0.02) init from train.seed), the path of an llm.c GPT-2 model file, or a Hugging Face "
           "model directory (config.json and model.safetensors, or shards and their index; docs/MODEL.md)"),
      choice("model.attention", "flash", {"flash", "materialized"},
             "the attention's algorithm: materialized (the (B, heads, T, T) probabilities kept for backward) or "
             "flash (tiles with an online softmax, FlashAttention-2: only (B, heads, T) row statistics kept, the "
             "probabilities recomputed in backward; memory linear in T, and on the CPU faster from T = 512)"),
      integer("model.classifier_chunk", std::string("256"), 0, 1048576,
              "tokens per chunk of the fused classifier: the LM head, its cross-entropy and (in training) its "
              "gradient over chunks of this many tokens, so that only (chunk, vocab/tensor) logits exist; 0: the "
              "whole (B, T, vocab/tensor) logits kept from forward to backward"),
      // [parallel] — world = tensor x pipeline x data.
      choice("parallel.layout", "manual", {"manual", "auto"},
             "manual: the layout as the deck gives it; auto: trident train takes the planner's best feasible layout "
             "for the ranks it was launched on (trident plan's search on parallel.hardware's profile): parallel.tensor, "
             "pipeline, data, context, schedule, virtual_stages, sequence_parallel, tp_comm_overlap, stage_layers, "
             "train.micro_batch, memory.recompute and optim.zero are chosen, printed with the prediction and written "
             "into deck.resolved.ini; with checkpoint.resume = auto a job requeued on another number of ranks "
             "resumes onto that number's best layout"),
      text("parallel.hardware", KeyType::String, "this-host",
           "the hardware profile parallel.layout = auto plans for: a name in inputs/hardware/ ("
           TRIDENT_HARDWARE_PROFILES ", this-host as trident plan --calibrate writes it) or a profile's path"),
      integer("parallel.tensor", std::string("1"), 1, 4096, "tensor-parallel group size"),
      integer("parallel.pipeline", std::string("1"), 1, 4096, "pipeline stages"),
      integer("parallel.data", std::string("1"), 1, 1048576, "data-parallel replicas"),
      integer("parallel.context", std::string("1"), 1, 4096,
              "context parallelism: each replica's sequences split over this many ranks (2 of 2 x context chunks "
              "each, ring attention over the group); world = tensor x context x pipeline x data; needs "
              "model.attention = flash and seq_len divisible by 2 x context; the gradients are summed over data x "
              "context"),
      choice("parallel.schedule", "1f1b", {"1f1b", "gpipe", "zb-h1"},
             "pipeline schedule over the micro-batches of a step: 1f1b; gpipe (every forward, then every "
             "backward); zb-h1 (zero-bubble H1: the backward split into input and weight gradients, the "
             "weight gradients filling 1F1B's bubble; holds min(pipeline, micro-batches) micro-batches on "
             "every stage; not with memory.recompute = full or every_k)"),
      integer("parallel.virtual_stages", std::string("1"), 1, 64,
              "model chunks per pipeline stage: > 1 is the interleaved 1F1B schedule (stage s holds chunks s, s + "
              "pipeline, ...; bubble (pipeline - 1)/(virtual_stages x micro-batches + pipeline - 1), virtual_stages "
              "times the point-to-point messages); needs parallel.schedule = 1f1b, pipeline >= 2, a block per "
              "chunk at least, micro-batches per step a multiple of pipeline; parallel.stage_layers then gives "
              "pipeline x virtual_stages counts"),
      boolean("parallel.sequence_parallel", "false",
              "sequence parallelism (Korthikanti et al. 2022): the LayerNorms, residual stream and pipeline messages "
              "hold micro_batch x seq_len / tensor token rows on each tensor rank (activation memory outside the "
              "parallel GEMMs / tensor); all-gathers and reduce-scatters replace the tensor all-reduces; needs "
              "micro_batch x seq_len divisible by parallel.tensor; not with parallel.schedule = zb-h1; nothing to "
              "split with parallel.tensor = 1"),
      boolean("parallel.tp_comm_overlap", "false",
              "with parallel.sequence_parallel: each all-gather before a column-parallel GEMM and each reduce-scatter "
              "after a row-parallel one as a ring of tensor steps over blocks of rows, the GEMM on the block already "
              "there while the next travels (collective matmul); the exposed wait is metrics.h5's tensor_exposed_ms"),
      {"parallel.stage_layers", KeyType::IntList, std::string(""), 1, 1024, {},
       "blocks per pipeline stage, e.g. 3,5,5,3 (interleaved: per virtual stage, pipeline x virtual_stages "
       "counts in the model's order); empty = even split"},
      // [topology] — node / rack / cross-rack.
      integer("topology.ranks_per_node", std::string("0"), 0, 1048576,
              "0 = a node is the ranks sharing memory; N = emulate nodes of N consecutive ranks"),
      integer("topology.nodes_per_rack", std::string("0"), 0, 1048576,
              "nodes per rack in node order; 0 = one rack (unless topology.file is set)"),
      text("topology.file", KeyType::Path, "",
           "Slurm topology.conf whose leaf switches (SwitchName=... Nodes=...) are the racks"),
      text("topology.link.node", KeyType::String, "off",
           "emulated link inside a node: 'LATENCY_US,BANDWIDTH_GBPS' (e.g. 2,300) or off"),
      text("topology.link.rack", KeyType::String, "off",
           "emulated link between nodes of a rack: 'LATENCY_US,BANDWIDTH_GBPS' (e.g. 5,25) or off"),
      text("topology.link.cross_rack", KeyType::String, "off",
           "emulated link across racks: 'LATENCY_US,BANDWIDTH_GBPS' (e.g. 10,12.5) or off"),
      // [train]
      integer("train.steps", std::string("100"), 0, kIntMax, "optimizer steps to run"),
      integer("train.global_batch", std::string("8"), 1, kIntMax,
              "sequences per optimizer step, summed over all data-parallel replicas"),
      integer("train.micro_batch", std::string("1"), 1, kIntMax,
              "sequences per micro-batch on one replica"),
      integer("train.seed", std::string("1337"), 0, kIntMax,
              "seed of initialisation and data sampling"),
      integer("train.eval_interval", std::string("0"), 0, kIntMax,
              "steps between validation passes; 0 = only at the end"),
      integer("train.eval_tokens", std::string("65536"), 1, kIntMax,
              "validation tokens per pass (whole windows of model.seq_len)"),
      text("train.run_dir", KeyType::Path, "runs/default",
           "directory for deck.resolved.ini, metrics.h5 and checkpoints"),
      real("train.lock_wait_s", "10", 0, 1e9,
           "a run directory locked by a live run (trident.lock) is waited for this long, then exit 2"),
      real("train.lock_heartbeat_s", "10", 0.1, 1e9, "the run refreshes its lock's mtime this often"),
      real("train.lock_stale_s", "120", 0.3, 1e9,
           "a lock of another host not refreshed this long is stale (its node died) and taken over"),
      // [optim] — AdamW with warm-up and cosine decay.
      real("optim.lr", "6e-4", 0, 10, "peak learning rate"),
      real("optim.min_lr", "6e-5", 0, 10, "learning rate at the end of the cosine decay"),
      integer("optim.warmup_steps", std::string("0"), 0, kIntMax, "linear warm-up steps"),
      real("optim.beta1", "0.9", 0, 0.999999, "AdamW first-moment decay"),
      real("optim.beta2", "0.95", 0, 0.999999, "AdamW second-moment decay"),
      real("optim.eps", "1e-8", 1e-30, 1, "AdamW epsilon"),
      real("optim.weight_decay", "0.1", 0, 10, "decoupled weight decay on 2-D weights only"),
      real("optim.grad_clip", "1.0", 0, kInf, "global gradient-norm clip; 0 = off"),
      integer("optim.max_bad_steps", std::string("10"), 0, kIntMax,
              "steps in a row skipped for NaN/Inf loss or gradients before the run stops"),
      choice("optim.precision", "fp32", {"fp32", "bf16", "fp16"},
             "fp32; bf16 or fp16 = mixed precision: parameters (a copy) and activations stored in "
             "16 bits, rounded to nearest even, f32 accumulation, fp32 gradients and master weights "
             "in the optimizer"),
      real("optim.loss_scale", "0", 0, kInf,
           "fp16 only: 0 = dynamic loss scaling (the optim.loss_scale_* keys); > 0 = this fixed "
           "scale"),
      real("optim.initial_loss_scale", "65536", 1, kInf, "fp16, dynamic: the first loss scale"),
      real("optim.min_loss_scale", "1", 1e-30, kInf, "fp16, dynamic: the scale is never reduced below this"),
      integer("optim.loss_scale_window", std::string("1000"), 1, kIntMax,
              "fp16, dynamic: steps without overflow before the scale grows"),
      real("optim.loss_scale_growth", "2", 1, 1e6, "fp16, dynamic: factor of a growth"),
      real("optim.loss_scale_backoff", "0.5", 1e-6, 1, "fp16, dynamic: factor of a reduction"),
      integer("optim.hysteresis", std::string("2"), 1, kIntMax,
              "fp16, dynamic: overflows tolerated (skipped steps) before the scale is reduced"),
      integer("optim.zero", std::string("0"), 0, 3,
              "1 = the distributed optimizer (ZeRO-1): the AdamW moments and, in bf16/fp16, the "
              "fp32 master weights sharded over the data group; gradients reduce-scattered bucket "
              "by bucket, each replica updates its part of every bucket, the parameters all-gathered "
              "(16-bit ones as 16-bit values). 2 = ZeRO-2: as 1, and no full-size gradient buffer of "
              "the blocks: each block's gradients reduce-scattered after every micro-batch's backward "
              "of it out of one of two one-block buffers, only the own part kept (not with "
              "parallel.schedule = zb-h1 or balance.replicas). 3 = ZeRO-3 (FSDP): as 2, and the "
              "parameters sharded too: each replica keeps its part of every block's parameters, and "
              "a block's are all-gathered into one of two one-block buffers before each forward, "
              "recomputed forward and backward of it; the embeddings, final norm and head stay whole, "
              "gathered after each update (not with zb-h1, balance.replicas or cuda.graphs)"),
      // [kernels]
      choice("kernels.device", "cpu", {"cpu", "cuda", "guard"},
             "the kernel backend the model's buffers and kernels live on: cpu (oneDNN + OpenMP), "
             "cuda (a deck error where the binary was built without CUDA or the machine has no "
             "GPU), or guard (a testing aid: the CPU's kernels on memory that host code cannot "
             "touch outside a kernel, as a GPU's; a stray host access stops the run with SIGSEGV)"),
      real("kernels.guard_memory_gb", "0", 0, 1e6,
           "kernels.device = guard only: the memory in GB (1e9 bytes) of its emulated device, which the "
           "host's ranks share and the memory model checks a job against, as a GPU's; 0 = the host's memory"),
      choice("kernels.low16_gemm", "auto", {"auto", "native", "widened"},
             "GEMMs on bf16/fp16 operands: native (oneDNN's 16-bit matmul; a deck error where "
             "oneDNN has none for this CPU, e.g. bf16 below AVX-512), widened (operands widened "
             "exactly to f32 in a workspace, multiplied in f32: any CPU, same products), or auto "
             "(native where every rank's CPU has it, else widened)"),
      choice("kernels.arithmetic", "native", {"native", "portable"},
             "how the CPU kernels sum: native (oneDNN and loops vectorized for this CPU: the fastest, "
             "bits that depend on the CPU's instruction set) or portable (our own kernels in one fixed "
             "order, no oneDNN: the same bits on every x86-64 and AArch64 CPU, any build target and thread count; "
             "about twice as slow; kernels.device = cpu or guard)"),
      // [cuda]
      boolean("cuda.graphs", "false",
              "record each micro-batch's forward and backward once as a graph and replay it (CUDA "
              "Graphs, one launch instead of hundreds of kernels); kernels.device = cuda (or guard, "
              "whose emulation checks the recorded work), with NCCL for parallel.tensor > 1"),
      choice("cuda.attention_products", "auto", {"auto", "f32"},
             "the flash attention's matrix products on CUDA: auto (a bf16/fp16 model's on the tensor "
             "cores in its 16-bit type, P and dS rounded as FlashAttention does, where heads have 32, 64 "
             "or 128 channels; an f32 model's in f32) or f32 (every product in f32 on the first-light "
             "kernels, one warp per row: the CPU's arithmetic, many times slower; for comparison). The "
             "CPU's products are f32 either way"),
      choice("cuda.attention_kernel", "auto", {"auto", "own"},
             "the flash attention's kernels on CUDA: auto (cuDNN's fused attention where the build has "
             "cuDNN and cuDNN takes the sizes: a bf16/fp16 model's whole causal sequence with its products "
             "in 16 bits; our tensor-core kernels for the rest — ring attention's blocks, f32 models or "
             "products, sizes cuDNN refuses — said once on stderr) or own (our kernels everywhere: for "
             "comparison). The CPU runs its own either way"),
      choice("cuda.gelu_epilogues", "auto", {"auto", "off"},
             "GPT-2's MLP GEMMs on CUDA: auto (the input layer's GELU and the pre-activation written by "
             "cuBLASLt's GELU_AUX_BIAS epilogue, their backward by its DGELU epilogue, in the kept type, "
             "where cuBLASLt offers an algorithm) or off (each GEMM writes f32 and a pass apart applies "
             "GELU or its derivative and rounds: for comparison). The CPU runs the GEMM and the pass "
             "either way"),
      // [memory]
      choice("memory.recompute", "none", {"none", "full", "every_k", "selective", "auto"},
             "activation recompute: none; full (keep each block's input, recompute the block in "
             "backward); every_k (keep every K-th block's input, recompute K-block segments); "
             "selective (recompute only the attention probabilities); auto (the cheapest that "
             "fits memory.budget_gb)"),
      integer("memory.recompute_interval", std::string("2"), 0, 1024,
              "K of memory.recompute = every_k: blocks per recomputed segment; 0 = auto, "
              "K = sqrt(2 x available / one block's activations) with memory.budget_gb"),
      real("memory.budget_gb", "0", 0, 1e9,
           "memory per rank in GB (1e9 bytes) the run must fit, by the memory model; 0 = no budget"),
      // [data]
      text("data.train", KeyType::Path, "", "training token shards: a file or a glob"),
      text("data.val", KeyType::Path, "", "validation token shards: a file or a glob"),
      choice("data.format", "llmc", {"llmc", "u16"},
             "llmc (256 x int32 header, then uint16 tokens) or u16 (raw uint16 tokens)"),
      // [checkpoint]
      text("checkpoint.fast_interval", KeyType::Interval, "off",
           "parameters-only checkpoint every interval: off, 200steps, 5min, 30s, 1h"),
      text("checkpoint.full_interval", KeyType::Interval, "off",
           "full training-state checkpoint every interval: off, 1000steps, 1h"),
      integer("checkpoint.keep_fast", std::string("2"), 1, 1000000, "fast checkpoints kept"),
      integer("checkpoint.keep_full", std::string("2"), 1, 1000000, "full checkpoints kept"),
      text("checkpoint.resume", KeyType::String, "none",
           "none, auto (newest valid checkpoint in the run directory) or a checkpoint path"),
      text("checkpoint.dir", KeyType::Path, "",
           "directory of the checkpoint files; empty = train.run_dir/checkpoints"),
      boolean("checkpoint.async", "false",
              "copy the state at the step boundary and write it from a background thread"),
      boolean("checkpoint.at_end", "true", "write a full checkpoint after the last step"),
      real("checkpoint.timeout_s", "1800", 0.001, 1e9,
           "a checkpoint write (and its verification) still running this long aborts the job"),
      // [metrics]
      integer("metrics.log_interval", std::string("10"), 1, kIntMax,
              "steps between console lines and metrics.h5 flushes"),
      // [comm]
      choice("comm.algo", "auto", {"flat", "hierarchical", "auto", "mpi"},
             "data-parallel all-reduce: flat ring, node/rack/cross-rack hierarchy, auto, or MPI's"),
      choice("comm.node_algo", "tree", {"ring", "tree", "shm"},
             "collective algorithm inside a node (groups that stay in one node, and the node level "
             "of the hierarchical all-reduce); shm: through memory shared by the node's ranks "
             "(the ring where a group spans nodes or hosts)"),
      choice("comm.rack_algo", "tree", {"ring", "tree"},
             "all-reduce algorithm among nodes of a rack (hierarchical all-reduce)"),
      choice("comm.cross_rack_algo", "ring", {"ring", "tree"},
             "all-reduce algorithm across racks (hierarchical all-reduce)"),
      choice("comm.backend", "auto", {"auto", "mpi", "nccl"},
             "communicator of device buffers: mpi (host memory), nccl (one NCCL communicator per "
             "group and per level; needs kernels.device = cuda, NCCL in the binary and one GPU per "
             "rank), or auto (nccl with kernels.device = cuda where NCCL is built in and loads, every rank "
             "has a GPU of its own and no topology.link.* is set; else mpi, said at start-up; an "
             "NCCL_ALGO/NCCL_PROTO environment against comm.nccl_* stays an error)"),
      choice("comm.nccl_node_algo", "auto", kNcclAlgos,
             "comm.backend = nccl: NCCL's algorithm inside a node (NCCL_ALGO, per process: the three "
             "levels must agree); auto = NCCL's choice per operation"),
      choice("comm.nccl_rack_algo", "auto", kNcclAlgos, "as comm.nccl_node_algo, among the nodes of a rack"),
      choice("comm.nccl_cross_rack_algo", "auto", kNcclAlgos, "as comm.nccl_node_algo, across racks"),
      choice("comm.nccl_node_proto", "auto", {"auto", "simple", "ll", "ll128"},
             "comm.backend = nccl: NCCL's protocol inside a node (NCCL_PROTO, per process: the three "
             "levels must agree); auto = NCCL's choice"),
      choice("comm.nccl_rack_proto", "auto", {"auto", "simple", "ll", "ll128"},
             "as comm.nccl_node_proto, among the nodes of a rack"),
      choice("comm.nccl_cross_rack_proto", "auto", {"auto", "simple", "ll", "ll128"},
             "as comm.nccl_node_proto, across racks"),
      boolean("comm.nccl_node_collnet", "false",
              "comm.backend = nccl: CollNet/SHARP (reduction in the switches) for the communicators "
              "inside a node (ncclConfig_t.collnetEnable, per communicator)"),
      boolean("comm.nccl_rack_collnet", "false", "as comm.nccl_node_collnet, among the nodes of a rack"),
      boolean("comm.nccl_cross_rack_collnet", "false", "as comm.nccl_node_collnet, across racks"),
      real("comm.bucket_mb", "25", 0.001, 65536, "gradient bucket size in MiB"),
      boolean("comm.overlap", "true", "overlap the gradient reduction with backward"),
      choice("comm.grad_dtype", "f32", {"f32", "bf16"},
             "the type the gradients travel in: f32, or bf16 (rounded before the reduction; over "
             "NCCL its bf16 sums, over MPI a ring of bf16 messages adding in f32 at each hop): "
             "half the bytes, with a rounding per hop"),
      real("comm.timeout_s", "300", 0.001, 1e9,
           "watchdog: a collective stuck this long aborts the job naming the operation"),
      real("comm.heartbeat_s", "1", 0.01, 3600,
           "seconds between heartbeats: each rank's heartbeat thread messages its neighbour rank"),
      real("comm.heartbeat_timeout_s", "20", 0, 1e9,
           "a rank whose heartbeat is silent this long (stopped, hung, its node unresponsive) ends the job "
           "naming it, long before comm.timeout_s; at least 3 x comm.heartbeat_s; 0 = no heartbeat"),
      // [balance] — measuring (and, issue 18, correcting) slow stages and replicas.
      integer("balance.interval", std::string("10"), 0, kIntMax,
              "steps between balance measurements: forward and backward time per micro-batch of every stage "
              "and replica, agreed over all ranks, into metrics.h5 (balance/*); 0 = off"),
      real("balance.threshold", "1.15", 1, 1e9,
           "max/min of the stages' (or replicas') time per micro-batch above which a measurement is an "
           "imbalance: printed on the console, and (balance.pipeline) a re-split considered"),
      boolean("balance.pipeline", "false",
              "move whole blocks between pipeline stages at a step boundary when the stages are imbalanced: "
              "the split that minimises the predicted slowest stage, from the measured per-block times (interleaved: "
              "a stage's blocks change within its own chunks, each keeping one or more); a resumed run takes the "
              "split its checkpoint recorded"),
      boolean("balance.replicas", "false",
              "give a slower data replica fewer of the global batch's micro-batches and a faster one more, at a "
              "step boundary: the same sequences and the same loss and gradient normalisation (by tokens); "
              "interleaved, in groups of parallel.pipeline micro-batches"),
      real("balance.margin", "0.1", 0, 100,
           "a re-split (or new replica shares) only when it predicts the slowest stage (replica) faster by more "
           "than this fraction"),
      integer("balance.cooldown", std::string("50"), 0, kIntMax,
              "steps after a re-split (or new replica shares) during which no other of its kind is made"),
      choice("balance.micro_batches", "fixed", {"fixed", "seed", "model"},
             "the number of micro-batches per step (the micro-batch size changes with it; the global batch "
             "does not): fixed = the deck's; seed = the seed's 4.1 rule, ceil(max/median) of the stage times "
             "when they are imbalanced; model = the count of least predicted step time, (m + (p - 1)/v) x the "
             "measured per-micro-batch time at its size, within the memory budget (v: parallel.virtual_stages, "
             "whose counts are multiples of p)"),
      // [debug] — fault injection for the tests of the error paths.
      integer("debug.fail_rank", std::string("-1"), -1, 1048576,
              "testing aid: this world rank raises a one-rank fault after set-up; -1 = none"),
      integer("debug.hang_rank", std::string("-1"), -1, 1048576,
              "testing aid: this world rank stops answering before its first gradient "
              "reduction (the watchdog test); -1 = none"),
      choice("debug.fail_mode", "fatal", {"fatal", "mpi_error", "sigkill"},
             "testing aid: the injected fault is a fatal error, a failing MPI call, or SIGKILL"),
      boolean("debug.skip_space_check", "false",
              "testing aid: write checkpoints without first checking the free space"),
      integer("debug.fail_step", std::string("0"), 0, kIntMax,
              "testing aid: debug.fail_rank fails at the start of this step (1-based); 0 = at set-up"),
      {"debug.nan_steps", KeyType::IntList, std::string(""), 1, kIntMax, {},
       "testing aid: steps (1-based) whose gradients rank 0 turns to NaN, e.g. 3,4"},
      text("debug.slowdown", KeyType::String, "",
           "testing aid: RANK:FACTOR[,RANK:FACTOR] makes each named rank's compute take FACTOR (>= 1) "
           "times as long, by sleeping the measured time x (FACTOR - 1) after each micro-batch's forward "
           "and backward (a host sleep: kernels.device = cpu or guard); empty = none"),
  };
}

std::string format_bound(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e16)
    return std::to_string(static_cast<long long>(value));
  std::ostringstream os;
  os << value;
  return os.str();
}

}  // namespace

std::string KeySpec::section() const { return key.substr(0, key.find('.')); }
std::string KeySpec::name() const { return key.substr(key.find('.') + 1); }

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> table = build_schema();
  return table;
}

const std::vector<std::string>& sections() {
  static const std::vector<std::string> list = [] {
    std::vector<std::string> result;
    for (const KeySpec& spec : schema())
      if (std::find(result.begin(), result.end(), spec.section()) == result.end())
        result.push_back(spec.section());
    return result;
  }();
  return list;
}

const KeySpec* find_key(const std::string& key) {
  for (const KeySpec& spec : schema())
    if (spec.key == key) return &spec;
  return nullptr;
}

bool is_section(const std::string& name) {
  const auto& list = sections();
  return std::find(list.begin(), list.end(), name) != list.end();
}

std::string describe_allowed(const KeySpec& spec) {
  const std::string hi = spec.max == kInf ? "inf)" : format_bound(spec.max) + "]";
  switch (spec.type) {
    case KeyType::Int: return "an integer in [" + format_bound(spec.min) + ", " + hi;
    case KeyType::Float: return "a number in [" + format_bound(spec.min) + ", " + hi;
    case KeyType::Bool: return "true or false";
    case KeyType::Enum: {
      std::string list;
      for (const auto& c : spec.choices) list += (list.empty() ? "" : ", ") + c;
      return "one of " + list;
    }
    case KeyType::IntList:
      return "a comma-separated list of integers in [" + format_bound(spec.min) + ", " + hi +
             ", or nothing";
    case KeyType::String: return "text";
    case KeyType::Path: return "a path";
    case KeyType::Interval: return "off, <n>steps, or a duration <n>s, <n>min, <n>h";
  }
  return "";
}

std::string value_name(const KeySpec& spec) {
  switch (spec.type) {
    case KeyType::Int: return "INT";
    case KeyType::Float: return "REAL";
    case KeyType::Bool: return "BOOL";
    case KeyType::Enum: {
      std::string list;
      for (const auto& c : spec.choices) list += (list.empty() ? "" : "|") + c;
      return list;
    }
    case KeyType::IntList: return "INT,INT,...";
    case KeyType::String: return "TEXT";
    case KeyType::Path: return "PATH";
    case KeyType::Interval: return "INTERVAL";
  }
  return "";
}

}  // namespace trident::deck
