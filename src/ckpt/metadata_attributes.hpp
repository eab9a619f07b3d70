// The metadata as the root attributes of an open HDF5 file (ckpt/metadata.hpp).
#pragma once

#include <string>

#include "ckpt/metadata.hpp"
#include "core/h5.hpp"

namespace trident::ckpt {

// The attributes of an open file: writes them all (with format_version, checksum_algorithm and
// metadata_checksum), "" or what failed.
std::string write_metadata(hid_t file, const Metadata& metadata);
// Reads them into `metadata` and checks them (the checksum, every value for sense): "" or what
// is missing, altered or impossible.
std::string read_metadata_of(hid_t file, Metadata& metadata);

}  // namespace trident::ckpt
