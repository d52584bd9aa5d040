"""ltm edit: change a packet in your editor, judged as ``ltm save`` judges it.

The packet is written as JSON to a private file, the editor opens it, and what
comes back goes through the one pre-flight (``preflight.accept``: the schema and
the redaction scan, one report). A refused edit is never lost: the report goes
to stderr and into a comment block at the top of the file, and the editor opens
again on the same text. Leaving it unchanged after a refusal (or any failure
after the editor ran) keeps the file and says where, ready for ``ltm save FILE``.

By default the edit is a new packet that continues the old one (``parent_id``,
a new id, stamped now), so the thread shows what changed; ``--in-place`` keeps
the id and replaces the stored packet.

Which editor: ``$VISUAL``, then ``$EDITOR`` (each may carry arguments, as
``code --wait``), else ``vi`` on a terminal, as git picks one
(https://git-scm.com/docs/git-var#Documentation/git-var.txt-GITEDITOR).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ltm.cli.commands import options
from ltm.cli.errors import CliError
from ltm.cli.terminal.output import info, safe
from ltm.present import where_label

if TYPE_CHECKING:
    from ltm.cli.client.backend import Backend

# Lines at the top of the file starting with this are ltm's notes, dropped on reading
# (JSON has no comments; git's commit message file works the same way with '#').
COMMENT = "//"


def editor_command() -> list[str]:
    """The editor to run, as argv (the file's path goes last); exit 2 when there is none."""
    import shlex

    for name in ("VISUAL", "EDITOR"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                words = shlex.split(value, posix=os.name == "posix")
            except ValueError:
                raise CliError(f"${name} is not a command line: {value!r}", exit_code=2) from None
            if words:
                return words
    if sys.stdin.isatty() and sys.stdout.isatty():
        import shutil

        fallback = "notepad" if os.name == "nt" else "vi"
        if shutil.which(fallback):
            return [fallback]
    raise CliError(
        "no editor to open: set $EDITOR (or $VISUAL), e.g. EDITOR=nano ltm edit ID",
        exit_code=2,
    )


# Editors that open a window and return at once unless told to wait, with the flags that
# make them wait (what each one's documentation gives git). Run without one, they leave
# the file unchanged to ltm, which stores nothing and removes it while the window is open.
WAIT_FLAGS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ("code", "code-insiders", "codium", "cursor", "windsurf", "subl", "zed", "atom", "mate"),
        ("--wait", "-w"),
    ),
    "bbedit": ("--wait", "-w"),
    **dict.fromkeys(("gvim", "mvim"), ("--nofork", "-f")),
    "kate": ("--block", "-b"),
}


def returns_at_once(command: list[str]) -> str | None:
    """``command`` with its wait flag, when it names a windowed editor run without one."""
    name = Path(command[0]).name.lower().removesuffix(".exe").removesuffix(".cmd")
    flags = WAIT_FLAGS.get(name)
    if flags is None or any(word in flags for word in command[1:]):
        return None
    return " ".join([*command, flags[0]])


def draft_body(packet: dict[str, Any], *, old_id: str, in_place: bool) -> str:
    """What the editor shows below the notes: the packet as it will be saved.

    A new packet leaves out the old id and time (save fills in new ones) and names
    the old one as its parent; ``in_place`` shows the packet as stored.
    """
    if not in_place:
        packet = {k: v for k, v in packet.items() if k not in ("id", "created_at")}
        packet["parent_id"] = old_id
        if packet.get("ltm_version") == "0.1":
            packet["ltm_version"] = "0.2"  # parent_id is new in 0.2, which 0.1's fields fit
    return json.dumps(packet, ensure_ascii=False, indent=2) + "\n"


def notes(lines: list[str]) -> str:
    """``lines`` as the comment block at the top of the file (one note per line)."""
    out = []
    for line in lines:
        for part in line.splitlines() or [""]:
            out.append(f"{COMMENT} {part}".rstrip())
    return "\n".join(out) + "\n"


def body_of(text: str) -> str:
    """The file without ltm's notes at the top (any blank lines among them go too)."""
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines) and (lines[i].lstrip().startswith(COMMENT) or not lines[i].strip()):
        i += 1
    return "".join(lines[i:])


def private_file(packet_id: str) -> Path:
    """A new file only this user can read (the packet may hold what should not leak)."""
    import tempfile

    from ltm.cli.config import private_dir, state_dir

    folder = state_dir() / "edits"
    # The id came from a server: only its plain characters name the file, so no "/" or
    # ".." it holds can put the file anywhere but the private folder.
    prefix = "".join(c for c in packet_id[:26] if c.isascii() and (c.isalnum() or c in "_-"))
    try:
        private_dir(folder)
        handle, name = tempfile.mkstemp(prefix=f"{prefix}-", suffix=".json", dir=folder)
    except OSError as exc:  # a state folder that is a file, read-only, or a full disk
        raise CliError(
            f"cannot make the file to edit in {folder}: {exc.strerror or exc}; nothing was"
            " opened (LTM_STATE_DIR sets another folder)"
        ) from None
    os.close(handle)  # mkstemp made it 0600 and exclusively
    return Path(name)


