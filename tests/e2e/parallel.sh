#!/usr/bin/env bash
# Parallel layouts against the single-rank run: same deck and seed, 20 steps of a tiny model;
# per-step losses within 1e-5 relative and final parameters within 1e-4 (max |Δ| / max |θ|).
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
cat > p.deck <<DECK
[model]
layers = 4
heads = 4
hidden = 32
vocab = 256
seq_len = 32
[train]
steps = 20
global_batch = 8
micro_batch = 1
eval_interval = 10
eval_tokens = 1024
run_dir = serial
[data]
train = $WORK/data/train.bin
val = $WORK/data/val.bin
[comm]
bucket_mb = 0.01
DECK
# Activation recompute: the same run bitwise (lib.sh's same_bits: losses, validation losses,
# gradient norms, parameters), with less activation memory.
recompute_pair() {  # recompute_pair NAME MODE RANKS OVERRIDES...: a run with recompute MODE against the same without
  local name=$1 mode=$2 ranks=$3
  shift 3
  mpirun -np "$ranks" "$TRIDENT" train p.deck --train.run_dir="$name" "$@" > "$name.out" 2>&1 &&
  mpirun -np "$ranks" "$TRIDENT" train p.deck --train.run_dir="${name}_full" --memory.recompute="$mode" "$@" > "${name}_full.out" 2>&1 ||
    { fail "$name" "run failed"; return; }
  if same_bits "$name" "${name}_full" && $PY - "$name" "${name}_full" <<'PY'
import sys, h5py
a, b = (h5py.File(d + "/metrics.h5") for d in sys.argv[1:])
sys.exit(0 if b["memory/activations_peak_bytes"][-1] < a["memory/activations_peak_bytes"][-1] else 1)
PY
  then pass "$name"; else fail "$name" "losses or parameters differ, or no less activation memory"; fi
}
# Mixed precision: the recomputed forward rounds to the same 16-bit values. TRIDENT_16BIT_ONLY=1
# runs these cases alone (.ci/run runs them again with oneDNN capped at AVX2: widened bf16).
recompute_pair recompute_full_bitwise_bf16_t2p2d1 full 4 --parallel.tensor=2 --parallel.pipeline=2 --optim.precision=bf16
recompute_pair recompute_every_2_bitwise_bf16 every_k 1 --memory.recompute_interval=2 --optim.precision=bf16
# Selective recompute drops the materialized attention's probabilities (flash keeps none).
recompute_pair recompute_selective_bitwise_fp16 selective 1 --optim.precision=fp16 --model.attention=materialized
recompute_pair recompute_selective_bitwise_bf16_t2p1d1 selective 2 --parallel.tensor=2 --optim.precision=bf16 \
  --model.attention=materialized
# Pipeline schedules (issue 36): ZB-H1 and interleaved 1F1B accumulate every gradient in 1F1B's
# order, so the same layout under 1F1B and under either is the same run bit for bit.
schedule_pair() {  # schedule_pair NAME RANKS SCHEDULE_OVERRIDE OVERRIDES...: 1F1B, then with SCHEDULE_OVERRIDE
  local name=$1 ranks=$2 other=$3
  shift 3
  mpirun -np "$ranks" "$TRIDENT" train p.deck --train.run_dir="${name}_1f1b" "$@" > "${name}_1f1b.out" 2>&1 &&
  mpirun -np "$ranks" "$TRIDENT" train p.deck --train.run_dir="${name}_other" "$other" "$@" \
    > "${name}_other.out" 2>&1 || { fail "$name" "run failed: $(grep -h -m1 -E 'error|rank' "${name}"_*.out)"; return; }
  if same_bits "${name}_1f1b" "${name}_other"; then pass "$name"; else fail "$name" "1F1B and $other differ"; fi
}
ZB=--parallel.schedule=zb-h1
schedule_pair zb_h1_bitwise_bf16_t2p2d2_zero1 8 $ZB --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 \
  --optim.zero=1 --optim.precision=bf16
# The whole classifier defers the head's weight gradient too.
schedule_pair zb_h1_bitwise_bf16_p4_whole_classifier 4 $ZB --parallel.pipeline=4 --model.classifier_chunk=0 \
  --optim.precision=bf16 --train.global_batch=16
schedule_pair zb_h1_bitwise_fp16_p8_materialized 8 $ZB --parallel.pipeline=8 --model.layers=8 --optim.precision=fp16 \
  --model.attention=materialized --memory.recompute=selective
# Interleaved 1F1B: p = 2, 4, 8, v = 2, 3, m from p to 4p.
schedule_pair interleaved_bitwise_bf16_p4_v2 4 --parallel.virtual_stages=2 --parallel.pipeline=4 --model.layers=8 \
  --optim.precision=bf16
