// A heartbeat around the ranks of a job, so that a rank that stops running (SIGSTOP, a node
// swapping itself to death, a hung kernel) ends the job within seconds, naming it, instead of
// after the collective watchdog (comm.timeout_s, minutes: it must allow for long steps).
//
// Each rank runs one thread on a communicator of its own (a duplicate of the world): every
// `interval` seconds it sends a small message to its right neighbour (rank + 1 mod n) and it
// watches its left neighbour's messages. Left silent for `timeout` seconds: this rank reports
// the silent rank and its host and aborts the job. O(1) messages per rank and interval, none
// on the training's communicators, and independent of what the main thread is doing (a long
// step, a checkpoint write): only a rank whose every thread stopped falls silent.
//
// A suspended job (`scontrol suspend` stops every rank) is not a dead rank: a watcher that
// notices it did not run itself for longer than the interval (its own clock jumped) restarts
// its count instead of blaming its neighbour.
//
// Stopping is a handshake so that no message is left unmatched at MPI_Finalize: each rank
// sends "done" to the right and keeps receiving (and watching) its left neighbour until its
// "done" arrives. Needs MPI_THREAD_MULTIPLE (else: no heartbeat, with a warning).
#pragma once

#include <mpi.h>

#include <atomic>
#include <string>
#include <thread>

#include "comm/communicator.hpp"

namespace trident::comm {

class Heartbeat {
 public:
  // Collective over `world` (a plain MPI communicator over every rank: comm/world.hpp).
  // timeout <= 0 or a single rank: nothing runs.
  Heartbeat(Communicator& world, double interval_s, double timeout_s);
  ~Heartbeat();  // the stop handshake (collective in effect: every rank must get here)
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  void run();
  void watch_left(double& heard_at, double& last_loop);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double interval_s_, timeout_s_;
  std::string left_host_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  // The left neighbour's receive in flight: its payload (a beat count, or -1 = done).
  MPI_Request receive_ = MPI_REQUEST_NULL;
  long long received_ = 0;
  bool left_done_ = false;
};

}  // namespace trident::comm