def run_editor(command: list[str], path: Path) -> None:
    """Run the editor on ``path`` and wait for it; CliError when it cannot run or fails."""
    import signal
    import subprocess

    try:
        editor = subprocess.Popen([*command, str(path)])
    except OSError as exc:
        raise CliError(f"could not run the editor {command[0]!r}: {exc.strerror or exc}") from None
    # While it runs, Ctrl-C is the editor's, as git has it: the terminal sends it to ltm
    # too, which would end with the editor still open on the packet. Ignored only once the
    # editor has started, so the editor itself does not inherit the ignoring.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status = editor.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    if status < 0:  # ended by a signal (Popen's -N): a kill, the terminal closing
        try:
            name = f" ({signal.Signals(-status).name})"
        except ValueError:
            name = ""
        raise CliError(f"the editor {command[0]!r} was ended by signal {-status}{name}")
    if status != 0:
        raise CliError(f"the editor {command[0]!r} exited with status {status}")


def edit(
    ref: options.Ref,
    team: options.Team = None,
    in_place: Annotated[
        bool,
        typer.Option(
            "--in-place",
            help="Replace the packet, keeping its id (default: save a new packet that continues"
            " it).",
        ),
    ] = False,
    lenient: options.Lenient = False,
    allow_unredacted: options.AllowUnredacted = False,
    local: options.Local = False,
) -> None:
    """Edit a packet in $EDITOR; saved as a new packet continuing it, checked as save checks."""
    from ltm.cli.client.backend import open_backend
    from ltm.ids import check_packet_id
    from ltm.present import decode_packet

    command = editor_command()  # before anything is fetched: no editor, nothing to do
    backend = open_backend(local=local, team=team)
    try:
        stored = backend.get(ref, team=team)
        old = decode_packet(stored, ref)
        old_id = str(old.get("id", ref))
        try:
            check_packet_id(old_id)  # a server's answer: no packet can have another id
        except ValueError:
            raise CliError(f"{ref} came back with an invalid id {old_id!r}; not edited") from None
        if in_place:
            _only_yours(backend, old_id)
        body = draft_body(old, old_id=old_id, in_place=in_place)
        saved = _edit_loop(
            backend,
            command,
            old_id=old_id,
            body=body,
            team=team,
            in_place=in_place,
            lenient=lenient,
            allow_unredacted=allow_unredacted,
            before=stored if in_place else None,
        )
    finally:
        backend.close()
    if saved is not None:
        print(saved)


def _only_yours(backend: Backend, old_id: str) -> None:
    """Refuse ``--in-place`` on a packet another user stored, before the editor opens.

    A server keeps each packet its author's: one shared with you, or a teammate's in a
    team, would be refused (409) only once the edit was done. Without ``--in-place`` the
    edit is a new packet of your own, continuing it, which is what can be stored.
    """
    author = backend.stored_by(old_id)
    if author and backend.is_me(author) is False:
        raise CliError(
            f"packet {old_id} is not yours (stored by user {author}); --in-place replaces only"
            " your own packets, so nothing was opened — drop --in-place to save your edit as a"
            " new packet continuing it"
        )


def _lineage_errors(data: dict[str, Any], old_id: str, *, in_place: bool) -> list[str]:
    """What an edit's id and parent_id break, in the pre-flight's words ([] when nothing).

    Without ``--in-place`` the old packet is kept: an edit given its id back would replace
    it, continuing itself, the very packet the new one was to leave as it was.
    """
    from ltm.preflight import own_parent

    new_id = data.get("id")
    errors = []
    if in_place and new_id != old_id:
        errors.append(f"id: --in-place keeps the id {old_id}; put it back (or drop --in-place)")
    elif not in_place and new_id == old_id:
        errors.append(
            f"id: {old_id} is the packet being edited, which a new packet leaves as it is;"
            " remove the id line (a new one is filled in), or use --in-place to replace it"
        )
    elif looping := own_parent(data):
        errors.append(looping)
    return errors


def _header(old_id: str, *, in_place: bool, where: str) -> list[str]:
    what = (
        f"editing packet {old_id} in {where}; saving replaces it (same id)"
        if in_place
        else f"editing packet {old_id} in {where}; saving stores a new packet continuing it"
        " (a new id and time are filled in)"
    )
    return [
        f"ltm edit: {what}.",
        "Save and close to store it; empty the file (or leave it unchanged) to store nothing.",
        f"Lines starting with {COMMENT} up here are ltm's notes and are ignored.",
    ]