schedule_pair interleaved_bitwise_fp16_p4_v3_m16_full 4 --parallel.virtual_stages=3 --parallel.pipeline=4 \
  --model.layers=12 --train.global_batch=16 --optim.precision=fp16 --memory.recompute=full
[[ ${TRIDENT_16BIT_ONLY:-0} == 1 ]] && exit 0
schedule_pair zb_h1_bitwise_p8_m32 8 $ZB --parallel.pipeline=8 --model.layers=8 --train.global_batch=32
schedule_pair zb_h1_bitwise_p4_m4 4 $ZB --parallel.pipeline=4 --train.global_batch=4
# Uneven chunks: 7 blocks as 2,2,2,1 over p = 2, v = 2, against 1F1B's even split 4,3.
if mpirun -np 2 "$TRIDENT" train p.deck --train.run_dir=uneven_1f1b --parallel.pipeline=2 --model.layers=7 \
     > uneven_1f1b.out 2>&1 &&
   mpirun -np 2 "$TRIDENT" train p.deck --train.run_dir=uneven_chunks --parallel.pipeline=2 --model.layers=7 \
     --parallel.virtual_stages=2 --parallel.stage_layers=2,2,2,1 > uneven_chunks.out 2>&1; then
  if same_bits uneven_1f1b uneven_chunks; then pass interleaved_bitwise_uneven_chunks
  else fail interleaved_bitwise_uneven_chunks "1F1B and uneven chunks differ"; fi
else fail interleaved_bitwise_uneven_chunks "$(grep -h -m1 -E 'error|rank' uneven_*.out)"; fi
schedule_pair interleaved_bitwise_p2_v3_m2 2 --parallel.virtual_stages=3 --parallel.pipeline=2 --model.layers=6 \
  --train.global_batch=2
schedule_pair interleaved_bitwise_p8_v2_m32 8 --parallel.virtual_stages=2 --parallel.pipeline=8 --model.layers=16 \
  --train.global_batch=32 --model.attention=materialized --memory.recompute=selective

mpirun -np 1 "$TRIDENT" train p.deck > serial.out 2>&1 || fail serial_run "$(tail -3 serial.out)"

# equivalent NAME RANKS OVERRIDES...: the layout's run matches the serial one.
equivalent() {
  local name=$1 ranks=$2
  shift 2
  if ! mpirun -np "$ranks" "$TRIDENT" train p.deck --train.run_dir="$name" "$@" > "$name.out" 2>&1; then
    fail "$name" "run failed: $(grep -m1 -E 'error|rank' "$name.out")"; return
  fi
  if $PY - serial "$name" > "$name.cmp" 2>&1 <<'PY'
import sys, h5py, numpy as np
a, b = sys.argv[1], sys.argv[2]
la, lb = h5py.File(a + "/metrics.h5")["loss"][:], h5py.File(b + "/metrics.h5")["loss"][:]
va, vb = h5py.File(a + "/metrics.h5")["val_loss"][:], h5py.File(b + "/metrics.h5")["val_loss"][:]
pa = np.fromfile(a + "/model.bin", dtype="<f4")[256:]
pb = np.fromfile(b + "/model.bin", dtype="<f4")[256:]
loss_err = float(np.max(np.abs(la - lb) / np.abs(la)))
val_err = float(np.max(np.abs(va - vb) / np.abs(va)))
param_err = float(np.max(np.abs(pa - pb)) / np.max(np.abs(pa)))
print(f"steps {len(lb)} loss {loss_err:.2e} val {val_err:.2e} params {param_err:.2e}")
sys.exit(0 if len(la) == len(lb) == 20 and loss_err <= 1e-5 and val_err <= 1e-5 and param_err <= 1e-4 else 1)
PY
  then pass "$name ($(cat "$name.cmp"))"; else fail "$name" "$(cat "$name.cmp")"; fi
}

