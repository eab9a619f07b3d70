#!/usr/bin/env bash
# Hugging Face tokenizer.json (data/hf_tokenizer.hpp): `trident prepare --tokenizer=hf
# --tokenizer-file=FILE` of GPT-2's kind gives the tokens of the same vocabulary read from
# encoder.json and vocab.bpe; of GPT-2's and Llama 3's kinds, the tokens Hugging Face's own
# tokenizers library gives (where make deps could install it, else SKIP), added tokens in the
# text included; the data directory keeps the file, so generate decodes with it; bad files are
# one clear error.
. tests/e2e/lib.sh
cd "$WORK" || exit 1
export OMP_NUM_THREADS=2
HF_PY=${TRIDENT_HF_VENV:-/var/cache/trident/hf-venv}/bin/python

LICENSES=(/usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0)
"$TRIDENT" prepare bpe "${LICENSES[@]}" --tokenizer=bpe --vocab=700 > prepare_bpe.out 2>&1
/usr/bin/python3 "$ROOT/tests/e2e/tokenizer_json.py" bpe gpt2 gpt2_kind.json
/usr/bin/python3 "$ROOT/tests/e2e/tokenizer_json.py" bpe llama3 llama3_kind.json

# One text with what the patterns treat differently: digits in threes or runs, contractions in
# both cases, newlines after punctuation, other scripts, and added tokens inside the text.
/usr/bin/python3 - <<'PY'
import random
random.seed(4)
licence = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()[:60000]
extra = ("I'M here, you'RE there; it's 1234567 or 3.14159!\n\n\tnaïve café 東京 x² ½ \u3000wide\r\n"
         "<|endoftext|>after<|begin_of_text|> 42<|reserved_special_token_3|> fill777 fill1234x\n")
open("mixed.txt", "w", encoding="utf-8", newline="").write(licence + extra * 20 + licence[:5000])
PY

prep() {  # prep DIR TOKENIZER_FILE TEXT... : prepare with a tokenizer.json
  local dir=$1 file=$2; shift 2
  "$TRIDENT" prepare "$dir" "$@" --tokenizer=hf --tokenizer-file="$file" > "$dir.out" 2>&1
}
prep hf_gpt2 gpt2_kind.json "${LICENSES[@]}"
check gpt2_kind_equals_encoder_json bash -c "cmp bpe/train.bin hf_gpt2/train.bin && cmp bpe/val.bin hf_gpt2/val.bin && \
  grep -qx 'kind = hf' hf_gpt2/tokenizer.txt && grep -qx 'vocab = 701' hf_gpt2/tokenizer.txt && cmp gpt2_kind.json hf_gpt2/tokenizer.json"
prep mixed_gpt2 gpt2_kind.json mixed.txt
prep mixed_llama3 llama3_kind.json mixed.txt

# The tokens of train.bin then val.bin, against tokenizers' encode of the whole text.
if "$HF_PY" -c 'import tokenizers' 2>/dev/null; then
  for kind in gpt2 llama3; do
    check "tokenizers_library_agrees_${kind}_kind" "$HF_PY" - "${kind}_kind.json" "mixed_$kind" <<'PY'
import struct, sys
import numpy as np
from tokenizers import Tokenizer
def tokens(path):  # llm.c's shards: uint16 (magic 20240520) or uint32 (20240801)
    raw = open(path, "rb").read()
    magic, _, count = struct.unpack("<3i", raw[:12])
    dtype = np.uint32 if magic == 20240801 else np.uint16
    return np.frombuffer(raw[1024:1024 + np.dtype(dtype).itemsize * count], dtype=dtype).tolist()
ours = tokens(sys.argv[2] + "/train.bin") + tokens(sys.argv[2] + "/val.bin")
theirs = Tokenizer.from_file(sys.argv[1]).encode(open("mixed.txt", encoding="utf-8", newline="").read(), add_special_tokens=False).ids
first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
print(f"{len(ours)} tokens ours, {len(theirs)} tokenizers'; first difference at {first}")
sys.exit(0 if ours == theirs else 1)
PY
  done
else
  skip tokenizers_library_agrees "the tokenizers library is not installed (make deps installs it from PyPI where it can)"
fi
check vocabularies_and_shard_kinds bash -c "grep -q 'vocab 128256 (hf)' mixed_llama3.out && grep -q 'vocab 701 (hf)' mixed_gpt2.out && \
  [[ \$(head -c 8 mixed_llama3/train.bin | od -An -td4 | xargs) == '20240801 7' && \$(head -c 8 mixed_gpt2/train.bin | od -An -td4 | xargs) == '20240520 1' ]]"

# generate reads the directory's tokenizer.json: the prompt round-trips through it.
cat > g.deck <<DECK
[model]
layers = 1
heads = 2
hidden = 16
vocab = 128256
seq_len = 64
[train]
eval_tokens = 64
[data]
train = $WORK/mixed_llama3/train.bin
val = $WORK/mixed_llama3/val.bin
DECK
"$TRIDENT" generate g.deck --prompt="It's 2024<|begin_of_text|>" --tokens=4 --temperature=0 > gen.out 2> gen.err
check generate_with_hf_tokenizer bash -c "head -c 26 gen.out | grep -qF \"It's 2024<|begin_of_text|>\""

# Bad files: one error each, naming the file and the key.
/usr/bin/python3 - <<'PY'
import json
base = json.load(open("gpt2_kind.json", encoding="utf-8"))
def variant(name, change):
    doc = json.loads(json.dumps(base)); change(doc); json.dump(doc, open(name, "w"))
variant("normalizer.json", lambda d: d.update(normalizer={"type": "NFC"}))
variant("wordpiece.json", lambda d: d["model"].update(type="WordPiece"))
variant("prefix.json", lambda d: d["pre_tokenizer"].update(add_prefix_space=True))
variant("gap.json", lambda d: d["model"]["vocab"].update({"Ġzzz": 900}))
variant("merge.json", lambda d: d["model"]["merges"].append("Ġqqq rrr"))
variant("regex.json", lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}))
variant("lstrip.json", lambda d: d["added_tokens"][0].update(lstrip=True))
open("notjson.json", "w").write("{\"model\": ")
PY
bad() {  # bad FILE 'substrings'
  expect_user_error "hf_tokenizer_$1" "$2" "$TRIDENT" prepare "$WORK/out_$1" "${LICENSES[0]}" --tokenizer=hf --tokenizer-file="$WORK/$1.json"
}
bad normalizer "normalizer.json|has a normalizer"
bad wordpiece "model of type WordPiece"
bad prefix "pre_tokenizer.add_prefix_space is true"
bad gap "no token has id 701"
bad merge "joins \"\\u0120qqq\", which is not in model.vocab"
bad regex "the pre-tokenising pattern does not compile|missing closing parenthesis"
bad lstrip "added token \"<|endoftext|>\" sets lstrip"
bad notjson "notjson.json|expected Hugging Face's tokenizer.json"
expect_user_error hf_tokenizer_without_file "--tokenizer=hf and --tokenizer-file=FILE" \
  "$TRIDENT" prepare "$WORK/out_nofile" "${LICENSES[0]}" --tokenizer=hf
