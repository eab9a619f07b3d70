#include "core/shared_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <stdexcept>
#include <utility>

namespace trident {

SharedLibrary::SharedLibrary(std::string soname, std::string needed_for)
    : soname_(std::move(soname)), needed_for_(std::move(needed_for)) {}

const std::string& SharedLibrary::problem() {
  std::call_once(opened_, [this] {
    // RTLD_LOCAL: its symbols serve the calls made through symbol() alone, never another
    // library's lookups (the functions of the same names defined in this binary forward here).
    handle_ = dlopen(soname_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const char* error = dlerror();
      problem_ = error != nullptr ? error : soname_ + ": cannot be opened";
    }
  });
  return problem_;
}

std::string SharedLibrary::path() {
  if (!problem().empty()) return "";
  const link_map* map = nullptr;
  if (dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) return soname_;
  return map->l_name;
}

void* SharedLibrary::symbol(const char* name) {
  if (!problem().empty())
    throw std::runtime_error(needed_for_ + " needs " + soname_ + ", which cannot be loaded (" + problem_ + ")");
  dlerror();
  void* address = dlsym(handle_, name);
  if (address == nullptr) {
    const char* error = dlerror();
    throw std::runtime_error(needed_for_ + " needs " + name + " from " + path() + ", which lacks it" +
                             (error != nullptr ? std::string(" (") + error + ")" : std::string()));
  }
  return address;
}

}  // namespace trident
