// The oneDNN engine and stream every CPU primitive runs on (one of each per process; oneDNN
// runs on the program's OpenMP thread pool), and the error a failing oneDNN call becomes.
#pragma once

#include <dnnl.hpp>

#include <stdexcept>
#include <string>

namespace trident::kernels::cpu {

dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();

// A oneDNN failure as the error the program reports (on the rank where it happened): what we
// asked oneDNN to do — `operation`, e.g. "create the f32 layer normalization of (N 2048, C
// 768)", with its shapes and types — the CPU's ISA, oneDNN's message and status, then `hint`.
std::runtime_error onednn_failure(const std::string& operation, const dnnl::error& error,
                                  const std::string& hint = "");

}  // namespace trident::kernels::cpu
