#!/usr/bin/env bash
# tier: long
# reference.sh — training arithmetic bit for bit against recorded fingerprints (a redesign may
# change structure, never results): the default deck in fp32 and bf16 on one rank, and a
# (2,2,2) ZeRO-1 run on 8 ranks; per-step losses, validation losses and the final model file.
# Each in portable arithmetic (kernels.arithmetic = portable: one record for every x86-64 and
# AArch64 CPU, build target and thread count, so these never skip) and in native arithmetic
# (records per CPU instruction set and build target: SKIP lines on a CPU without one).
BUILD=${BUILD:-build} scripts/reference-runs.sh check
