// The job's control communicators: the world as a Communicator for what every command agrees
// on before and around the parallel work (a deck or a file read on rank 0 and broadcast, an
// error one rank found, thread and memory figures), and the splits of a group by host or by a
// colour. Created from the MPI session (core/mpi_util.hpp) by main(), then passed: nothing
// outside comm/ names MPI_COMM_WORLD or holds a native handle (comm/mpi/native_handle.hpp).
//
// Control communicators have no watchdog deadline: rank 0 may read a large file while the
// others wait in the broadcast, as long as it takes. The training's communicators
// (comm/job_groups.hpp) have one; a rank that stops during training is found by the heartbeat
// (comm/heartbeat.hpp).
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.hpp"

namespace trident::comm {

// Collective over every rank of the job: a communicator of its own over all of them (a
// duplicate of MPI's world, so its messages never meet another's), rank r = world rank r.
std::unique_ptr<Communicator> make_world(const std::string& name = "world");
// Collective over `group`: the same ranks in the same order, with a context of their own (for a
// thread of its own, such as the checkpoint writer's, or a library such as parallel HDF5).
std::unique_ptr<Communicator> duplicate(Communicator& group, const std::string& name);
// Collective over `group`: its members on this rank's host (shared memory: real hosts, not the
// emulated nodes of topology.ranks_per_node), in group order.
std::unique_ptr<Communicator> split_by_host(Communicator& group, const std::string& name);
// Collective over `group`: its members with this rank's `color`, ordered by `key`.
std::unique_ptr<Communicator> split(Communicator& group, int color, int key, const std::string& name);
// Collective over `group`: its members whose `value` equals this rank's (a device's identity, a
// set of visible devices), in group order.
std::unique_ptr<Communicator> split_by_value(Communicator& group, const std::string& value, const std::string& name);

// debug.fail_mode = mpi_error: a send to a rank `group` does not have, whose MPI error ends this
// rank as every failed MPI call does (core/error.hpp, MPI_CHECK): the fault path's test.
void send_to_missing_rank(Communicator& group);

// The MPI library this binary runs on ("Open MPI v4.1.4, ..."), for `trident version`.
std::string mpi_library_version();

}  // namespace trident::comm
