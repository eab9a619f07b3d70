// Hyperslabs of parameter slices and of flat ranges inside them.
#include "ckpt/slab.hpp"

namespace trident::ckpt {
namespace {

SlabDim whole(int64_t extent) { return {0, 1, 1, extent}; }
SlabDim range(int64_t start, int64_t length) { return {start, 1, 1, length}; }

// A strided selection whose blocks touch (stride == block) is one plain range.
SlabDim normalised(SlabDim dim) {
  if (dim.count > 1 && dim.stride == dim.block) return {dim.start, 1, 1, dim.count * dim.block};
  return dim;
}

// One box in the expanded coordinates of a slab: [lo[e], hi[e]) along each expanded dimension.
struct Box {
  std::vector<int64_t> lo, hi;
};

// Boxes covering flat elements [begin, end) of the row-major shape, restricted to dimensions
// dim.. (those before dim are fixed in box.lo/box.hi already): the head of a partial leading
// index, the run of whole leading indices, the tail of a partial last one.
void decompose(const std::vector<int64_t>& shape, size_t dim, int64_t begin, int64_t end, Box& box,
               std::vector<Box>& out) {
  if (begin >= end) return;
  if (dim + 1 == shape.size()) {
    box.lo[dim] = begin;
    box.hi[dim] = end;
    out.push_back(box);
    return;
  }
  int64_t inner = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t first = begin / inner, last = (end - 1) / inner;
  auto one_index = [&](int64_t index, int64_t from, int64_t to) {
    box.lo[dim] = index;
    box.hi[dim] = index + 1;
    decompose(shape, dim + 1, from, to, box, out);
  };
  if (first == last) return one_index(first, begin - first * inner, end - first * inner);
  int64_t full_begin = first, full_end = last + 1;
  if (begin % inner != 0) {
    one_index(first, begin % inner, inner);
    full_begin = first + 1;
  }
  if (end % inner != 0) full_end = last;
  if (full_begin < full_end) {
    box.lo[dim] = full_begin;
    box.hi[dim] = full_end;
    for (size_t d = dim + 1; d < shape.size(); ++d) {
      box.lo[d] = 0;
      box.hi[d] = shape[d];
    }
    out.push_back(box);
  }
  if (end % inner != 0) one_index(last, 0, end - last * inner);
}

}  // namespace

int64_t Hyperslab::elements() const {
  int64_t n = 1;
  for (const SlabDim& d : dims) n *= d.count * d.block;
  return dims.empty() ? 0 : n;
}

TensorSlab whole_slab(const std::vector<int64_t>& shape) {
  TensorSlab slab{shape, {}};
  for (int64_t extent : shape) slab.slice.dims.push_back(whole(extent));
  return slab;
}

namespace {

// Blocks [first_block, first_block + blocks) of a per-block tensor, or the whole of another.
// Row sections of equal size (GPT-2's q, k, v; SwiGLU's gate, up) are one strided dimension.
TensorSlab tensor_slab(const model::GptConfig& config, const model::Partition& part, int tensor, int first_block,
                       int blocks) {
  const std::vector<int64_t> shape = model::param_specs(config)[tensor].shape;
  TensorSlab slab = whole_slab(shape);
  std::vector<SlabDim>& dims = slab.slice.dims;
  if (model::param_specs(config, part)[tensor].count() == 0) {  // a tensor this stage lacks
    if (!dims.empty()) dims[0].block = 0;
    return slab;
  }
  const int64_t C = config.channels, p = part.size, r = part.rank, Cl = C / p;
  const int64_t H = model::mlp_hidden(config), Hl = H / p, sections = model::is_llama(config) ? 2 : 1;
  if (model::is_block_tensor(tensor)) dims[0] = range(first_block, blocks);
  switch (tensor) {
    case model::kWte:
    case model::kHead: dims[0] = range(r * (config.padded_vocab / p), config.padded_vocab / p); break;  // rows
    case model::kQkvw:                                            // (L, C + 2kv, C)
    case model::kQkvb: dims[1] = normalised({r * Cl, C, 3, Cl}); break;  // q, k, v rows (kv = C here: qkv_slabs)
    case model::kAttprojw: dims[2] = range(r * Cl, Cl); break;    // input columns
    case model::kFcw:                                             // (L, sections·H, C)
    case model::kFcb: dims[1] = normalised({r * Hl, H, sections, Hl}); break;  // rows of each section
    case model::kFcprojw: dims[2] = range(r * Hl, Hl); break;     // input columns
    default: break;                                               // replicated: whole
  }
  return slab;
}

// Grouped-query attention's qkv rows (C of q, then kv of k and of v, kv < C): sections of two
// sizes, so per block one slab per section, in the order the rank stacks them. With fewer
// key/value heads than ranks, the rank's k and v rows are its one head's (model::kv_replicas).
std::vector<TensorSlab> qkv_slabs(const model::GptConfig& config, const model::Partition& part, int tensor,
                                  int first_block, int blocks) {
  const int64_t C = config.channels, kv = model::kv_channels(config), p = part.size, r = part.rank;
  const int64_t kv_mine = int64_t(model::kv_heads_local(config, part.size)) * model::head_size(config);
  const int64_t kv_first = int64_t(model::first_kv_head(config, part.size, part.rank)) * model::head_size(config);
  std::vector<TensorSlab> slabs;
  for (int block = first_block; block < first_block + blocks; ++block)
    for (const auto& [start, rows] : {std::pair<int64_t, int64_t>{r * (C / p), C / p}, {C + kv_first, kv_mine},
                                     {C + kv + kv_first, kv_mine}}) {
      TensorSlab slab = whole_slab(model::param_specs(config)[tensor].shape);
      slab.slice.dims[0] = range(block, 1);
      slab.slice.dims[1] = range(start, rows);
      slabs.push_back(slab);
    }
  return slabs;
}

}  // namespace

std::vector<TensorSlab> tensor_slabs(const model::GptConfig& config, const model::Partition& part, int tensor) {
  const bool per_block = model::is_block_tensor(tensor);
  const bool grouped = (tensor == model::kQkvw || tensor == model::kQkvb) && model::kv_channels(config) != config.channels &&
                       model::param_specs(config, part)[tensor].count() > 0;
  std::vector<std::pair<int, int>> runs;  // (first block, blocks): the stage's, or each chunk's
  if (part.chunks() == 1 || !per_block) runs.push_back({part.first_layer, part.layers(config)});
  else
    for (int j = 0; j < part.chunks(); ++j) runs.push_back({part.chunk_first[j], part.chunk_blocks[j]});
  std::vector<TensorSlab> slabs;
  for (const auto& [first, blocks] : runs) {
    if (grouped) {
      for (TensorSlab& slab : qkv_slabs(config, part, tensor, first, blocks)) slabs.push_back(slab);
    } else {
      slabs.push_back(tensor_slab(config, part, tensor, first, blocks));
    }
  }
  return slabs;
}

std::vector<Hyperslab> range_hyperslabs(const TensorSlab& slab, int64_t begin, int64_t end) {
  std::vector<Hyperslab> result;
  if (begin >= end) return result;
  // Expanded shape: a strided dimension becomes (count, block), a plain one (block).
  std::vector<int64_t> expanded;
  for (const SlabDim& d : slab.slice.dims) {
    if (d.count > 1) expanded.push_back(d.count);
    expanded.push_back(d.block);
  }
  Box box{std::vector<int64_t>(expanded.size()), std::vector<int64_t>(expanded.size())};
  std::vector<Box> boxes;
  decompose(expanded, 0, begin, end, box, boxes);
  for (const Box& b : boxes) {
    Hyperslab h;
    size_t e = 0;
    for (const SlabDim& d : slab.slice.dims) {
      if (d.count > 1) {
        const int64_t count = b.hi[e] - b.lo[e];
        h.dims.push_back({d.start + b.lo[e] * d.stride + b.lo[e + 1], count > 1 ? d.stride : 1, count,
                          b.hi[e + 1] - b.lo[e + 1]});
        e += 2;
      } else {
        h.dims.push_back(range(d.start + b.lo[e], b.hi[e] - b.lo[e]));
        e += 1;
      }
    }
    result.push_back(h);
  }
  return result;
}

}  // namespace trident::ckpt
