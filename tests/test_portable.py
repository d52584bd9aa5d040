"""ltm export / ltm import: bundles out of and into the local store and a real server.

The CLI is the real ``ltm`` in subprocesses; the server the real ``ltm server
run`` (on its SQLite file) and the same app on DynamoDB (moto's server), via
serverkit. Packets are compared as the stores hold them: byte for byte.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpkit
import pytest
from clikit import LTM, Cli, signed_in
from serverkit import SERVER_STORES, Server, make_packet, running_server
from timing import scaled

from ltm import bundle
from ltm.cli.terminal.progress import Progress
from ltm.store.sqlite import SqliteStore

AWS_KEY = (
    "AKIA" + "QYLPMN5H" + "T2ZRW3VK"
)  # built from pieces, so no scanner trips on this file (AWS's EXAMPLE key is a placeholder now)

# A batch of a hundred packets on moto, while the rest of the suite runs beside it, can
# take longer than the client's default wait: these imports are about batch sizes.
SLOW_BATCH = f"{min(600, scaled(60)):g}"


@pytest.fixture(scope="module", params=SERVER_STORES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("portable"), store=request.param) as srv:
        yield srv


def save_local(cli: Cli, n: int, goal: str = "Keep the build green") -> list[str]:
    ids = []
    for i in range(n):
        packet = make_packet(goal=f"{goal} #{i}", created_at=f"2026-05-01T12:00:{i:02d}Z")
        ids.append(cli.ok("save", "-", "--local", stdin=json.dumps(packet)).strip())
    return ids


def local_bodies(cli: Cli) -> dict[str, bytes]:
    """Every packet of the person's local store, as stored."""
    store = SqliteStore(Path(cli.env["LTM_DATA_DIR"]) / "ltm.db")
    try:
        out: dict[str, bytes] = {}
        cursor = None
        while True:
            page = store.list_packets(owner_id="local", limit=500, cursor=cursor)
            for meta in page.items:
                found = store.get_packet(meta.id)
                assert found is not None
                out[meta.id] = found.body
            if page.cursor is None:
                return out
            cursor = page.cursor
    finally:
        store.close()


def read_bundle(path: Path) -> tuple[dict[str, object], list[bundle.Entry]]:
    lines = path.read_bytes().splitlines()
    return bundle.read_header(lines[0]), [bundle.read_entry(line) for line in lines[1:]]


def write_bundle(path: Path, lines: list[dict[str, object] | str]) -> Path:
    header = bundle.header_line(source="test", exported_at="2026-05-01T12:00:00Z")
    body = "".join(line if isinstance(line, str) else json.dumps(line) + "\n" for line in lines)
    path.write_text(header + body, encoding="utf-8")
    return path


def line_for(packet: dict[str, object], **extra: object) -> dict[str, object]:
    return {
        "id": packet["id"],
        "scope": "personal",
        "created_by": "someone",
        "created_at": packet["created_at"],
        "conforming": True,
        "packet": packet,
        **extra,
    }


# -- the local store ---------------------------------------------------------------


