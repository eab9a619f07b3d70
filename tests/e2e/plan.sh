#!/usr/bin/env bash
# `trident plan`: one process, nothing model-sized allocated — 175B on 1024 GPUs answers in
# seconds; --json is one valid object per layout with the promised fields; the seed's §5.2
# audit says the claim is impossible and the claimed layout does not fit; --emit-deck writes a
# deck that trains; bad input exits 2 with one error line. The measured-vs-predicted check on
# this host is tests/e2e/plan_measured.sh (the long tier).
. tests/e2e/lib.sh
PLAN_DECKS="$ROOT/inputs"
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3

# 175B on 1024 A100s: seconds and a small resident set, in one process without mpirun.
start=$(date +%s%N)
if /usr/bin/time -f '%M' -o rss.txt "$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=a100-80gb-dgx \
    --gpus=1024 > big.out 2> big.err; then
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  rss_mb=$(( $(tail -1 rss.txt) / 1024 ))
  if (( ms < 30000 && rss_mb < 500 )) && grep -q "fit in memory" big.out; then
    pass "plan_175b_1024_gpus (${ms} ms, ${rss_mb} MB resident)"
  else fail "plan_175b_1024_gpus" "${ms} ms, ${rss_mb} MB: $(tail -3 big.out)"; fi
else fail "plan_175b_1024_gpus" "$(tail -3 big.err)"; fi

# ZeRO stages (issue 33): the seed's 175B, tensor 8 x data 4 in bf16 — the distributed
# optimizer's state is 2 + 4 + 12/4 = 9 bytes per parameter of the rank's 21.8 B (~197 GB)
# against 2 + 4 + 12 = 18 (its master unsharded); on 256 A100s the per-stage summary says how
# many layouts fit with each stage, the distributed optimizer more.
"$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=a100-80gb-dgx --optim.zero=1 > zero1.out 2>&1
"$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=a100-80gb-dgx --gpus=256 > stages.out 2>&1
if $PY - zero1.out stages.out > stages.cmp 2>&1 <<'PY'
import re, sys
text = open(sys.argv[1]).read()
g, o, p = (float(re.search(k + r" ([0-9.]+) GB", text).group(1)) for k in ("gradients", "optimizer", "parameters"))
n = 174.56e9 / 8  # the rank's parameters, in round figures (the tensor slice of everything but the embeddings)
listing = open(sys.argv[2]).read()
stages = dict(re.findall(r"optim.zero = ([0-3])[^:]*: ([0-9]+) of [0-9]+ layouts fit", listing))
print(f"t8 d4 ZeRO-1 state {g + o + p:.1f} GB = {(g + o + p) * 1e9 / n:.2f} bytes per parameter "
      f"(optimizer {o} GB); layouts that fit on 256 GPUs: {stages}")
ok = abs((g + o + p) * 1e9 / n - 9) < 0.1 and abs(o * 1e9 / n - 3) < 0.05
# Each stage shards more, so more layouts fit; every stage is searched (issue 33).
fits = [int(stages.get(k, -1)) for k in "0123"]
sys.exit(0 if ok and set(stages) == set("0123") and fits == sorted(fits) and fits[1] > fits[0] else 1)
PY
then pass "plan_zero_stages ($(cat stages.cmp))"; else fail plan_zero_stages "$(cat stages.cmp)"; fi

# --json: every line one object with the fields the issue names; feasible ones ranked by tokens/s.
"$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=h100-80gb-dgx --gpus=256 --json > plan.jsonl 2> json.err
if $PY - plan.jsonl > json.cmp 2>&1 <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
need = ["tensor", "context", "pipeline", "data", "micro_batch", "sequence_parallel", "tp_comm_overlap", "feasible",
        "memory_bytes", "step_time_s", "tokens_per_s", "tflops_per_device", "mfu", "reason", "scaling_efficiency"]
