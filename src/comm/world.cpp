// The control communicators on MPI: duplicates and splits of MPI communicators, each owned by
// the MpiCommunicator made over it.
#include "comm/world.hpp"

#include "comm/agreement.hpp"
#include "comm/mpi/native_handle.hpp"
#include "core/error.hpp"

namespace trident::comm {
namespace {

std::unique_ptr<Communicator> owning(MPI_Comm comm, const std::string& name) {
  std::unique_ptr<MpiCommunicator> group = over_native(comm, name);
  group->own_handle();
  return group;
}

}  // namespace

std::unique_ptr<Communicator> make_world(const std::string& name) {
  MPI_Comm world = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world));
  return owning(world, name);
}

std::unique_ptr<Communicator> duplicate(Communicator& group, const std::string& name) {
  MPI_Comm copy = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_dup(native_handle(group), &copy));
  return owning(copy, name);
}

std::unique_ptr<Communicator> split_by_host(Communicator& group, const std::string& name) {
  MPI_Comm host = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(native_handle(group), MPI_COMM_TYPE_SHARED, group.rank(), MPI_INFO_NULL, &host));
  return owning(host, name);
}

std::unique_ptr<Communicator> split(Communicator& group, int color, int key, const std::string& name) {
  MPI_Comm part = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(native_handle(group), color, key, &part));
  return owning(part, name);
}

std::unique_ptr<Communicator> split_by_value(Communicator& group, const std::string& value, const std::string& name) {
  const std::vector<std::string> values = all_gather_strings(group, value);
  return split(group, first_rank_with_same(values, group.rank()), group.rank(), name);
}

void send_to_missing_rank(Communicator& group) {
  int payload = 0;
  MPI_CHECK(MPI_Send(&payload, 1, MPI_INT, group.size() + 7, 0, native_handle(group)));
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int length = 0;
  MPI_Get_library_version(text, &length);
  return std::string(text, static_cast<size_t>(length));
}

}  // namespace trident::comm
