#!/usr/bin/env python3
"""The loss of a Hugging Face model directory on an llm.c token shard, by transformers itself.

    hf_check.py MODEL_DIR VAL.bin SEQ_LEN WINDOWS

Reads the directory with transformers' AutoModelForCausalLM.from_pretrained (float32, the
safetensors Trident wrote), and prints `val_loss X`: the mean cross-entropy over WINDOWS windows
of SEQ_LEN tokens (window w: tokens [w*T, w*T + T] — what `trident eval` computes), so that the
two can be compared. Exit 3 when transformers is not installed (the caller skips).
"""
import struct
import sys

try:
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM
except ImportError as e:  # the check is optional where transformers cannot be installed
    print(f"transformers not available: {e}", file=sys.stderr)
    sys.exit(3)


def llmc_tokens(path):
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        if header[0] != 20240520:
            sys.exit(f"{path}: not an llm.c token shard")
        return np.frombuffer(f.read(2 * header[2]), dtype=np.uint16).astype(np.int64)


def main():
    model_dir, val, T, windows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    model.eval()
    tokens = torch.from_numpy(llmc_tokens(val))
    total = 0.0
    with torch.no_grad():
        for w in range(windows):
            window = tokens[w * T: w * T + T + 1].unsqueeze(0)
            logits = model(window[:, :-1]).logits.double()  # (1, T, V)
            loss = torch.nn.functional.cross_entropy(logits[0], window[0, 1:], reduction="sum")
            total += loss.item()
    print(f"val_loss {total / (windows * T):.9g}")


if __name__ == "__main__":
    main()
