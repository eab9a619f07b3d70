// Parallel HDF5 checkpoint files: write, verify, read.
#include "ckpt/checkpoint_file.hpp"

#include <cstdio>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "ckpt/checksum.hpp"
#include "ckpt/slab.hpp"
#include "core/clock.hpp"
#include "core/file_util.hpp"
#include "core/h5.hpp"
#include "core/mpi_util.hpp"
#include "core/printable.hpp"
#include "deck/value.hpp"
#include "kernels/backend.hpp"

namespace trident::ckpt {
namespace {

using h5::Handle;
const char* const kSections[] = {"params", "adamw_m", "adamw_v"};

// Errors seen by this rank, in order; agreed on by all ranks at the end of an operation.
struct Errors {
  std::string first;
  void add(bool ok, const std::string& what) {
    if (!ok && first.empty()) first = what;
  }
  // Collective: the first error of the lowest rank that saw one, on every rank.
  std::string agree(MPI_Comm comm) const {
    int mine = first.empty() ? 0 : 1, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm);
    if (!any) return "";
    for (const std::string& message : allgather_strings(first, comm))
      if (!message.empty()) return message;
    return "";
  }
};

// Collective: true on every rank when `ok` holds on every rank.
bool all_ok(bool ok, MPI_Comm comm) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  return all == 1;
}

Handle open_parallel(const std::string& path, MPI_Comm comm, bool create) {
  h5::Lock lock(h5::hdf5_mutex());
  h5::quiet_errors();
  Handle access(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL);
  H5Pset_all_coll_metadata_ops(access.get(), true);  // metadata reads: one rank reads, all get it
  H5Pset_coll_metadata_write(access.get(), true);
  return Handle(create ? H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get())
                       : H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get()));
}

Handle collective_transfer() {
  Handle transfer(H5Pcreate(H5P_DATASET_XFER));
  H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_COLLECTIVE);
  return transfer;
}

// The file dataspace of `dataset` with the union of `slabs` selected (nothing if none), and a
// memory space of as many contiguous elements.
std::pair<Handle, Handle> selection(hid_t dataset, const std::vector<Hyperslab>& slabs) {
  Handle file_space(H5Dget_space(dataset));
  H5Sselect_none(file_space.get());
  hsize_t elements = 0;
  for (const Hyperslab& slab : slabs) {
    std::vector<hsize_t> start, stride, count, block;
    for (const SlabDim& d : slab.dims) {
      start.push_back(static_cast<hsize_t>(d.start));
      stride.push_back(static_cast<hsize_t>(d.stride));
      count.push_back(static_cast<hsize_t>(d.count));
      block.push_back(static_cast<hsize_t>(d.block));
    }
    H5Sselect_hyperslab(file_space.get(), elements == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(),
                        stride.data(), count.data(), block.data());
    elements += static_cast<hsize_t>(slab.elements());
  }
  const hsize_t memory_size = elements ? elements : 1;
  Handle memory_space(H5Screate_simple(1, &memory_size, nullptr));
  if (elements == 0) H5Sselect_none(memory_space.get());
  return {std::move(file_space), std::move(memory_space)};
}

// What this rank moves for one dataset: the hyperslabs of the whole tensor and the memory they
// map to (their elements in order).
struct Piece {
  std::vector<Hyperslab> slabs;
  float* data = nullptr;
  int64_t elements() const {
    int64_t n = 0;
    for (const Hyperslab& s : slabs) n += s.elements();
    return n;
  }
};

