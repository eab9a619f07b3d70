// A part of a run whose state a checkpoint keeps in the metadata — torchtitan's Stateful: the
// part writes its own section of a checkpoint's metadata (ckpt/metadata.hpp) and takes it back
// on resume, so what a part keeps is its own business: its section lists the attributes once,
// and the part fills and reads them; the trainer only goes through its parts. (The tensors —
// parameters, AdamW's moments — are the datasets of the file: ckpt/state_view.hpp.)
#pragma once

#include <string>

#include "ckpt/metadata.hpp"

namespace trident::ckpt {

class Stateful {
 public:
  virtual ~Stateful() = default;
  // Its section of `checkpoint` from its state now.
  virtual void save(Metadata& checkpoint) const = 0;
  // Its state from its section of `checkpoint`, read from the file at `path` (for messages).
  // Collective where the part's state is shared (every rank restores the same checkpoint).
  virtual void restore(const Metadata& checkpoint, const std::string& path) = 0;
};

}  // namespace trident::ckpt
