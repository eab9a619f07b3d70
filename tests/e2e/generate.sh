#!/usr/bin/env bash
# Text in, text out (issue 19): `trident prepare` with a byte-level BPE learned from the input
# (GPT-2's files, the data directory's record) and with GPT-2-format vocabulary files (encoding
# exactly as OpenAI's encoder.py, byte-exact round trips over text, binary and invalid UTF-8),
# training refusing a model.vocab below the tokenizer's, `trident generate` (the same seed gives
# the same text; a checkpoint of a tensor-parallel run gives the model.bin's text; bad prompts and
# model files are deck errors), and `make run`'s script printing a sample after the ETA/MFU lines.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3


# Texts: two licenses and a multilingual one (scripts, numbers, contractions, odd whitespace).
LICENSES=(/usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0)
$PY - <<'PY'
import random
random.seed(4)
words = ["naïve", "café", "東京", "Москва", "x²", "½", "2024", "don't", "we'll", "I'M", "\u3000", "\u00a0",
         "\t", "\n\n", "  ", "!?", "emoji\U0001F600", "αβγ", "١٢٣"]
open("multi.txt", "w", encoding="utf-8").write(" ".join(random.choice(words) for _ in range(20000)))
open("binary.bin", "wb").write(bytes(random.getrandbits(8) for _ in range(60000)))
open("invalid.txt", "wb").write(b"ok \xff\xfe \xc3\x28 \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 end\xc3" * 200)
PY

"$TRIDENT" prepare bpe "${LICENSES[@]}" multi.txt --tokenizer=bpe --vocab=512 > prepare_bpe.out 2>&1
check prepare_bpe_writes_vocabulary bash -c "grep -q 'vocab 512 (bpe)' prepare_bpe.out && grep -qx 'kind = bpe' bpe/tokenizer.txt &&
  grep -qx 'vocab = 512' bpe/tokenizer.txt && [[ \$(head -1 bpe/vocab.bpe) == '#version: 0.2' && \$(wc -l < bpe/vocab.bpe) == 257 ]] &&
  $PY -c 'import json, sys; e = json.load(open(\"bpe/encoder.json\")); sys.exit(sorted(e.values()) != list(range(512)))' &&
  echo \"\$(tail -1 prepare_bpe.out)\""

# The vocabulary files as GPT-2's: encoded by `--tokenizer=gpt2` exactly as OpenAI's encoder.py does.
"$TRIDENT" prepare gpt2 "${LICENSES[@]}" multi.txt --tokenizer=gpt2 --vocab-files=bpe > prepare_gpt2.out 2>&1
check gpt2_files_reproduce_the_encoding bash -c "grep -q 'vocab 512 (gpt2)' prepare_gpt2.out && cmp bpe/train.bin gpt2/train.bin &&
  cmp bpe/encoder.json gpt2/encoder.json && cmp bpe/vocab.bpe gpt2/vocab.bpe && grep -qx 'kind = gpt2' gpt2/tokenizer.txt && echo same shards"
if $PY -c 'import regex' 2> /dev/null; then
  check encodes_as_openai_encoder $PY "$ROOT/tests/e2e/gpt2_encoder.py" encode bpe bpe/train.bin,bpe/val.bin "${LICENSES[@]}" multi.txt
else
  skip encodes_as_openai_encoder "python3-regex is not installed (make deps)"
fi

# Byte-exact round trip through the shards: text, random binary, invalid UTF-8.
"$TRIDENT" prepare mixed "${LICENSES[0]}" binary.bin invalid.txt multi.txt --tokenizer=bpe --vocab=700 > prepare_mixed.out 2>&1
check round_trip_is_byte_exact $PY "$ROOT/tests/e2e/gpt2_encoder.py" decode mixed mixed/train.bin,mixed/val.bin \
  "${LICENSES[0]}" binary.bin invalid.txt multi.txt

expect_user_error prepare_bpe_needs_vocab "--tokenizer=bpe needs --vocab=N" "$TRIDENT" prepare out "${LICENSES[0]}" --tokenizer=bpe
expect_user_error prepare_unknown_tokenizer "--tokenizer=sentencepiece is not bytes, bpe, gpt2 or hf" \
  "$TRIDENT" prepare out "${LICENSES[0]}" --tokenizer=sentencepiece