// Section 0 (parameters): the whole slice; 1, 2 (moments): the slice's part inside
// [moments_begin, moments_end). `writing`: only what this rank owns.
Piece piece_of(const StateView& state, int section, int tensor, bool writing) {
  const auto specs = model::param_specs(state.config, state.part);
  int64_t offset = 0;
  for (int t = 0; t < tensor; ++t) offset += specs[t].count();
  const TensorSlab slab = tensor_slab(state.config, state.part, tensor);
  const bool owner = (specs[tensor].sharded || state.part.rank == 0) && !(tensor == 0 && !state.part.first_stage);
  Piece piece;
  if (slab.elements() == 0 || (writing && !owner)) return piece;
  if (section == 0) {
    if (writing && !state.params_owner) return piece;
    piece.slabs = {slab.slice};
    piece.data = state.params + offset;
    return piece;
  }
  float* moments = section == 1 ? state.m : state.v;
  if (!moments || (writing && !state.moments_owner)) return piece;
  const int64_t begin = std::max(offset, state.moments_begin) - offset;
  const int64_t end = std::min(offset + slab.elements(), state.moments_end) - offset;
  if (begin >= end) return piece;
  piece.slabs = range_hyperslabs(slab, begin, end);
  piece.data = moments + (offset + begin - state.moments_begin);
  return piece;
}

// A state on a device in host memory, which HDF5 writes from and reads into: host buffers of the
// state's sizes and a view of them, filled from the device (`download`: what this rank writes) or
// to be uploaded after a read.
struct HostState {
  std::vector<float> params, m, v;
  StateView view;
};

HostState on_host(const StateView& state, bool download) {
  HostState host;
  host.params.resize(static_cast<size_t>(model::num_parameters(state.config, state.part)));
  if (state.m) host.m.resize(static_cast<size_t>(state.moments_end - state.moments_begin)), host.v.resize(host.m.size());
  host.view = state;
  host.view.device = Device{};
  host.view.backend = nullptr;
  host.view.params = host.params.data();
  host.view.m = state.m ? host.m.data() : nullptr;
  host.view.v = state.m ? host.v.data() : nullptr;
  if (!download) return host;
  kernels::Context ctx;
  ctx.backend = state.backend;
  if (state.params_owner) kernels::download(ctx, host.params.data(), view(state.params, host.params.size(), state.device));
  if (state.m && state.moments_owner) {
    kernels::download(ctx, host.m.data(), view(state.m, host.m.size(), state.device));
    kernels::download(ctx, host.v.data(), view(state.v, host.v.size(), state.device));
  }
  return host;
}

void upload(const HostState& host, const StateView& state) {
  kernels::Context ctx;
  ctx.backend = state.backend;
  kernels::upload(ctx, view(state.params, host.params.size(), state.device), host.params.data());
  if (!state.m) return;
  kernels::upload(ctx, view(state.m, host.m.size(), state.device), host.m.data());
  kernels::upload(ctx, view(state.v, host.v.size(), state.device), host.v.data());
}

std::string name_of(int section, int tensor) {
  return std::string(kSections[section]) + "/" + model::param_specs(model::GptConfig{})[tensor].name;
}

int sections_of(const std::string& kind) { return kind == "full" ? 3 : 1; }

// Root attributes <-> Metadata, one table for both directions.
struct Field {
  const char* name;
  std::function<std::string(const Metadata&)> get;
  std::function<void(Metadata&, const std::string&)> set;
  bool integer;
  bool optional = false;  // added after format version 1 was first written: may be absent
};

template <class T>
Field int_field(const char* name, T Metadata::*member) {
  return {name, [member](const Metadata& m) { return std::to_string(m.*member); },
          [member](Metadata& m, const std::string& v) { m.*member = static_cast<T>(std::stoll(v)); }, true};
}
Field model_field(const char* name, int model::GptConfig::*member) {
  return {name, [member](const Metadata& m) { return std::to_string(m.model.*member); },
          [member](Metadata& m, const std::string& v) { m.model.*member = std::stoi(v); }, true};
}
Field real_field(const char* name, double Metadata::*member) {
  return {name,
          [member](const Metadata& m) {
            char text[32];
            std::snprintf(text, sizeof text, "%.17g", m.*member);  // round-trips exactly
            return std::string(text);
          },
          [member](Metadata& m, const std::string& v) { m.*member = std::stod(v); }, false};
}
Field optional(Field field) {
  field.optional = true;
  return field;
}
Field text_field(const char* name, std::string Metadata::*member) {
  return {name, [member](const Metadata& m) { return m.*member; },
          [member](Metadata& m, const std::string& v) { m.*member = v; }, false};
}

