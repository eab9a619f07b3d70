#!/usr/bin/env bash
# Hugging Face model directories (model/hf_architectures.hpp): `trident export --format=hf` and
# model.init = DIR, both ways bitwise; sharded and 16-bit files; a checkpoint of a tensor ×
# pipeline run exports the files its model.bin does; a directory read in slices by every rank of
# a parallel run trains as the llm.c file does; transformers itself gives our loss on our files
# (where it is installed: make deps puts it in a virtual environment, else SKIP); hostile files
# are one clear error.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
HF_PY=${TRIDENT_HF_VENV:-/var/cache/trident/hf-venv}/bin/python

cat > a.deck <<DECK
[model]
layers = 4
heads = 4
hidden = 32
vocab = 256
seq_len = 32
[train]
steps = 8
global_batch = 8
micro_batch = 2
eval_interval = 8
eval_tokens = 1024
run_dir = run
[checkpoint]
full_interval = 8steps
[data]
train = $WORK/data/train.bin
val = $WORK/data/val.bin
DECK
"$TRIDENT" train a.deck > run.out 2>&1 || echo "serial run failed: $(tail -2 run.out)"
train_run run_tp2pp2 4 --parallel.tensor=2 --parallel.pipeline=2

# The trained model out and back in: every bit.
"$TRIDENT" export a.deck hf --format=hf --model.init=run/model.bin > export.out 2>&1
"$TRIDENT" export a.deck back.bin --model.init=hf > back.out 2>&1
check export_import_round_trip_bitwise bash -c "[[ -s hf/config.json && -s hf/model.safetensors ]] && cmp run/model.bin back.bin"
"$TRIDENT" eval a.deck --model.init=run/model.bin > eval_bin.out 2>&1
"$TRIDENT" eval a.deck --model.init=hf > eval_hf.out 2>&1
check eval_from_hf_directory bash -c "grep -q '^val_loss' eval_hf.out && [[ \$(tail -1 eval_bin.out) == \$(tail -1 eval_hf.out) ]]"

# Shards above --shard-size and their index: the same model back.
"$TRIDENT" export a.deck sharded --format=hf --shard-size=40kB --model.init=run/model.bin > sharded.out 2>&1
"$TRIDENT" export a.deck sharded.bin --model.init=sharded > /dev/null 2>&1
check sharded_round_trip bash -c "ls sharded | grep -q 'model-00001-of-0000[2-9].safetensors' && [[ -s sharded/model.safetensors.index.json ]] && cmp run/model.bin sharded.bin"

# bf16 files: the header says BF16, config.json bfloat16, and they load to the rounded model.
"$TRIDENT" export a.deck hf16 --format=hf --dtype=bf16 --model.init=run/model.bin > hf16.out 2>&1
"$TRIDENT" eval a.deck --model.init=hf16 > eval_hf16.out 2>&1
check bf16_export bash -c "grep -q '\"BF16\"' <(head -c 4000 hf16/model.safetensors) && grep -q bfloat16 hf16/config.json && grep -q '^val_loss' eval_hf16.out && \
  (( \$(stat -c %s hf16/model.safetensors) < \$(stat -c %s hf/model.safetensors) * 6 / 10 ))"

# A checkpoint of a tensor × pipeline run exports the files its own model.bin does.
"$TRIDENT" export a.deck from_ckpt --format=hf --checkpoint=run_tp2pp2/checkpoints/step-00000008.full.h5 > from_ckpt.out 2>&1
"$TRIDENT" export a.deck from_bin --format=hf --model.init=run_tp2pp2/model.bin > from_bin.out 2>&1
check export_any_layout_checkpoint bash -c "[[ -s from_ckpt/model.safetensors ]] && cmp from_ckpt/model.safetensors from_bin/model.safetensors && cmp from_ckpt/config.json from_bin/config.json"

# Every rank of a tensor × pipeline × data run reads its own slice of the directory: the run is
# the one that starts from the llm.c file, bit for bit.
sed -i 's/^steps = 8/steps = 3/; /^\[checkpoint\]/,/^full_interval/d' a.deck
train_run from_bin 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --model.init=run/model.bin
train_run from_hf 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --model.init=hf
same_losses hf_init_every_rank_reads_its_slice from_bin from_hf

# transformers' GPT2LMHeadModel on our files: our loss (6 digits printed) within 1e-5.
if "$HF_PY" -c 'import transformers' 2>/dev/null; then
  "$HF_PY" "$ROOT/scripts/hf_check.py" hf "$WORK/data/val.bin" 32 32 > transformers.out 2>&1
  same_loss transformers_gives_our_loss eval_hf.out transformers.out transformers
else
  skip transformers_gives_our_loss "transformers is not installed (make deps installs it from PyPI where it can)"
fi

# Hostile directories: one clear error each (exit 2), naming the file and what is wrong.
/usr/bin/python3 - <<'PY'
import json, os, shutil, struct
src = "hf"
def clone(name, config=None):
    shutil.copytree(src, name)
    if config is not None:
        c = json.load(open(f"{src}/config.json")); c.update(config)
        json.dump(c, open(f"{name}/config.json", "w"))
    return name