def _left_by_editor(path: Path, fallback: str) -> str:
    """The packet text in ``path`` as an editor left it; ``fallback`` when it cannot be read."""
    try:
        return body_of(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return fallback


def _edit_loop(
    backend: Backend,
    command: list[str],
    *,
    old_id: str,
    body: str,
    team: str | None,
    in_place: bool,
    lenient: bool,
    allow_unredacted: bool,
    before: bytes | None = None,
) -> str | None:
    """Open, judge, reopen on a refusal; the saved id, or None when nothing changed.

    ``before``: the stored bytes the edit started from, for ``--in-place``, which replaces
    the packet only if they are still what is stored.
    """
    from ltm.cli.client import preflight

    where = where_label(backend, team)
    header = _header(old_id, in_place=in_place, where=where)
    path = private_file(old_id)
    path.write_text(notes(header) + body, encoding="utf-8")
    original = body
    last = body
    refused = False

    # The command that stores the kept file as this edit would have: the same scope, and the
    # same overrides of the checks, or the save refuses what the edit was let through.
    flags = [f"-t {team}"] if team else []
    flags += ["--lenient"] if lenient else []
    flags += ["--allow-unredacted"] if allow_unredacted else []
    import shlex  # a state folder's path may hold a space (macOS: Application Support)

    again = " ".join(["ltm save", shlex.quote(str(path)), *flags])

    def keep(reason: str, text: str) -> CliError:
        # The edit survives as a plain packet file: ltm save takes it as it is.
        path.write_text(text, encoding="utf-8")
        return CliError(f"{reason}; your edit is kept in {path} (store it with: {again})")

    while True:
        try:
            run_editor(command, path)
        except CliError as exc:
            # What the editor left is the edit (it may have written the file before it
            # failed): kept as it is. One it never changed (or could not start on) holds no
            # edit, and saving it would store a copy of the packet.
            left = _left_by_editor(path, last)
            if not left.strip() or (left == original and not refused):
                path.unlink(missing_ok=True)
                unchanged = f"{exc.message}; nothing saved (packet {old_id} is unchanged)"
                raise CliError(unchanged) from None
            raise keep(exc.message, left) from None
        try:
            edited = body_of(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:  # the edit is there, in another encoding: left be
            raise CliError(
                f"the edited file is not UTF-8 (byte {exc.start}); your edit is kept in {path}"
                f" — save it as UTF-8, then: {again}"
            ) from None
        except OSError as exc:
            raise keep(f"could not read the edited file: {exc}", last) from None
        if not edited.strip():
            path.unlink(missing_ok=True)
            raise CliError(f"the file was emptied; nothing saved (packet {old_id} is unchanged)")
        if edited == original and not refused:
            path.unlink(missing_ok=True)
            info(f"no changes; packet {old_id} is unchanged")
            if waiting := returns_at_once(command):
                info(
                    f"{command[0]!r} returns before you edit unless told to wait: set"
                    f" EDITOR={waiting!r} (or VISUAL) and run ltm edit again"
                )
            return None
        if refused and edited == last:
            raise keep("the packet is still refused (the file was not changed)", edited)
        last = edited
        try:
            checked = preflight.accept(
                edited.encode("utf-8", "surrogateescape"),
                fill=True,
                lenient=lenient,
                allow_unredacted=allow_unredacted,
                label="the edited packet",
            )
            if wrong := _lineage_errors(checked.data, old_id, in_place=in_place):
                raise preflight.Refused("the edited packet", wrong, [])
        except preflight.Refused as exc:
            refused = True
            info(safe(exc.message, multiline=True))
            info("ltm: opening the editor again; the report is at the top of the file")
            report = ["the last save was refused:", *exc.message.splitlines(), ""]
            path.write_text(notes([*report, *header]) + edited, encoding="utf-8")
            continue
        if before is not None and (now := backend.stored(old_id)) != before:
            # Saved from elsewhere (another session, device or agent) while the editor was
            # open: replacing it would drop that change unseen. Read again just before the
            # push, which narrows the window to the moment between the two.
            what = "was deleted" if now is None else "changed"
            raise keep(
                f"packet {old_id} {what} while it was open in your editor, and --in-place"
                f" would overwrite that unseen — compare with: ltm show {old_id}",
                edited,
            )
        try:
            pushed = backend.push(
                checked.data, team=team, lenient=lenient, allow_unredacted=allow_unredacted
            )
        except CliError as exc:
            raise keep(exc.message, edited) from None
        path.unlink(missing_ok=True)
        note = "" if checked.conforming else " (non-conforming, accepted with --lenient)"
        if in_place:
            info(f"updated {pushed.id} in {where}{note}")
        else:
            info(f"saved {pushed.id} in {where}, continuing {old_id}{note}")
        return pushed.id