const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      text_field("kind", &Metadata::kind),
      int_field("step", &Metadata::step),
      int_field("tokens_seen", &Metadata::tokens_seen),
      int_field("optimizer_updates", &Metadata::optimizer_updates),
      int_field("bad_steps_in_a_row", &Metadata::bad_steps_in_a_row),
      int_field("skipped_steps", &Metadata::skipped_steps),
      int_field("seed", &Metadata::seed),
      optional(text_field("precision", &Metadata::precision)),
      optional(real_field("loss_scale", &Metadata::loss_scale)),
      optional(int_field("loss_scale_good_steps", &Metadata::loss_scale_good_steps)),
      optional(int_field("loss_scale_hysteresis_left", &Metadata::loss_scale_hysteresis_left)),
      model_field("model.layers", &model::GptConfig::layers),
      model_field("model.heads", &model::GptConfig::heads),
      model_field("model.hidden", &model::GptConfig::channels),
      model_field("model.vocab", &model::GptConfig::vocab),
      model_field("model.padded_vocab", &model::GptConfig::padded_vocab),
      model_field("model.seq_len", &model::GptConfig::max_seq_len),
      int_field("layout.tensor", &Metadata::tensor),
      int_field("layout.pipeline", &Metadata::pipeline),
      int_field("layout.data", &Metadata::data),
      int_field("layout.zero", &Metadata::zero),
      text_field("layout.stage_layers", &Metadata::stage_layers),
      optional(int_field("layout.micro_batch", &Metadata::micro_batch)),
      optional(text_field("layout.replica_shares", &Metadata::replica_shares)),
      text_field("trident_version", &Metadata::version),
      text_field("written_at", &Metadata::written_at),
      text_field("deck", &Metadata::deck),
      optional(text_field("lineage.run_id", &Metadata::run_id)),
      optional(text_field("lineage.branch", &Metadata::branch)),
      optional(text_field("lineage.parent", &Metadata::parent)),
  };
  return table;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '\\' ? "\\\\" : c == '\n' ? "\\n" : std::string(1, c);
  return out;
}

std::string unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      out += text[i + 1] == 'n' ? '\n' : text[i + 1];
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string write_metadata(hid_t file, const Metadata& metadata) {
  h5::Lock lock(h5::hdf5_mutex());
  Metadata written = metadata;
  written.format_version = kFormatVersion;
  bool ok = h5::write_int_attribute(file, "format_version", kFormatVersion);
  for (const Field& f : fields())
    ok = ok && (f.integer ? h5::write_int_attribute(file, f.name, std::stoll(f.get(written)))
                          : h5::write_string_attribute(file, f.name, f.get(written)));
  ok = ok && h5::write_string_attribute(file, "checksum_algorithm",
                                        "sum mod 2^64 over elements of mix(row-major index * 0x9e3779b97f4a7c15 xor float32 "
                                        "bits), mix(x) = y xor (y >> 31), y = x * 0xbf58476d1ce4e5b9 (docs/CHECKPOINTS.md); "
                                        "metadata_checksum: FNV-1a 64 of the attributes as key=value lines");
  ok = ok && h5::write_uint_attribute(file, "metadata_checksum", metadata_checksum(written));
  return ok ? "" : "writing the metadata attributes failed";
}

// Version 2 on, the attributes must add up to metadata_checksum: HDF5 keeps attributes in
// object headers without checksums of their own, so a flipped bit in `step` would otherwise
// resume a silently different run.
std::string check_metadata_checksum(hid_t file, const Metadata& metadata) {
  if (metadata.format_version < 2) return "";
  uint64_t stored = 0;
  if (!h5::read_uint_attribute(file, "metadata_checksum", stored)) return "no attribute 'metadata_checksum'";
  const uint64_t computed = metadata_checksum(metadata);
  if (stored == computed) return "";
  char line[200];
  std::snprintf(line, sizeof line, "metadata checksum mismatch (stored %016llx, computed %016llx): an attribute "
                "(step, optimizer_updates, layout, ...) was altered", static_cast<unsigned long long>(stored),
                static_cast<unsigned long long>(computed));
  return line;
}

