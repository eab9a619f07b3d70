#!/usr/bin/env python3
"""tsan_reports.py LOG...: ThreadSanitizer's reports that are ours, grouped; exit 1 if any.

Open MPI is not built with ThreadSanitizer, so a buffer that one thread's MPI call fills while
another thread's call drives MPI's progress engine (MPI_THREAD_MULTIPLE: any caller progresses
every request) looks like a race: the synchronisation is inside uninstrumented code. A report
with an MPI, PMIx or libevent frame in it is therefore counted as MPI's and not failed; every
other report (our threads racing on our memory, or on libc's: gmtime's static buffer) fails.
libgomp is not instrumented either: OpenMP's team barriers are invisible, so a report with an
OpenMP worker thread in it (libgomp frames) is the same kind and not counted.
"""
import re
import sys
from collections import Counter

MPI_FRAMES = re.compile(r"libgomp|libopen-pal|libopen-rte|libmpi\.so|mca_\w+\.so|\bopal_|\bompi_|libevent|libpmix|hwloc")
OUR_FRAME = re.compile(r"#\d+ (\S+) ((?:src|kernels|tests)/\S+)")

ours, mpi = Counter(), 0  # mpi: MPI's or OpenMP's
example = {}
for path in sys.argv[1:]:
    text = open(path, errors="replace").read()
    for block in text.split("==================")[1:]:
        if "WARNING: ThreadSanitizer" not in block:
            continue
        if MPI_FRAMES.search(block):
            mpi += 1
            continue
        kind = block.split("WARNING: ThreadSanitizer: ")[1].split("(")[0].strip()
        frames = " | ".join(f"{name} {where}" for name, where in OUR_FRAME.findall(block)[:3])
        key = f"{kind}: {frames}"
        ours[key] += 1
        example.setdefault(key, block.strip())
for key, count in ours.most_common():
    print(f"{count} x {key}")
    print("    " + "\n    ".join(example[key].splitlines()[:40]))
print(f"tsan: {sum(ours.values())} reports of ours, {mpi} inside MPI's progress or OpenMP (not counted)")
sys.exit(1 if ours else 0)