for r in rows:
    missing = [k for k in need if k not in r]
    if missing: sys.exit(print(f"missing {missing} in {r}") or 1)
    if r["tensor"] * r["context"] * r["pipeline"] * r["data"] != r["devices"]: sys.exit(print(f"bad layout {r}") or 1)
    # Per category the largest over ranks; the total is the busiest rank's: at most their sum.
    m = r["memory_bytes"]
    parts = [v for k, v in m.items() if k not in ("total", "runtime", "device_total")]
    if not max(parts) <= m["total"] <= sum(parts):
        sys.exit(print(f"categories and total disagree: {m}") or 1)
    # On the device beside the tensors: the runtime's reservation and NCCL's buffers.
    if not (m["runtime"] > 0 and m["device_total"] == m["total"] + m["runtime"]):
        sys.exit(print(f"no runtime memory, or the device's total is not the tensors' and the runtime's: {m}") or 1)
    if not r["feasible"] and "more than the device" not in r["reason"]: sys.exit(print(f"no reason: {r}") or 1)
search = [r for r in rows if r["source"] == "search"]
fit = [r for r in search if r["feasible"]]
if not fit: sys.exit(print("nothing fits 256 H100s") or 1)
rates = [r["tokens_per_s"] for r in fit]
if rates != sorted(rates, reverse=True): sys.exit(print("not ranked by tokens/s") or 1)
if search[:len(fit)] != fit: sys.exit(print("feasible layouts are not first") or 1)
print(f"{len(rows)} objects, {len(fit)} fit; best {fit[0]['tensor']}x{fit[0]['pipeline']}x{fit[0]['data']} "
      f"{fit[0]['tokens_per_s']:.0f} tokens/s, MFU {100 * fit[0]['mfu']:.0f}%")
PY
then pass "plan_json ($(cat json.cmp))"; else fail "plan_json" "$(cat json.cmp) $(head -c 300 json.err)"; fi

# The seed's §5.2: 680 samples/s on 32 DGX A100 is above the peak, and tensor 8 x data 4 does not fit.
"$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=a100-80gb-dgx --gpus=256 --audit samples_per_s=680 > audit.out 2>&1
if grep -q "IMPOSSIBLE: above the peak" audit.out && grep -q "claimed layout.*DOES NOT FIT" audit.out &&
   grep -q "18.8 x the peak" audit.out; then
  pass "plan_seed_audit ($(grep -o '[0-9.]* x the peak' audit.out))"
else fail "plan_seed_audit" "$(grep -A6 '^audit' audit.out)"; fi

# The scaling curve over a range, with the seed's rule beside it.
"$TRIDENT" plan "$PLAN_DECKS/bench-124m.deck" --hardware=h200 --gpus=1-64 --train.global_batch=64 > curve.out 2>&1
if grep -q "^scaling:" curve.out && grep -q "seed §2.1" curve.out && grep -q "model's best device count" curve.out &&
   [[ $(grep -cE '^ +(1|2|4|8|16|32|64) ' curve.out) -ge 7 ]]; then
  pass "plan_scaling_curve"
else fail "plan_scaling_curve" "$(tail -20 curve.out)"; fi

# --plot: the same curve as a PNG (libpng) that a reader decodes: 640x400 RGB, white ground, the
# curve's blue points drawn.
"$TRIDENT" plan "$PLAN_DECKS/bench-124m.deck" --hardware=h200 --gpus=1-64 --train.global_batch=64 \
  --plot=curve.png > plot.out 2>&1
if $PY - curve.png > plot.cmp 2>&1 <<'PY'
import sys
import matplotlib.image as mpimg
image = mpimg.imread(sys.argv[1])  # float RGB in [0, 1]
assert image.shape == (400, 640, 3), image.shape
pixels = (image * 255).round().astype(int).reshape(-1, 3).tolist()
assert pixels.count([255, 255, 255]) > 0.8 * len(pixels), "not a white ground"
assert pixels.count([30, 90, 200]) > 50, "no curve drawn"
PY
then pass "plan_plot_png_decodes"; else fail "plan_plot_png_decodes" "$(cat plot.out plot.cmp | tail -5)"; fi

