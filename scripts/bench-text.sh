#!/usr/bin/env bash
# bench-text.sh — text in, text out (docs/PERFORMANCE.md, "Tokenizer and generation"):
#   the BPE tokenizer's encoding rate on 1 and 2 OpenMP threads (the copyright files of every
#   installed Debian package, ~30 MB of real English text, a 8192-token BPE learned from it), and
#   `trident generate`'s tokens/s for the default model and the GPT-2 124M shape (random weights:
#   the speed does not depend on them).
set -euo pipefail
BIN=${BIN:-build/bin/trident}
WORK=$(mktemp -d /tmp/trident-bench-text.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cat /usr/share/doc/*/copyright > "$WORK/corpus.txt" 2> /dev/null || true
echo "corpus: $(wc -c < "$WORK/corpus.txt") bytes"
for threads in 1 2; do
  OMP_NUM_THREADS=$threads "$BIN" prepare "$WORK/bpe$threads" "$WORK/corpus.txt" --tokenizer=bpe --vocab=8192 > "$WORK/prepare$threads.out"
  cmp -s "$WORK/bpe1/train.bin" "$WORK/bpe$threads/train.bin" || { echo "threads=$threads: different tokens"; exit 1; }
  awk -v t="$threads" '/^learned/ {learn=$0} /^encoded/ {line=$0; rate=$2 / $(NF-1)}
    END {printf "threads=%d %s: %.1f MB/s | %s\n", t, line, rate, learn}' "$WORK/prepare$threads.out"
done
# Generation: the default deck and the GPT-2 124M shape, random weights, no tokenizer (bytes).
for deck in inputs/default.deck inputs/bench-124m.deck; do
  for threads in 1 2; do
    OMP_NUM_THREADS=$threads "$BIN" generate "$deck" --data.train="$WORK/none/train.bin" --prompt="The" \
      --tokens=120 --temperature=0 2>&1 >/dev/null | sed "s|^|$deck threads=$threads: |"
  done
done