# Every layout with tensor, pipeline, data in {1, 2} (t, p, d), then the larger ones.
equivalent t1p1d2_overlap 2 --parallel.data=2 --comm.overlap=true
equivalent t1p1d2_no_overlap 2 --parallel.data=2 --comm.overlap=false
equivalent t1p2d1 2 --parallel.pipeline=2
equivalent t2p1d1 2 --parallel.tensor=2
equivalent t1p2d2 4 --parallel.pipeline=2 --parallel.data=2
equivalent t2p1d2 4 --parallel.tensor=2 --parallel.data=2
equivalent t2p2d1 4 --parallel.tensor=2 --parallel.pipeline=2
equivalent t2p2d2 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2
equivalent t4p1d2_zero1 8 --parallel.tensor=4 --parallel.data=2 --optim.zero=1
equivalent t1p4d2_zero1 8 --parallel.pipeline=4 --parallel.data=2 --optim.zero=1
equivalent t2p2d2_zero1 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --optim.zero=1
equivalent t1p2d4_gpipe 8 --parallel.pipeline=2 --parallel.data=4 --parallel.schedule=gpipe
equivalent t1p3d1_uneven 3 --parallel.pipeline=3 --parallel.stage_layers=1,2,1
equivalent t1p2d1_uneven_gpipe 2 --parallel.pipeline=2 --parallel.stage_layers=3,1 --parallel.schedule=gpipe
equivalent t1p1d4_micro2 4 --parallel.data=4 --train.micro_batch=2
equivalent t1p1d8 8 --parallel.data=8 --comm.bucket_mb=1
equivalent t1p1d2_zero1 2 --parallel.data=2 --optim.zero=1
# ZB-H1 (issue 36): p = 2 (m = 4p), 4 (m = 2p, p), with tensor and data parallelism and ZeRO.
equivalent t1p2d1_zb_h1 2 --parallel.pipeline=2 --parallel.schedule=zb-h1
equivalent t1p4d1_zb_h1 4 --parallel.pipeline=4 --parallel.schedule=zb-h1
equivalent t1p4d2_zb_h1_zero1_m4 8 --parallel.pipeline=4 --parallel.data=2 --parallel.schedule=zb-h1 --optim.zero=1
# Interleaved 1F1B (issue 36): v = 2 with p = 2, and with tensor and data parallelism and ZeRO.
equivalent t1p2d1_interleaved_v2 2 --parallel.pipeline=2 --parallel.virtual_stages=2
equivalent t2p2d2_interleaved_v2_zero1 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 \
  --parallel.virtual_stages=2 --optim.zero=1 --comm.overlap=true
equivalent t2p2d2_zb_h1_zero1 8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 --parallel.schedule=zb-h1 \
  --optim.zero=1 --comm.overlap=true

# Sequence parallelism (issue 34): 50 steps against the serial run — fp32 losses, validation
# losses and gradient norms within 1e-6 relative at every step, the final model within 1e-5 of
# its largest weight (plain tensor parallelism is already 1.4e-6 there: fp32 sums in another
# order, through 50 AdamW steps); bf16 against the serial bf16 run within bf16's rounding (the
# losses differ by 1e-5, the gradient norms by 2e-4, as plain tensor parallelism's do).
mpirun -np 1 "$TRIDENT" train p.deck --train.run_dir=serial50 --train.steps=50 > serial50.out 2>&1 ||
  fail serial50_run "$(tail -3 serial50.out)"
mpirun -np 1 "$TRIDENT" train p.deck --train.run_dir=serial50_bf16 --train.steps=50 --optim.precision=bf16 \
  > serial50_bf16.out 2>&1 || fail serial50_bf16_run "$(tail -3 serial50_bf16.out)"
close_to() {  # close_to REFERENCE NAME RANKS LOSS_TOLERANCE MODEL_TOLERANCE OVERRIDES...
  local reference=$1 name=$2 ranks=$3 loss_tolerance=$4 model_tolerance=$5
  shift 5
  if ! mpirun -np "$ranks" "$TRIDENT" train p.deck --train.run_dir="$name" --train.steps=50 "$@" > "$name.out" 2>&1; then
    fail "$name" "run failed: $(grep -m1 -E 'error|rank' "$name.out")"; return
  fi
  if $PY - "$reference" "$name" "$loss_tolerance" "$model_tolerance" > "$name.cmp" 2>&1 <<'PY'
import sys, h5py, numpy as np
a, b, loss_tolerance, model_tolerance = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
fa, fb = h5py.File(a + "/metrics.h5"), h5py.File(b + "/metrics.h5")
rel = lambda k: float(np.max(np.abs(fa[k][:] - fb[k][:]) / np.abs(fa[k][:])))
pa = np.fromfile(a + "/model.bin", dtype="<f4")[256:]
pb = np.fromfile(b + "/model.bin", dtype="<f4")[256:]
err = {k: rel(k) for k in ("loss", "val_loss", "grad_norm")}
err["model"] = float(np.max(np.abs(pa - pb)) / np.max(np.abs(pa)))
print(f"{len(fb['loss'])} steps: " + " ".join(f"{k} {v:.2e}" for k, v in err.items()))
ok = len(fa["loss"]) == len(fb["loss"]) == 50 and max(err["loss"], err["val_loss"], err["grad_norm"]) <= loss_tolerance
sys.exit(0 if ok and err["model"] <= model_tolerance else 1)
PY
  then pass "$name ($(cat "$name.cmp"))"; else fail "$name" "$(cat "$name.cmp")"; fi
}
SP=--parallel.sequence_parallel=true
close_to serial50 t2_sp_50_steps 2 1e-6 1e-5 --parallel.tensor=2 $SP
close_to serial50 t4_sp_50_steps 4 1e-6 1e-5 --parallel.tensor=4 $SP
close_to serial50 t2p2d2_sp_zero1_50_steps 8 1e-6 1e-5 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 $SP \
  --optim.zero=1
