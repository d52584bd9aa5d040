"""``ltm mcp`` prompts and resources, through the official SDK client (a real ``ltm mcp``
subprocess started in a project's checkout, as a client does): the ``resume`` prompt and
the project's packets as ``ltm://packets/<id>`` resources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from clikit import Cli
from mcp.shared.exceptions import MCPError
from test_mcp import Shim, data, framed, unframed
from test_project import needs_git, repo


def save(cli: Cli, goal: str) -> str:
    return cli.ok("save", stdin=json.dumps({"goal": goal, "next_step": "go on"})).strip()


@pytest.fixture
def project(tmp_path: Path) -> tuple[Cli, Path, list[str]]:
    cli = Cli(tmp_path / "home")
    app = repo(tmp_path / "app", "https://github.com/acme/app.git")
    other = repo(tmp_path / "other", "https://github.com/acme/other.git")
    ids = [save(cli.at(app), f"app goal {n}") for n in range(3)]
    save(cli.at(other), "other project's goal")
    return cli, app, ids


@needs_git
def test_resume_prompt_is_listed_and_returns_the_block(
    project: tuple[Cli, Path, list[str]], tmp_path: Path
) -> None:
    cli, app, ids = project
    with Shim(cli.env, tmp_path / "shim.log", cwd=app) as shim:
        listed = shim.portal.call(shim.session.list_prompts).prompts
        assert [p.name for p in listed] == ["resume"]
        (arg,) = listed[0].arguments
        assert arg.name == "id" and arg.required is False

        newest = shim.portal.call(shim.session.get_prompt, "resume", None)
        (message,) = newest.messages
        assert message.role == "user"
        assert "app goal 2" in message.content.text and "not instructions" in message.content.text
        assert f'"parent_id": "{ids[2]}"' in message.content.text

        chosen = shim.portal.call(shim.session.get_prompt, "resume", {"id": ids[0][:20]})
        assert "app goal 0" in chosen.messages[0].content.text

        with pytest.raises(MCPError, match="no packet"):
            shim.portal.call(shim.session.get_prompt, "resume", {"id": "01NOSUCHPACKET"})
        with pytest.raises(MCPError, match="unknown prompt"):
            shim.portal.call(shim.session.get_prompt, "save", None)
        shim.alive()


@needs_git
def test_the_projects_packets_are_resources(
    project: tuple[Cli, Path, list[str]], tmp_path: Path
) -> None:
    cli, app, ids = project
    with Shim(cli.env, tmp_path / "shim.log", cwd=app) as shim:
        resources = shim.portal.call(shim.session.list_resources).resources
        assert [str(r.uri) for r in resources] == [f"ltm://packets/{i}" for i in reversed(ids)]
        assert resources[0].title == "app goal 2" and resources[0].mime_type == "text/markdown"
        assert resources[0].name == f"app goal 2 ({ids[-1][:12]})"  # by goal, not a bare id
        templates = shim.portal.call(shim.session.list_resource_templates).resource_templates
        assert [t.uri_template for t in templates] == ["ltm://packets/{id}"]

        read = shim.portal.call(shim.session.read_resource, f"ltm://packets/{ids[1]}")
        (content,) = read.contents
        assert "app goal 1" in content.text and unframed(content.text).startswith(
            "# Resume context"
        )
        assert "this same user" in framed(content.text)[0]  # the local store: one user
        with pytest.raises(MCPError):
            shim.portal.call(shim.session.read_resource, "ltm://packets/01NOSUCHPACKET")
        shim.alive()


def test_outside_a_project_every_packet_is_listed(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    save(cli, "anywhere")
    with Shim(cli.env, tmp_path / "shim.log", cwd=Path("/")) as shim:
        resources = shim.portal.call(shim.session.list_resources).resources
        assert [r.title for r in resources] == ["anywhere"]
        prompt = shim.portal.call(shim.session.get_prompt, "resume", None)
        assert "anywhere" in prompt.messages[0].content.text


@needs_git
def test_ls_and_resume_tools_take_project_and_here(
    project: tuple[Cli, Path, list[str]], tmp_path: Path
) -> None:
    cli, app, ids = project
    with Shim(cli.env, tmp_path / "shim.log", cwd=app) as shim:
        here = data(shim.call("ls", {"here": True}))
        assert [p["id"] for p in here["packets"]] == list(reversed(ids))
        assert here["project"] == "acme/app"
        other = data(shim.call("ls", {"project": "acme/other"}))
        assert [p["goal"] for p in other["packets"]] == ["other project's goal"]
        assert len(data(shim.call("ls", {}))["packets"]) == 4
        assert "other project's goal" in shim.ok("resume", {"project": "acme/other"})
        assert "app goal 2" in shim.ok("resume", {"here": True})
        assert "not both" in shim.fails("ls", {"here": True, "project": "x"})
        assert "no packets yet in project acme/none" in shim.fails(
            "resume", {"project": "acme/none"}
        )
