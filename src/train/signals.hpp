// Preemption signals. Slurm sends SIGTERM before a preemption or at the time limit (then
// SIGKILL after KillWait) and, with --signal, SIGUSR1 ahead of time; mpirun forwards SIGUSR1.
// The handler only records the signal: the trainer looks at the step boundary, all ranks agree
// (any rank that saw one stops them all), write a full checkpoint and exit with kExitStopped.
#pragma once

namespace trident {

void install_stop_signals();  // SIGUSR1 and SIGTERM
int stop_signal();            // the last one received, 0 if none

}  // namespace trident