// Each value for sense on its own (a checksum is no signature: anyone can recompute it): "" or
// the first value that cannot be, with what is allowed.
std::string metadata_problem(const Metadata& m) {
  const auto out_of = [](const char* name, int64_t value, const std::string& allowed) {
    return std::string("attribute '") + name + "' = " + std::to_string(value) + " is impossible: " + allowed;
  };
  if (m.kind != "fast" && m.kind != "full") return "unknown kind '" + m.kind + "'";
  if (m.step < 0) return out_of("step", m.step, "0 or more");
  if (m.tokens_seen < 0) return out_of("tokens_seen", m.tokens_seen, "0 or more");
  if (m.optimizer_updates < 0 || m.optimizer_updates > m.step)
    return out_of("optimizer_updates", m.optimizer_updates, "from 0 to the step, " + std::to_string(m.step));
  if (m.skipped_steps < 0 || m.skipped_steps > m.step)
    return out_of("skipped_steps", m.skipped_steps, "from 0 to the step, " + std::to_string(m.step));
  if (m.bad_steps_in_a_row < 0 || m.bad_steps_in_a_row > m.skipped_steps)
    return out_of("bad_steps_in_a_row", m.bad_steps_in_a_row, "from 0 to skipped_steps, " + std::to_string(m.skipped_steps));
  if (m.precision != "fp32" && m.precision != "bf16" && m.precision != "fp16")
    return "attribute 'precision' = '" + m.precision + "' is impossible: fp32, bf16 or fp16";
  if (!std::isfinite(m.loss_scale) || m.loss_scale < 0) return "attribute 'loss_scale' is not a finite number of 0 or more";
  if (m.loss_scale_good_steps < 0) return out_of("loss_scale_good_steps", m.loss_scale_good_steps, "0 or more");
  if (m.loss_scale_hysteresis_left < 0) return out_of("loss_scale_hysteresis_left", m.loss_scale_hysteresis_left, "0 or more");
  const std::string shape = model::config_problem(m.model);
  if (!shape.empty()) return shape;
  constexpr int64_t kMaxRanks = int64_t(1) << 24;
  if (m.tensor < 1 || m.tensor > kMaxRanks) return out_of("layout.tensor", m.tensor, "from 1 to 2^24");
  if (m.pipeline < 1 || m.pipeline > m.model.layers)
    return out_of("layout.pipeline", m.pipeline, "from 1 to model.layers, " + std::to_string(m.model.layers));
  if (m.data < 1 || m.data > kMaxRanks) return out_of("layout.data", m.data, "from 1 to 2^24");
  if (m.zero != 0 && m.zero != 1) return out_of("layout.zero", m.zero, "0 or 1");
  if (m.micro_batch < 0) return out_of("layout.micro_batch", m.micro_batch, "0 (not recorded) or more");
  const auto positive_list = [](const std::string& text, int64_t count, int64_t sum) {
    try {
      const std::vector<int64_t> values = deck::parse_int_list(text);
      int64_t total = 0;
      for (int64_t v : values) total += v >= 1 && v <= (int64_t(1) << 31) ? v : -(int64_t(1) << 40);
      return static_cast<int64_t>(values.size()) == count && (sum < 0 ? total > 0 : total == sum);
    } catch (const std::exception&) {
      return false;
    }
  };
  if (!positive_list(m.stage_layers, m.pipeline, m.model.layers))
    return "attribute 'layout.stage_layers' = '" + printable(m.stage_layers) + "' is impossible: " +
           std::to_string(m.pipeline) + " counts of at least 1 adding up to model.layers, " + std::to_string(m.model.layers);
  if (!m.replica_shares.empty() && !positive_list(m.replica_shares, m.data, -1))
    return "attribute 'layout.replica_shares' = '" + printable(m.replica_shares) + "' is impossible: " +
           std::to_string(m.data) + " counts of at least 1";
  return "";
}

