// Preemption signals. Slurm sends SIGTERM before a preemption or at the time limit (then
// SIGKILL after KillWait) and, with --signal, SIGUSR1 ahead of time; mpirun forwards SIGUSR1.
// SIGINT (Ctrl-C on a rank run without a launcher) takes the same path; a second SIGINT ends the
// process at once. The handler only records the signal: the trainer looks at the step
// boundary, all ranks agree (any rank that saw one stops them all), write a full checkpoint and
// exit with kExitStopped.
#pragma once

namespace trident {

void install_stop_signals();  // SIGUSR1, SIGTERM and SIGINT
int stop_signal();            // the last one received, 0 if none
const char* stop_signal_name(int signal);  // "SIGTERM", …; "a stop signal" for another number

}  // namespace trident
