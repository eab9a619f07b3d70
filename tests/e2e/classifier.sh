#!/usr/bin/env bash
# model.classifier_chunk (the fused, chunked classifier, issue 32): the head and its loss over
# chunks of tokens train as the whole (B, T, V) logits do — within 1e-5 over 20 steps in fp32,
# serially and vocabulary-parallel in a (2,2,2) layout, fp16 and bf16 within their storage's
# precision, with the memory-efficient attention too — and the logits are gone from the memory
# estimate (the memory model is held to the tracked peaks in memory.sh).
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
write_deck a.deck '[checkpoint]
at_end = false'
sed -i 's/^steps = 2$/steps = 20/' a.deck


# Chunks of 7 tokens: 32-token micro-batches end on a short chunk of 4 (of 1 with 2 sequences).
train_run whole 1 --model.classifier_chunk=0
train_run chunked 1 --model.classifier_chunk=7
same_losses chunked_trains_as_whole_fp32 whole chunked 1e-5
train_run chunked_222 8 --model.classifier_chunk=7 --parallel.tensor=2 --parallel.pipeline=2 --parallel.data=2 \
  --train.micro_batch=2
same_losses chunked_222_vocabulary_parallel_as_serial whole chunked_222 1e-5
train_run chunked_flash_t2 2 --model.classifier_chunk=5 --model.attention=flash --parallel.tensor=2
train_run whole_flash 1 --model.classifier_chunk=0 --model.attention=flash
same_losses chunked_with_flash_attention_t2_as_serial whole_flash chunked_flash_t2 1e-5
for precision in bf16 fp16; do
  train_run "whole_$precision" 1 --model.classifier_chunk=0 --optim.precision="$precision"
  train_run "chunked_$precision" 1 --model.classifier_chunk=7 --optim.precision="$precision"
  same_losses "chunked_trains_as_whole_$precision" "whole_$precision" "chunked_$precision" 2e-3
done

# The activations of the estimate with micro-batches of 2 sequences: one micro-batch's logits
# (64 tokens x 256 rows) less one chunk's (16 x 256) and the head's gradient the training
# forward keeps for the backward (64 tokens x 64 channels).
activations() {
  mpirun -q -np 1 "$TRIDENT" train a.deck --train.micro_batch=2 --check "$@" 2>&1 |
    sed -n 's/^memory_estimate_bytes: .* activations=\([0-9]*\).*/\1/p'
}
with=$(activations --model.classifier_chunk=0) without=$(activations --model.classifier_chunk=16)
expected=$(( (2 * 32 - 16) * 256 * 4 - 2 * 32 * 64 * 4 ))
if [[ -n $with && -n $without && $((with - without)) == "$expected" ]]; then
  pass "chunked_classifier_keeps_no_logits ($with -> $without bytes of activations)"
else
  fail chunked_classifier_keeps_no_logits "activations $with -> $without, expected a difference of $expected"
fi
