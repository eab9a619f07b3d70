#!/usr/bin/env python3
"""gpt2_encoder.py — OpenAI's GPT-2 encoder (encoder.py of github.com/openai/gpt-2: bytes_to_unicode,
get_pairs, bpe and the pre-tokenising pattern, as published under the MIT License, Copyright (c)
2019 OpenAI) over a directory's encoder.json and vocab.bpe: the reference that
`trident prepare --tokenizer=gpt2` is held to (tests/e2e/generate.sh).

  gpt2_encoder.py encode VOCAB_DIR TOKENS.bin TEXT...   exit 0 when the llm.c token files
                                                        TOKENS.bin (train then val, comma-separated)
                                                        hold exactly OpenAI's encoding of the texts,
                                                        each text encoded on its own
  gpt2_encoder.py decode VOCAB_DIR TOKENS.bin FILE...    exit 0 when the tokens decode to the
                                                        bytes of the files, concatenated
"""
import json
import struct
import sys
from functools import lru_cache


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, [chr(n) for n in cs]))


def get_pairs(word):
    return set(zip(word[:-1], word[1:]))


def load(vocab_dir):
    encoder = json.load(open(vocab_dir + "/encoder.json"))
    merges = [tuple(line.split()) for line in open(vocab_dir + "/vocab.bpe", encoding="utf-8").read().split("\n")[1:-1]]
    return encoder, dict(zip(merges, range(len(merges))))


def tokens_of(paths):
    tokens = []
    for path in paths.split(","):
        data = open(path, "rb").read()
        count = struct.unpack("<3i", data[:12])[2]
        tokens += struct.unpack("<%dH" % count, data[1024:1024 + 2 * count])
    return tokens


def encode_all(vocab_dir, texts):
    import regex as re
    encoder, ranks = load(vocab_dir)
    byte_encoder = bytes_to_unicode()
    pat = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

    @lru_cache(maxsize=None)
    def bpe(token):
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: ranks.get(pair, float("inf")))
            if bigram not in ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                    new_word.extend(word[i:j])
                    i = j
                except ValueError:
                    new_word.extend(word[i:])
                    break
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        return " ".join(word)

    out = []
    for text in texts:
        for token in re.findall(pat, text):
            token = "".join(byte_encoder[b] for b in token.encode("utf-8"))
            out.extend(encoder[bpe_token] for bpe_token in bpe(token).split(" "))
    return out


def main():
    mode, vocab_dir, token_files, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    ours = tokens_of(token_files)
    if mode == "encode":
        reference = encode_all(vocab_dir, [open(f, encoding="utf-8").read() for f in files])
        first = next((i for i, (a, b) in enumerate(zip(reference, ours)) if a != b), min(len(reference), len(ours)))
        print(f"{len(ours)} tokens, OpenAI's encoder {len(reference)}; first difference at {first}")
        sys.exit(0 if reference == ours else 1)
    encoder, _ = load(vocab_dir)
    byte_decoder = {v: k for k, v in bytes_to_unicode().items()}
    decoder = {v: k for k, v in encoder.items()}
    decoded = bytes(byte_decoder[c] for t in ours for c in decoder[t])
    expected = b"".join(open(f, "rb").read() for f in files)
    print(f"{len(ours)} tokens decode to {len(decoded)} bytes; the files hold {len(expected)}")
    sys.exit(0 if decoded == expected else 1)


if __name__ == "__main__":
    main()