close_to serial50 t4p2_sp_interleaved_full_50_steps 8 1e-6 1e-5 --parallel.tensor=4 --parallel.pipeline=2 $SP \
  --parallel.virtual_stages=2 --memory.recompute=full
close_to serial50 t2d2_sp_micro2_materialized_whole_50_steps 4 1e-6 1e-5 --parallel.tensor=2 --parallel.data=2 $SP \
  --train.micro_batch=2 --model.attention=materialized --model.classifier_chunk=0
close_to serial50_bf16 t4_sp_bf16_50_steps 4 2e-3 2e-2 --parallel.tensor=4 $SP --optim.precision=bf16
close_to serial50_bf16 t2p2_sp_bf16_selective_50_steps 4 2e-3 2e-2 --parallel.tensor=2 --parallel.pipeline=2 $SP \
  --optim.precision=bf16 --model.attention=materialized --memory.recompute=selective

# The tensor group's all-gathers and reduce-scatters as rings beside the GEMMs
# (parallel.tp_comm_overlap, issue 34 item 3): the same 50 steps against the serial run.
OVERLAP="$SP --parallel.tp_comm_overlap=true"
close_to serial50 t2_sp_overlap_50_steps 2 1e-6 1e-5 --parallel.tensor=2 $OVERLAP
close_to serial50 t4p2_sp_overlap_full_whole_50_steps 8 1e-6 1e-5 --parallel.tensor=4 --parallel.pipeline=2 $OVERLAP \
  --memory.recompute=full --model.classifier_chunk=0
close_to serial50 t2c2d2_sp_overlap_zero1_50_steps 8 1e-6 1e-5 --parallel.tensor=2 --parallel.context=2 \
  --parallel.data=2 $OVERLAP --optim.zero=1
close_to serial50_bf16 t4_sp_overlap_bf16_50_steps 4 2e-3 2e-2 --parallel.tensor=4 $OVERLAP --optim.precision=bf16

# Context parallelism (issue 34): each rank 2 of the 2c chunks of every sequence, attention as
# a ring; 50 steps against the serial run as sequence parallelism's above: c = 2, 4, 8, with
# tensor (and sequence) parallelism, pipeline, data and ZeRO, interleaving, full recompute,
# chunks of 2 positions (c = 8 on 32), two sequences per micro-batch, bf16.
close_to serial50 c2_50_steps 2 1e-6 1e-5 --parallel.context=2
close_to serial50 c8_chunks_of_2_50_steps 8 1e-6 1e-5 --parallel.context=8
close_to serial50 t2c2d2_sp_zero1_50_steps 8 1e-6 1e-5 --parallel.tensor=2 --parallel.context=2 --parallel.data=2 $SP \
  --optim.zero=1
close_to serial50 c4p2_interleaved_full_micro2_50_steps 8 1e-6 1e-5 --parallel.context=4 --parallel.pipeline=2 \
  --parallel.virtual_stages=2 --memory.recompute=full --train.micro_batch=2
close_to serial50_bf16 c4_bf16_50_steps 4 2e-3 2e-2 --parallel.context=4 --optim.precision=bf16
if grep -q 'tensor 1 x context 8 x pipeline 1 x data 1' c8_chunks_of_2_50_steps.out &&
   $PY -c "import h5py, sys; sys.exit(0 if h5py.File('c8_chunks_of_2_50_steps/metrics.h5')['bytes_context'][-1] > 0 else 1)"
then pass context_group_reported_and_counted; else fail context_group_reported_and_counted "no layout line or bytes_context"; fi

grep -q 'comm_exposed_ms' <(h5dump -H t1p1d2_overlap/metrics.h5) && pass metrics_record_communication \
  || fail metrics_record_communication "no comm_exposed_ms in metrics.h5"