// The metadata of an open file, or a description of what is missing or altered.
std::string read_metadata_of(hid_t file, Metadata& metadata) {
  h5::Lock lock(h5::hdf5_mutex());
  int64_t version = 0;
  if (!h5::read_int_attribute(file, "format_version", version)) return "no format_version attribute";
  if (version < 1 || version > kFormatVersion)
    return "format version " + std::to_string(version) + ", this trident reads versions 1 to " +
           std::to_string(kFormatVersion);
  metadata.format_version = version;
  for (const Field& f : fields()) {
    std::string text;
    int64_t number = 0;
    if (f.integer ? !h5::read_int_attribute(file, f.name, number) : !h5::read_string_attribute(file, f.name, text)) {
      if (f.optional) continue;
      return std::string("no attribute '") + f.name + "'";
    }
    try {
      f.set(metadata, f.integer ? std::to_string(number) : text);
    } catch (const std::exception&) {  // a damaged number that no longer parses
      return std::string("attribute '") + f.name + "' is unreadable";
    }
  }
  const std::string altered = check_metadata_checksum(file, metadata);
  if (!altered.empty()) return altered;
  return metadata_problem(metadata);
}

// A dataset the metadata promises, as stored: reached through hard links only (an external or
// soft link would make HDF5 open another file, which may be a FIFO that blocks for ever),
// float32, contiguous in this file (no external raw-data files, no virtual dataset) and all of
// its bytes there: a shape is believed only when the file holds its data. `bytes` adds its size.
std::string dataset_problem(hid_t file, const std::string& name, const std::vector<int64_t>& shape, int64_t& bytes) {
  for (size_t slash = name.find('/'); ; slash = name.find('/', slash + 1)) {
    const std::string link = name.substr(0, slash);
    H5L_info_t info{};
    if (H5Lexists(file, link.c_str(), H5P_DEFAULT) <= 0) return "no dataset '" + name + "'";
    if (H5Lget_info(file, link.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_HARD)
      return "'" + link + "' is a " + (info.type == H5L_TYPE_EXTERNAL ? "link to another file" : "soft link") +
             ", not an object of this file (trident writes none)";
    if (slash == std::string::npos) break;
  }
  Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!dataset.valid()) return "'" + name + "' is not a dataset";
  Handle type(H5Dget_type(dataset.get())), space(H5Dget_space(dataset.get())), create(H5Dget_create_plist(dataset.get()));
  if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4)
    return "dataset '" + name + "' is not float32";
  std::vector<hsize_t> dims(shape.size(), 0);
  if (H5Sget_simple_extent_ndims(space.get()) != static_cast<int>(dims.size()) ||
      H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0 ||
      !std::equal(dims.begin(), dims.end(), shape.begin(), [](hsize_t a, int64_t b) { return a == static_cast<hsize_t>(b); }))
    return "dataset '" + name + "' does not have the shape its metadata gives the model";
  if (H5Pget_layout(create.get()) != H5D_CONTIGUOUS || H5Pget_external(create.get(), 0, 0, nullptr, nullptr, nullptr) >= 0)
    return "dataset '" + name + "' is not stored contiguously in the file (trident writes nothing else)";
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  if (static_cast<int64_t>(H5Dget_storage_size(dataset.get())) != elements * 4)
    return "dataset '" + name + "' holds " + std::to_string(H5Dget_storage_size(dataset.get())) + " bytes, not the " +
           std::to_string(elements * 4) + " of its shape";
  bytes += elements * 4;
  return "";
}

