"""Run one converted page as a script, as a kernel would (cwd = page folder).

Usage: python run_page.py SCRIPT RESULT_JSON
Writes RESULT_JSON at exit: peak GPU memory, glued values, the exception.
"""

import json
import os
import runpy
import sys
import time
import traceback

script, result_path = sys.argv[1], sys.argv[2]
sys.argv = [script]
sys.path.insert(
    0, os.getcwd()
)  # a kernel has the notebook's folder on sys.path
result = {"ok": False}
start = time.perf_counter()
try:
    runpy.run_path(script, run_name="__main__")
    result["ok"] = True
except BaseException as error:  # noqa: BLE001 - record, then re-raise
    result["exception"] = f"{type(error).__name__}: {error}"[:2000]
    traceback.print_exc()
    code = 1
else:
    code = 0
finally:
    result["seconds_in_page"] = time.perf_counter() - start
    torch = sys.modules.get("torch")
    if (
        torch is not None
        and torch.cuda.is_available()
        and torch.cuda.is_initialized()
    ):
        result["peak_gpu_allocated_mb"] = (
            torch.cuda.max_memory_allocated() / 2**20
        )
        result["peak_gpu_reserved_mb"] = (
            torch.cuda.max_memory_reserved() / 2**20
        )
    myst_nb = sys.modules.get("myst_nb")
    if myst_nb is not None:
        result["glue"] = getattr(myst_nb, "GLUED", {})
    try:
        import transformer_book._book as rt

        result["preset"] = rt.preset()
    except Exception as error:  # noqa: BLE001
        result["preset"] = f"? {error}"
    with open(result_path, "w") as f:
        json.dump(result, f, indent=1)
sys.stdout.flush()
os._exit(code)  # skip slow interpreter teardown, like a kernel shutdown
