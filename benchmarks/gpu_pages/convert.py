"""Convert the executed pages of _toc.yml to py:percent scripts.

Run here (prepare.sh does), not on the GPU machine.
"""

import json
import sys
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from execute_pages import toc_pages  # noqa: E402

out = Path(__file__).resolve().parent / "pages"
out.mkdir(exist_ok=True)
pages = []
for page in toc_pages(ROOT):
    rel = page.relative_to(ROOT)
    name = "__".join(rel.with_suffix("").parts[1:])
    nb = jupytext.read(page)
    # Only code cells matter; markdown becomes comments.
    jupytext.write(nb, out / f"{name}.py", fmt="py:percent")
    pages.append(
        {"page": str(rel), "script": f"pages/{name}.py", "name": name}
    )
(out.parent / "pages.json").write_text(json.dumps(pages, indent=1))
print(len(pages), "pages")