def header(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]
def rewrite(path, head, data):
    text = json.dumps(head).encode(); text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data)
d = clone("truncated"); raw = open(f"{d}/model.safetensors", "rb").read(); open(f"{d}/model.safetensors", "wb").write(raw[:len(raw) // 2])
d = clone("huge_header"); open(f"{d}/model.safetensors", "r+b").write(struct.pack("<Q", 1 << 60))
d = clone("bad_json"); raw = bytearray(open(f"{d}/model.safetensors", "rb").read()); raw[8] = ord("x"); open(f"{d}/model.safetensors", "wb").write(raw)
d = clone("missing_tensor"); h, data = header(f"{d}/model.safetensors"); del h["transformer.h.2.mlp.c_fc.bias"]; rewrite(f"{d}/model.safetensors", h, data)
d = clone("wrong_shape"); h, data = header(f"{d}/model.safetensors"); h["transformer.h.1.attn.c_attn.weight"]["shape"] = [96, 32]; rewrite(f"{d}/model.safetensors", h, data)
d = clone("overlap"); h, data = header(f"{d}/model.safetensors"); h["transformer.h.0.ln_1.bias"]["data_offsets"] = h["transformer.h.0.ln_1.weight"]["data_offsets"]; rewrite(f"{d}/model.safetensors", h, data)
d = clone("int64"); h, data = header(f"{d}/model.safetensors"); e = h["transformer.ln_f.bias"]; e["dtype"] = "I64"; e["shape"] = [16]; rewrite(f"{d}/model.safetensors", h, data)
d = clone("extra"); h, data = header(f"{d}/model.safetensors")
h["transformer.h.7.ln_1.weight"] = {"dtype": "F32", "shape": [32], "data_offsets": [len(data), len(data) + 128]}; rewrite(f"{d}/model.safetensors", h, data + bytes(128))
clone("mistral", {"model_type": "mistral"})
clone("relu", {"activation_function": "relu"})
clone("deeper", {"n_layer": 6})
shutil.copytree("sharded", "escaping_index")
i = json.load(open("escaping_index/model.safetensors.index.json")); k = next(iter(i["weight_map"])); i["weight_map"][k] = "../hf/model.safetensors"
json.dump(i, open("escaping_index/model.safetensors.index.json", "w"))
os.makedirs("pickle_only"); shutil.copy("hf/config.json", "pickle_only/"); open("pickle_only/pytorch_model.bin", "wb").write(b"PK")
os.makedirs("no_config")
PY
bad() {  # bad NAME 'substrings' : model.init = NAME fails with them, on 1 rank and on 4
  expect_user_error "hf_$1" "$2" "$TRIDENT" train "$WORK/a.deck" --model.init="$WORK/$1"
}
bad truncated "truncated/model.safetensors|do not lie in the file|model.init"
bad huge_header "huge_header/model.safetensors|header length 1152921504606846976"
bad bad_json "bad_json/model.safetensors|at byte 1"
bad missing_tensor "missing_tensor|no tensor 'transformer.h.2.mlp.c_fc.bias'"
bad wrong_shape "tensor 'transformer.h.1.attn.c_attn.weight' has shape [96, 32], the model needs [32, 96]"
bad overlap "overlap/model.safetensors|'transformer.h.0.ln_1.weight'|'transformer.h.0.ln_1.bias'|overlap"
bad int64 "tensor 'transformer.ln_f.bias' has dtype I64; Trident reads F32, BF16 and F16"
bad extra "tensor 'transformer.h.7.ln_1.weight' is not one of GPT2LMHeadModel's for 4 blocks"
bad mistral "mistral/config.json|model_type \"mistral\" is not one Trident reads (gpt2, llama)"
bad relu "\"activation_function\" is \"relu\"|gelu_new"
bad deeper "the model file has model.layers = 6 but the deck says model.layers = 4"
bad escaping_index "model.safetensors.index.json|../hf/model.safetensors|not the name of a file in the directory"
bad pickle_only "holds neither model.safetensors|pytorch_model.bin is a pickle"
bad no_config "no_config"
expect_user_error hf_bad_in_parallel "tensor 'transformer.h.1.attn.c_attn.weight' has shape" \
  mpirun -q -np 4 "$TRIDENT" train "$WORK/a.deck" --model.init="$WORK/wrong_shape" --parallel.tensor=2 --parallel.pipeline=2
expect_user_error export_bad_format "--format=onnx is not llmc or hf" "$TRIDENT" export "$WORK/a.deck" out --format=onnx
expect_user_error export_bad_dtype "--dtype=f8 is not f32, bf16 or fp16" "$TRIDENT" export "$WORK/a.deck" out --format=hf --dtype=f8
expect_user_error export_bad_shard_size "--shard-size=lots" "$TRIDENT" export "$WORK/a.deck" out --format=hf --shard-size=lots
