#!/usr/bin/env bash
# Training on one rank end to end: prepare, train (losses fall, metrics.h5, determinism),
# eval against an independent PyTorch GPT-2, llm.c export/import, and bad data files.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3


"$TRIDENT" prepare data /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 > prepare.out 2>&1
check prepare_writes_llmc_shards bash -c "grep -q 'prepared data/train.bin' prepare.out && [[ \$(head -c 4 data/train.bin | od -An -td4 | tr -d ' ') == 20240520 ]]"

cat > tiny.deck <<'DECK'
[model]
layers = 2
heads = 2
hidden = 32
vocab = 256
seq_len = 32
[train]
steps = 30
global_batch = 8
micro_batch = 4
eval_interval = 10
eval_tokens = 2048
run_dir = run
seed = 5
[optim]
lr = 3e-3
min_lr = 3e-4
warmup_steps = 5
[data]
train = data/train.bin
val = data/val.bin
[metrics]
log_interval = 10
DECK

"$TRIDENT" train tiny.deck > train.out 2> train.err; status=$?
check train_runs [ "$status" == 0 ]
check train_prints_step_lines bash -c "grep -qE '^step +30/30 \| loss [0-9.]+ \| lr .* tok/s .* TFLOP/s .* ms' train.out"
$PY - run/metrics.h5 > metrics.txt 2>&1 <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
loss, val = f["loss"][:], f["val_loss"][:]
print("rows", len(loss), len(f["step"]), len(f["tokens_per_s"]), len(f["step_ms"]), len(f["memory_mb"]))
print("falls", loss[-5:].mean() < loss[:5].mean() - 0.3, val[-1] < val[0] - 0.3)
print("val_points", len(val), list(f["val_step"][:]))
print("deck", f.attrs["model.layers"], "[model]" in f.attrs["deck"])
PY
check metrics_h5_has_every_step bash -c "grep -q '^rows 30 30 30 30 30' metrics.txt"
check training_and_validation_losses_fall bash -c "grep -q '^falls True True' metrics.txt"
check validation_every_interval bash -c "grep -q '^val_points 4 \[0, 10, 20, 30\]' metrics.txt"
check metrics_h5_carries_the_deck bash -c "grep -q '^deck 2 True' metrics.txt && h5dump -H run/metrics.h5 > /dev/null"

"$TRIDENT" train tiny.deck --train.run_dir=run2 > /dev/null 2>&1
check same_deck_same_losses_bitwise $PY -c "
import h5py, numpy
a, b = h5py.File('run/metrics.h5')['loss'][:], h5py.File('run2/metrics.h5')['loss'][:]
assert a.tobytes() == b.tobytes(), (a, b)
assert open('run/model.bin','rb').read() == open('run2/model.bin','rb').read()"

# The trained model, evaluated by Trident and by an independent PyTorch implementation.
"$TRIDENT" eval tiny.deck --model.init=run/model.bin > eval.out 2>&1
ours=$(tail -1 eval.out | sed -n 's/^val_loss //p')
theirs=$($PY "$ROOT/scripts/torch_gpt2.py" eval --model run/model.bin --data data/val.bin --seq-len 32 --eval-tokens 2048 | tail -1 | sed -n 's/^val_loss //p')
check eval_matches_pytorch_reference $PY -c "
ours, theirs = float('$ours'), float('$theirs')
assert abs(ours - theirs) / theirs < 1e-4, (ours, theirs)"
check eval_last_line_format bash -c "tail -1 eval.out | grep -qE '^val_loss [0-9]+\.[0-9]{1,5}$'"
last_val=$($PY -c "import h5py; print('%.6g' % h5py.File('run/metrics.h5')['val_loss'][-1])")
check eval_equals_training_validation [ "$ours" == "$last_val" ]

# llm.c round trip: export the random init, load it, export again: identical bytes.
"$TRIDENT" export tiny.deck init.bin > /dev/null 2>&1
"$TRIDENT" export tiny.deck again.bin --model.init=init.bin > /dev/null 2>&1
check llmc_export_import_round_trip cmp -s init.bin again.bin
check llmc_header $PY -c "
import numpy; h = numpy.fromfile('init.bin', dtype='<i4', count=8)
assert list(h) == [20240326, 3, 32, 256, 2, 2, 32, 256], h"

expect_user_error model_file_disagrees_with_deck "the model file has model.layers = 2 but the deck says model.layers = 3" \
  "$TRIDENT" eval "$WORK/tiny.deck" --model.init="$WORK/init.bin" --model.layers=3
head -c 3000 "$WORK/init.bin" > "$WORK/short.bin"
expect_user_error model_file_truncated "short.bin': is 3000 bytes but its header describes" \
  "$TRIDENT" eval "$WORK/tiny.deck" --model.init="$WORK/short.bin"

# Bad token files: wrong magic, truncated, a token outside the vocabulary.
cp data/val.bin bad_magic.bin && printf '\x01\x02\x03\x04' | dd of=bad_magic.bin conv=notrunc 2>/dev/null
expect_user_error data_wrong_magic "token file '$WORK/bad_magic.bin': bad magic" \
  "$TRIDENT" eval "$WORK/tiny.deck" --data.val="$WORK/bad_magic.bin"
head -c 5000 data/val.bin > truncated.bin
expect_user_error data_truncated "truncated.bin': is 5000 bytes but its header promises" \
  "$TRIDENT" eval "$WORK/tiny.deck" --data.val="$WORK/truncated.bin"
expect_user_error data_token_outside_vocab "is not below the vocabulary size 100 (model.vocab)" \
  "$TRIDENT" train "$WORK/tiny.deck" --model.vocab=100 --data.train="$WORK/data/train.bin" --data.val="$WORK/data/val.bin"
expect_user_error data_missing "token file '$WORK/none*.bin': no such file" \
  "$TRIDENT" train "$WORK/tiny.deck" --data.train="$WORK/none*.bin"

# Raw uint16 data (nanoGPT's train.bin) and several shards through a glob.
tail -c +1025 data/val.bin > val.u16
"$TRIDENT" eval tiny.deck --model.init=run/model.bin --data.val=val.u16 --data.format=u16 > eval-u16.out 2>&1
check u16_format_reads_the_same_tokens [ "$(tail -1 eval-u16.out)" == "$(tail -1 eval.out)" ]
"$TRIDENT" prepare shard_a /usr/share/common-licenses/GPL-2 > /dev/null 2>&1
"$TRIDENT" prepare shard_b /usr/share/common-licenses/MPL-2.0 > /dev/null 2>&1
"$TRIDENT" train tiny.deck --train.steps=2 --data.train='shard_*/train.bin' --train.run_dir=run_glob > glob.out 2>&1
check glob_reads_several_shards bash -c "grep -q \"train \$(( \$(od -An -td4 -j8 -N4 shard_a/train.bin) + \$(od -An -td4 -j8 -N4 shard_b/train.bin) )) tokens\" glob.out"

# scripts/plot: PNG plots from one or several runs' metrics.h5.
"$ROOT/scripts/plot" run run2 --out plots > plot.out 2>&1
check plot_writes_pngs bash -c "for f in loss throughput memory communication_time; do head -c 8 plots/\$f.png | od -An -tx1 | grep -q '89 50 4e 47' || exit 1; done"
