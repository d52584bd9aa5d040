"""Where the time goes: in-process timings and cProfile tops of the bulk and write paths.

    .venv/bin/python bench/bench_profile.py [--what save,push,batch,import,scan] [--top 8]

- ``save``: the MCP ``save`` tool's function (the stdio shim's place) into a local
  store seeded with ``--packets`` packets of ``bench/corpus.py`` (20,000 by
  default), 200 saves after 20 to warm up: p50, then the profile of 200 more.
- ``push``: ``POST /v1/packets`` of the example packet (a fresh id each) through
  the app as ``ltm server run`` serves it (the WSGI adapter over ``app.py``), on
  one thread, SQLite ``synchronous=FULL``: p50 of 500, then the profile of 500.
- ``batch``: ``POST /v1/packets/batch`` of 10 example packets (what ``ltm import``
  sends a server a request), the same way: the server's CPU a packet (200 requests),
  then the profile of 200 more.
- ``import``: ``ltm import FILE --local`` of 10,000 example packets run in this
  process (the importer and its writes; worker processes judge a bundle this
  size, and are not in the profile: their share shows as waiting).
- ``scan``: ``redact.scan_packet`` of the example packet: best of 15 rounds of
  100 (a saved packet's size; ``bench_redact.py`` has the 32 KiB ones).

The figures are this process's; BENCHMARKS.md quotes them beside the command.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import fill_store, machine
from results import Figure, record

# What each part measured, recorded at the end (the profiles are printed only).
FIGURES: list[Figure] = []

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "spec" / "examples" / "example.v0.2.json"


def top(run: Callable[[], None], count: int) -> None:
    profile = cProfile.Profile()
    profile.enable()
    run()
    profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out).strip_dirs().sort_stats("tottime")
    stats.print_stats(count)
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
    print("\n".join(lines[start:]))


def timed(call: Callable[[], None], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def home(tmp: Path, name: str) -> Path:
    folder = tmp / name
    folder.mkdir(mode=0o700)
    os.environ["LTM_DATA_DIR"] = os.environ["LTM_CONFIG_DIR"] = str(folder)
    return folder


def save(tmp: Path, packets: int, count: int) -> None:
    from bench_mcp import PACKET
    from bench_search import seed_sqlite

    from ltm.cli.agents.mcp import place
    from ltm.mcp import tools

    folder = home(tmp, "save")
    seed_sqlite(folder / "ltm.db", "local", packets)
    place.install()

    def one() -> None:
        tools._save({"packet": copy.deepcopy(PACKET)})

    for _ in range(20):
        one()
    p50 = timed(one, 200) * 1e3
    print(f"save into {packets:,} packets: p50 {p50:.2f} ms (200 saves)")
    FIGURES.append(Figure(f"MCP save into {packets:,} packets, p50 of 200", p50, "ms"))
    top(lambda: [one() for _ in range(200)], count)


def push(tmp: Path, count: int, batch: int = 0) -> None:
    """Pushes through the app; with ``batch``, ``POST /v1/packets/batch`` of that many."""
    from ulid import ULID

    os.environ["LTM_STORE"] = "sqlite"
    os.environ["LTM_DB"] = str(tmp / "server.db")
    sys.path.insert(0, str(ROOT))
    from cli.server.loader import load_app
    from cli.server.wsgi import ChaliceWSGI
    from ltm.service import tokens

    module = load_app()
    module.close_store()  # a store of this run's own (push, then batch, in one process)
    issued = tokens.issue_for(module.get_store(), "bench", label="bench", new_user=True)
    module.logger.handlers.clear()  # the access log line is still made, not printed
    module.logger.propagate = False
    app = ChaliceWSGI(module.app, logger=module.logger)
    example = json.loads(EXAMPLE.read_bytes())

    def one() -> None:
        if batch:
            texts = [json.dumps({**example, "id": str(ULID())}) for _ in range(batch)]
            path, body, ok = "/v1/packets/batch", json.dumps({"packets": texts}).encode(), "200"
        else:
            path, body, ok = (
                "/v1/packets",
                json.dumps({**example, "id": str(ULID())}).encode(),
                "201",
            )
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1",
            "HTTP_AUTHORIZATION": f"Bearer {issued.secret}",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
        }
        status: list[str] = []
        answer = b"".join(app(environ, lambda s, h, *a: status.append(s)))
        assert status[0].startswith(ok), status
        assert not batch or answer.count(b'"status":201') == batch, answer[:300]

    for _ in range(50):
        one()
    if batch:
        started = time.process_time()
        for _ in range(200):
            one()
        cpu = (time.process_time() - started) / (200 * batch)
        print(
            f"batch of {batch} (example packet): {cpu * 1e6:,.0f} µs of CPU a packet (200 requests)"
        )
        FIGURES.append(Figure(f"batch of {batch}: CPU a packet", cpu * 1e6, "µs"))
        top(lambda: [one() for _ in range(200)], count)
        module.close_store()
        return
    p50 = timed(one, 500) * 1e6
    print(f"push (example packet): p50 {p50:,.0f} µs (500 pushes)")
    FIGURES.append(Figure("push of the example packet, p50 of 500", p50, "µs"))
    top(lambda: [one() for _ in range(500)], count)
    module.close_store()


def import_(tmp: Path, count: int) -> None:
    from ltm.cli.client.backend import LocalBackend
    from ltm.cli.client.portable import Importer, Report, export

    source = home(tmp, "source")
    fill_store(source / "ltm.db", 10_000)
    bundle = tmp / "bundle.jsonl"
    backend = LocalBackend.open()
    with bundle.open("wb") as out:
        export(backend, [None], out)
    backend.close()
    home(tmp, "target")
    backend = LocalBackend.open()
    report = Report(out=io.StringIO())

    def run() -> None:
        with bundle.open("rb") as stream:
            importer = Importer(
                backend, report, team=None, lenient=False, allow_unredacted=False, replace=False
            )
            importer.run(stream, size=bundle.stat().st_size)

    started = time.perf_counter()
    top(run, count)
    took = time.perf_counter() - started
    print(f"import of 10,000 (profiled): {took:.1f} s; {report.added:,} added")
    FIGURES.append(Figure("import of 10,000, in process and profiled", took, "s"))
    backend.close()


def scan(count: int) -> None:
    from ltm import redact

    packet = json.loads(EXAMPLE.read_bytes())
    for _ in range(50):
        redact.scan_packet(packet)
    best = min(
        timed(lambda: [redact.scan_packet(packet) for _ in range(100)], 1) for _ in range(15)
    )
    print(f"scan of the example packet: {best / 100 * 1e6:.0f} µs (best of 15 rounds of 100)")
    FIGURES.append(Figure("scan of the example packet, best of 15 rounds", best / 100 * 1e6, "µs"))
    # Its pieces: what the literal sets replace, and what the fast walk replaces.
    sets = redact._sets
    assert sets is not None  # built by the scans above
    text = "\x00".join(redact.normalize(t) for _, t in redact._collect(packet))
    needles = sets[0].words
    # Without the sets, the needles of rules with one are looked for one by one; a rule
    # with several is searched without (redact._searched).
    plan = redact._plan(redact._builtin_rules())
    single = list(plan.single)
    print(
        f"  built-in rules with several needles: {len(plan.several)};"
        f" distinct needles: {len(needles)}"
    )
    pieces = {
        f"the {len(single)} needles of rules with one, one by one (`in`, no sets)": lambda: [
            n in text for n in single
        ],
        f"all {len(needles)} needles, ruled out by their set": lambda: sets[0].absent(text),
        "the keywords ruled out by their set": lambda: sets[1].absent(text.lower()),
        "the full walk for strings and paths (_collect)": lambda: redact._collect(packet),
        "the fast walk for strings (_plain_texts)": lambda: redact._plain_texts(packet),
    }
    for label, piece in pieces.items():
        took = min(timed(lambda p=piece: [p() for _ in range(100)], 1) for _ in range(15))
        print(f"  {label}: {took / 100 * 1e6:.1f} µs")
    top(lambda: [redact.scan_packet(packet) for _ in range(500)], count)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--what", default="save,push,batch,import,scan")
    parser.add_argument("--packets", type=int, default=20_000, help="in the store save writes to")
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}")
    for what in args.what.split(","):
        print(f"\n== {what}")
        with tempfile.TemporaryDirectory() as tmp:
            if what == "save":
                save(Path(tmp), args.packets, args.top)
            elif what == "push":
                push(Path(tmp), args.top)
            elif what == "batch":
                push(Path(tmp), args.top, batch=10)
            elif what == "import":
                import_(Path(tmp), args.top)
            elif what == "scan":
                scan(args.top)
            else:
                raise SystemExit(f"unknown --what {what!r}")
    record("profile", FIGURES)


if __name__ == "__main__":
    main()