# The data-parallel reduction through our collectives on an emulated cluster (4 nodes of 2 in
# 2 racks): hierarchical, and flat with the tree; per-level bytes in metrics.h5 as the formulas
# say (node S, rack S/2, cross-rack S/2 for k = r = q = 2, S the gradient bytes).
EMULATED=(--topology.ranks_per_node=2 --topology.nodes_per_rack=2)
equivalent t1p1d8_hierarchical 8 --parallel.data=8 "${EMULATED[@]}" --comm.algo=hierarchical --comm.bucket_mb=1
# The node level through shared memory (comm.node_algo = shm): the tensor and data groups of one
# host, and the node level of the hierarchical all-reduce.
equivalent t2p1d4_shm 8 --parallel.tensor=2 --parallel.data=4 --comm.node_algo=shm
equivalent t1p1d8_hierarchical_shm 8 --parallel.data=8 "${EMULATED[@]}" --comm.algo=hierarchical \
  --comm.node_algo=shm --comm.bucket_mb=1
equivalent t1p1d8_flat_tree_links 8 --parallel.data=8 "${EMULATED[@]}" --comm.algo=flat --comm.node_algo=tree \
  --topology.link.node=1,50 --topology.link.rack=5,10 --topology.link.cross_rack=10,5
for run in t1p1d8_hierarchical t1p1d8_hierarchical_shm; do
  if $PY - $run/metrics.h5 <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1])
S = 4 * (np.fromfile(sys.argv[1].replace("metrics.h5", "model.bin"), dtype="<f4").size - 256)
node, rack, cross = (f["data_bytes_" + k][:] for k in ("node", "rack", "cross_rack"))
sys.exit(0 if np.all(node == S) and np.all(rack == S / 2) and np.all(cross == S / 2) else 1)
PY
  then pass "per_level_bytes_match_the_formulas ($run)"
  else fail "per_level_bytes_match_the_formulas ($run)" "data_bytes_* differ from S, S/2, S/2"; fi
done

# Tracked memory: parameter, gradient and optimizer bytes equal the analytic counts exactly.
# The busiest rank (recorded: maximum over ranks) holds the first stage (wte, wpe, its blocks)
# or the last (its blocks, lnf, wte); ZeRO-1 keeps AdamW's two moments for its shard only.
memory_exact() {  # memory_exact NAME tp pp dp zero
  $PY - "$1" "$2" "$3" "$4" "$5" <<'PY'
import sys, h5py
run, tp, pp, dp, zero = sys.argv[1], *map(int, sys.argv[2:])
L, C, V, T = 4, 32, 256, 32  # p.deck
Vp = (V + 127) // 128 * 128
block = 12 * C * C // tp + 6 * C + 7 * C // tp
layers = [L // pp + (1 if s < L % pp else 0) for s in range(pp)]  # even split (no remainder here)
def stage(s):
    n = layers[s] * block
    if s == 0: n += Vp // tp * C + T * C
    if s == pp - 1: n += 2 * C + (Vp // tp * C if s != 0 else 0)
    return n
params = max(stage(s) for s in range(pp))
optimizer = max(2 * ((stage(s) + dp - 1) // dp if zero else stage(s)) for s in range(pp))
f = h5py.File(run + "/metrics.h5")
got = {k: f["memory/" + k + "_bytes"][-1] for k in ("parameters", "gradients", "optimizer")}
want = {"parameters": 4 * params, "gradients": 4 * params, "optimizer": 4 * optimizer}
ok = all(got[k] == want[k] for k in want)
print(f"{got} vs {want}")
sys.exit(0 if ok else 1)
PY
}
for spec in "serial 1 1 1 0" "t2p1d1 2 1 1 0" "t1p2d1 1 2 1 0" "t2p2d2 2 2 2 0" "t1p1d2_zero1 1 1 2 1" "t2p2d2_zero1 2 2 2 1"; do
  set -- $spec
  if out=$(memory_exact "$@" 2>&1); then pass "memory_counts_$1"; else fail "memory_counts_$1" "$out"; fi
done

# Activation recompute in fp32 (the 16-bit cases are above).
recompute_pair recompute_full_bitwise_serial full 1
recompute_pair recompute_full_bitwise_t2p2d1 full 4 --parallel.tensor=2 --parallel.pipeline=2
recompute_pair recompute_every_2_bitwise_serial every_k 1 --memory.recompute_interval=2
recompute_pair recompute_every_3_bitwise_t1p1d2 every_k 2 --parallel.data=2 --memory.recompute_interval=3
recompute_pair recompute_selective_bitwise_serial selective 1 --model.attention=materialized
recompute_pair recompute_selective_bitwise_t2p1d2 selective 4 --parallel.tensor=2 --parallel.data=2 \
  --model.attention=materialized