expect_user_error prepare_gpt2_missing_files "missing/encoder.json|encoder.json and vocab.bpe" \
  "$TRIDENT" prepare out "${LICENSES[0]}" --tokenizer=gpt2 --vocab-files="$WORK/missing"

cat > bpe.deck <<DECK
[model]
layers = 2
heads = 2
hidden = 32
vocab = 512
seq_len = 48
[train]
steps = 40
global_batch = 8
micro_batch = 4
eval_interval = 0
eval_tokens = 2048
run_dir = run
[optim]
lr = 3e-3
[data]
train = $WORK/bpe/train.bin
val = $WORK/bpe/val.bin
[checkpoint]
at_end = true
DECK
expect_user_error train_refuses_vocab_below_tokenizer "model.vocab = 256|512 tokens|set model.vocab = 512 or more" \
  "$TRIDENT" train "$WORK/bpe.deck" --model.vocab=256

"$TRIDENT" train bpe.deck > train.out 2>&1; status=$?
check train_on_bpe_data bash -c "[[ $status == 0 ]] && grep -E '^step +40/40 .* \| MFU +[0-9.]+% \| ETA 0s' train.out && grep -E '^run: .* tokens/s .*evaluation .* checkpoints' train.out"
gen() {  # gen NAME ARGS...: stdout of generate into NAME.txt
  local name=$1; shift
  "$TRIDENT" generate bpe.deck --prompt="This License" --tokens=40 "$@" > "$name.txt" 2> "$name.err"
}
gen greedy_a --model.init=run/model.bin --temperature=0 && gen greedy_b --model.init=run/model.bin --temperature=0
gen seed3_a --model.init=run/model.bin --seed=3 && gen seed3_b --model.init=run/model.bin --seed=3 --temperature=1
gen seed4 --model.init=run/model.bin --seed=4
check generate_is_deterministic bash -c "cmp greedy_a.txt greedy_b.txt && cmp seed3_a.txt seed3_b.txt && ! cmp -s seed3_a.txt seed4.txt &&
  grep -q '^This License' greedy_a.txt && grep -E 'generated 40 tokens .* tokens/s' greedy_a.err"

# A checkpoint of a tensor x pipeline run, read whole: the same text as its model.bin.
mpirun -np 2 "$TRIDENT" train bpe.deck --parallel.tensor=2 --train.run_dir=run_tp2 > train_tp2.out 2>&1
gen tp2_model --model.init=run_tp2/model.bin --temperature=0
gen tp2_checkpoint --checkpoint=run_tp2/checkpoints/step-00000040.full.h5 --temperature=0
check generate_from_any_layout_checkpoint bash -c "[[ -s tp2_model.txt ]] && cmp tp2_model.txt tp2_checkpoint.txt && echo equal text"

head -c 5000 /dev/urandom > junk.bin
cp junk.bin step-00000001.full.h5
expect_user_error generate_empty_prompt "--prompt=TEXT" "$TRIDENT" generate "$WORK/bpe.deck" --prompt=
expect_user_error generate_prompt_too_long "do not fit the model's context of 48 positions" \
  "$TRIDENT" generate "$WORK/bpe.deck" --prompt="This License" --tokens=100
expect_user_error generate_bad_model_file "junk.bin|model.init" "$TRIDENT" generate "$WORK/bpe.deck" --prompt=Hi --model.init="$WORK/junk.bin"
expect_user_error generate_missing_checkpoint "no-such.h5|no such file" \
  "$TRIDENT" generate "$WORK/bpe.deck" --prompt=Hi --checkpoint="$WORK/no-such.h5"
expect_user_error generate_corrupt_checkpoint "step-00000001.full.h5" \
  "$TRIDENT" generate "$WORK/bpe.deck" --prompt=Hi --checkpoint="$WORK/step-00000001.full.h5"

# make run's script in a scratch tree: prepares with the BPE, trains, prints a sample.
mkdir -p makerun/build/bin && ln -s "$TRIDENT" makerun/build/bin/trident && ln -s "$ROOT/scripts" "$ROOT/inputs" makerun/
(cd makerun && timeout 300 bash scripts/run-default.sh --train.steps=20 --train.eval_interval=0 > ../makerun.out 2>&1)
check make_run_prints_sample bash -c "grep -q 'vocab 1024 (bpe)' makerun.out && grep -qE '^step +20/20 .* \| MFU .* \| ETA' makerun.out &&
  grep -A1 '^sample (' makerun.out | grep '^This License' && grep -q 'tokens/s' makerun.out"
