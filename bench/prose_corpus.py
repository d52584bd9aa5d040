"""A large corpus of engineering prose for the redaction scan's false-positive figure.

Rebuilt at run time, never committed: every docstring (module, class and
function) of the Python standard library installed with the interpreter that
runs this (read with ``ast``, nothing imported; PSF-licensed text) and its
comments (runs of ``#`` lines: the engineers' own notes), the
project's own documentation (README.md, BENCHMARKS.md, docs/*.md), and the
hand-written near misses of tests/redact_corpus.py. The standard library's
test suites are left out (they hold fixtures, not prose). Units are
paragraphs; the order is sorted, so one interpreter version gives the same
corpus on every run.

Run alone to print its size: ``.venv/bin/python bench/prose_corpus.py``.
"""

from __future__ import annotations

import ast
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

# Folders of the standard library that are not prose: test suites and data.
_SKIP = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}


def _docstrings(path: Path) -> Iterator[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node)
            if doc:
                yield doc


def _comments(path: Path) -> Iterator[str]:
    """Each run of comment lines, as one paragraph."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (UnicodeDecodeError, ValueError):
        return
    run: list[str] = []
    for line in [*lines, ""]:
        stripped = line.strip()
        if stripped.startswith("#") and not stripped.startswith("#!"):
            run.append(stripped.lstrip("#").strip())
        elif run:
            text = "\n".join(run).strip()
            if text:
                yield text
            run = []


def _paragraphs(text: str) -> Iterator[str]:
    for para in text.split("\n\n"):
        if para.strip():
            yield para


def stdlib_units() -> list[tuple[str, str]]:
    """(module path, paragraph) for every docstring paragraph of the standard library."""
    base = Path(sysconfig.get_paths()["stdlib"])
    out: list[tuple[str, str]] = []
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base)
        if _SKIP & set(rel.parts[:-1]) or rel.name.startswith("test_"):
            continue
        source = f"stdlib/{rel.as_posix()}"
        for doc in _docstrings(path):
            out += [(source, p) for p in _paragraphs(doc)]
        out += [(source, c) for c in _comments(path)]
    return out


def project_units() -> list[tuple[str, str]]:
    """The project's documentation, paragraph by paragraph, and the near misses."""
    import redact_corpus

    out: list[tuple[str, str]] = []
    for path in [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]:
        rel = path.relative_to(ROOT).as_posix()
        out += [(rel, p) for p in _paragraphs(path.read_text(encoding="utf-8"))]
    near = redact_corpus.NEAR_MISSES + redact_corpus.FORMAT_NEAR_MISSES
    out += [("near misses", s) for s in near]
    return out


def units() -> list[tuple[str, str]]:
    """The whole corpus: (source, paragraph)."""
    return stdlib_units() + project_units()


def main() -> int:
    corpus = units()
    size = sum(len(t.encode()) for _, t in corpus)
    print(f"{len(corpus)} paragraphs, {size:,} bytes (Python {sys.version.split()[0]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
