#!/usr/bin/env bash
# model.attention = flash (the memory-efficient attention, issue 32) against the materialized
# one: the same training within 1e-5 over 20 steps in fp32 (serial and with the heads split
# over a tensor group in a (2,2,2) layout), fp16 and bf16 within their storage's precision, and
# the (B, heads, T, T) probabilities gone from the memory estimate (the memory model is held to
# the tracked peaks in memory.sh); and `trident bench --ops`, each operation of the step timed.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
# T = 160: two key tiles of the CPU kernel (128 keys each), the second one short.
write_deck a.deck '[checkpoint]
at_end = false'
sed -i 's/^seq_len = 32$/seq_len = 160/; s/^steps = 2$/steps = 20/; s/^\[model\]$/[model]\nattention = materialized/' a.deck


train_run materialized 1
train_run flash 1 --model.attention=flash
same_losses flash_trains_as_materialized_fp32 materialized flash 1e-5
train_run flash_222 8 --model.attention=flash --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --optim.zero=1 \
  --train.micro_batch=2
same_losses flash_222_zero1_as_serial flash flash_222 1e-5
train_run flash_selective 1 --model.attention=flash --memory.recompute=selective
same_losses flash_selective_recompute_changes_nothing flash flash_selective
train_run flash_every2 2 --model.attention=flash --parallel.pipeline=2 --memory.recompute=every_k --memory.recompute_interval=2
same_losses flash_every_k_recompute_as_serial flash flash_every2 1e-5
for precision in bf16 fp16; do
  train_run "materialized_$precision" 1 --optim.precision="$precision"
  train_run "flash_$precision" 1 --model.attention=flash --optim.precision="$precision"
  same_losses "flash_trains_as_materialized_$precision" "materialized_$precision" "flash_$precision" 2e-3
done
# cuda.attention_products = f32 chooses CUDA's kernels (the first-light f32 ones rather than the
# tensor cores'): the CPU's products are f32 either way, the same bits.
train_run flash_bf16_f32_products 1 --model.attention=flash --optim.precision=bf16 --cuda.attention_products=f32
same_losses cuda_attention_products_leave_the_cpu_alone flash_bf16 flash_bf16_f32_products
# So does cuda.gelu_epilogues = off (CUDA's GELU layer without cuBLASLt's epilogues).
train_run flash_bf16_unfused_gelu 1 --model.attention=flash --optim.precision=bf16 --cuda.gelu_epilogues=off
same_losses cuda_gelu_epilogues_leave_the_cpu_alone flash_bf16 flash_bf16_unfused_gelu
# And cuda.attention_kernel = own (CUDA's flash attention on our kernels instead of cuDNN's).
train_run flash_bf16_own_attention 1 --model.attention=flash --optim.precision=bf16 --cuda.attention_kernel=own
same_losses cuda_attention_kernel_leaves_the_cpu_alone flash_bf16 flash_bf16_own_attention

# The activations of the estimate at T = 512: the probabilities (B, heads, T, T) per block, and
# their gradient's scratch, are gone; only the row statistics (B, heads, T) remain.
activations() {
  mpirun -q -np 1 "$TRIDENT" train a.deck --model.seq_len=512 --check "$@" 2>&1 |
    sed -n 's/^memory_estimate_bytes: .* activations=\([0-9]*\).*/\1/p'
}
with=$(activations) without=$(activations --model.attention=flash)
# 4 blocks of (1, 4 heads, 512, 512) f32 probabilities and one gradient scratch, less 4 blocks of
# (1, 4, 512) f32 statistics (micro-batches of 1 sequence).
expected=$(( (4 + 1) * 4 * 512 * 512 * 4 - 4 * 4 * 512 * 4 ))
if [[ -n $with && -n $without && $((with - without)) == "$expected" ]]; then
  pass "flash_keeps_no_probabilities ($((with / 1048576)) MiB -> $((without / 1048576)) MiB of activations)"
else
  fail flash_keeps_no_probabilities "activations $with -> $without, expected a difference of $expected"
fi

# trident eval builds its model with the deck's attention and classifier, as training does: at
# T = 4096 the flash attention's eval holds no (1, 4, T, T) probabilities — the materialized one
# keeps them for each of the 4 blocks (1 GiB), which its peak resident memory shows.
eval_rss_mib() {  # eval_rss_mib NAME OVERRIDES...: the eval's peak resident memory in MiB, its loss in NAME.out
  local name=$1
  shift
  /usr/bin/python3 - "$TRIDENT" eval a.deck --model.seq_len=4096 --data.val="$WORK/data/train.bin" --train.eval_tokens=4096 \
    --train.micro_batch=1 "$@" 3> "$name.out" <<'PY'
import os, resource, subprocess, sys
with os.fdopen(3, "w") as out:
    status = subprocess.run(sys.argv[1:], stdout=out, stderr=subprocess.STDOUT).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024 if status == 0 else -1)
PY
}
flash_rss=$(eval_rss_mib eval_flash --model.attention=flash) materialized_rss=$(eval_rss_mib eval_materialized --model.attention=materialized)
probabilities_mib=$((4 * 4 * 4096 * 4096 * 4 / 1048576))
if ((flash_rss > 0 && materialized_rss - flash_rss >= probabilities_mib * 8 / 10)) && grep -q '^val_loss' eval_flash.out; then
  pass "eval_holds_no_probabilities (peak resident $flash_rss MiB, materialized $materialized_rss MiB)"
else
  fail eval_holds_no_probabilities "peak resident $flash_rss MiB with flash, $materialized_rss MiB materialized, expected $probabilities_mib MiB less: $(tail -1 eval_flash.out)"
fi

# trident bench --ops (issue 32, item 4): every kernel operation of the step timed, the
# operations' time within the step's, and the attention's operations those of model.attention.
check_ops() {  # check_ops NAME EXPECTED_ATTENTION_OP ABSENT_OP OVERRIDES...
  local name=$1 present=$2 absent=$3
  shift 3
  "$TRIDENT" bench a.deck --ops --steps=2 --warmup=1 "$@" > "$name.ops" 2>&1
  if /usr/bin/python3 - "$name.ops" "$present" "$absent" > "$name.cmp" 2>&1 <<'PY'
import re, sys
text = open(sys.argv[1]).read()
ops = dict((m.group(1), float(m.group(3))) for m in re.finditer(r"^(\w+)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+%$", text, re.M))
step = float(re.search(r"step_ms=([0-9.]+)", text).group(1))
inside = float(re.search(r"operations_ms=([0-9.]+)", text).group(1))
problems = []
if sys.argv[2] not in ops: problems.append(f"no {sys.argv[2]} row")
if sys.argv[3] in ops: problems.append(f"a {sys.argv[3]} row")
for needed in ("linear_forward", "linear_backward", "layernorm_forward", "adamw_update"):
    if needed not in ops: problems.append(f"no {needed} row")
if not (0 < inside <= step) or abs(sum(ops.values()) - inside) > 0.01 * step:
    problems.append(f"operations {inside} ms (rows {sum(ops.values()):.3f}) against a step of {step} ms")
print("; ".join(problems) or f"{len(ops)} operations, {inside:.1f} of {step:.1f} ms")
sys.exit(1 if problems else 0)
PY
  then pass "$name ($(cat "$name.cmp"))"; else fail "$name" "$(cat "$name.cmp")"; fi
}
check_ops bench_ops_times_every_operation attention_forward flash_attention_forward
check_ops bench_ops_with_flash flash_attention_backward attention_backward --model.attention=flash
