"""Our CLI against a server shaped like the Go reference's self-hosted one.

The reference server (``internal/api/api.go`` in dennisdevulder/ltm) has the
protocol's routes only: no ``/v1/packets/{id}/publish``, no ``/v1/tokens``,
no ``/v1/search``. Its router answers any other path with 404 and the text/plain
body ``404 page not found`` (Go's ``net/http`` ``NotFound``); its healthz is
``{"ok": true, "version": ...}`` as ours. Our CLI must then say that the server
does not offer the feature, not that it may not be an ltm server, and find
that out from ``/v1/healthz`` once per command.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import Cli, Seen, Stub, json_reply, stub_server
from serverkit import make_packet

PACKET = make_packet(id="01REFERENCEPUBLISH000000000", goal="on a reference server")
GO_NOT_FOUND = (404, {"Content-Type": "text/plain; charset=utf-8"}, b"404 page not found\n")


def reference(seen: Seen) -> tuple[int, dict[str, str], bytes]:
    path = seen.path.split("?", 1)[0]
    if seen.method == "GET" and path == "/v1/healthz":
        # Go's encoder with SetIndent("", "  "), as the reference writes every answer.
        body = json.dumps({"ok": True, "version": "0.2"}, indent=2).encode() + b"\n"
        return 200, {"Content-Type": "application/json"}, body
    if seen.method == "GET" and path == "/v1/packets":
        return json_reply(200, {"packets": []})
    if seen.method == "GET" and path == f"/v1/packets/{PACKET['id']}":
        return json_reply(200, PACKET)
    return GO_NOT_FOUND


def not_ltm(seen: Seen) -> tuple[int, dict[str, str], bytes]:
    if seen.path.startswith("/v1/packets") and seen.method == "GET":
        return json_reply(200, {"packets": []})
    return GO_NOT_FOUND


@pytest.fixture
def stub() -> Iterator[Stub]:
    with stub_server(reference) as server:
        yield server


def healthz_asked(stub: Stub) -> int:
    return sum(1 for s in stub.seen if s.path.startswith("/v1/healthz"))


@pytest.mark.parametrize(
    ("args", "feature"),
    [
        (("publish", PACKET["id"]), "publishing (public pages)"),
        (("unpublish", PACKET["id"], "--yes"), "publishing (public pages)"),
        (("tokens",), "token management"),
        (("tokens", "revoke", "laptop", "--yes"), "token management"),
        (("search", "anything"), "search"),
    ],
)
def test_a_feature_the_reference_server_lacks_is_not_offered(
    stub: Stub, tmp_path: Path, args: tuple[str, ...], feature: str
) -> None:
    cli = Cli(tmp_path / "home")
    cli.ok("auth", stub.url, "--with-token", stdin="a-token-for-the-reference-server")
    before = healthz_asked(stub)
    message = cli.fails(*args)
    assert message.startswith(f"ltm: {stub.url} does not offer {feature} ("), message
    assert "a reference ltm server?" in message
    assert "not ltm JSON" not in message and "is it an ltm server" not in message
    assert healthz_asked(stub) - before == 1  # asked once for the command, not per request


def test_show_on_a_reference_server_has_no_published_line(stub: Stub, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    cli.ok("auth", stub.url, "--with-token", stdin="a-token-for-the-reference-server")
    shown = cli.ok("show", PACKET["id"])
    assert "on a reference server" in shown and "Published" not in shown


def test_a_server_that_is_not_ltm_is_still_named_so(tmp_path: Path) -> None:
    with stub_server(not_ltm) as stub:
        cli = Cli(tmp_path / "home")
        home = cli.config / "credentials"
        home.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # as ltm makes it
        home.write_text(json.dumps({"default": stub.url, "hosts": {stub.url: {"token": "t"}}}))
        home.chmod(0o600)
        message = cli.fails("publish", PACKET["id"])
        assert "does not offer" not in message
        assert "is it an ltm server" in message, message


def test_import_and_export_fall_back_to_one_request_per_packet(tmp_path: Path) -> None:
    """Without the batch routes, ``ltm import`` pushes and ``ltm export`` reads one packet
    per request, having asked for a batch route once per command."""
    from ltm import bundle, packet

    held: dict[str, bytes] = {}

    def reference_with_store(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        path = seen.path.split("?", 1)[0]
        if path == "/v1/packets/batch" and seen.method == "POST":
            # Go's ServeMux: the path matches "GET /v1/packets/{id}", the method does not.
            return 405, {"Content-Type": "text/plain; charset=utf-8"}, b"Method Not Allowed\n"
        if seen.method == "POST" and path == "/v1/packets":
            data = json.loads(seen.body)
            held[data["id"]] = packet.canonical_bytes(data)
            return json_reply(201, {"id": data["id"]})
        if seen.method == "GET" and path == "/v1/packets":
            rows = [{"id": i, "created_at": "2026-05-01T12:00:00Z", "goal": "g"} for i in held]
            return json_reply(200, {"packets": rows})
        if seen.method == "GET" and path.startswith("/v1/packets/"):
            found = held.get(path.rsplit("/", 1)[1])  # "batch" is read as an id: absent
            if found is None:
                return json_reply(404, {"error": "not found"})
            return 200, {"Content-Type": "application/json"}, found
        return reference(seen)

    packets = [make_packet(goal=f"packet {n}") for n in range(5)]
    source = tmp_path / "in.ltm.jsonl"
    lines = [bundle.header_line(source="local", exported_at="2026-05-01T12:00:00Z")]
    for one in packets:
        lines.append(
            bundle.entry_line(
                body=packet.canonical_bytes(one),
                team=None,
                created_by="u",
                created_at=one["created_at"],
                conforming=True,
            )
        )
    source.write_text("".join(lines))
    with stub_server(reference_with_store) as stub:
        cli = Cli(tmp_path / "home")
        cli.ok("auth", stub.url, "--with-token", stdin="a-token-for-the-reference-server")
        before = len(stub.seen)
        out = cli.ok("import", str(source))
        assert out.count("added ") == 5, out
        asked = [(s.method, s.path.split("?", 1)[0]) for s in stub.seen[before:]]
        # the batch read is asked first; without it, the batch push is not tried either
        assert asked.count(("GET", "/v1/packets/batch")) == 1
        assert asked.count(("POST", "/v1/packets/batch")) == 0
        assert asked.count(("POST", "/v1/packets")) == 5
        assert set(held) == {p["id"] for p in packets}
        assert cli.ok("import", str(source)).count("skipped ") == 5
        exported = tmp_path / "out.ltm.jsonl"
        before = len(stub.seen)
        cli.ok("export", "-o", str(exported))
        asked = [(s.method, s.path.split("?", 1)[0]) for s in stub.seen[before:]]
        assert asked.count(("GET", "/v1/packets/batch")) == 1
        bodies = [json.loads(line)["packet"] for line in exported.read_text().splitlines()[1:]]
        assert sorted(b["id"] for b in bodies) == sorted(held)


def test_listing_filters_are_applied_by_the_cli_where_the_server_ignores_them(
    tmp_path: Path,
) -> None:
    """The reference lists every packet whatever ``?tag=``, ``?since=`` or ``?project=``
    asks (they are our extensions, and it echoes none): the CLI then filters the newest
    packets itself, rather than list them all as if they matched. Who stored a packet is
    in neither its row nor its body: ``--author`` is refused, not ignored."""
    held = [
        make_packet(goal="infra, recent", tags=["infra"], created_at="2026-05-03T12:00:00Z"),
        make_packet(goal="docs, recent", tags=["docs"], created_at="2026-05-02T12:00:00Z"),
        make_packet(goal="infra, old", tags=["infra"], created_at="2026-04-01T12:00:00Z"),
    ]
    by_id = {p["id"]: p for p in held}

    def listing(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        path = seen.path.split("?", 1)[0]
        if seen.method == "GET" and path == "/v1/packets":
            rows = [{k: p[k] for k in ("id", "created_at", "goal")} for p in held]
            return json_reply(200, {"packets": rows})  # every packet: no filter, no echo
        if seen.method == "GET" and path.removeprefix("/v1/packets/") in by_id:
            return json_reply(200, by_id[path.removeprefix("/v1/packets/")])
        return reference(seen)

    with stub_server(listing) as stub:
        cli = Cli(tmp_path / "home")
        cli.ok("auth", stub.url, "--with-token", stdin="a-token-for-the-reference-server")

        def goals(*args: str) -> list[str]:
            rows = json.loads(cli.ok("ls", "--json", *args))["packets"]
            return [row["goal"] for row in rows]

        assert goals() == ["infra, recent", "docs, recent", "infra, old"]
        assert goals("--tag", "infra") == ["infra, recent", "infra, old"]
        assert goals("--since", "2026-05-01") == ["infra, recent", "docs, recent"]
        assert goals("--tag", "infra", "--until", "2026-05-01") == ["infra, old"]
        refused = cli.fails("ls", "--author", "me")
        assert "lists without ltm's listing filters" in refused and "--author" in refused


def test_a_packet_at_the_cap_pulled_from_a_reference_server_pushes_back(tmp_path: Path) -> None:
    # The reference answers GET with its packet re-encoded, indented: past 32 KiB for a
    # packet whose compact form fits. The file `ltm pull` wrote is a packet all the same.
    from reference_standin import running_reference

    near = make_packet(id="01REFERENCEATTHECAP00000000", project={"name": "capped"})
    near |= {"tags": ["a"] * 16, "constraints": ["c" * 1000] * 32}
    compact = len(json.dumps(near, ensure_ascii=False, separators=(",", ":")).encode())
    near["open_questions"] = ["q" * (32_768 - 40 - compact)]
    with running_reference() as (stub, _reference, token):
        cli = Cli(tmp_path / "home")
        cli.ok("auth", stub.url, "--with-token", stdin=token)
        cli.ok("push", "-", stdin=json.dumps(near, separators=(",", ":")))
        pulled = tmp_path / "pulled.json"
        cli.ok("pull", near["id"], "-o", str(pulled))
        assert len(pulled.read_bytes()) > 32_768
        assert json.loads(pulled.read_bytes()) == near
        cli.ok("push", str(pulled))
