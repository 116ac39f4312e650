"""Execute every converted page under BOOK_PRESET=gpu, N at a time; time it.

Mirrors `make book` on a GPU machine: one process per page (a kernel),
OMP_NUM_THREADS=1, cwd = the page's folder, all sharing the GPU.
Writes OUT/results.json after every page, OUT/logs.tar.gz at the end.
"""

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# Likely heaviest first (from the gpu SIZES), so that they get the whole
# window; the rest in _toc.yml order.
FIRST = [
    "implementation__gpt",
    "vision__training-vit",
    "implementation__encoder",
    "implementation__translation",
    "implementation__training-well",
    "vision__what-vit-sees",
    "sequences__tokens-and-embeddings",
    "architecture__families-and-heads",
    "sequences__encoder-decoder",
    "sequences__lstm-gru",
    "architecture__transformer-layer",
    "attention__positional-encoding",
    "attention__self-attention",
    "attention__multi-head",
    "attention__cost",
    "vision__patches",
]


def sh(cmd):
    try:
        return subprocess.run(
            cmd, shell=True, capture_output=True, text=True, timeout=60
        ).stdout
    except Exception as error:  # noqa: BLE001
        return f"{cmd}: {error}"


def tail(path, n):
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    return "\n".join(lines[-n:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/harness-out"))
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--page-timeout", type=float, default=420)
    ap.add_argument(
        "--deadline",
        type=float,
        default=450,
        help="seconds after start: kill what runs, start nothing",
    )
    ap.add_argument("--only", nargs="*", help="page names to run")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--preset", default="gpu")
    args = ap.parse_args()
    t0 = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="harness-"))
    logs = work / "logs"
    logs.mkdir()
    cache = work / "data-cache"
    cache.mkdir()

    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        MPLBACKEND="Agg",
        TRANSFORMER_BOOK_DATA=str(cache),
        BOOK_DATA_LOG=str(work / "data-log.jsonl"),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("BOOK_SMOKE", None)
    env.pop("BOOK_PRESET", None)
    if args.smoke:
        env["BOOK_SMOKE"] = "1"
    else:
        env["BOOK_PRESET"] = args.preset
    paths = [str(ROOT / "src"), str(HERE / "site")]
    env["PYTHONPATH"] = os.pathsep.join(
        paths + [p for p in [os.environ.get("PYTHONPATH")] if p]
    )
    os.environ.update(
        {k: env[k] for k in ("TRANSFORMER_BOOK_DATA", "PYTHONPATH")}
    )
    sys.path[:0] = paths

    info = {
        "python": sys.version,
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "workers": args.workers,
        "page_timeout_s": args.page_timeout,
        "deadline_s": args.deadline,
        "smoke": args.smoke,
    }
    t = time.time()
    import torch

    info["torch"] = torch.__version__
    info["cuda_available"] = torch.cuda.is_available()
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    from transformer_book import data

    info["seed_cache"] = data.seed_cache(HERE / "data", cache_dir=cache)
    info["setup_s"] = time.time() - t
    (out / "env.txt").write_text(
        json.dumps(info, indent=1)
        + "\n\n"
        + sh("nvidia-smi")
        + "\n"
        + sh("nproc; free -g; uptime")
    )
    print(json.dumps(info, indent=1), flush=True)

    pages = json.loads((HERE / "pages.json").read_text())
    order = {n: i for i, n in enumerate(FIRST)}
    pages.sort(key=lambda p: order.get(p["name"], len(FIRST)))
    if args.only:
        pages = [p for p in pages if p["name"] in args.only]

    results = {}
    lock = threading.Lock()
    procs = {}
    stop = threading.Event()

    def save():
        with lock:
            doc = {
                "info": info,
                "elapsed_s": time.time() - t0,
                "pages": results,
            }
            tmp = out / "results.json.tmp"
            tmp.write_text(json.dumps(doc, indent=1))
            tmp.replace(out / "results.json")

    def gpu_sampler():
        with open(work / "gpu_util.csv", "w") as f:
            f.write("t,gpu_util,mem_used_mb,load1,running\n")
            while not stop.is_set():
                q = (
                    sh(
                        "nvidia-smi --query-gpu=utilization.gpu,memory.used "
                        "--format=csv,noheader,nounits"
                    )
                    .strip()
                    .replace(" ", "")
                )
                load = Path("/proc/loadavg").read_text().split()[0]
                with lock:
                    running = len(procs)
                f.write(f"{time.time() - t0:.0f},{q},{load},{running}\n")
                f.flush()
                stop.wait(5)

    threading.Thread(target=gpu_sampler, daemon=True).start()

    def run(page):
        name = page["name"]
        if time.time() - t0 > args.deadline:
            results[name] = {"page": page["page"], "status": "not started"}
            save()
            return
        cwd = (ROOT / page["page"]).parent
        res_file = work / f"{name}.result.json"
        log = logs / f"{name}.log"
        err = logs / f"{name}.err"
        start = time.time()
        with open(log, "w") as so, open(err, "w") as se:
            p = subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / "run_page.py"),
                    str(HERE / page["script"]),
                    str(res_file),
                ],
                cwd=cwd,
                env={**env, "BOOK_PAGE": str(ROOT / page["page"])},
                stdout=so,
                stderr=se,
                start_new_session=True,
            )
            with lock:
                procs[name] = p
            status = None
            while True:
                try:
                    rc = p.wait(timeout=1)
                    break
                except subprocess.TimeoutExpired:
                    now = time.time()
                    if now - start > args.page_timeout:
                        status = "timeout"
                    elif now - t0 > args.deadline:
                        status = "killed at deadline"
                    if status:
                        os.killpg(p.pid, signal.SIGKILL)
                        rc = p.wait()
                        break
            with lock:
                procs.pop(name, None)
        r = {
            "page": page["page"],
            "started_s": start - t0,
            "seconds": time.time() - start,
            "rc": rc,
        }
        if res_file.exists():
            r.update(json.loads(res_file.read_text()))
        r["status"] = status or ("ok" if rc == 0 else "error")
        if r["status"] != "ok":
            r["stderr_tail"] = tail(err, 40)
        r["stdout_tail"] = tail(log, 8)
        results[name] = r
        print(
            f"[{time.time() - t0:6.1f}s] {name}: {r['status']} "
            f"{r['seconds']:.1f}s "
            f"peak={r.get('peak_gpu_allocated_mb', 0):.0f}MB",
            flush=True,
        )
        save()

    with ThreadPoolExecutor(args.workers) as pool:
        list(pool.map(run, pages))
    stop.set()
    info["total_wall_s"] = time.time() - t0
    save()
    if (work / "data-log.jsonl").exists():
        shutil.copy(work / "data-log.jsonl", logs / "data-log.jsonl")
    shutil.copy(work / "gpu_util.csv", out / "gpu_util.csv")
    with tarfile.open(out / "logs.tar.gz", "w:gz") as tar:
        tar.add(logs, arcname="logs")
    print(f"total {info['total_wall_s']:.1f}s", flush=True)


if __name__ == "__main__":
    main()
