// A shared library opened on first use (dlopen), for the CUDA libraries that only the CUDA
// backend and the NCCL communicator call: cuBLASLt, cuDNN, NVRTC and NCCL. Linked as
// dependencies, they were loaded by every process before main — on the CPU backend too, where
// none is called: cuBLASLt's loading alone maps ~200 MiB and takes ~70 ms a process (8 CPU ranks
// of a node: 1.7 GiB), and a host without them (a login node running `trident plan`) could not
// start the binary at all. Opened here, a CPU run never loads them, and a missing one is a
// sentence that names it where it is needed (kernels.device = cuda, comm.backend = nccl).
//
// Each library's functions that the program calls are defined with TRIDENT_FORWARD (in one
// file per library: kernels/cuda/cuda_libraries.cpp, comm/nccl/nccl_library.cpp) as calls
// through the library's own, resolved on the first call; the rest of the program calls the
// libraries' documented functions as before. Opened libraries are never closed (CUDA's
// libraries keep state for the process's life).
#pragma once

#include <mutex>
#include <string>

namespace trident {

class SharedLibrary {
 public:
  // soname: as the linker names the library ("libcublasLt.so.13"), looked for as ld.so looks for
  // a dependency of the binary: LD_LIBRARY_PATH, the binary's run path, ldconfig's cache.
  // needed_for: what needs it, for the error ("kernels.device = cuda").
  SharedLibrary(std::string soname, std::string needed_for);
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  const std::string& soname() const { return soname_; }
  // Opens the library on the first call: "" once it is open, else why it cannot be
  // ("libnccl.so.2: cannot open shared object file: No such file or directory").
  const std::string& problem();
  // The path it was loaded from ("" where it is not open).
  std::string path();
  // The address of the function `name` in it; throws std::runtime_error naming the library, the
  // function and what needs it where the library cannot be opened or lacks the function.
  void* symbol(const char* name);

 private:
  std::string soname_, needed_for_;
  std::once_flag opened_;
  void* handle_ = nullptr;
  std::string problem_;
};

}  // namespace trident

// TRIDENT_FORWARD(LIBRARY, RETURN, NAME, PARAMETERS, ARGUMENTS): defines the C function NAME,
// declared by the library's header (which must be included), as a call to the library's own NAME
// resolved on the first call; LIBRARY is an expression giving its SharedLibrary. A parameter list
// other than the header's does not compile (two C functions of one name).
#define TRIDENT_FORWARD(LIBRARY, RETURN, NAME, PARAMETERS, ARGUMENTS)                               \
  extern "C" RETURN NAME PARAMETERS {                                                              \
    static const auto library_function = reinterpret_cast<decltype(&NAME)>((LIBRARY).symbol(#NAME)); \
    return library_function ARGUMENTS;                                                             \
  }
