#!/usr/bin/env bash
# parallel.layout = auto (job/auto_layout.hpp): the planner chooses the layout for the ranks a job
# was launched on — the layout trident plan ranks first for that count — writes it into
# deck.resolved.ini, and a job killed on 4 ranks resumes on 2, then (killed again) on 8, each
# time onto that count's best layout, continuing the uninterrupted serial run's losses.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1

write_resume_deck a.deck  # 12 steps, a full checkpoint every 4

run() {  # run NAME RANKS OVERRIDES...: exit status of the job
  local name=$1 ranks=$2
  shift 2
  timeout -k 10 120 mpirun -q -np "$ranks" "$TRIDENT" train a.deck --train.run_dir="$name" --parallel.hardware=h100-80gb-dgx \
    "$@" > "$name.out.$ranks" 2>&1
}
run straight 1 || fail straight_run "$(tail -3 straight.out.1)"

# The planner's first for each count, from trident plan itself (its JSON), as "T P D M".
planned() {
  "$TRIDENT" plan a.deck --gpus="$1" --hardware=h100-80gb-dgx --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line)
    if j["source"] == "search" and j["rank"] == 1:
        print(j["tensor"], j["pipeline"], j["data"], j["micro_batch"]); break'
}
# What a run took, from its deck.resolved.ini, the same way.
took() {
  /usr/bin/python3 - "$1/deck.resolved.ini" <<'PY'
import configparser, sys
c = configparser.ConfigParser(inline_comment_prefixes=("#",))
c.read(sys.argv[1])
p = c["parallel"]
print(p["tensor"], p["pipeline"], p["data"], c["train"]["micro_batch"])
PY
}

# 4 ranks, killed at step 7 (after the step-4 checkpoint); then 2 ranks, killed at step 10 (after
# step 8's); then 8 ranks to the end. Each start chooses anew and reshards the checkpoint.
export -f took planned; export TRIDENT  # for the checks' shells
auto=(--parallel.layout=auto --checkpoint.resume=auto)
run elastic 4 "${auto[@]}" --debug.fail_rank=1 --debug.fail_step=7 --debug.fail_mode=sigkill
check chose_on_4_ranks bash -c "grep -q '^parallel.layout = auto: tensor .* the best of [0-9]* feasible layouts of 4 ranks on H100' elastic.out.4 && \
  [[ -n \"\$(planned 4)\" && \"\$(took elastic)\" == \"\$(planned 4)\" ]] && grep -q '^tensor = [0-9]*  # parallel.layout = auto' elastic/deck.resolved.ini && echo \$(planned 4)"
run elastic 2 "${auto[@]}" --debug.fail_rank=0 --debug.fail_step=10 --debug.fail_mode=sigkill
check resumed_on_2_ranks bash -c "grep -q 'of 2 ranks on H100' elastic.out.2 && grep -q 'resumed from elastic/checkpoints/step-00000004.full.h5' elastic.out.2 && \
  grep -q 'resharded onto' elastic.out.2 && [[ -n \"\$(planned 2)\" && \"\$(took elastic)\" == \"\$(planned 2)\" ]] && echo \$(planned 2)"
run elastic 8 "${auto[@]}" || fail elastic_8_ranks "$(tail -3 elastic.out.8)"
check resumed_on_8_ranks bash -c "grep -q 'of 8 ranks on H100' elastic.out.8 && grep -q 'resumed from elastic/checkpoints/step-00000008.full.h5' elastic.out.8 && \
  [[ -n \"\$(planned 8)\" && \"\$(took elastic)\" == \"\$(planned 8)\" ]] && echo \$(planned 8)"
same_losses elastic_continues_the_serial_run straight elastic 1e-5 5

# Manual stays manual: the deck's layout, nothing chosen.
run manual 2 --parallel.data=2
check manual_is_the_decks bash -c "! grep -q 'parallel.layout = auto' manual.out.2 manual/deck.resolved.ini && [[ \$(took manual) == '1 1 2 1' ]]"
expect_user_error auto_unknown_profile "parallel.hardware = nope|nope.ini|No such file" \
  "$TRIDENT" train "$WORK/a.deck" --parallel.layout=auto --parallel.hardware=nope
