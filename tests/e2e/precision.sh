#!/usr/bin/env bash
# Mixed precision (optim.precision = bf16 | fp16): parallel layouts against the serial run of
# the same precision (200 steps on the default corpus against fp32: precision_curve.sh); tracked
# parameter bytes in 16 bits beside the fp32 master weights; fp16's dynamic loss scaling
# (overflow → step skipped and counted, scale reduced after the hysteresis, growth after the
# window, a fixed scale, too many overflows in a row → exit 1); bit-exact resume with the
# scaler's state; the deck error of a loss scale without fp16.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3

write_resume_deck m.deck
run() {  # run NAME RANKS OVERRIDES...
  local name=$1 ranks=$2
  shift 2
  timeout 120 mpirun -q -np "$ranks" "$TRIDENT" train m.deck --train.run_dir="$name" "$@" > "$name.out" 2>&1
}

# Layouts against the serial run of the same precision. The GEMMs of a tensor slice sum over
# other partial products and round other partial results to 16 bits, so the agreement is that
# of two roundings (1e-2), not fp32's 1e-5.
L222="--parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --optim.zero=1"
for precision in bf16 fp16; do
  run "serial_$precision" 1 --optim.precision=$precision || fail "serial_$precision" "$(tail -3 serial_$precision.out)"
  run "t2p2d2_zero1_$precision" 8 $L222 --optim.precision=$precision ||
    { fail "t2p2d2_zero1_$precision" "$(tail -3 t2p2d2_zero1_$precision.out)"; continue; }
  same_losses "layout_t2p2d2_zero1_matches_serial_$precision" "serial_$precision" "t2p2d2_zero1_$precision" 1e-2
done
run t1p2d1_gpipe_bf16 2 --parallel.pipeline=2 --parallel.schedule=gpipe --optim.precision=bf16 &&
  same_losses layout_t1p2d1_gpipe_matches_serial_bf16 serial_bf16 t1p2d1_gpipe_bf16 1e-2 ||
  fail layout_t1p2d1_gpipe_matches_serial_bf16 "$(tail -3 t1p2d1_gpipe_bf16.out)"

