// The program's version, shown by --version, written into resolved decks and output files.
#pragma once

#define TRIDENT_VERSION "0.1.0"

#include <string>

namespace trident {

// A library's version numbered major·10000 + minor·100 + patch (NCCL, cuDNN 9, cudnn-frontend),
// written "2.28.9".
inline std::string dotted_version(long long code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

}  // namespace trident
