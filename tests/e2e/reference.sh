# reference.sh — training arithmetic bit for bit against recorded fingerprints (issue 15: a
# redesign may change structure, never results): the default deck in fp32 and bf16 on one
# rank, and a (2,2,2) ZeRO-1 run on 8 ranks; per-step losses, validation losses and the final
# model file. A CPU without a record (another instruction set) gives SKIP lines.
BUILD=${BUILD:-build} scripts/reference-runs.sh check