// Every dataset the metadata promises (dataset_problem), and all of them together no larger
// than the file: checked before anything is sized from the metadata.
std::string storage_problem(hid_t file, const std::string& path, const Metadata& metadata) {
  h5::Lock lock(h5::hdf5_mutex());
  int64_t bytes = 0;
  for (const auto& [name, shape] : checkpoint_datasets(metadata.model, metadata.kind)) {
    const std::string problem = dataset_problem(file, name, shape, bytes);
    if (!problem.empty()) return problem;
  }
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && bytes > static_cast<int64_t>(size))
    return "its datasets would take " + std::to_string(bytes) + " bytes but the file has " + std::to_string(size);
  return "";
}

// This rank's share (1/size, in row-major order) of a dataset's checksum, read in pieces of at
// most kVerifyChunk elements so that verification needs the same small buffer for any shape.
// Every rank makes the same number of (collective) reads, some of them empty.
constexpr int64_t kVerifyChunk = int64_t(1) << 22;  // 16 MiB of float32

uint64_t checksum_of_share(hid_t dataset, const std::vector<int64_t>& shape, int rank, int size, Errors& errors,
                           const std::string& name) {
  const TensorSlab whole = whole_slab(shape);
  const int64_t n = whole.elements();
  const int64_t begin = n * rank / size, end = n * (rank + 1) / size;
  const int64_t largest_share = (n + size - 1) / size, reads = (largest_share + kVerifyChunk - 1) / kVerifyChunk;
  std::vector<float> values(static_cast<size_t>(std::min(end - begin, kVerifyChunk)));
  uint64_t sum = 0;
  for (int64_t k = 0; k < reads; ++k) {
    const int64_t from = std::min(end, begin + k * kVerifyChunk), to = std::min(end, from + kVerifyChunk);
    const std::vector<Hyperslab> slabs = from < to ? range_hyperslabs(whole, from, to) : std::vector<Hyperslab>{};
    auto [file_space, memory_space] = selection(dataset, slabs);
    const Handle transfer = collective_transfer();
    errors.add(H5Dread(dataset, H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), transfer.get(), values.data()) >= 0,
               "reading dataset '" + name + "' failed (truncated file?)");
    const float* at = values.data();
    for (const Hyperslab& slab : slabs) {
      sum += partial_checksum(shape, slab, at);
      at += slab.elements();
    }
  }
  return sum;
}

}  // namespace

std::string Metadata::id() const {
  char name[64];
  std::snprintf(name, sizeof name, "/step-%08lld.%s", static_cast<long long>(step), kind.c_str());
  return run_id + name;
}

uint64_t metadata_checksum(const Metadata& metadata) {
  const std::string text = "format_version=" + std::to_string(metadata.format_version) + "\n" + metadata.to_text();
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ULL;
  return hash;
}

std::string name_mismatch(const std::string& path, const Metadata& metadata) {
  static const std::regex pattern(R"(step-(\d+)\.(fast|full)\.h5)");
  const std::string name = std::filesystem::path(path).filename().string();
  std::smatch match;
  if (!std::regex_match(name, match, pattern)) return "";
  const long long named = std::stoll(match[1].str());
  if (named == metadata.step && match[2].str() == metadata.kind) return "";
  return "its file name says step " + std::to_string(named) + " (" + match[2].str() + ") but its metadata says step " +
         std::to_string(metadata.step) + " (" + metadata.kind + "): renamed, or the step attribute altered";
}

std::string Metadata::to_text() const {
  std::string text;
  for (const Field& f : fields()) text += std::string(f.name) + "=" + escape(f.get(*this)) + "\n";
  return text;
}

Metadata Metadata::from_text(const std::string& text) {
  Metadata metadata;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    for (const Field& f : fields())
      if (line.compare(0, equals, f.name) == 0 && std::strlen(f.name) == equals) f.set(metadata, unescape(line.substr(equals + 1)));
  }
  return metadata;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> checkpoint_datasets(const model::GptConfig& config,
                                                                              const std::string& kind) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> result;
  const auto specs = model::param_specs(config);
  for (int section = 0; section < sections_of(kind); ++section)
    for (int t = 0; t < model::kNumParamTensors; ++t) result.emplace_back(name_of(section, t), specs[t].shape);
  return result;
}

