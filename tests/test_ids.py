"""Packet ids: one rule (``ltm.ids``), applied by the CLI and MCP before anything is sent.

An id is valid iff it matches ``^[A-Za-z0-9][A-Za-z0-9._:-]{9,63}$``. One with
``/``, CR/LF or a bidi mark could be stored and listed, yet never be fetched or
deleted, and prints as something it is not. The message names the character.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clikit import Cli, json_reply, stub_server
from hypothesis import given
from hypothesis import strategies as st

from ltm.ids import check_packet_id, id_problem
from ltm.packet import new_id

RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{9,63}")
GOOD = [
    "01M842PBE2HR6T8B4XB0EW6HK7",  # a ULID as new_id() mints them (fixed: xdist workers agree)
    "01JS5LTMEXAMPLEPACKET00001A",  # the published example's
    "ltm-bench-2026-04-22",
    "a" * 64,
    "0123456789",
    "team:alpha.2026_04-x",
]
BAD = {
    "abc/defghijkl": "'/' (U+002F)",
    "abcdefghij\r\nX-Injected: 1": "'\\r' (U+000D)",
    "abcdefghij\n": "'\\n' (U+000A)",
    "abc\u202edefghijkl": "'\\u202e' (U+202E)",
    "abc\u2066defghijkl": "'\\u2066' (U+2066)",
    "abcdefghij klm": "' ' (U+0020)",
    "abcdé12345xyz": "'é' (U+00E9)",
    "abc%2fdefghijk": "'%' (U+0025)",
    "..abcdefghij": "starts with '.'",
    "-abcdefghijk": "starts with '-'",
    "short": "10 to 64 characters long, not 5",
    "a" * 65: "10 to 64 characters long, not 65",
    "": "packet id is empty",
}


@pytest.mark.parametrize("packet_id", GOOD)
def test_good_ids_pass(packet_id: str) -> None:
    check_packet_id(packet_id)
    assert id_problem(packet_id) is None


def test_minted_ids_pass() -> None:
    for _ in range(100):
        check_packet_id(new_id())


@pytest.mark.parametrize(("packet_id", "named"), BAD.items(), ids=[repr(k) for k in BAD])
def test_bad_ids_are_refused_naming_the_character(packet_id: str, named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        check_packet_id(packet_id)
    problem = id_problem(packet_id)
    assert problem is not None and problem.startswith("packet id ")
    assert problem.isprintable()  # the message never carries the character itself
    if "(U+" in named:
        assert problem.endswith("ids may use letters, digits and . _ : -")


def test_prefixes_may_be_short_but_never_odd() -> None:
    assert id_problem("01JS5", prefix=True) is None
    assert id_problem("01JS5", prefix=False) is not None
    assert id_problem("01/JS", prefix=True) is not None
    assert id_problem("a" * 65, prefix=True) is not None
    assert id_problem(5) == "packet id must be a string"


@given(st.text(max_size=70))
def test_the_function_is_the_published_rule(text: str) -> None:
    assert (id_problem(text) is None) == bool(RULE.fullmatch(text))


# -- the CLI and the MCP shim say it before sending ---------------------------------------


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "me")


def test_save_push_and_validate_refuse_a_bad_id(cli: Cli) -> None:
    packet = {"id": "notes/2026-05-01", "goal": "g", "next_step": "n"}
    for verb in ("save", "validate"):
        result = cli.run(verb, "-", stdin=json.dumps(packet))
        out = result.stderr if verb == "save" else result.stdout
        assert result.returncode == 1 and "id: contains '/' (U+002F)" in out, out
    complete = {**packet, "ltm_version": "0.2", "created_at": "2026-05-01T00:00:00Z"}
    for extra in ((), ("--lenient",)):  # lenient mode does not excuse it either
        result = cli.run("push", *extra, "-", stdin=json.dumps(complete))
        assert result.returncode == 1 and "id: contains '/' (U+002F)" in result.stderr
    assert "no packets yet" in cli.run("ls").stderr


@pytest.mark.parametrize("verb", ["show", "pull", "rm", "resume"])
def test_id_arguments_are_refused_before_anything_is_sent(cli: Cli, verb: str) -> None:
    seen_any = []
    with stub_server(lambda req: json_reply(200, {"ok": True, "version": "0.2"})) as stub:
        (cli.config).mkdir(parents=True)
        (cli.config / "config.toml").write_text(f'host = "{stub.url}"\n')
        (cli.config / "credentials").write_text("ltm_token\n")
        for ref, named in (("01JS/x", "'/' (U+002F)"), ("01\u202eJS", "'\\u202e' (U+202E)")):
            args = [verb, ref] + (["--yes"] if verb == "rm" else [])
            assert f"packet id contains {named}" in cli.fails(*args, code=2)
        seen_any = list(stub.seen)
    assert seen_any == []  # refused on this machine: no request reached the server
    err = Cli(cli.home.parent / "local").fails(verb, "01JS/x", code=2)
    assert "packet id contains '/'" in err  # the local store says the same


def test_the_mcp_tools_refuse_a_bad_id(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ltm.cli.agents.mcp.place import install
    from ltm.mcp import tools

    install()
    monkeypatch.setenv("LTM_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("LTM_DATA_DIR", str(tmp_path / "data"))
    for name in ("show", "pull", "rm", "resume"):
        reply = tools.call(name, {"id": "01JS\r\nx"})
        assert reply.is_error and "packet id contains '\\r' (U+000D)" in reply.text, name
    reply = tools.call("save", {"packet": {"id": "a/b/c/d/e/f", "goal": "g", "next_step": "n"}})
    assert reply.is_error and "id: contains '/' (U+002F)" in reply.text
    assert "no packets yet" in tools.call("ls", {}).text


def test_short_ids_grow_until_each_names_one_packet() -> None:
    from ltm.ids import short_ids

    twins = ["01JS5LTWINPREFIX00000000A1", "01JS5LTWINPREFIX00000000B2"]
    other = "01ABCDEFGHJKMNPQRSTVWXYZ00"
    assert short_ids([*twins, other]) == [twins[0][:25], twins[1][:25], other[:12]]
    assert short_ids(["tenchars01"]) == ["tenchars01"]  # shorter than 12: whole
    # Another packet of the scope, not listed, counts too.
    assert short_ids([other], taken=lambda p: p == other[:12]) == [other[:13]]
