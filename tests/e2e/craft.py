#!/usr/bin/python3
"""craft.py — files that lie, made as a hostile user would make them (tests/e2e/hostile_files.sh).

  craft.py attrs CKPT.h5 KEY=VALUE ...      set root attributes of a checkpoint (each keeps its
                                            stored type: integer or string) and recompute
                                            metadata_checksum so that it matches again
  craft.py reshape CKPT.h5 [contiguous]     recreate every dataset with the shapes of the model its
                                            (crafted) attributes describe, never written — chunked, or
                                            contiguous as trident writes them: HDF5 stores nothing for
                                            them either way, so the file stays small
  craft.py extlink CKPT.h5 DATASET TARGET   replace DATASET (e.g. params/wte) with an HDF5 external
                                            link to TARGET:/data (TARGET may be a FIFO)
  craft.py llmc OUT.bin KEY=VALUE ...       a sparse llm.c model file (no disk used) whose header
                                            says maxT, V, L, NH, C, Vp as given (default: a tiny
                                            model); its size is what the header claims, or
                                            size=N bytes where given

The metadata checksum is FNV-1a 64 over "format_version=V\\n" and one "name=value\\n" line per
attribute in the order of the table in src/ckpt/metadata.cpp (the kind, then the sections' lists
of src/ckpt/metadata.hpp) (a checksum is no signature:
anyone can recompute it, which is the point of these files).
"""
import struct
import sys

# The order of the table in src/ckpt/metadata.cpp (tests/unit/test_checkpoint.cpp holds it to this list);
# the model.arch … model.norm_eps attributes are format 3's (a format 2 file lacks them), the
# model.rope_* scaling attributes format 4's, layout.virtual_layers format 5's.
FIELDS = [
    "kind", "step", "tokens_seen", "optimizer_updates", "bad_steps_in_a_row", "skipped_steps", "seed",
    "precision", "loss_scale", "loss_scale_good_steps", "loss_scale_hysteresis_left",
    "model.layers", "model.heads", "model.hidden", "model.vocab", "model.padded_vocab", "model.seq_len",
    "model.arch", "model.kv_heads", "model.ffn_hidden", "model.tie_embeddings", "model.rope_theta", "model.norm_eps",
    "model.rope_factor", "model.rope_low_freq_factor", "model.rope_high_freq_factor", "model.rope_original_context",
    "layout.tensor", "layout.pipeline", "layout.data", "layout.zero", "layout.stage_layers",
    "layout.micro_batch", "layout.replica_shares", "layout.virtual_layers", "trident_version", "written_at", "deck",
    "lineage.run_id", "lineage.branch", "lineage.parent",
]


def text_of(value):
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("\n", "\\n")
    return str(int(value))


def fnv1a(text):
    h = 1469598103934665603
    for byte in text.encode():
        h = ((h ^ byte) * 1099511628211) % (1 << 64)
    return h


def attrs(path, assignments):
    import h5py
    import numpy
    with h5py.File(path, "r+") as f:
        for assignment in assignments:
            key, value = assignment.split("=", 1)
            if f.attrs.get_id(key).dtype.kind in "iu":
                f.attrs.create(key, int(value), dtype=numpy.int64)
            else:
                f.attrs.create(key, value, dtype=h5py.string_dtype())
        text = "format_version=%d\n" % int(f.attrs["format_version"])
        text += "".join("%s=%s\n" % (name, text_of(f.attrs[name])) for name in FIELDS if name in f.attrs)
        f.attrs.create("metadata_checksum", fnv1a(text), dtype=numpy.uint64)


def gpt2_shapes(L, C, V, T):
    """The tensors of docs/MODEL.md (model/params.hpp), in order."""
    return [("wte", (V, C)), ("wpe", (T, C)), ("blocks.ln1w", (L, C)), ("blocks.ln1b", (L, C)),
            ("blocks.qkvw", (L, 3 * C, C)), ("blocks.qkvb", (L, 3 * C)), ("blocks.attprojw", (L, C, C)),
            ("blocks.attprojb", (L, C)), ("blocks.ln2w", (L, C)), ("blocks.ln2b", (L, C)),
            ("blocks.fcw", (L, 4 * C, C)), ("blocks.fcb", (L, 4 * C)), ("blocks.fcprojw", (L, C, 4 * C)),
            ("blocks.fcprojb", (L, C)), ("lnfw", (C,)), ("lnfb", (C,))]


def reshape(path, layout):
    import h5py
    with h5py.File(path, "r+") as f:
        a = f.attrs
        shapes = gpt2_shapes(int(a["model.layers"]), int(a["model.hidden"]), int(a["model.padded_vocab"]),
                             int(a["model.seq_len"]))
        for section in [s for s in ("params", "adamw_m", "adamw_v") if s in f]:
            for name, shape in shapes:
                checksum = f[section][name].attrs["checksum"]
                del f[section][name]
                chunks = None if layout == "contiguous" else tuple(min(d, 64) for d in shape)
                f[section].create_dataset(name, shape=shape, dtype="<f4", chunks=chunks)
                f[section][name].attrs["checksum"] = checksum


def extlink(path, dataset, target):
    import h5py
    with h5py.File(path, "r+") as f:
        del f[dataset]
        f[dataset] = h5py.ExternalLink(target, "/data")


def llmc(path, assignments):
    header = {"maxT": 32, "V": 256, "L": 1, "NH": 1, "C": 8, "Vp": 256, "size": -1}
    for assignment in assignments:
        key, value = assignment.split("=", 1)
        header[key] = int(value)
    words = [20240326, 3, header["maxT"], header["V"], header["L"], header["NH"], header["C"], header["Vp"]]
    words += [0] * (256 - len(words))
    size = header["size"]
    if size < 0:  # what the header claims: the parameters of llm.c's GPT-2 in fp32
        L, C, Vp, T = header["L"], header["C"], header["Vp"], header["maxT"]
        size = 1024 + 4 * (Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *[w if w < 2**31 else 2**31 - 1 for w in words]))
        f.truncate(max(size, 1024))


if __name__ == "__main__":
    command, target, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    if command == "attrs":
        attrs(target, rest)
    elif command == "reshape":
        reshape(target, rest[0] if rest else "chunked")
    elif command == "extlink":
        extlink(target, rest[0], rest[1])
    elif command == "llmc":
        llmc(target, rest)
    else:
        sys.exit("craft.py: unknown command " + command)
