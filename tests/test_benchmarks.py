"""BENCHMARKS.md is rendered from the benches' recorded results, and every bench records."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from timing import scaled

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
BENCHES = sorted(p.stem.removeprefix("bench_") for p in BENCH.glob("bench_*.py"))


def _module(name: str) -> ModuleType:
    """A module of bench/ (not a package: the benches run as scripts with bench/ on the path)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


results = _module("results")
render = _module("render")


def test_benchmarks_md_is_what_the_results_render() -> None:
    rendered = render.render()
    assert (ROOT / "BENCHMARKS.md").read_text() == rendered, (
        "BENCHMARKS.md differs from the render of bench/results/*.json:"
        " run .venv/bin/python bench/render.py"
    )
    assert len(rendered.splitlines()) <= 300


def _recorded_name(path: Path) -> str | None:
    """The bench name a bench passes to ``record``, read from its source."""
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "record"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            return str(node.args[0].value)
    return None


@pytest.mark.parametrize("bench", BENCHES)
def test_every_bench_records_its_figures(bench: str) -> None:
    assert _recorded_name(BENCH / f"bench_{bench}.py") == bench, (
        f"bench_{bench}.py must call record({bench!r}, ...) from bench/results.py"
    )
    data = results.load(results.path_for(bench))
    assert data["bench"] == bench
    assert data["figures"], f"{bench}: no figures recorded"
    assert data["command"].split()[1] == f"bench/bench_{bench}.py"


def test_no_results_without_their_bench() -> None:
    orphans = {p.stem for p in results.RESULTS.glob("*.json")} - set(BENCHES)
    assert not orphans, f"results with no bench/bench_<name>.py: {sorted(orphans)}"


def test_record_writes_the_machine_load_command_date_and_figures(tmp_path: Path) -> None:
    F = results.Figure
    out = results.record(
        "coldstart",
        [
            F("python -c pass", 10.0, "ms"),
            F("ltm ls", 42.0, "ms", baseline="python -c pass", ratio=4.2, ratio_target=5),
            F("pushes", 900.0, "/s", better="higher", target=1000),
            F("kill -9", 0.0, "lost", target="no acknowledged push lost", met=True),
        ],
        command=".venv/bin/python bench/bench_coldstart.py --runs 3",
        notes=["reduced: --runs 3"],
        results=tmp_path,
    )
    assert out == tmp_path / "coldstart.json"
    data = json.loads(out.read_text())
    assert data["command"] == ".venv/bin/python bench/bench_coldstart.py --runs 3"
    assert data["machine"]["cores"] >= 1 and data["machine"]["python"].count(".") == 2
    assert data["machine"]["cpu"]
    assert len(data["load"]["start"]) == 3 and len(data["load"]["end"]) == 3
    assert data["date"].endswith("Z") and data["notes"] == ["reduced: --runs 3"]
    figures = {f["name"]: f for f in data["figures"]}
    assert figures["python -c pass"]["met"] is None
    assert figures["ltm ls"]["met"] is True and figures["ltm ls"]["baseline"] == "python -c pass"
    assert figures["pushes"]["met"] is False  # 900/s against at least 1,000/s
    assert figures["kill -9"]["met"] is True

    text = render.render(tmp_path)
    assert "`.venv/bin/python bench/bench_coldstart.py --runs 3`" in text
    assert "| ltm ls | 42.0 ms | ≤ 5x | 4.20x python -c pass | yes |" in text
    assert "| pushes | 900/s | ≥ 1,000/s |  | **no** |" in text
    assert "- reduced: --runs 3" in text


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"ratio": 2.0}, "baseline"),
        ({"ratio_target": 5}, "ratio target"),
        ({"target": "holds under load"}, "met="),
        ({"better": "faster"}, "lower"),
    ],
)
def test_a_figure_that_cannot_be_judged_is_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        results.Figure("x", 1.0, "ms", **kwargs)


def test_record_refuses_a_baseline_not_in_the_run_and_an_unknown_bench(tmp_path: Path) -> None:
    F = results.Figure
    with pytest.raises(ValueError, match="not a figure of the run"):
        results.record("coldstart", [F("a", 1.0, "ms", baseline="b", ratio=1.0)], results=tmp_path)
    with pytest.raises(ValueError, match=r"no bench/bench_nosuch\.py"):
        results.record("nosuch", [F("a", 1.0, "ms")], results=tmp_path)
    assert not list(tmp_path.iterdir())


def test_render_check_exits_1_when_the_file_differs(tmp_path: Path) -> None:
    results.record("coldstart", [results.Figure("a", 1.0, "ms")], results=tmp_path)
    output = tmp_path / "BENCHMARKS.md"
    argv = [sys.executable, str(BENCH / "render.py"), "--results", str(tmp_path)]
    check = [*argv, "--output", str(output), "--check"]
    stale = subprocess.run(check, capture_output=True, text=True, timeout=scaled(30))
    assert stale.returncode == 1 and "bench/render.py" in stale.stderr
    wrote = subprocess.run([*argv, "--output", str(output)], timeout=scaled(30))
    assert wrote.returncode == 0 and "| a | 1.00 ms |" in output.read_text()
    fresh = subprocess.run(check, capture_output=True, text=True, timeout=scaled(30))
    assert fresh.returncode == 0, fresh.stderr


def test_bench_server_reads_a_chunked_answer_whole() -> None:
    """``bench_server.py --url`` against a server that sends chunks (the reference, for a
    larger listing): each answer is read to its end, so the next one is read as an answer."""
    import asyncio

    bench = _module("bench_server")
    first = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    second = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    async def read() -> bytes:
        reader = asyncio.StreamReader()
        reader.feed_data(first + second)
        reader.feed_eof()
        head = await reader.readuntil(b"\r\n\r\n")
        await bench._read_body(reader, head)
        head = await reader.readuntil(b"\r\n\r\n")
        await bench._read_body(reader, head)
        return head + await reader.read()

    assert asyncio.run(read()) == second[: second.index(b"ok")]