# --emit-deck: the best layout for 4 ranks of this host, written as a deck that trains.
write_deck small.deck '[topology]
ranks_per_node = 2'
if "$TRIDENT" plan small.deck --hardware=a100-80gb-dgx --gpus=4 --emit-deck=best.deck > emit.out 2>&1 &&
   grep -q "^tensor = \|^\[parallel\]" best.deck &&
   timeout 120 mpirun -q -np 4 "$TRIDENT" train best.deck --train.run_dir=emitted > emitted.out 2>&1 &&
   [[ -f emitted/metrics.h5 ]]; then
  pass "plan_emit_deck ($(sed -n 's/^wrote best.deck (\(.*\))/\1/p' emit.out))"
else fail "plan_emit_deck" "$(tail -3 emit.out) $(tail -3 emitted.out 2>/dev/null)"; fi

# Bad input: exit 2, one error line naming the problem.
expect_user_error plan_unknown_profile "hardware profile|this-host" "$TRIDENT" plan "$PLAN_DECKS/tiny.deck" --hardware=nosuch
expect_user_error plan_bad_gpus "--gpus" "$TRIDENT" plan "$PLAN_DECKS/tiny.deck" --gpus=zero
expect_user_error plan_bad_audit "samples_per_s" "$TRIDENT" plan "$PLAN_DECKS/tiny.deck" --audit tokens=5
# --as=megatron: Megatron-LM's costs where the implementations differ (16-bit activations on the
# wire and in the element-wise passes, dropout): the same layout, another predicted step, said so.
step_of() { "$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=a100-80gb-dgx --optim.precision=bf16 --json "$@" |
  head -1 | $PY -c 'import json, sys; print(json.loads(sys.stdin.read())["step_time_s"])'; }
ours=$(step_of) theirs=$(step_of --as=megatron)
if "$TRIDENT" plan "$PLAN_DECKS/seed-175b.deck" --hardware=a100-80gb-dgx --as=megatron | head -1 |
     grep -q "Megatron-LM's costs (--as=megatron" && $PY -c "import sys; sys.exit(0 if 0 < $theirs < $ours else 1)"; then
  pass "plan_as_megatron (t8 d4 bf16 step: Trident's ${ours} s, Megatron-LM's ${theirs} s)"
else fail plan_as_megatron "Trident's ${ours:-?} s, Megatron-LM's ${theirs:-?} s"; fi
# --as=torchtitan: its per-layer activation checkpointing recomputes one block in K, Trident's
# every_k all of them: the same deck's step is shorter, and the header says whose costs.
titan_step() { "$TRIDENT" plan "$PLAN_DECKS/llama3-8b.deck" --hardware=h100-500w --memory.recompute=every_k --json "$@" |
  head -1 | $PY -c 'import json, sys; print(json.loads(sys.stdin.read())["step_time_s"])'; }
ours=$(titan_step) theirs=$(titan_step --as=torchtitan)
if "$TRIDENT" plan "$PLAN_DECKS/llama3-8b.deck" --hardware=h100-500w --as=torchtitan | head -1 |
     grep -q "TorchTitan's costs (--as=torchtitan" && $PY -c "import sys; sys.exit(0 if 0 < $theirs < $ours else 1)"; then
  pass "plan_as_torchtitan (Llama 3 8B d8, every_k 2: Trident's ${ours} s, TorchTitan's ${theirs} s)"
else fail plan_as_torchtitan "Trident's ${ours:-?} s, TorchTitan's ${theirs:-?} s"; fi
expect_user_error plan_bad_as "--as takes trident, megatron or torchtitan, not 'deepspeed'" "$TRIDENT" plan "$PLAN_DECKS/tiny.deck" --as=deepspeed
expect_user_error plan_missing_deck "deck" "$TRIDENT" plan nosuch.deck
expect_user_error plan_bad_key "unknown option" "$TRIDENT" plan "$PLAN_DECKS/tiny.deck" --parallel.tensr=2
printf '[device]\nname = x\nmemory_gb = -1\n' > bad.ini
expect_user_error plan_bad_profile "bad.ini|memory_gb" "$TRIDENT" plan "$PLAN_DECKS/tiny.deck" --hardware="$WORK/bad.ini"
