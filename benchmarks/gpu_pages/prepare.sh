#!/bin/bash
# Lay out what go.sh needs on a GPU machine that has torch, numpy,
# matplotlib, tqdm, sacrebleu and scikit-learn but no book toolchain and
# no network: the pages as scripts, stubs of myst_nb and IPython, the pure
# Python packages the pages import (copied from .venv), and the full-size
# data (from ../shared/data). Run from the repository root, after `make
# install`; then carry benchmarks/gpu_pages/{site,data,pages,pages.json}
# (git ignores them, about 35 MB) and run `bash benchmarks/gpu_pages/go.sh`.
set -euo pipefail
H=benchmarks/gpu_pages
SITE=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
DATA=${BOOK_DATA:-../shared/data}
rm -rf "$H/site" "$H/data" "$H/pages" "$H/pages.json"
mkdir -p "$H/site" "$H/data"
cp -r "$H/stubs/." "$H/site/"
for name in num2words docopt.py mlxtend; do cp -r "$SITE/$name" "$H/site/"; done
cp -r "$SITE"/num2words-*.dist-info "$SITE"/docopt-*.dist-info \
    "$SITE"/mlxtend-*.dist-info "$H/site/"
cp -r "$DATA/tinyshakespeare.txt" "$DATA/multi30k" "$DATA/fashion-mnist" \
    "$H/data/"
.venv/bin/python "$H/convert.py"
