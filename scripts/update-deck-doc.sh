#!/usr/bin/env bash
# update-deck-doc.sh BIN DOC — replace the generated key tables of DOC (between the markers)
# with what `BIN help deck` prints now.
set -euo pipefail
bin=$1 doc=$2
table=$(mktemp)
trap 'rm -f "$table"' EXIT
"$bin" help deck > "$table"
python3 - "$doc" "$table" <<'PY'
import sys
doc_path, table_path = sys.argv[1], sys.argv[2]
doc = open(doc_path).read()
table = open(table_path).read()
begin = "<!-- BEGIN generated"
end = "<!-- END generated -->"
head, rest = doc.split(begin, 1)
marker_line, _ = rest.split("\n", 1)
_, tail = rest.split(end, 1)
open(doc_path, "w").write(head + begin + marker_line + "\n" + table.rstrip("\n") + "\n" + end + tail)
PY
echo "updated $doc"
