"""Count the package's code the way issue 22 measures it.

``python scripts/code_stats.py [FOLDER] [--files]``: code lines (neither
blank, nor a comment, nor inside a docstring), docstring lines (non-blank
lines inside one), ``raise`` statements, the longest function bodies (the
lines after the signature and the docstring) and the bodies of the forwards
that issue 22 bounds.
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from pathlib import Path

FORWARDS = ("MultiHeadAttention.forward", "EncoderLayer.forward",
            "DecoderLayer.forward", "GPT.forward", "ViT.forward")


def _docstring(node: ast.AST) -> ast.Expr | None:
    if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)):
        return None
    body = node.body
    if (body and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        return body[0]
    return None


def stats(path: Path) -> tuple[int, int, int, list[tuple[int, str]]]:
    """Code lines, docstring lines, raises and (body, name) per function."""
    source = path.read_text()
    tree = ast.parse(source)
    lines = source.splitlines()
    docs: set[int] = set()
    for node in ast.walk(tree):
        doc = _docstring(node)
        if doc is not None:
            docs.update(range(doc.lineno, doc.end_lineno + 1))
    comments = {tok.start[0] for tok in
                tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT
                and lines[tok.start[0] - 1].lstrip().startswith("#")}

    def counted(i: int) -> bool:
        return bool(lines[i - 1].strip()) and i not in comments

    code = sum(counted(i) and i not in docs for i in range(1, len(lines) + 1))
    doc = sum(counted(i) and i in docs for i in range(1, len(lines) + 1))
    raises = sum(isinstance(n, ast.Raise) for n in ast.walk(tree))
    bodies = []
    for parent in ast.walk(tree):
        for node in ast.iter_child_nodes(parent):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = node.body[1:] if _docstring(node) else node.body
            if not body:
                continue
            size = sum(counted(i) and i not in docs
                       for i in range(body[0].lineno, node.end_lineno + 1))
            in_class = isinstance(parent, ast.ClassDef)
            owner = f"{parent.name}." if in_class else ""
            bodies.append((size, f"{owner}{node.name}"))
    return code, doc, raises, bodies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="src/transformer_book")
    parser.add_argument("--files", action="store_true",
                        help="one line per file as well")
    args = parser.parse_args()
    root = Path(args.folder)
    total = [0, 0, 0]
    bodies: list[tuple[int, str]] = []
    rows = []
    for path in sorted(root.rglob("*.py")):
        code, doc, raises, found = stats(path)
        name = str(path.relative_to(root))
        rows.append((code, doc, raises, name))
        total = [total[0] + code, total[1] + doc, total[2] + raises]
        bodies += [(size, f"{name}:{fn}") for size, fn in found]
    if args.files:
        for code, doc, raises, name in sorted(rows, reverse=True):
            print(f"{code:6d} code {doc:5d} doc {raises:4d} raise  {name}")
    code, doc, raises = total
    print(f"code lines {code}, docstring lines {doc} "
          f"(ratio {doc / max(code, 1):.2f}), raise statements {raises}")
    bodies.sort(reverse=True)
    print("longest bodies:", ", ".join(f"{n} {s}" for s, n in bodies[:5]))
    for want in FORWARDS:
        hits = [f"{s} ({n.split(':')[0]})" for s, n in bodies
                if n.endswith(":" + want)]
        print(f"{want}: {', '.join(hits) or 'not found'}")


if __name__ == "__main__":
    main()