def test_export_then_import_into_a_fresh_store_is_byte_identical(tmp_path: Path) -> None:
    alice = Cli(tmp_path / "alice")
    ids = save_local(alice, 5)
    out = tmp_path / "backup.jsonl"
    result = alice.run("export", "--local", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # the bundle went to the file
    assert "exported 5 packets" in result.stderr
    assert (out.stat().st_mode & 0o777) == 0o600  # a bundle holds every packet: private
    header, entries = read_bundle(out)
    assert header["format"] == "ltm-bundle" and header["version"] == bundle.VERSION
    assert header["source"] == "local"
    assert [e.id for e in entries] == list(reversed(ids))  # newest first
    assert {(e.scope, e.team, e.created_by) for e in entries} == {("personal", None, "local")}

    laptop = Cli(tmp_path / "laptop")
    first = laptop.run("import", str(out), "--local")
    assert first.returncode == 0, first.stderr
    assert sorted(first.stdout.split()) == sorted([w for i in ids for w in ("added", i)]), (
        first.stdout
    )
    assert "5 added, 0 skipped (already present), 0 refused" in first.stderr
    assert local_bodies(laptop) == local_bodies(alice)

    again = laptop.run("import", str(out), "--local")
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("identical packet already present") == 5
    assert "0 added, 5 skipped (already present), 0 refused — nothing changed" in again.stderr
    assert local_bodies(laptop) == local_bodies(alice)


def test_export_to_stdout_and_import_from_stdin(tmp_path: Path) -> None:
    alice = Cli(tmp_path / "alice")
    save_local(alice, 2)
    text = alice.ok("export", "--local")
    assert len(text.splitlines()) == 3
    bob = Cli(tmp_path / "bob")
    bob.ok("import", "-", "--local", stdin=text)
    assert local_bodies(bob) == local_bodies(alice)


def test_export_walks_every_page(tmp_path: Path) -> None:
    # More packets than one listing page (1000): export follows the store's cursor.
    from datetime import UTC, datetime

    from ltm.service import packets
    from ltm.store import User

    alice = Cli(tmp_path / "alice")
    store = SqliteStore(Path(alice.env["LTM_DATA_DIR"]) / "ltm.db")
    me = User("local", "local", datetime.now(UTC))
    for i in range(2100):
        packets.push(
            store, me, make_packet(created_at=f"2026-05-01T12:{i // 60:02d}:{i % 60:02d}Z")
        )
    store.close()
    out = tmp_path / "all.jsonl"
    alice.ok("export", "--local", "-o", str(out))
    _, entries = read_bundle(out)
    assert len(entries) == 2100 and len({e.id for e in entries}) == 2100
    stamps = [e.created_at for e in entries]
    assert stamps == sorted(stamps, reverse=True)


def test_import_reports_each_refusal_and_exits_non_zero(tmp_path: Path) -> None:
    alice = Cli(tmp_path / "alice")
    [kept] = save_local(alice, 1)
    good = make_packet(goal="A clean packet")
    leaky = make_packet(goal=f"Rotate the key {AWS_KEY}")
    invalid = make_packet(goal="")
    changed = make_packet(id=kept, goal="Someone edited this one")
    lenient = {**make_packet(), "surprise": 1}
    path = write_bundle(
        tmp_path / "mixed.jsonl",
        [
            line_for(good),
            line_for(leaky),
            line_for(invalid),
            "this is not json\n",
            line_for(changed),
            line_for(lenient, conforming=False),
            line_for(good),
        ],
    )
    before = local_bodies(alice)
    result = alice.run("import", str(path), "--local")
    assert result.returncode == 1, result.stderr
    report = result.stdout.splitlines()
    assert report[0] == f"added {good['id']}"
    assert report[1].startswith(f"refused {leaky['id']} (line 3): the redaction pre-flight found")
    assert "AKIA" in report[1] and "--allow-unredacted" in report[1]
    assert report[2].startswith(f"refused {invalid['id']} (line 4): packet is not a valid packet")
    assert report[3] == "refused line 5: not valid JSON"
    assert report[4].startswith(f"refused {kept} (line 6): a different packet with this id")
    assert report[5].startswith(f"refused {lenient['id']} (line 7):")
    assert report[5].endswith("(stored in lenient mode: pass --lenient)")
    assert report[6] == f"skipped {good['id']}: identical packet already present among your packets"
    assert "1 added, 1 skipped (already present), 5 refused" in result.stderr
    after = local_bodies(alice)
    assert after[kept] == before[kept]  # never overwritten without --replace
    assert set(after) == {kept, good["id"]}

    # The overrides, each doing only what it says.
    forced = alice.run(
        "import", str(path), "--local", "--allow-unredacted", "--replace", "--lenient"
    )
    assert f"added {leaky['id']}" in forced.stdout
    assert f"replaced {kept}" in forced.stdout
    assert f"added {lenient['id']}" in forced.stdout
    assert "refused line 5: not valid JSON" in forced.stdout
    assert json.loads(local_bodies(alice)[kept])["goal"] == "Someone edited this one"


def _stopped_import(
    tmp_path: Path, signum: int
) -> tuple[Cli, list[dict[str, Any]], Path, subprocess.Popen[bytes], list[str]]:
    """``ltm import --local`` of 16 batches, sent ``signum`` once its first batch is reported:
    the CLI, the packets, the bundle, the process and every line it said on stdout."""
    from ltm.cli.client.portable import LOCAL_CHUNK as BATCH

    cli = Cli(tmp_path / "alice")
    packets = [
        make_packet(
            goal=f"Packet {n} of a large import", created_at=f"2026-05-01T12:{n % 60:02d}:00Z"
        )
        for n in range(16 * BATCH)
    ]
    path = write_bundle(tmp_path / "big.jsonl", [line_for(p) for p in packets])
    proc = subprocess.Popen(
        [LTM, "import", str(path), "--local"],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    said = [proc.stdout.readline().decode() for _ in range(BATCH)]  # the first commit is in
    os.kill(proc.pid, signum)
    said += [line.decode() for line in proc.stdout]
    return cli, packets, path, proc, said


def test_an_import_killed_midway_keeps_whole_batches_and_a_rerun_completes_it(
    tmp_path: Path,
) -> None:
    from ltm.cli.client.portable import LOCAL_CHUNK as BATCH
    from ltm.packet import canonical_bytes

    cli, packets, path, proc, said = _stopped_import(tmp_path, signal.SIGKILL)
    assert proc.wait(timeout=scaled(60)) == -signal.SIGKILL, "the import ended before the kill"
    reported = [line.split()[1] for line in said if line.startswith("added ")]
    held = local_bodies(cli)
    # A line says "added" only once its batch is on disk, and a batch lands whole.
    assert set(reported) <= set(held)
    assert len(held) % BATCH == 0 and 0 < len(held) < len(packets)
    assert set(held) == {p["id"] for p in packets[: len(held)]}

    again = cli.run("import", str(path), "--local")
    assert again.returncode == 0, again.stderr
    added = len(packets) - len(held)
    assert f"{added} added, {len(held)} skipped (already present), 0 refused" in again.stderr
    assert local_bodies(cli) == {p["id"]: canonical_bytes(p) for p in packets}


def test_an_import_interrupted_by_ctrl_c_says_what_it_did_and_a_rerun_completes_it(
    tmp_path: Path,
) -> None:
    """Ctrl-C ends an import as a server out of reach does: the summary of what got in,
    then a line saying it was interrupted and that running it again completes it."""
    cli, packets, path, proc, said = _stopped_import(tmp_path, signal.SIGINT)
    assert proc.stderr is not None
    assert proc.wait(timeout=scaled(60)) == 130, "the import ended before the interrupt"
    err = proc.stderr.read().decode()
    reported = [line.split()[1] for line in said if line.startswith("added ")]
    held = local_bodies(cli)
    assert set(reported) <= set(held) and 0 < len(held) < len(packets)
    assert "added, 0 skipped (already present), 0 refused" in err, err  # the summary
    assert err.rstrip().endswith(
        "ltm: import interrupted — the lines reported above were imported, the rest were"
        " not; run the same import again: what is there already is skipped"
    ), err

    again = cli.run("import", str(path), "--local")
    assert again.returncode == 0, again.stderr
    assert f"{len(packets) - len(held)} added, {len(held)} skipped" in again.stderr
    assert set(local_bodies(cli)) == {p["id"] for p in packets}


def test_an_import_whose_report_reader_goes_away_still_imports_every_line(
    tmp_path: Path,
) -> None:
    """``ltm import B | head`` (or ``| less``, quit early): the report's reader goes away
    while the import runs. The import is the job, not its report: it goes on to the
    end, and the summary and the exit status (on stderr and in the status, which the
    reader never held) still say how it went; it never stops silently with 0 midway."""
    from ltm.cli.client.portable import LOCAL_CHUNK as BATCH
    from ltm.packet import canonical_bytes

    fcntl = pytest.importorskip("fcntl")
    if not hasattr(fcntl, "F_SETPIPE_SZ"):
        pytest.skip("a pipe's size is set on Linux only")
    cli = Cli(tmp_path / "alice")
    packets = [
        make_packet(goal=f"Packet {n} of an import read by head", created_at="2026-05-01T12:00:00Z")
        for n in range(3 * BATCH)
    ]
    lines: list[dict[str, object] | str] = [line_for(p) for p in packets]
    path = write_bundle(tmp_path / "big.jsonl", [*lines, "not json\n"])
    proc = subprocess.Popen(
        [LTM, "import", str(path), "--local"],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    # A pipe smaller than the first batch's report, so the import is still writing it
    # (and has batches to go) when the reader, having read a line, goes away.
    fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    assert proc.stdout.readline().startswith(b"added ")
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=scaled(60)) == 1, err  # the line that is not JSON was refused
    assert f"{len(packets)} added, 0 skipped (already present), 1 refused" in err, err
    assert "Traceback" not in err and "Broken pipe" not in err, err
    assert local_bodies(cli) == {p["id"]: canonical_bytes(p) for p in packets}


def test_an_import_the_local_store_has_no_room_for_stops_and_a_rerun_completes_it(
    tmp_path: Path,
) -> None:
    """The local store cannot be written midway (a full disk; here the size this process
    may write, ``RLIMIT_FSIZE``, as a quota): the import stops at the first line of the
    batch that did not go in, after the summary of what did, as for a server out of
    reach; it was an unexpected error with no summary. Run again with room, it adds
    the rest, nothing twice."""
    from ltm.cli.client.portable import LOCAL_CHUNK as BATCH
    from ltm.packet import canonical_bytes

    resource = pytest.importorskip("resource")
    cli = Cli(tmp_path / "alice")
    # Some 2 KiB a packet: more than the limit holds in all.
    rules = [f"Constraint {i}: " + "keep the build green " * 47 for i in range(2)]
    packets = [
        make_packet(goal=f"Packet {n} of an import", constraints=rules) for n in range(3 * BATCH)
    ]
    path = write_bundle(tmp_path / "big.jsonl", [line_for(p) for p in packets])
    limit = 2 * 1024 * 1024

    def quota() -> None:  # in the child, before ltm starts
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = subprocess.run(
        [LTM, "import", str(path), "--local"],
        env=cli.env,
        capture_output=True,
        text=True,
        preexec_fn=quota,  # in the child only: this process keeps its own limit
    )
    assert result.returncode == 1, result.stderr
    assert "unexpected" not in result.stderr, result.stderr
    added = [line.split()[1] for line in result.stdout.splitlines()]
    assert all(line.startswith("added ") for line in result.stdout.splitlines())
    assert f"import into local store ({cli.env['LTM_DATA_DIR']}" in result.stderr
    assert f"{len(added)} added, 0 skipped (already present), 0 refused" in result.stderr
    assert f"import stopped at line {len(added) + 2}: local store (" in result.stderr
    assert "run the same import again" in result.stderr
    held = local_bodies(cli)
    assert set(added) == set(held) and len(held) < len(packets)

    again = cli.run("import", str(path), "--local")
    assert again.returncode == 0, again.stderr
    rest = len(packets) - len(held)
    assert f"{rest} added, {len(held)} skipped (already present), 0 refused" in again.stderr
    assert local_bodies(cli) == {p["id"]: canonical_bytes(p) for p in packets}


def test_export_to_a_folder_or_to_no_name_is_refused_plainly(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "alice")
    save_local(cli, 1)
    for target in ("", str(tmp_path)):
        result = cli.run("export", "--local", "-o", target)
        assert result.returncode == 2, result.stderr
        assert "-o needs a file to write, not a folder" in result.stderr
        assert "unexpected error" not in result.stderr


def test_import_refuses_what_is_not_a_bundle(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    packet = tmp_path / "packet.json"
    packet.write_text(json.dumps(make_packet()))
    assert "not an ltm bundle" in cli.fails("import", str(packet), "--local")
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"format": "ltm-bundle", "version": 99}) + "\n")
    assert "newer than this ltm reads" in cli.fails("import", str(newer), "--local")
    # A first line nested past what the JSON decoder recurses into is no header either
    # (packet lines nested so are refused each as not valid JSON).
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "\n")
    assert "not an ltm bundle" in cli.fails("import", str(deep), "--local")
    assert "no such file" in cli.fails("import", str(tmp_path / "missing"), "--local")
    assert "teams live on a server" in cli.fails("export", "--local", "-t", "team")


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        (b'{"id":"01JS5LTMEXAMPLE","scope":"personal"}', "01JS5LTMEXAMPLE"),
        (b'{ "id" :\t"01JS5LTMEXAMPLE" , "scope": 1}', "01JS5LTMEXAMPLE"),
        ('{"id":"01JS5LTMEXAMPLE","x":1}', "01JS5LTMEXAMPLE"),
        (b'{"scope":"personal","id":"01JS5LTMEXAMPLE"}', None),  # not first
        (b'{"id":"01JS5LTM/EXAMPLE","x":1}', None),  # not letters and digits alone
        (b'{"id":"\\u0030JS5LTMEXAMPLE","x":1}', None),  # an escape
        (b'{"id":"01JS5LTMEXAMPLE"}', None),  # nothing after it: no line of ours
        (b'{"id":"' + b"A" * 65 + b'","x":1}', None),  # longer than an id may be
    ],
)
def test_a_lines_id_hint_reads_its_head_alone(line: bytes | str, hint: str | None) -> None:
    assert bundle.id_hint(line) == hint


