#!/usr/bin/env python3
"""Writes Hugging Face tokenizer.json files from a GPT-2-format vocabulary (encoder.json,
vocab.bpe), in the two kinds Trident reads, with only the standard library:

    tokenizer_json.py VOCAB_DIR gpt2 OUT.json    GPT-2's kind: ByteLevel with its own pattern,
                                                 merges as "a b", <|endoftext|> added at id V
    tokenizer_json.py VOCAB_DIR llama3 OUT.json  Llama 3's kind: a Split with Llama 3's pattern then
                                                 ByteLevel, ignore_merges, merges as [a, b] pairs,
                                                 the vocabulary filled up to Llama 3's 128,000 with
                                                 tokens " fill0" ... (no merge makes them: only
                                                 ignore_merges finds them), then 256 special tokens
"""
import json
import sys

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def main():
    vocab_dir, kind, out = sys.argv[1:4]
    vocab = json.load(open(f"{vocab_dir}/encoder.json", encoding="utf-8"))
    lines = open(f"{vocab_dir}/vocab.bpe", encoding="utf-8").read().split("\n")
    merges = [line for line in lines[1:] if line]
    special = lambda i, text: {"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
                               "normalized": False, "special": True}
    if kind == "gpt2":
        n = len(vocab)
        vocab["<|endoftext|>"] = n
        added = [special(n, "<|endoftext|>")]
        pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        model_merges, ignore = merges, False
    else:
        for i in range(128000 - len(vocab)):
            vocab[f"\u0120fill{i}"] = len(vocab)
        names = ["<|begin_of_text|>", "<|end_of_text|>"] + [f"<|reserved_special_token_{i}|>" for i in range(254)]
        added = [special(len(vocab) + i, t) for i, t in enumerate(names)]
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
        model_merges, ignore = [m.split(" ") for m in merges], True
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": pre, "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "ignore_merges": ignore, "vocab": vocab, "merges": model_merges}}
    json.dump(doc, open(out, "w", encoding="utf-8"), ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
