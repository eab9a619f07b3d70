#!/usr/bin/env bash
# tier: long
# A job killed at random instants (every process of it, as a dead node would be) and restarted
# with resume = auto each time: every restart starts, and the end is the uninterrupted run's
# model bitwise with a complete metrics history (scripts/stress-resume.sh; 11 kills here, more
# with `scripts/stress-resume.sh N`). 1 rank; 2 ranks with ZeRO-1 and asynchronous checkpoints.
LABEL=stress_serial bash scripts/stress-resume.sh 6 1
LABEL=stress_d2_zero_async bash scripts/stress-resume.sh 5 2 --parallel.data=2 --optim.zero=1 --checkpoint.async=true