def test_a_line_that_names_another_id_further_on_is_refused_however_it_is_read() -> None:
    """``ltm import`` orders and looks a line up by the id it starts with before any
    process decodes it (``bundle.id_hint``); JSON keeps the last of a name given twice,
    so a line naming another id further on would be read as another packet's."""
    packet = make_packet()
    line = json.dumps(line_for(packet))
    assert bundle.read_entry(line.encode()).id == bundle.id_hint(line.encode()) == packet["id"]
    twice = '{"id": "01OTHERPACKET000000000000", ' + line[1:]
    for form in (twice, twice.encode()):
        with pytest.raises(bundle.BundleError, match="names its id twice, differently"):
            bundle.read_entry(form)
    same = '{{"id": "{}", '.format(packet["id"]) + line[1:]  # the same id twice: one packet
    assert bundle.read_entry(same).id == packet["id"]


def test_a_failed_export_leaves_no_partial_file(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    save_local(cli, 1)
    db = Path(cli.env["LTM_DATA_DIR"]) / "ltm.db"
    db.write_bytes(b"this is not a database" * 100)
    out = tmp_path / "out.jsonl"
    cli.run("export", "--local", "-o", str(out))
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []


def test_an_export_with_no_room_to_write_says_where_and_leaves_nothing(tmp_path: Path) -> None:
    """A full disk ends an export with one line naming where it could not write, exit 1,
    never an unexpected error: standard output on /dev/full, and a file past the size
    this process may write (``RLIMIT_FSIZE``, as a quota; its bundle is over the 1 MiB
    the file is written by, so the refusal comes midway, not at the end)."""
    resource = pytest.importorskip("resource")
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    cli = Cli(tmp_path / "alice")
    # Some 25 KiB a packet (under the 32 KiB cap), some 1.1 MiB in all.
    rules = [f"Constraint {i}: " + "keep the build green " * 47 for i in range(25)]
    packets = [make_packet(goal=f"Packet {n}", constraints=rules) for n in range(45)]
    path = write_bundle(tmp_path / "in.jsonl", [line_for(p) for p in packets])
    cli.ok("import", str(path), "--local")

    with open("/dev/full", "wb") as full:
        result = subprocess.run(
            [LTM, "export", "--local"], env=cli.env, stdout=full, stderr=subprocess.PIPE
        )
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert err.startswith("ltm: cannot write the bundle to standard output: "), err
    assert "unexpected" not in err

    limit = 256 * 1024

    def quota() -> None:  # in the child, before ltm starts
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = tmp_path / "out.jsonl"
    result = subprocess.run(
        [LTM, "export", "--local", "-o", str(out)],
        env=cli.env,
        stderr=subprocess.PIPE,
        preexec_fn=quota,  # in the child only: this process keeps its own limit
    )
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert err.startswith(f"ltm: cannot write {out}: "), err
    assert "unexpected" not in err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []


def test_progress_draws_only_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        bar = Progress("imported", total=100, unit=" packets", stream=stream)
        bar.update(5, part=50)
        bar.clear()
        bar.done()
    assert "[############............]  50% imported 5 packets" in tty.getvalue()
    assert tty.getvalue().endswith("\r\x1b[K")
    assert pipe.getvalue() == ""


# -- a server -------------------------------------------------------------------------


def test_page_token_walks_a_scope(server: Server) -> None:
    _, token = server.issue("pager")
    with server.client(token) as http:
        ids = []
        for i in range(7):
            packet = make_packet(created_at=f"2026-05-01T12:00:{i:02d}Z")
            assert http.post("/v1/packets", json=packet).status_code == 201
            ids.append(packet["id"])
        seen, page_token, pages = [], None, 0
        while True:
            params: dict[str, object] = {"limit": 3}
            if page_token:
                params["page_token"] = page_token
            answer = http.get("/v1/packets", params=params).json()
            pages += 1
            seen += [row["id"] for row in answer["packets"]]
            assert all(set(row) == {"id", "created_at", "goal"} for row in answer["packets"])
            page_token = answer.get("next_page_token")
            if not page_token:
                break
        assert seen == list(reversed(ids)) and pages == 3
        assert "next_page_token" not in http.get("/v1/packets").json()  # the reference's shape
        bad = http.get("/v1/packets", params={"page_token": "not-a-token"})
        assert bad.status_code == 400 and bad.json() == {
            "error": "page_token: not a token from this listing"
        }


def test_export_warns_of_a_cut_listing_only_where_the_server_has_no_pages(
    tmp_path: Path,
) -> None:
    """A full last page without a page token is the end of the listing on a server that
    pages (exactly 1,000 packets here), and a cut one only on a server without pages (the
    reference, which has no batch read either)."""
    from clikit import Seen, json_reply, stub_server

    from ltm.backend import WALK_PAGE

    packets = [make_packet(goal=f"one of many #{i}") for i in range(WALK_PAGE)]
    path = write_bundle(tmp_path / "many.jsonl", [line_for(p) for p in packets])
    with running_server(tmp_path / "server") as srv:
        cli = signed_in(srv, tmp_path / "me", "many")
        assert cli.run("import", str(path)).returncode == 0
        done = cli.run("export", "-o", str(tmp_path / "out.jsonl"))
    assert done.returncode == 0, done.stderr
    assert f"exported {WALK_PAGE} packets" in done.stderr and "warning" not in done.stderr

    bodies = {p["id"]: p for p in packets}
    rows = [{"id": p["id"], "created_at": p["created_at"], "goal": p["goal"]} for p in packets]

    def reference(request: Seen) -> tuple[int, dict[str, str], bytes]:
        path = request.path.split("?")[0]
        if path == "/v1/packets":
            return json_reply(200, {"packets": rows})
        if path == "/v1/packets/batch":
            return 404, {"Content-Type": "text/plain"}, b"404 page not found"
        status, headers, body = json_reply(200, bodies[path.rsplit("/", 1)[-1]])
        # A fresh connection each: a kept-alive one waits on delayed ACKs, 40 ms a read.
        return status, {**headers, "Connection": "close"}, body

    with stub_server(reference) as stub:
        cut = Cli(tmp_path / "ref", {**Cli(tmp_path / "ref").env, "LTM_HOST": stub.url})
        cut.env["LTM_TOKEN"] = "ltm_" + "0" * 64
        done = cut.run("export", "-o", str(tmp_path / "ref.jsonl"))
    assert done.returncode == 0, done.stderr
    assert "has no page_token; older ones were not exported" in done.stderr


def test_round_trip_local_server_local_is_byte_identical(server: Server, tmp_path: Path) -> None:
    laptop = Cli(tmp_path / "laptop")
    save_local(laptop, 4)
    up = tmp_path / "up.jsonl"
    laptop.ok("export", "--local", "-o", str(up))

    signed = signed_in(server, tmp_path / "laptop-signed", "carol")
    signed.env["LTM_DATA_DIR"] = laptop.env["LTM_DATA_DIR"]
    pushed = signed.run("import", str(up))
    assert pushed.returncode == 0, pushed.stderr
    assert "4 added, 0 skipped" in pushed.stderr and server.url in pushed.stderr
    again = signed.run("import", str(up))
    assert "0 added, 4 skipped (already present), 0 refused — nothing changed" in again.stderr

    down = tmp_path / "down.jsonl"
    signed.ok("export", "-o", str(down))
    header, entries = read_bundle(down)
    assert header["source"] == server.url and len(entries) == 4
    assert {e.created_by for e in entries} == {entries[0].created_by} != {""}

    desktop = Cli(tmp_path / "desktop")
    desktop.ok("import", str(down), "--local")
    assert local_bodies(desktop) == local_bodies(laptop)


def test_lenient_packets_survive_the_trip(server: Server, tmp_path: Path) -> None:
    cli = signed_in(server, tmp_path / "dave", "dave")
    odd = {**make_packet(), "surprise": {"b": 1, "a": 2}}
    cli.ok("push", "-", "--lenient", stdin=json.dumps(odd))
    out = tmp_path / "odd.jsonl"
    cli.ok("export", "-o", str(out))
    _, [entry] = read_bundle(out)
    assert entry.conforming is False and entry.packet["surprise"] == {"a": 2, "b": 1}
    local = Cli(tmp_path / "dave-local")
    refused = local.run("import", str(out), "--local")
    assert refused.returncode == 1 and "pass --lenient" in refused.stdout
    local.ok("import", str(out), "--local", "--lenient")
    store = SqliteStore(Path(local.env["LTM_DATA_DIR"]) / "ltm.db")
    try:
        got = store.get_packet(odd["id"])
        assert got is not None and got.conforming is False
    finally:
        store.close()


def test_import_never_overwrites_another_users_packet(server: Server, tmp_path: Path) -> None:
    erin = signed_in(server, tmp_path / "erin", "erin")
    mine = make_packet(goal="Erin's own")
    erin.ok("push", "-", stdin=json.dumps(mine))
    theirs = make_packet(id=mine["id"], goal="Frank's take-over attempt")
    path = write_bundle(tmp_path / "frank.jsonl", [line_for(theirs), line_for(make_packet())])
    frank = signed_in(server, tmp_path / "frank", "frank")
    result = frank.run("import", str(path))
    assert result.returncode == 1
    assert f"refused {mine['id']} (line 2): the id belongs to someone else" in result.stdout
    assert "1 added, 0 skipped (already present), 1 refused" in result.stderr
    assert json.loads(erin.ok("show", mine["id"], "--json"))["goal"] == "Erin's own"


def test_team_scopes_export_with_all_and_import_into_their_team(
    server: Server, tmp_path: Path
) -> None:
    gina = signed_in(server, tmp_path / "gina", "gina")
    team = f"crew{tmp_path.name[-6:].replace('_', '').lower()}"[:30]
    gina.ok("teams", "create", team)
    personal, shared = make_packet(goal="Mine"), make_packet(goal="Ours")
    gina.ok("push", "-", stdin=json.dumps(personal))
    gina.ok("push", "-", "-t", team, stdin=json.dumps(shared))

    only_team = tmp_path / "team.jsonl"
    gina.ok("export", "-t", team, "-o", str(only_team))
    _, entries = read_bundle(only_team)
    assert [(e.id, e.scope, e.team) for e in entries] == [(shared["id"], "team", team)]

    everything = tmp_path / "all.jsonl"
    gina.ok("export", "--all", "-o", str(everything))
    _, entries = read_bundle(everything)
    assert {(e.id, e.scope, e.team) for e in entries} == {
        (personal["id"], "personal", None),
        (shared["id"], "team", team),
    }

    # A team -t names that does not exist (a typo) or is not hers: said once, before a
    # line is read, rather than each line refused for it, one request each.
    typo = gina.run("import", "-t", team + "x", str(everything))
    assert typo.returncode == 1 and typo.stdout == ""
    assert typo.stderr.strip() == (
        f"ltm: team {team + 'x'!r} not found on {server.url}, or you are not a member"
        " — see your teams: ltm teams ls"
    )

    # Deleted on the server, then restored from the bundle: each into its own scope.
    gina.ok("rm", personal["id"], "--yes")
    gina.ok("rm", shared["id"], "-t", team, "--yes")
    restored = gina.run("import", str(everything))
    assert restored.returncode == 0, restored.stderr
    assert f"added {shared['id']} in team {team}" in restored.stdout
    assert json.loads(gina.ok("show", shared["id"], "-t", team, "--json"))["goal"] == "Ours"

    # Into the local store (personal only), team packets land in the personal scope.
    local = Cli(tmp_path / "gina-local")
    done = local.run("import", str(everything), "--local")
    assert "1 team packets went into your personal store" in done.stderr
    assert len(local_bodies(local)) == 2


def test_export_counts_a_team_named_personal_apart_from_personal_packets(
    server: Server, tmp_path: Path
) -> None:
    """What the export says it wrote is what it wrote, whatever the teams are called."""
    hal = signed_in(server, tmp_path / "hal", "hal")
    hal.ok("teams", "create", "personal")
    for n in range(2):
        hal.ok("push", "-", stdin=json.dumps(make_packet(goal=f"Mine {n}")))
    hal.ok("push", "-", "-t", "personal", stdin=json.dumps(make_packet(goal="The team's")))
    out = tmp_path / "all.jsonl"
    done = hal.run("export", "--all", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert len(read_bundle(out)[1]) == 3
    assert f"exported 3 packets from {server.url} (2 personal, 1 team personal)" in done.stderr


def test_on_a_terminal_progress_shows_and_the_bundle_never_floods_it(tmp_path: Path) -> None:
    import pexpect

    cli = Cli(tmp_path)
    save_local(cli, 3)
    out = tmp_path / "tty.jsonl"

    def on_terminal(*args: str) -> tuple[str, int]:
        child = pexpect.spawn(LTM, list(args), env=cli.env, encoding="utf-8", timeout=scaled(60))
        child.expect(pexpect.EOF)
        child.close()
        return child.before, child.exitstatus

    text, code = on_terminal("export", "--local", "-o", str(out))
    assert code == 0
    assert "\rexported 1 packets\x1b[K" in text  # drawn on the terminal, then cleared
    assert "exported 3 packets from local store" in text
    assert len(out.read_text().splitlines()) == 4

    text, code = on_terminal("export", "--local")  # stdout is the terminal: refused
    assert code == 2 and "ltm export -o FILE" in text and "ltm-bundle" not in text

    text, code = on_terminal("import", str(out), "--local")
    assert code == 0 and "% imported" in text and "3 skipped (already present)" in text


def test_export_never_writes_through_a_file_another_user_planted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a folder others may write to, the partial file is created, never opened: a
    symlink planted under its name (the old name was guessable: the pid) is refused,
    and a link at the destination is replaced, not written through."""
    import os
    import secrets

    from ltm.cli.client.portable import AtomicFile

    shared = tmp_path / "shared"
    shared.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = shared / "out.jsonl"
    # Under the names a writer might pick: the pid's, and the first random one.
    names = iter(["0123456789abcdef", "fedcba9876543210", "00000000000000ff"])
    monkeypatch.setattr(secrets, "token_hex", lambda n=None: next(names))
    for planted in (f".out.jsonl.{os.getpid()}.partial", ".out.jsonl.0123456789abcdef.partial"):
        (shared / planted).symlink_to(victim)
    (shared / "out.jsonl").symlink_to(victim)  # the destination too

    sink = AtomicFile(out)
    sink.file.write(b"the bundle\n")
    sink.commit()
    assert victim.read_text() == "precious\n"  # never truncated, never written
    assert not out.is_symlink() and out.read_bytes() == b"the bundle\n"
    assert (out.stat().st_mode & 0o777) == 0o600

    # A failure on the way removes the partial file.
    sink = AtomicFile(shared / "other.jsonl")
    sink.abandon()
    left = sorted(p.name for p in shared.iterdir())
    assert left == sorted(
        [".out.jsonl.0123456789abcdef.partial", f".out.jsonl.{os.getpid()}.partial", "out.jsonl"]
    )


def test_export_refuses_a_destination_folder_it_cannot_write(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    save_local(cli, 1)
    line = cli.fails("export", "--local", "-o", str(tmp_path / "missing" / "out.jsonl"))
    assert "cannot write" in line
    assert not (tmp_path / "missing").exists()


def test_pull_to_a_file_writes_it_private_and_never_through_a_planted_link(
    tmp_path: Path,
) -> None:
    """A pulled packet is private memory, as a bundle is: written 0600 whatever the umask,
    in whole or not at all, and a link at the destination is replaced, not written through."""
    cli = Cli(tmp_path / "alice")
    [packet_id] = save_local(cli, 1)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "shared" / "packet.json"
    out.parent.mkdir()
    out.symlink_to(victim)
    old = os.umask(0o022)  # the usual umask: a plain write would make the file 0644
    try:
        cli.ok("pull", packet_id, "--local", "-o", str(out))
    finally:
        os.umask(old)
    assert victim.read_text() == "precious\n"
    assert not out.is_symlink() and out.read_bytes() == local_bodies(cli)[packet_id] + b"\n"
    assert (out.stat().st_mode & 0o777) == 0o600
    assert [p.name for p in out.parent.iterdir()] == ["packet.json"]  # no partial file left
    result = cli.run("pull", packet_id, "--local", "-o", str(out.parent))
    assert result.returncode == 2 and "-o needs a file to write, not a folder" in result.stderr


def test_dash_as_the_output_is_standard_output(tmp_path: Path) -> None:
    """``-o -`` is standard output, as ``-`` is standard input for import, save and push:
    never a file named ``-``."""
    cli = Cli(tmp_path / "alice")
    [packet_id] = save_local(cli, 1)
    work = tmp_path / "work"
    work.mkdir()
    here = cli.at(work)
    text = here.ok("export", "--local", "-o", "-")
    header, line = text.splitlines()
    assert bundle.read_header(header)["format"] == "ltm-bundle"
    assert bundle.read_entry(line).id == packet_id
    pulled = here.ok("pull", packet_id, "--local", "-o", "-")
    assert pulled.encode() == local_bodies(cli)[packet_id] + b"\n"
    assert list(work.iterdir()) == []


def test_output_to_what_is_not_a_file_is_refused_not_replaced(tmp_path: Path) -> None:
    """``-o`` naming a device or a pipe (``/dev/null``, ``/dev/stdout``, a FIFO someone
    made) is refused: the file moved to its name would replace it (run as root, the
    system's ``/dev/null`` itself). Standard output is ``-o -``."""
    cli = Cli(tmp_path / "alice")
    [packet_id] = save_local(cli, 1)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for verb in (["export", "--local"], ["pull", packet_id, "--local"]):
        result = cli.run(*verb, "-o", str(fifo))
        assert result.returncode == 2, result.stderr
        assert f"-o {fifo} is not a regular file (for standard output: -o -)" in result.stderr
        assert fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alice", "pipe"]


def test_an_export_is_on_disk_once_it_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundle's bytes are synced, then moved to their name, then the folder is synced:
    a rename is durable only once its folder is, so a power cut after "exported" would
    otherwise leave the old file, or none, where the backup was said to be."""
    import stat

    from ltm.cli.client.portable import AtomicFile

    done: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        done.append("folder synced" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file synced")
        real_fsync(fd)

    def replace(src: object, dst: object) -> None:
        done.append("moved")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    sink = AtomicFile(tmp_path / "out.jsonl")
    sink.file.write(b"the bundle\n")
    sink.commit()
    assert done == ["file synced", "moved", "folder synced"]
    assert (tmp_path / "out.jsonl").read_bytes() == b"the bundle\n"


def test_import_into_a_server_goes_in_batches_and_reports_in_bundle_order(
    server: Server, tmp_path: Path
) -> None:
    cli = signed_in(server, tmp_path / "hana", "hana")
    first, second = make_packet(goal="first"), make_packet(goal="second")
    rival = {**second, "goal": "second, rewritten"}
    many = [make_packet(goal=f"bulk {n}") for n in range(150)]  # more than one chunk
    lines: list[dict[str, object] | str] = [
        line_for(first),
        line_for(second),
        "not a bundle line\n",
        line_for(first),  # the same id again: sees the first line's push
        line_for(rival),  # the same id, other bytes: kept
        *(line_for(p) for p in many),
    ]
    path = write_bundle(tmp_path / "mixed.jsonl", lines)
    before = server.logs().count('"message":"request"')
    result = cli.run("import", str(path))
    assert result.returncode == 1  # a refusal
    said = result.stdout.splitlines()
    assert said[:5] == [
        f"added {first['id']}",
        f"added {second['id']}",
        said[2],
        f"skipped {first['id']}: identical packet already present among your packets",
        f"refused {second['id']} (line 6): a different packet with this id is already there"
        " (kept; pass --replace to overwrite your own)",
    ]
    assert said[2].startswith("refused line 4: ")  # the header is line 1
    assert said[5:] == [f"added {p['id']}" for p in many]
    assert "152 added, 1 skipped (already present), 2 refused" in result.stderr
    logged = [
        json.loads(line)
        for line in server.logs().splitlines()
        if line.startswith("{") and '"message":"request"' in line
    ][before:]
    pushes = [(e["method"], e["path"]) for e in logged if e["method"] == "POST"]
    assert pushes and set(pushes) == {("POST", "/v1/packets/batch")}
    assert len(logged) < 20  # lookups and pushes a batch at a time, not a request a line


def _requests(server: Server, since: int) -> list[tuple[str, str]]:
    """(method, path) of each request the server logged after its first ``since``."""
    logged = [
        json.loads(line)
        for line in server.logs().splitlines()
        if line.startswith("{") and '"message":"request"' in line
    ][since:]
    return [(e["method"], e["path"]) for e in logged]


def _logged(server: Server) -> int:
    return server.logs().count('"message":"request"')


def test_import_into_a_server_sends_a_packet_too_big_to_share_a_batch_alone(
    server: Server, tmp_path: Path
) -> None:
    """The first batch request is held to the 32 KiB any server takes: a packet whose
    escaped text cannot share one goes alone, as a push. Past it, the rest go on two
    connections at once, in batches as big as the server's batch reply says, which a
    packet that big shares."""
    cli = signed_in(server, tmp_path / "ines", "ines")
    small = [make_packet(goal=f"bulk {n}") for n in range(120)]  # several requests
    quoted = '"' * 1000  # escaped twice in a batch body: 4 bytes each there
    big = [make_packet(goal="quotes", constraints=[quoted] * 14) for _ in range(2)]
    assert len(json.dumps(big[0])) < 32_768 < 2 * len(json.dumps(big[0]))
    lines = [line_for(big[0])] + [line_for(p) for p in small[:60]]
    lines += [line_for(big[1])] + [line_for(p) for p in small[60:]]
    before = _logged(server)
    result = cli.run("import", str(write_bundle(tmp_path / "big.jsonl", lines)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert {f"added {p['id']}" for p in big} <= set(result.stdout.splitlines())
    assert "122 added, 0 skipped (already present), 0 refused" in result.stderr
    pushes = [path for method, path in _requests(server, before) if method == "POST"]
    assert pushes[0] == "/v1/packets"  # the first, alone
    assert set(pushes[1:]) == {"/v1/packets/batch"}  # the second shares a batch


def test_import_into_a_server_sends_batches_as_big_as_the_server_takes(
    server: Server, tmp_path: Path
) -> None:
    """250 packets of 3 KiB: the first request carries 10 (32 KiB), the rest of each
    100-line chunk one request each, where 32 KiB requests would take 25."""
    cli = signed_in(server, tmp_path / "jun", "jun")
    packets = [make_packet(constraints=["x" * 1000] * 3) for _ in range(250)]
    before = _logged(server)
    bundle = write_bundle(tmp_path / "3k.jsonl", map(line_for, packets))
    result = cli.run("import", str(bundle), LTM_TIMEOUT=SLOW_BATCH)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "250 added, 0 skipped (already present), 0 refused" in result.stderr
    pushes = [path for method, path in _requests(server, before) if method == "POST"]
    assert pushes == ["/v1/packets/batch"] * 4


@pytest.mark.parametrize("kib", [3, 29])
def test_import_through_a_proxy_that_takes_less_than_the_server_says(
    server: Server, tmp_path: Path, kib: int
) -> None:
    """A proxy in front refuses bodies over 32 KiB with 413, though the server's batch
    reply says it takes more: the client goes back to 32 KiB and loses no packet. With
    packets of 29 KiB a chunk makes several 1 MiB requests, sent on two connections at
    once: each may be refused once, and what one connection learns, the other sends."""
    from clikit import Seen, stub_server

    from ltm.cli.client.remote import LANES

    def forward(request: Seen) -> tuple[int, dict[str, str], bytes]:
        if len(request.body) > 32_768:
            return 413, {"Content-Type": "text/html"}, b"<h1>413 Request Entity Too Large</h1>"
        keep = {"authorization", "content-type", "x-ltm-allow-unredacted"}
        reply = httpkit.request(
            request.method,
            server.url + request.path,
            content=request.body,
            headers={k: v for k, v in request.headers.items() if k in keep},
            timeout=float(SLOW_BATCH),  # httpx's default 5 s: less than a loaded moto batch
        )
        passed = {"content-type", "x-ltm-batch-bytes"}
        return (
            reply.status_code,
            {k: v for k, v in reply.headers.items() if k in passed},
            reply.content,
        )

    packets = [make_packet(constraints=["x" * 1000] * kib) for _ in range(150)]
    with stub_server(forward) as proxy:
        _user, token = server.issue(f"kai-{kib}")
        cli = Cli(tmp_path / "kai")
        cli.ok("auth", proxy.url, "--with-token", stdin=token)
        bundle = write_bundle(tmp_path / "3k.jsonl", map(line_for, packets))
        result = cli.run("import", str(bundle), LTM_TIMEOUT=SLOW_BATCH)
        refused = [s for s in proxy.seen if len(s.body) > 32_768]
    assert result.returncode == 0, result.stdout + result.stderr
    assert "150 added, 0 skipped (already present), 0 refused" in result.stderr
    assert 1 <= len(refused) <= LANES  # once a connection at most: then 32 KiB
    assert {s.path for s in refused} == {"/v1/packets/batch"}


@pytest.mark.parametrize(
    ("said", "sent"),
    [
        (None, 32_768),  # a server that does not say: what every server takes
        ("", 32_768),
        ("lots", 32_768),
        ("100", 32_768),  # never less than that
        ("1048576", 1_048_576),
        (str(1 << 40), 8 * 1024 * 1024),  # never more than a reply may be
    ],
)
def test_a_batch_is_as_big_as_the_server_said_within_reason(said: str | None, sent: int) -> None:
    from ltm.cli.client.remote import _batch_bytes

    assert _batch_bytes(said) == sent


def test_a_batch_body_of_packets_encoded_ahead_is_the_one_encoded_at_once() -> None:
    """``remote.wire`` (run in an import's workers) quotes each packet as the batch body
    carries it: the body joined from them is the JSON of ``{"packets": [TEXT, ...]}``."""
    from ltm import packet
    from ltm.cli.client.remote import wire

    packets = [
        make_packet(goal="plain"),
        make_packet(goal='quotes " and \\ and é, ✓, \U0001f600, \u2028'),
        make_packet(goal="a\nnew line", tags=["x"]),
    ]
    made = [wire(packet.check(p)) for p in packets]
    texts = [json.dumps(p, ensure_ascii=False, separators=(",", ":")) for p in packets]
    assert [w.id for w in made] == [p["id"] for p in packets]
    assert [w.text for w in made] == texts
    joined = b'{"packets":[' + b",".join(w.quoted for w in made) + b"]}"
    assert (
        joined == json.dumps({"packets": texts}, ensure_ascii=False, separators=(",", ":")).encode()
    )
    assert json.loads(joined) == {"packets": texts}
    assert wire(packets[0]) == made[0]  # a mapping as a Checked


def _import_in_process(
    home: Path, path: Path, monkeypatch: pytest.MonkeyPatch, **options: bool
) -> tuple[str, str, dict[str, bytes]]:
    """``ltm import FILE --local`` run in this process: (report, summary, what the store holds)."""
    from ltm.cli.client.backend import LocalBackend
    from ltm.cli.client.portable import Importer, Report

    monkeypatch.setenv("LTM_DATA_DIR", str(home))
    monkeypatch.setenv("LTM_CONFIG_DIR", str(home))
    out = io.StringIO()
    report = Report(out=out)
    backend = LocalBackend.open()
    try:
        with path.open("rb") as stream:
            Importer(
                backend,
                report,
                team=None,
                lenient=options.get("lenient", False),
                allow_unredacted=options.get("allow_unredacted", False),
                replace=options.get("replace", False),
            ).run(stream, size=path.stat().st_size)
    finally:
        backend.close()
    store = SqliteStore(home / "ltm.db")
    try:
        held = {
            meta.id: store.get_packet(meta.id).body  # type: ignore[union-attr]
            for meta in store.list_packets(owner_id="local", limit=5000).items
        }
    finally:
        store.close()
    return out.getvalue(), report.summary("import"), held


@pytest.mark.parametrize("pooled", [False, True])
def test_an_import_refuses_a_lone_surrogate_however_the_line_spells_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pooled: bool
) -> None:
    """A line's packet is judged as it is, without a walk for what JSON cannot carry,
    only when no lone surrogate can be in it: none gets through, escaped either way or
    encoded as bytes (which json.loads decodes with "surrogatepass"), in the workers or
    here, and a character of U+D000 to U+D7FF (0xED in UTF-8 too) is still stored."""
    from ltm.cli.client import judges

    monkeypatch.setattr(judges, "MIN_BYTES", 1 if pooled else 1 << 40)
    plain = make_packet(goal="plain")
    hangul = make_packet(goal="\ud55c\uae00 notes")  # 한글: 0xED 0x95 0x9C in UTF-8
    marked = [make_packet(goal=f"surrogate {n} MARK") for n in range(3)]
    texts = [json.dumps(line_for(p), ensure_ascii=False) for p in (plain, hangul, *marked)]
    raw = [text.encode() for text in texts]
    raw[2] = raw[2].replace(b"MARK", b"\\ud800")
    raw[3] = raw[3].replace(b"MARK", b"\\uDBFF")
    raw[4] = raw[4].replace(b"MARK", b"\xed\xa0\x80")  # U+D800, encoded
    assert b"\xed" in raw[1]
    path = tmp_path / "surrogates.jsonl"
    header = bundle.header_line(source="test", exported_at="2026-05-01T12:00:00Z").encode()
    path.write_bytes(header + b"".join(line + b"\n" for line in raw))
    report, summary, held = _import_in_process(tmp_path / "home", path, monkeypatch)
    assert "2 added, 0 skipped (already present), 3 refused" in summary, report
    assert set(held) == {plain["id"], hangul["id"]}
    for packet in marked:
        said = next(line for line in report.splitlines() if packet["id"] in line)
        assert said.startswith("refused ") and "lone surrogate" in said, said


def test_spawned_workers_read_the_rules_again_and_judge_as_this_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the workers cannot be forked (macOS and Windows spawn them: a fresh
    interpreter, to which no compiled pattern is handed), each reads the user's rules
    from the settings again, gets ready as a forked one does, and judges and makes
    ready what this process would."""
    from ltm.cli.client import judges, preflight
    from ltm.cli.client.backend import LocalBackend
    from ltm.cli.config import save_settings

    if judges.cores() < 2:
        pytest.skip("worker processes are used only with two cores or more")
    monkeypatch.setenv("LTM_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LTM_CONFIG_DIR", str(tmp_path))
    save_settings({"sensitive": [{"kind": "team-code", "regex": r"TEAMCODE-[0-9]{4}"}]})
    monkeypatch.setattr(judges.sys, "platform", "darwin")  # spawn, as there
    packets = [
        make_packet(goal="Judged in a spawned worker"),
        make_packet(goal="Ship with TEAMCODE-1234 in the notes"),
        make_packet(goal=f"Rotate the key {AWS_KEY}"),
        make_packet(goal=""),
    ]
    backend = LocalBackend.open()
    try:
        ready = backend.readying()
        rules = preflight.user_rules()
        pool = judges.Judges.start(size=judges.MIN_BYTES, scan=True, rules=rules, ready=ready)
        assert pool is not None
        try:
            assert pool.pool._mp_context.get_start_method() == "spawn"
            state = pool.pool.submit(_worker_state).result(timeout=scaled(120))
            pooled = pool.judge([(p, True) for p in packets])()
        finally:
            pool.close()
        here = [judges.judge_here(p, scan=True, rules=rules, ready=ready) for p in packets]
    finally:
        backend.close()
    assert state == (True, ["team-code"], judges.GC_THRESHOLD)
    assert pooled == here
    assert [[hit.kind for hit in judged.hits] for judged in here] == [
        [],
        ["team-code"],
        ["aws-access-key"],
        [],
    ]


def test_an_import_writes_the_report_of_a_chunk_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A terminal's stdout, or one unbuffered, takes a system call for every write: the
    lines of a chunk go out in one write, in the bundle's order."""
    from ltm.cli.client.backend import LocalBackend
    from ltm.cli.client.portable import Importer, Report

    class Writes(io.StringIO):
        calls = 0

        def write(self, text: str) -> int:
            Writes.calls += 1
            return super().write(text)

    packets = [make_packet(goal=f"Reported {n}") for n in range(4)]
    lines: list[dict[str, object] | str] = [line_for(p) for p in packets]
    lines.insert(2, "not json\n")
    path = write_bundle(tmp_path / "report.jsonl", lines)
    monkeypatch.setenv("LTM_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LTM_CONFIG_DIR", str(tmp_path))
    out = Writes()
    backend = LocalBackend.open()
    try:
        with path.open("rb") as stream:
            Importer(
                backend,
                Report(out=out),
                team=None,
                lenient=False,
                allow_unredacted=False,
                replace=False,
            ).run(stream, size=path.stat().st_size)
    finally:
        backend.close()
    said = out.getvalue().splitlines()
    assert Writes.calls == 1
    assert [line.split()[0] for line in said] == ["added"] * 2 + ["refused"] + ["added"] * 2
    assert [line.split()[1] for line in said if line.startswith("added")] == [
        p["id"] for p in packets
    ]
    assert said[2].startswith("refused line 4: ")  # the header is line 1


@pytest.mark.parametrize("fails", [False, True])
def test_an_import_runs_the_garbage_collector_rarely_and_leaves_it_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    """The chunks in flight keep thousands of objects alive, which every collection at
    Python's default threshold walked again: while an import runs, the collector waits
    for many more, and leaves out what was alive before; after it, even one that
    failed, the collector is as it was."""
    import gc

    from ltm.cli.client import judges, portable

    before = gc.get_threshold()
    seen: list[tuple[int, int]] = []
    real = portable.Importer._finish

    def finish(self: portable.Importer, run: object) -> int:
        seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
        if fails:
            raise OSError("disk full")
        return real(self, run)  # type: ignore[arg-type]

    monkeypatch.setattr(portable.Importer, "_finish", finish)
    path = write_bundle(tmp_path / "few.jsonl", [line_for(make_packet()) for _ in range(3)])
    if fails:
        with pytest.raises(OSError, match="disk full"):
            _import_in_process(tmp_path / "home", path, monkeypatch)
    else:
        _import_in_process(tmp_path / "home", path, monkeypatch)
    assert seen and all(threshold == judges.GC_THRESHOLD for threshold, _ in seen)
    assert all(frozen > 0 for _, frozen in seen)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_large_import_judged_in_worker_processes_says_and_stores_what_one_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large bundle is judged in worker processes while this one writes; every line's
    outcome, the report's order and the store are what judging here gives, refusals,
    duplicates, skips and a worker's failure included."""
    from ltm.cli.client import judges, portable

    if judges.cores() < 2:
        pytest.skip("worker processes are used only with two cores or more")
    good = [make_packet(goal=f"Packet {n} of a large import") for n in range(1400)]
    leaky = make_packet(goal=f"Rotate the key {AWS_KEY}")
    invalid = make_packet(goal="")
    lenient = {**make_packet(), "surprise": 1}
    lines: list[dict[str, object] | str] = [line_for(p) for p in good]
    other_id = good[8]["id"]
    two_ids = f'{{"id": "{other_id}", ' + json.dumps(line_for(good[7]))[1:] + "\n"
    for at, line in (
        (3, line_for(leaky)),
        (700, line_for(invalid)),
        (701, "this is not json\n"),
        (702, line_for(good[5])),  # the same packet again: skipped once stored
        # Lines that start with an id (read off their head, decoded in a worker) but are
        # not JSON further on, or name another id further on (JSON keeps the last).
        (703, '{"id": "01HEADONLY0000000000000000", "scope": nope}\n'),
        (704, two_ids),
        (1200, line_for(lenient, conforming=False)),
        (1201, line_for({**good[1300], "goal": "Changed on the way"})),  # a different one
    ):
        lines.insert(at, line)
    path = write_bundle(tmp_path / "large.jsonl", lines)

    # Judged here: a bundle below the workers' threshold.
    monkeypatch.setattr(judges, "MIN_BYTES", path.stat().st_size + 1)
    alone = _import_in_process(tmp_path / "alone", path, monkeypatch)
    # Judged in the workers, counted; they are killed on the way, and what they had, and
    # all that follows, is judged here instead. All of them: with one killed, the other
    # could finish the work left before the pool noticed, and nothing would fall here.
    monkeypatch.setattr(judges, "MIN_BYTES", 1)
    batches: list[int] = []
    start = judges.Judges.judge

    def counted(self: judges.Judges, packets: list[dict[str, object]]) -> object:
        batches.append(len(packets))
        later = start(self, packets)
        # The first batch is in by now: its writing waited for it, before the batch after
        # the AHEAD it had to wait for was handed out.
        if len(batches) == portable.AHEAD + 2:
            for pid in list(self.pool._processes):
                os.kill(pid, signal.SIGKILL)
        return later

    here: list[object] = []
    judge_here = judges.judge_here

    def judged_here(packet: dict[str, object], **options: object) -> object:
        here.append(packet)
        return judge_here(packet, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(judges.Judges, "judge", counted)
    monkeypatch.setattr(judges, "judge_here", judged_here)
    pooled = _import_in_process(tmp_path / "pooled", path, monkeypatch)
    assert len(batches) > 2 and sum(batches) >= len(good)
    assert 0 < len(here) < len(good)  # the workers judged some, this process the rest
    assert pooled[0] == alone[0]
    assert pooled[1] == alone[1]
    assert pooled[2] == alone[2]
    assert "1400 added, 1 skipped (already present), 7 refused" in alone[1]
    assert "names its id twice, differently" in alone[0] and "not valid JSON" in alone[0]


def test_the_workers_judge_and_make_ready_what_this_process_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a worker sends back (the verdict, and the packet made ready for the local
    store: encoded, its identity read, its search text and packed body) is what judging
    in this process gives; a packet that may not be pushed comes back as checked."""
    from ltm.cli.client import judges
    from ltm.cli.client.backend import LocalBackend
    from ltm.service.packets import Prepared

    if judges.cores() < 2:
        pytest.skip("worker processes are used only with two cores or more")
    monkeypatch.setenv("LTM_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LTM_CONFIG_DIR", str(tmp_path))
    good = make_packet(goal="Judged in a worker")
    packets: list[dict[str, object]] = [
        good,
        dict(reversed(list(good.items()))),  # the same packet, its keys in another order
        {**make_packet(), "surprise": 1},  # lenient: made ready, its errors kept
        make_packet(goal=""),  # not valid
        make_packet(goal=f"Rotate the key {AWS_KEY}"),  # a hit
        {**make_packet(), "id": "../../etc/passwd"},  # an id the store refuses
        {k: v for k, v in make_packet().items() if k != "id"},  # no id: prepare refuses it
    ]
    backend = LocalBackend.open()
    try:
        ready = backend.readying()
        pool = judges.Judges.start(size=judges.MIN_BYTES, scan=True, rules=[], ready=ready)
        assert pool is not None
        try:
            # Plain (as a bundle line without a surrogate makes them): not walked again,
            # and judged as the walk judges them.
            pooled = pool.judge([(p, True) for p in packets])()
        finally:
            pool.close()
        here = [judges.judge_here(p, scan=True, rules=[], ready=ready) for p in packets]
    finally:
        backend.close()
    assert pooled == here
    made = [type(judged.ready).__name__ for judged in here]
    assert made == ["Prepared", "Prepared", "Prepared", "Prepared", "Checked", "Checked", "Checked"]
    first, reordered = here[0].ready, here[1].ready
    assert isinstance(first, Prepared) and isinstance(reordered, Prepared)
    assert first == reordered  # the canonical bytes, and the search text read from them
    assert first.packet.meta.owner_id == "local" and first.derived is not None
    assert here[2].ready.errors and here[4].hits and here[5].id_error
    assert here[3].refusals(lenient=False) and not here[2].refusals(lenient=True)


def _worker_state() -> tuple[bool, list[str], int]:
    """In a worker: whether its scans are ready for many packets, its users' rules, and
    how many new objects its garbage collector waits for."""
    import gc

    from ltm import redact
    from ltm.cli.client import judges

    ready = redact._scans >= redact._SETS_AFTER and redact._sets is not None
    return ready, [rule.kind for rule in judges._rules], gc.get_threshold()[0]


def test_the_workers_start_ready_to_scan_with_the_importers_own_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers start as the pool does and get ready before the first lines reach
    them (the built-in rules compiled, their literal sets built: the importer, which
    scans nothing, has none to hand down), and judge with the rules the importer holds."""
    from ltm import redact
    from ltm.cli.client import judges

    if judges.cores() < 2:
        pytest.skip("worker processes are used only with two cores or more")
    monkeypatch.setenv("LTM_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LTM_CONFIG_DIR", str(tmp_path))  # no rule in the settings
    rules = [redact.compile_user_rule("team-code", r"TEAMCODE-[0-9]{4}")]
    pool = judges.Judges.start(size=judges.MIN_BYTES, scan=True, rules=rules)
    assert pool is not None
    try:
        state = pool.pool.submit(_worker_state).result(timeout=scaled(60))
        assert state == (True, ["team-code"], judges.GC_THRESHOLD)
        packet = make_packet(goal="Ship with TEAMCODE-1234 in the notes")
        (judged,) = pool.judge([(packet, True)])()
    finally:
        pool.close()
    assert not isinstance(judged, bundle.BundleError)
    assert [hit.kind for hit in judged.hits] == ["team-code"]


def test_what_a_worker_sends_back_loads_as_what_it_was(tmp_path: Path) -> None:
    """A line's verdict, its packet made ready and the line as read cross the pipe from a
    worker flat (their ``__reduce__``): each loads equal to itself, of its own type."""
    import pickle

    from ltm import packet
    from ltm.cli.client import judges
    from ltm.service.packets import prepare

    line = json.dumps(line_for({**make_packet(), "parent_id": "01PARENT00", "tags": ["a"]}))
    judged = judges.judge_item(
        line.encode(),
        scan=True,
        rules=[],
        ready=lambda c: prepare(c, owner_id="local", derive=SqliteStore.derive),
    )
    assert not isinstance(judged, Exception) and judged.entry is not None
    lenient = prepare(packet.check({**make_packet(), "surprise": 1}, lenient=True))
    for value in (judged, judged.ready, judged.ready.derived, judged.entry, lenient):
        back = pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == value and type(back) is type(value)
    assert judged.entry.packet == {} and judged.ready.packet.meta.parent_id == "01PARENT00"


@pytest.mark.parametrize("lenient", [False, True])
def test_push_many_stores_a_packet_made_ready_as_it_stores_the_checked_one(
    tmp_path: Path, lenient: bool
) -> None:
    """The service's rules hold for a packet made ready ahead (``packets.prepare``) as for
    a checked one: the lenient rule, the id rule, the owner; the store ends the same."""
    from datetime import UTC, datetime

    from ltm import packet
    from ltm.service import packets
    from ltm.store import User

    caller = User("local", "local", datetime(2026, 1, 1, tzinfo=UTC))
    checked = [
        packet.check(p, lenient=True)
        for p in (
            make_packet(goal="Made ready"),
            {**make_packet(), "surprise": 1},  # stored only when lenient
            {**make_packet(goal="Another"), "tags": ["x", "a"]},
        )
    ]
    ends = []
    for ahead in (False, True):
        store = SqliteStore(tmp_path / f"{ahead}.db")
        try:
            items: list[object] = [
                packets.prepare(c, owner_id="someone else", derive=SqliteStore.derive)
                if ahead
                else c
                for c in checked
            ]
            outcomes = packets.push_many(store, caller, items, lenient=lenient)  # type: ignore[arg-type]
            held = [store.get_packet(str(c.data["id"])) for c in checked]
            ends.append(([repr(o) for o in outcomes], held))
        finally:
            store.close()
    assert ends[0] == ends[1]
    assert all(h is None or h.meta.owner_id == "local" for h in ends[1][1])
    assert (ends[1][1][1] is not None) is lenient


def test_a_packet_made_ready_whose_id_another_user_holds_is_refused_by_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local store shared with a server: an id another user stored there is theirs."""
    from ltm import packet
    from ltm.cli.client.backend import IdTaken, LocalBackend
    from ltm.store import PacketMeta, StoredPacket

    monkeypatch.setenv("LTM_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LTM_CONFIG_DIR", str(tmp_path))
    theirs, mine = make_packet(goal="Theirs"), make_packet(goal="Mine")
    backend = LocalBackend.open()
    try:
        held = StoredPacket(PacketMeta(str(theirs["id"]), "", "", "someone"), b"{}")
        backend.store.put_packet(held, sort_key="k")
        ready = backend.readying()
        items = [(ready(packet.check(p)), None) for p in (theirs, mine)]
        taken, added = backend.push_many(items)
    finally:
        backend.close()
    assert isinstance(taken, IdTaken) and str(theirs["id"]) in taken.message
    assert not isinstance(added, Exception) and added.created


def test_where_worker_processes_cannot_start_the_import_judges_in_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A machine without the semaphores a process pool needs (a container without
    /dev/shm) imports all the same, judging here."""
    import concurrent.futures

    from ltm.cli.client import judges

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(judges, "cores", lambda: 2)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", refuse)
    assert judges.Judges.start(size=judges.MIN_BYTES, scan=True, rules=[]) is None


def test_who_wrote_a_line_is_judged_against_the_account_signed_in_or_the_exporter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Into the local store a line is the user's own when its author is the account this
    machine is signed in with on the bundle's server, else the exporter; a bundle from
    before exporters were named is told by its personal lines, which a server's personal
    scope fills with its caller's packets only."""
    from ltm.cli.client.authors import FromBundle

    monkeypatch.setenv("LTM_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("LTM_HOST", raising=False)
    server = "https://team.example"

    def line(created_by: str, team: str | None = None, **extra: str) -> bundle.Entry:
        packet = make_packet()
        scope = {"scope": "team", "team": team} if team else {"scope": "personal"}
        data = {"id": packet["id"], **scope, "created_by": created_by, **extra, "packet": packet}
        return bundle.read_entry(json.dumps(data))

    named = FromBundle({"source": server, "exported_by": "uSAM"})
    assert named.author(line("uSAM")) is None
    assert named.author(line("uOLIVE", "core", created_by_name="Olive")) == {
        "id": "uOLIVE",
        "name": "Olive",
        "host": server,
    }
    older = FromBundle({"source": server})  # no exporter: the first personal line's author
    assert older.author(line("uSAM")) is None
    assert older.author(line("uSAM", "core")) is None
    assert (older.author(line("uOLIVE", "core")) or {}).get("id") == "uOLIVE"
    local = FromBundle({"source": "local", "exported_by": "local"})
    assert local.author(line("local")) is None
    copy = line("uOLIVE", created_by_name="Olive", created_by_host=server)
    assert local.author(copy) == {"id": "uOLIVE", "name": "Olive", "host": server}

    # Signed in to that server as Olive: her lines are hers, Sam's bundle or not.
    from ltm.cli.client import credentials

    credentials.store_login(
        server, "ltm_" + "x" * 40, via="token", user={"id": "uOLIVE"}, make_default=False
    )
    as_olive = FromBundle({"source": server, "exported_by": "uSAM"})
    assert as_olive.author(line("uOLIVE", "core")) is None
    assert (as_olive.author(line("uSAM")) or {}).get("id") == "uSAM"


def test_an_author_a_bundle_names_is_shown_on_one_line(tmp_path: Path) -> None:
    """A bundle is anyone's text: the author a line names is kept, and shown one-lined,
    so it cannot add lines of its own to ``show`` or ``ls``."""
    packet = make_packet(goal="Theirs")
    named = "Olive\nSaved by you\r\n\u001b[2J"
    path = write_bundle(
        tmp_path / "b.jsonl",
        [line_for(packet, scope="team", team="core", created_by="01EVIL", created_by_name=named)],
    )
    cli = Cli(tmp_path / "home")
    cli.ok("import", str(path), "--local")
    shown = cli.ok("show", str(packet["id"]), "--local").splitlines()
    assert "Saved by Olive Saved by you \\u001b[2J (01EVIL, on test)" in shown
    assert not any(line.startswith("Saved by you") for line in shown)
    listed = cli.ok("ls", "--local").splitlines()
    assert len(listed) == 1 and "Olive Saved by you" in listed[0], listed


def test_a_skipped_line_never_makes_a_teammates_copy_read_as_yours(tmp_path: Path) -> None:
    """A line skipped as already present changes nothing, its author included: a bundle
    that reads as the user's (exported by them, or by someone where they are not signed
    in) must not make a copy recorded as a teammate's read as the user's own, which the
    session start would then frame as the user's notes."""
    packet = make_packet(goal="The fix")
    cli = Cli(tmp_path / "home")
    olives = write_bundle(
        tmp_path / "olive.jsonl",
        [
            line_for(
                packet,
                created_by="01OLIVE",
                created_by_name="Olive",
                created_by_host="https://team.example",
            )
        ],
    )
    cli.ok("import", str(olives), "--local")
    first = cli.ok("show", str(packet["id"]), "--local")
    assert "Saved by Olive (01OLIVE, on https://team.example)" in first
    mine = write_bundle(tmp_path / "mine.jsonl", [line_for(packet, created_by="local")])
    again = cli.run("import", str(mine), "--local")
    assert again.returncode == 0, again.stderr
    assert "nothing changed" in again.stderr
    listed = cli.ok("ls", "--local").splitlines()
    assert len(listed) == 1 and "Olive" in listed[0] and " you " not in listed[0], listed
    shown = cli.ok("show", str(packet["id"]), "--local")
    assert "Saved by Olive (01OLIVE, on https://team.example)" in shown


def test_two_bundles_joined_into_one_file_stop_at_the_second_header(tmp_path: Path) -> None:
    """``cat a.ltm b.ltm | ltm import -``: the lines before the second header go in; the
    import then stops there, naming it, since the other bundle's lines come from where its
    own header says (their authors would be recorded as this one's)."""
    ours = [make_packet(goal=f"ours {n}") for n in range(2)]
    theirs = make_packet(goal="theirs")
    second = bundle.header_line(
        source="https://elsewhere.example", exported_at="2026-05-02T12:00:00Z"
    )
    joined = write_bundle(
        tmp_path / "joined.jsonl",
        [*(line_for(p) for p in ours), second, line_for(theirs, created_by="01OTHER")],
    )
    cli = Cli(tmp_path / "home")
    result = cli.run("import", str(joined), "--local")
    assert result.returncode == 1, result.stderr
    assert "2 added" in result.stderr
    assert (
        "import stopped at line 4: another bundle's header (bundles joined into one file?)"
        in result.stderr
    )
    assert "import each bundle on its own" in result.stderr
    assert set(local_bodies(cli)) == {str(p["id"]) for p in ours}