WriteResult write_checkpoint(const std::string& path, MPI_Comm comm, const StateView& state,
                             const Metadata& metadata) {
  if (!state.device.is_cpu()) return write_checkpoint(path, comm, on_host(state, true).view, metadata);
  const auto start = std::chrono::steady_clock::now();
  WriteResult result;
  Errors errors;
  Handle file = open_parallel(path, comm, true);
  if (!all_ok(file.valid(), comm)) {
    result.error = "cannot create '" + path + "'";
    return result;
  }
  const int sections = sections_of(metadata.kind);
  const auto specs = model::param_specs(state.config);
  std::vector<uint64_t> checksums;
  for (int section = 0; section < sections; ++section) {
    for (int t = 0; t < model::kNumParamTensors; ++t) {
      const std::string name = name_of(section, t);
      h5::Lock lock(h5::hdf5_mutex());
      std::vector<hsize_t> shape(specs[t].shape.begin(), specs[t].shape.end());
      Handle space(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr));
      Handle create(H5Pcreate(H5P_DATASET_CREATE));
      H5Pset_fill_time(create.get(), H5D_FILL_TIME_NEVER);  // every element is written: no fill pass
      Handle links(H5Pcreate(H5P_LINK_CREATE));
      H5Pset_create_intermediate_group(links.get(), 1);
      Handle dataset(H5Dcreate2(file.get(), name.c_str(), H5T_IEEE_F32LE, space.get(), links.get(), create.get(),
                                H5P_DEFAULT));
      if (!all_ok(dataset.valid(), comm)) {
        errors.add(false, "creating dataset '" + name + "' in '" + path + "' failed");
        section = sections;
        break;
      }
      const Piece piece = piece_of(state, section, t, true);
      auto [file_space, memory_space] = selection(dataset.get(), piece.slabs);
      const Handle transfer = collective_transfer();
      errors.add(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), transfer.get(),
                          piece.data) >= 0,
                 "writing dataset '" + name + "' to '" + path + "' failed (disk full?)");
      uint64_t sum = 0;
      const float* values = piece.data;
      for (const Hyperslab& slab : piece.slabs) {
        sum += partial_checksum(specs[t].shape, slab, values);
        values += slab.elements();
      }
      checksums.push_back(sum);
      result.bytes += specs[t].count() * static_cast<int64_t>(sizeof(float));
    }
  }
  if (!checksums.empty())
    MPI_Allreduce(MPI_IN_PLACE, checksums.data(), static_cast<int>(checksums.size()), MPI_UINT64_T, MPI_SUM, comm);
  if (checksums.size() == static_cast<size_t>(sections) * model::kNumParamTensors) {
    h5::Lock lock(h5::hdf5_mutex());
    size_t k = 0;
    for (int section = 0; section < sections; ++section)
      for (int t = 0; t < model::kNumParamTensors; ++t) {
        Handle dataset(H5Dopen2(file.get(), name_of(section, t).c_str(), H5P_DEFAULT));
        errors.add(h5::write_uint_attribute(dataset.get(), "checksum", checksums[k++]),
                   "writing the checksum of '" + name_of(section, t) + "' failed");
      }
    const std::string problem = write_metadata(file.get(), metadata);
    errors.add(problem.empty(), problem);
    errors.add(h5::write_int_attribute(file.get(), "complete", 1), "writing the completion mark failed");
    errors.add(H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0, "flushing '" + path + "' failed (disk full?)");
  }
  {
    h5::Lock lock(h5::hdf5_mutex());
    errors.add(H5Fclose(file.release()) >= 0, "closing '" + path + "' failed (disk full?)");
  }
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) {
    const std::string problem = sync_to_disk(path);
    errors.add(problem.empty(), problem);
  }
  result.error = errors.agree(comm);
  result.seconds = seconds_since(start);
  return result;
}