# Tracked bytes: the 16-bit parameters (2 bytes each) and the f32 copy of those read in f32
# (biases, LayerNorm parameters, wpe), fp32 gradients, and the optimizer's fp32 master weights
# beside AdamW's moments (all three of its ZeRO shard: the distributed optimizer).
if $PY - > counts.cmp 2>&1 <<'PY'
import sys, h5py
L, C, V, T = 4, 32, 256, 32
Vp = (V + 127) // 128 * 128
def count(tp, layers, first, last):
    n = layers * (12 * C * C // tp + 6 * C + 7 * C // tp)
    if first: n += Vp // tp * C + T * C
    if last: n += 2 * C + (Vp // tp * C if not first else 0)
    return n
def f32_reads(tp, layers, first, last):  # what is not a GEMM weight
    return layers * (6 * C + 7 * C // tp) + (T * C if first else 0) + (2 * C if last else 0)
ok = True
for run, part, shard in (("serial_bf16", (1, 4, True, True), None), ("t2p2d2_zero1_bf16", (2, 2, True, False), 2)):
    n = count(*part)
    f = h5py.File(run + "/metrics.h5", "r")
    got = {k: int(f["memory/" + k + "_bytes"][-1]) for k in ("parameters", "gradients", "optimizer")}
    owned = (n + shard - 1) // shard if shard else n
    want = {"parameters": 2 * n + 4 * f32_reads(*part), "gradients": 4 * n, "optimizer": 4 * 3 * owned}
    print(f"{run}: {got}", end="; " if run == "serial_bf16" else "")
    ok = ok and got == want
sys.exit(0 if ok else 1)
PY
then pass "memory_counts_bf16 ($(cat counts.cmp))"; else fail memory_counts_bf16 "$(cat counts.cmp)"; fi

# fp16 dynamic loss scaling. From a scale of 2^40 every step overflows: the first two are
# tolerated (hysteresis 2), then the scale halves at each overflow until gradients fit; the
# skipped steps are counted; the console says so. Afterwards it grows ×2 every 3 good steps.
run scaling 1 --optim.precision=fp16 --optim.initial_loss_scale=1099511627776 --optim.loss_scale_window=3 \
  --optim.max_bad_steps=40 --train.steps=40 --checkpoint.at_end=false || fail fp16_dynamic_loss_scale "$(tail -3 scaling.out)"
if $PY - scaling > scaling.cmp 2>&1 <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1] + "/metrics.h5", "r")
scale, skipped = f["loss_scale"][:], f["skipped"][:]
bad = int(np.argmin(skipped))  # the first good step
ok = skipped[:bad].all() and bad >= 3 and scale[0] == scale[1] == 2.0**40
ok = ok and all(scale[i + 1] == scale[i] / 2 for i in range(1, bad - 1))  # halving after the hysteresis
good = [i for i in range(bad, len(scale) - 1) if not skipped[i]]
grew = sum(scale[i + 1] == 2 * scale[i] for i in good)
print(f"{bad} overflows first (scale 2^40 -> 2^{np.log2(scale[bad]):.0f}), then {int(skipped[bad:].sum())} more, "
      f"{grew} growths; final scale 2^{np.log2(scale[-1]):.0f}; final loss {f['loss'][-1]:.4f}")
sys.exit(0 if ok and grew >= 3 and np.isfinite(f["loss"][-1]) else 1)
PY
then pass "fp16_dynamic_loss_scale ($(cat scaling.cmp))"; else fail fp16_dynamic_loss_scale "$(cat scaling.cmp)"; fi
grep -q "scale 1.09951e+12 | skipped (overflow)" scaling.out && pass fp16_overflow_on_console ||
  fail fp16_overflow_on_console "no 'skipped (overflow)' line with the scale"
"$TRIDENT" doctor scaling > doctor.out 2>&1
grep -q "finding: fp16 overflows" doctor.out && grep -q "[1-9][0-9]* loss-scale reductions" doctor.out &&
  grep -q "optim.initial_loss_scale (now 1099511627776)" doctor.out && pass doctor_reads_loss_scale_events ||
  fail doctor_reads_loss_scale_events "$(grep -A2 finding doctor.out | head -6)"

# A fixed scale never changes; training goes as with the dynamic one.
run fixed 1 --optim.precision=fp16 --optim.loss_scale=1024 --checkpoint.at_end=false &&
  $PY -c "import h5py, sys; s = h5py.File('fixed/metrics.h5')['loss_scale'][:]; sys.exit(0 if (s == 1024).all() else 1)" &&
  same_losses fp16_fixed_loss_scale serial_fp16 fixed 1e-2 || fail fp16_fixed_loss_scale "$(tail -3 fixed.out)"

# Overflows beyond optim.max_bad_steps in a row: exit 1 with a message naming the key.
run overflowing 1 --optim.precision=fp16 --optim.initial_loss_scale=1e30 --optim.max_bad_steps=3
status=$?
if [[ $status == 1 ]] && grep -q "optim.max_bad_steps" overflowing.out; then pass fp16_too_many_overflows_exit_1
else fail fp16_too_many_overflows_exit_1 "status $status: $(tail -2 overflowing.out)"; fi

# Bit-exact resume after a SIGKILL, fp16 with its scaler state (window 3, so the scale changes
# between the checkpoint and the kill) and bf16.
for precision in fp16 bf16; do
  extra=(--optim.precision=$precision --optim.loss_scale_window=3)
  run "straight_$precision" 1 "${extra[@]}" || { fail "resume_bitwise_$precision" "$(tail -3 straight_$precision.out)"; continue; }
  run "killed_$precision" 1 "${extra[@]}" --debug.fail_rank=0 --debug.fail_step=7 --debug.fail_mode=sigkill
  run "killed_$precision" 1 "${extra[@]}" --checkpoint.resume=auto ||
    { fail "resume_bitwise_$precision" "$(tail -3 killed_$precision.out)"; continue; }
  grep -q "resumed from killed_$precision/checkpoints/step-00000004.full.h5" "killed_$precision.out" ||
    { fail "resume_bitwise_$precision" "did not resume from step 4"; continue; }
  same_losses "resume_bitwise_$precision" "straight_$precision" "killed_$precision"
done
if $PY -c "
import h5py, sys
a, b = (h5py.File(d + '/metrics.h5')['loss_scale'][:] for d in ('straight_fp16', 'killed_fp16'))
print(a[:8]); sys.exit(0 if len(set(a)) > 1 and (a == b).all() else 1)" > scale.cmp 2>&1
then pass fp16_resume_restores_loss_scale; else fail fp16_resume_restores_loss_scale "$(cat scale.cmp)"; fi
"$TRIDENT" inspect killed_fp16/checkpoints/step-00000004.full.h5 | grep -q "precision fp16 .*loss scale" &&
  pass inspect_shows_precision || fail inspect_shows_precision "no precision and loss scale in inspect's report"

write_deck bad.deck '[optim]
precision = bf16
loss_scale = 128'
expect_user_error loss_scale_needs_fp16 'bad.deck:13|optim.loss_scale|fp16|bad.deck:12' "$TRIDENT" train "$WORK/bad.deck"

# The 16-bit GEMM path (kernels.low16_gemm). widened runs on any CPU and follows the default
# path (native where oneDNN has a bf16 matmul: to f32 rounding; widened otherwise: bitwise);
# forcing native needs the CPU feature (skipped without it); the path is in the run header,
# --check, metrics.h5 and `trident version`; native on a CPU without it — here oneDNN capped at
# AVX2 — is a deck error naming the key and the ISA. (The cap is x86's: on AArch64, which oneDNN
# 2.6 gives no bf16 matmul, the capped ISA is the CPU's own.)
CAPPED_ISA=$(DNNL_MAX_CPU_ISA=AVX2 "$TRIDENT" version | sed -n 's/^CPU: oneDNN [^ ]* on //p')
run widened_bf16 1 --optim.precision=bf16 --kernels.low16_gemm=widened &&
  same_losses bf16_widened_follows_default serial_bf16 widened_bf16 1e-4 ||
  fail bf16_widened_follows_default "$(tail -3 widened_bf16.out)"
if "$TRIDENT" version | grep -q '^bf16 GEMM: native'; then
  run native_bf16 1 --optim.precision=bf16 --kernels.low16_gemm=native &&
    grep -q "^bf16 GEMM: native" native_bf16.out && same_losses bf16_native_forced_is_default serial_bf16 native_bf16 ||
    fail bf16_native_forced_is_default "$(grep -E 'GEMM|error' native_bf16.out | head -3)"
else
  skip bf16_native_forced_is_default "$("$TRIDENT" version | grep '^bf16 GEMM')"
fi
if grep -q "^bf16 GEMM: widened to f32 (" widened_bf16.out &&
  "$TRIDENT" train m.deck --optim.precision=bf16 --kernels.low16_gemm=widened --check | grep -q "^bf16 GEMM: widened to f32" &&
  $PY -c "import h5py, sys; a = h5py.File('widened_bf16/metrics.h5').attrs['gemm_path']; print(a); sys.exit(0 if a.startswith('bf16 GEMM: widened to f32') else 1)" > path.cmp 2>&1 &&
  DNNL_MAX_CPU_ISA=AVX2 "$TRIDENT" version | grep -qx "bf16 GEMM: widened to f32 (no bf16 matmul on $CAPPED_ISA)"
then pass "gemm_path_reported ($(cat path.cmp))"; else fail gemm_path_reported "$(cat path.cmp)"; fi
expect_user_error native_bf16_without_cpu_feature "kernels.low16_gemm = native (command line)|no bf16 matmul|ISA $CAPPED_ISA|widened" \
  env DNNL_MAX_CPU_ISA=AVX2 "$TRIDENT" train "$WORK/bad.deck" --optim.loss_scale=0 --kernels.low16_gemm=native
expect_user_error native_fp16_is_refused 'kernels.low16_gemm = native|no f16 matmul' \
  "$TRIDENT" train "$WORK/bad.deck" --optim.precision=fp16 --kernels.low16_gemm=native

# An fp32 deck leaves the 16-bit path to each GEMM: `trident bench --compare=bf16` on a CPU
# without a bf16 matmul widens (it used to force native from the fp32 probe and abort).
if env DNNL_MAX_CPU_ISA=AVX2 "$TRIDENT" bench m.deck --compare=bf16 --steps=1 --warmup=0 > compare.out 2>&1 &&
  grep -q "^precision threads=.* bf16_step_ms=" compare.out
then pass "bench_compare_bf16_on_avx2 ($(grep -o 'speedup=[0-9.]*' compare.out))"
else fail bench_compare_bf16_on_avx2 "$(tail -2 compare.out)"; fi
