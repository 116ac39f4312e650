#!/bin/bash
# The one device call: bash benchmarks/gpu_pages/go.sh  (run from the repo root)
H=$(dirname "$0")
OUT=${OUT:-/tmp/harness-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=$(command -v python3 || command -v python)
echo "python: $PY"; nvidia-smi -L; nproc
timeout -k 5 ${HARNESS_LIMIT:-475} "$PY" $H/run_pages.py --out "$OUT" \
  --workers ${WORKERS:-16} --page-timeout ${PAGE_TIMEOUT:-420} \
  --deadline ${DEADLINE:-440} ${HARNESS_ARGS:-} 2>&1 | tee "$OUT/driver.log"
echo "driver exit: ${PIPESTATUS[0]}"
"$PY" - "$OUT/results.json" <<'PYEOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no results: {e}")
for n, r in sorted(d["pages"].items(), key=lambda kv: -kv[1].get("seconds", 0)):
    print(f"{n:40s} {r['status']:10s} {r.get('seconds', 0):7.1f}s "
          f"{r.get('peak_gpu_allocated_mb', 0):8.0f}MB  {r.get('exception', '')[:150]}")
print("elapsed", round(d.get("elapsed_s", 0), 1))
PYEOF