Metadata read_metadata(const std::string& path) {
  h5::Lock lock(h5::hdf5_mutex());
  h5::quiet_errors();
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) throw std::runtime_error("'" + path + "' cannot be opened as HDF5 (truncated, or not a checkpoint)");
  Metadata metadata;
  std::string problem = read_metadata_of(file.get(), metadata);
  if (!problem.empty()) throw std::runtime_error("'" + path + "' is not a sound trident checkpoint: " + problem);
  problem = name_mismatch(path, metadata);
  if (!problem.empty()) throw std::runtime_error("'" + path + "': " + problem);
  problem = storage_problem(file.get(), path, metadata);
  if (!problem.empty()) throw std::runtime_error("'" + path + "' is not a sound trident checkpoint: " + problem);
  return metadata;
}

std::string verify_checkpoint(const std::string& path, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  Handle file = open_parallel(path, comm, false);
  if (!all_ok(file.valid(), comm)) return "cannot be opened as HDF5 (truncated, or not a checkpoint)";
  Metadata metadata;
  int64_t complete = 0;
  std::string problem = read_metadata_of(file.get(), metadata);
  if (problem.empty()) problem = name_mismatch(path, metadata);
  if (problem.empty() && (!h5::read_int_attribute(file.get(), "complete", complete) || complete != 1))
    problem = "not marked complete (its writing was interrupted)";
  if (problem.empty()) problem = storage_problem(file.get(), path, metadata);
  if (!all_ok(problem.empty(), comm)) return problem.empty() ? "metadata unreadable on some rank" : problem;
  std::vector<uint64_t> computed, stored;
  Errors errors;
  for (const auto& [name, shape] : checkpoint_datasets(metadata.model, metadata.kind)) {
    h5::Lock lock(h5::hdf5_mutex());
    Handle dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT));
    uint64_t checksum = 0;
    if (!all_ok(h5::read_uint_attribute(dataset.get(), "checksum", checksum), comm)) {
      errors.add(false, "dataset '" + name + "' has no checksum");
      break;
    }
    computed.push_back(checksum_of_share(dataset.get(), shape, rank, size, errors, name));
    stored.push_back(checksum);
  }
  std::string error = errors.agree(comm);
  if (!error.empty()) return error;
  if (!computed.empty())
    MPI_Allreduce(MPI_IN_PLACE, computed.data(), static_cast<int>(computed.size()), MPI_UINT64_T, MPI_SUM, comm);
  const auto datasets = checkpoint_datasets(metadata.model, metadata.kind);
  for (size_t k = 0; k < computed.size(); ++k)
    if (computed[k] != stored[k]) {
      char line[160];
      std::snprintf(line, sizeof line, " (stored %016llx, computed %016llx)",
                    static_cast<unsigned long long>(stored[k]), static_cast<unsigned long long>(computed[k]));
      return "dataset '" + datasets[k].first + "': checksum mismatch" + line;
    }
  return "";
}

std::string read_checkpoint(const std::string& path, MPI_Comm comm, const StateView& state) {
  if (!state.device.is_cpu()) {
    const HostState host = on_host(state, false);
    const std::string problem = read_checkpoint(path, comm, host.view);
    if (problem.empty()) upload(host, state);
    return problem;
  }
  Handle file = open_parallel(path, comm, false);
  if (!all_ok(file.valid(), comm)) return "cannot open '" + path + "'";
  Errors errors;
  const int sections = state.m ? 3 : 1;
  for (int section = 0; section < sections; ++section)
    for (int t = 0; t < model::kNumParamTensors; ++t) {
      const std::string name = name_of(section, t);
      h5::Lock lock(h5::hdf5_mutex());
      Handle dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT));
      if (!all_ok(dataset.valid(), comm)) return "'" + path + "' has no dataset '" + name + "'";
      const Piece piece = piece_of(state, section, t, false);
      auto [file_space, memory_space] = selection(dataset.get(), piece.slabs);
      const Handle transfer = collective_transfer();
      errors.add(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), transfer.get(),
                         piece.data) >= 0,
                 "reading dataset '" + name + "' of '" + path + "' failed");
    }
  return errors.agree(comm);
}

}  // namespace trident::ckpt
