"""Export and import: a user's packets out of one store and into another, as a bundle.

The bundle format is ``ltm.bundle``'s. Both directions stream: export holds
one page of listing and one packet at a time, import one line at a time, so
memory stays flat at 100,000 packets (``bench/bench_portable.py``).
``export_to`` and ``import_from`` are the bodies of ``ltm export`` and ``ltm import``,
plain functions that import no parser.

Import sends every packet through the same door as ``ltm push``: validation,
the redaction pre-flight (``--allow-unredacted`` is the one override), then
the backend's push, whose rule is that an id owned by someone else, or held
in another scope, is never overwritten (the server's 409). A packet already
present with the same bytes is skipped, so a second import changes nothing.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO, NamedTuple, Protocol

from ltm.cli.errors import CliError
from ltm.cli.terminal.progress import Progress
from ltm.errors import Failure
from ltm.present import where_label

if TYPE_CHECKING:
    from collections.abc import Callable

    from ltm.bundle import BundleError
    from ltm.cli.client.authors import FromBundle
    from ltm.cli.client.backend import Backend, Pushed
    from ltm.cli.client.judges import Item, Judged, Judges, Ready


# -- export ------------------------------------------------------------------------


def export_to(output: Path | None, *, team: str | None, all_scopes: bool, local: bool) -> None:
    """``ltm export``: the bundle of ``team`` (or personal, or with ``all_scopes`` every
    scope) to ``output`` (None: standard output), and a line saying what went."""
    from ltm.cli.client.backend import open_backend
    from ltm.cli.terminal.output import info

    if team and all_scopes:
        raise CliError("give -t TEAM or --all, not both", exit_code=2)
    output = output_file(output)
    if output is None and sys.stdout.isatty():
        raise CliError(
            "the bundle would flood the terminal; write it to a file: ltm export -o FILE"
            " (or redirect: ltm export > FILE)",
            exit_code=2,
        )
    backend = open_backend(local=local, team=team)
    try:
        scopes: list[str | None] = [team] if team else [None]
        if all_scopes:
            scopes += backend.team_names()
        elif team and backend.whoami().get("backend") == "local":
            raise CliError(
                "teams live on a server; the local store is personal. Sign in first: ltm auth HOST"
            )
        sink = AtomicFile(output) if output is not None else None
        out = Destination(
            sink.file if sink else sys.stdout.buffer,
            str(output) if output is not None else "the bundle to standard output",
        )
        try:
            counts = export(backend, scopes, out)
        except BaseException:
            if sink is not None:
                sink.abandon()
            raise
        if sink is not None:
            sink.commit()
        else:
            out.flush()
    finally:
        backend.close()
    total = sum(counts.values())
    parts = ", ".join(f"{n} {_scope_label(scope)}" for scope, n in counts.items())
    where = f" to {output}" if output is not None else ""
    noun = "packet" if total == 1 else "packets"
    info(f"exported {total} {noun} from {backend.label} ({parts}){where}")


def _scope_label(team: str | None) -> str:
    return "personal" if team is None else f"team {team}"


def export(backend: Backend, scopes: list[str | None], out: Writes) -> dict[str | None, int]:
    """Write the header and every packet of ``scopes`` (None: personal) to ``out``.

    Returns how many packets each scope had (None: personal; else the team's name, which
    may be any name, ``personal`` too).
    Each line names who stored the packet, by id and (when known) display name; a
    copy in the local store of another's packet names them and their server
    (``ltm.cli.client.authors``), so an import elsewhere keeps it theirs.
    """
    import json

    from ltm import bundle
    from ltm.cli.client import authors

    local = backend.whoami().get("backend") == "local"
    source = "local" if local else backend.label
    me = {"id": "local"} if local else _exporter(backend)
    copies = authors.every() if local else {}
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out.write(bundle.header_line(source=source, exported_at=stamp, exported_by=me["id"]).encode())
    counts: dict[str | None, int] = {}
    progress = Progress("exported", unit=" packets")
    total = 0
    try:
        for team in scopes:
            counts[team] = 0
            mine = {me["id"]: me.get("display", "")}
            names = authors.member_names(backend, team) if team else mine
            for held in backend.walk(team=team):
                by, host = held.created_by, ""
                copy = copies.get(json.loads(held.body).get("id")) if copies else None
                if copy is not None:
                    by, host = copy["id"], copy["host"]
                    names[by] = copy["name"]
                line = bundle.entry_line(
                    body=held.body,
                    team=held.team,
                    created_by=by,
                    created_at=held.created_at,
                    conforming=held.conforming,
                    created_by_name=names.get(by, ""),
                    created_by_host=host,
                )
                out.write(line.encode())
                counts[team] += 1
                total += 1
                progress.update(total)
    finally:
        progress.done()
    return counts


class Writes(Protocol):
    """Where ``export`` writes a bundle: a binary file, or a ``Destination``."""

    def write(self, data: bytes, /) -> object: ...


class Destination:
    """A bundle's file or standard output, as ``export`` writes it: a write the system
    refuses (a full disk, a quota) is one line naming where, not an unexpected error. A
    reader gone (``BrokenPipeError``) is left as it is: the verb ends quietly there."""

    def __init__(self, stream: BinaryIO, where: str) -> None:
        self.stream = stream
        self.where = where

    def write(self, data: bytes) -> int:
        with self._refused():
            return self.stream.write(data)

    def flush(self) -> None:
        with self._refused():
            self.stream.flush()

    @contextlib.contextmanager
    def _refused(self) -> Iterator[None]:
        try:
            yield
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise CliError(f"cannot write {self.where}: {exc.strerror or exc}") from None


def _exporter(backend: Backend) -> dict[str, str]:
    """Who exports, on a server: ``{"id", "display"}`` as ``ltm auth`` recorded it, else as
    the server says; ``{"id": ""}`` where it cannot say (the reference has no whoami)."""
    user = backend.whoami().get("user")
    if not (isinstance(user, dict) and user.get("id")):
        try:
            answer = backend.identify()
        except CliError:
            answer = None
        user = (answer or {}).get("user")
    if not (isinstance(user, dict) and isinstance(user.get("id"), str)):
        return {"id": ""}
    return {"id": user["id"], "display": str(user.get("display") or "")}


def output_file(output: Path | None) -> Path | None:
    """The file ``-o`` names, None for standard output: none given, or ``-`` (as ``-`` is
    standard input for import, save and push). A folder, or no name, is refused."""
    if output is None or str(output) == "-":
        return None
    if not output.name or output.is_dir():
        raise CliError(f"-o needs a file to write, not a folder: {output}", exit_code=2)
    try:
        mode: int | None = output.stat().st_mode
    except OSError:
        mode = None  # nothing there yet (or nothing this user may look at: said on writing)
    if mode is not None and not stat.S_ISREG(mode):
        # A device or a pipe: the file moved to its name would replace it (run as root,
        # the system's /dev/null itself), and a pipe someone made would read the bundle.
        raise CliError(
            f"-o {output} is not a regular file (for standard output: -o -)", exit_code=2
        )
    return output


def write_file(path: Path, data: bytes) -> None:
    """``data`` as the whole of ``path``, written as a bundle is (``AtomicFile``): private,
    whole or not at all, never through a link planted at its name."""
    sink = AtomicFile(path)
    try:
        sink.file.write(data)
    except BaseException:
        sink.abandon()
        raise
    sink.commit()


class AtomicFile:
    """A file written beside its final name and moved there only when complete.

    A failed or interrupted export never leaves a truncated bundle where a
    good backup was. The file is private (0600): a bundle holds every packet.
    In a folder other users may write to (``/tmp``), the partial file must be
    ours: it is created under an unguessable name with ``O_EXCL`` (an existing
    file, or a symlink another user planted, is refused, never opened) and
    ``O_NOFOLLOW``, and the final move (``rename``) replaces a link at the
    destination instead of writing through it. On any failure the partial file
    is removed.
    """

    ATTEMPTS = 3

    def __init__(self, path: Path) -> None:
        import secrets

        self.path = path
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        flags |= getattr(os, "O_BINARY", 0)
        for _ in range(self.ATTEMPTS):
            self.partial = path.with_name(f".{path.name}.{secrets.token_hex(8)}.partial")
            try:
                fd = os.open(self.partial, flags, 0o600)
                break
            except FileExistsError:
                continue  # someone else's file under that name: never ours to write
            except OSError as exc:
                raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
        else:
            raise CliError(f"cannot write {path}: the folder keeps refusing a new private file")
        self.file: BinaryIO = os.fdopen(fd, "wb", buffering=1024 * 1024)

    def commit(self) -> None:
        """The file under its name, on disk: its bytes synced, then the move, then the
        folder (the move is durable only once the folder is), so what says it was
        written survives a power cut."""
        from ltm.cli.config import sync_dir

        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.partial, self.path)
        except OSError as exc:
            self.abandon()
            raise CliError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        # A folder that cannot be opened to sync (write and search rights, no read) still
        # has the whole file under its name: only a power cut could undo it, as before.
        with contextlib.suppress(OSError):
            sync_dir(self.path.parent)

    def abandon(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
        self.partial.unlink(missing_ok=True)


# -- import ------------------------------------------------------------------------


def import_from(
    source: str,
    *,
    team: str | None,
    lenient: bool,
    allow_unredacted: bool,
    replace: bool,
    local: bool,
) -> int:
    """``ltm import``: the bundle in ``source`` (``-``: standard input) into the store, each
    line reported, then the sum. Returns the exit status: 1 when any line was refused."""
    from ltm.cli.client.backend import open_backend
    from ltm.cli.client.preflight import source_error
    from ltm.cli.terminal.output import info

    if source == "-":
        stream, size = sys.stdin.buffer, None
    else:
        path = Path(source)
        try:
            stream = path.open("rb")
            size = path.stat().st_size
        except OSError as exc:
            raise source_error(source, exc, "a bundle") from None
    backend = open_backend(local=local, team=team)
    report = Report()
    stopped: CliError | None = None
    try:
        if team and backend.whoami().get("backend") == "local":
            from ltm.cli.client.backend import no_team_here

            raise no_team_here(team)
        if team and team not in backend.team_names():
            # Asked once, before a line is read: else each line is refused for the same
            # mistyped name, one report line and one request each.
            from ltm.cli.client.remote import team_not_found

            raise CliError(team_not_found(team, backend.label))
        Importer(
            backend,
            report,
            team=team,
            lenient=lenient,
            allow_unredacted=allow_unredacted,
            replace=replace,
        ).run(stream, size=size)
    except Stopped as exc:  # what was done is summed up first
        stopped = exc
    except KeyboardInterrupt:  # Ctrl-C: the same, rather than typer's silent exit 130
        stopped = CliError(
            "import interrupted — the lines reported above were imported, the rest were not;"
            " run the same import again: what is there already is skipped",
            exit_code=130,
        )
    finally:
        backend.close()
        if stream is not sys.stdin.buffer:
            stream.close()
    sys.stdout.flush()
    info(report.summary(where_label(backend, team)))
    if stopped is not None:
        raise stopped
    return 1 if report.refused else 0


AGAIN = "run the same import again: what is there already is skipped"


class Stopped(CliError):
    """The server went out of reach, or stopped taking the token, during an import
    (``_ends_import``), or the local store could not be written: it ends at the first
    line that did not get through, rather than refuse every line after it for the same
    reason. Also a second bundle's header in the stream (bundles joined with ``cat``):
    the lines after it come from where that header says, never this one's."""

    def __init__(self, line: int, cause: CliError, *, then: str = AGAIN) -> None:
        super().__init__(
            f"import stopped at line {line}: {cause.message} — that line and the ones after"
            f" it were not imported; {then}"
        )


@dataclass
class Report:
    """What an import did, line by line (``lines``) and in sum."""

    added: int = 0
    replaced: int = 0
    moved: int = 0  # the caller's personal packets that went into the team the line names
    skipped: int = 0
    refused: int = 0
    into_personal: int = 0  # team packets that went into the (personal-only) local store
    out: IO[str] = field(default_factory=lambda: sys.stdout)
    progress: Progress | None = None
    held: list[str] | None = None  # while set, lines wait here (to be said in bundle order)

    def say(self, text: str) -> None:
        """One report line; ids and messages come from the bundle, so through ``safe``."""
        self.say_all([text])

    def say_all(self, texts: Sequence[str]) -> None:
        """Report lines, in one write: a terminal's stdout, or one unbuffered, takes a
        system call for every write (an import reports each of its lines)."""
        from ltm.cli.terminal.output import safe

        if self.held is not None:
            self.held.extend(texts)
            return
        if not texts:
            return
        if self.progress is not None:
            self.progress.clear()
        self.out.write("".join([safe(text) + "\n" for text in texts]))

    def summary(self, label: str) -> str:
        parts = [f"{self.added} added"]
        if self.replaced:
            parts.append(f"{self.replaced} replaced")
        if self.moved:
            parts.append(f"{self.moved} moved from your personal packets")
        parts += [f"{self.skipped} skipped (already present)", f"{self.refused} refused"]
        text = f"import into {label}: " + ", ".join(parts)
        if not self.added and not self.replaced and not self.moved and not self.refused:
            text += " — nothing changed"
        if self.into_personal:
            text += (
                f"; {self.into_personal} team packets went into your personal store"
                " (the local store has no teams)"
            )
        return text


def _ends_import(exc: BaseException) -> bool:
    """Whether every later line would fail as this one did: the server out of reach
    (``outbox.unreachable``), or the token no longer taken (401: it expired or was
    revoked midway; each line refused for it would be one more request, and a report that
    reads as if the packets were at fault). Signed in again, the same import completes."""
    from ltm.cli.client.outbox import unreachable
    from ltm.cli.client.remote import Rejected

    return unreachable(exc) or isinstance(exc, Rejected)


def _one_line(message: str) -> str:
    return "; ".join(part.strip() for part in message.splitlines() if part.strip())


class Importer:
    """Loads bundle lines into one backend; every outcome goes to ``report``."""

    def __init__(
        self,
        backend: Backend,
        report: Report,
        *,
        team: str | None,
        lenient: bool,
        allow_unredacted: bool,
        replace: bool,
    ) -> None:
        from ltm.cli.client import preflight

        self.backend = backend
        self.report = report
        self.local = backend.whoami().get("backend") == "local"
        self.team = team
        self.lenient = lenient
        self.allow_unredacted = allow_unredacted
        self.replace = replace
        self.rules = preflight.user_rules()  # read the user's patterns once, not per packet
        self.judges: Judges | None = None  # worker processes, for a large bundle
        self.ready: Ready | None = backend.readying()
        # Into the local store: who wrote each line that landed (None: the user), recorded
        # as ``pull --to-local`` records it, so a teammate's packet stays theirs.
        self.provenance: FromBundle | None = None
        self.copied: dict[str, dict[str, str] | None] = {}
        self.recorded: dict[str, dict[str, str]] = {}  # the authors known before the import

    def run(self, stream: BinaryIO, *, size: int | None) -> None:
        """Every packet line of the bundle in ``stream``, in order (``_run``), the cyclic
        garbage collector run rarely meanwhile (``judges.rare_collections``)."""
        from ltm.cli.client.judges import rare_collections

        try:
            with rare_collections():
                self._run(stream, size=size)
        finally:  # what landed keeps its author, however the run ended
            if self.copied:
                from ltm.cli.client.authors import remember_many

                remember_many(self.copied)

    def _run(self, stream: BinaryIO, *, size: int | None) -> None:
        """Every packet line of the bundle in ``stream``, in order, ``CHUNK`` lines at a time.

        A chunk's ids are looked up together and its pushes go together
        (``Backend.stored_many``, ``Backend.push_many``: one request each on a
        server with the batch routes); each line is still judged alone, and the
        report keeps the bundle's order. A chunk ends early where an id comes
        back, so a later line sees what an earlier one stored, as one at a time.
        With workers, up to ``AHEAD`` chunks are judged while this process
        writes the one before them; a chunk that shares an id with one of those
        is looked up only once they are written.
        """
        from collections import deque

        from ltm import bundle
        from ltm.cli.client.judges import Judges, read_line

        first = stream.readline(bundle.MAX_LINE_BYTES)
        try:
            header = bundle.read_header(first)
        except bundle.BundleError as exc:
            raise CliError(str(exc)) from None
        if self.local:
            from ltm.cli.client.authors import FromBundle, every

            self.provenance = FromBundle(header)
            self.recorded = every()
        progress = Progress("imported", total=size, unit=" packets")
        self.report.progress = progress
        read = len(first)
        done = 0
        size_of_chunk = LOCAL_CHUNK if self.local else CHUNK
        chunk: list[tuple[int, Any]] = []  # (line number, entry or the line's BundleError)
        ids: set[str] = set()
        # The chunks looked up and judged (in the workers), not yet written, oldest first.
        ahead: deque[_Chunk] = deque()
        self.judges = Judges.start(
            size=size, scan=not self.allow_unredacted, rules=self.rules, ready=self.ready
        )

        def step(lines: list[tuple[int, Any]], ids: set[str]) -> None:
            nonlocal done
            if any(not run.ids.isdisjoint(ids) for run in ahead):
                while ahead:  # a later line sees what an earlier one stored
                    done += self._finish(ahead.popleft())
            ahead.append(self._begin(lines, ids))
            while len(ahead) > (AHEAD if self.judges is not None else 0):
                done += self._finish(ahead.popleft())
            progress.update(done, part=read)

        # With workers, a line that starts with its id is decoded there, not here: this
        # process orders and looks it up by that id (``bundle.id_hint``: a line that
        # names another id further on is refused wherever it is read).
        hinted = self.judges is not None
        joined: Stopped | None = None
        try:
            for number, line in bundle.lines(_bounded(stream)):
                read += len(line) + 1
                hint = bundle.id_hint(line) if hinted else None
                entry: Any = _Unread(hint, line) if hint is not None else read_line(line)
                if isinstance(entry, bundle.AnotherBundle):
                    # Its lines come from where its own header says, not this one's: never
                    # imported as this bundle's (authors are recorded from the header).
                    joined = Stopped(
                        number,
                        CliError(str(entry)),
                        then="import each bundle on its own, from its own header line",
                    )
                    break
                packet_id = getattr(entry, "id", None)
                if packet_id in ids or len(chunk) == size_of_chunk:
                    step(chunk, ids)
                    chunk, ids = [], set()
                chunk.append((number, entry))
                if packet_id:
                    ids.add(packet_id)
            step(chunk, ids)
            while ahead:
                done += self._finish(ahead.popleft())
            progress.update(done, part=read)
        finally:
            if self.judges is not None:
                self.judges.close()
            progress.done()
        if joined is not None:
            raise joined

    def refuse(self, name: str, reason: str) -> None:
        self.report.refused += 1
        self.report.say(f"refused {name}: {reason}")

    def _begin(self, chunk: list[tuple[int, Any]], ids: set[str]) -> _Chunk:
        """Look a run of lines with distinct ids up, and start judging what needs it."""
        from ltm import bundle
        from ltm.cli.client.judges import read_line

        wanted = [e.id for _, e in chunk if not isinstance(e, bundle.BundleError) and e.id]
        known: dict[str, bytes | None] = {}
        failed: CliError | None = None
        try:
            known = self.backend.stored_many(wanted) if wanted else {}
        except CliError as exc:
            failed = exc
        same: set[int] = set()  # lines whose packet is here already, byte for byte
        todo: list[int] = []  # lines to judge
        for at, (number, entry) in enumerate(chunk):
            if isinstance(entry, _Unread):
                if failed is None and known.get(entry.id) is None:
                    todo.append(at)  # decoded and judged by a worker
                    continue
                entry = read_line(entry.line)  # compared with what is stored, or refused, here
                chunk[at] = (number, entry)
            if isinstance(entry, bundle.BundleError) or (failed is not None and entry.id):
                continue
            present = known.get(entry.id) if entry.id else None
            if present is not None and present == _canonical(entry.packet):
                same.add(at)
            else:
                todo.append(at)
        verdicts = None
        if self.judges is not None and todo:
            verdicts = self.judges.judge([_item(chunk[at][1]) for at in todo])
        return _Chunk(chunk, ids, known, failed, same, todo, verdicts)

    def _finish(self, run: _Chunk) -> int:
        """Judge, push and report a run of lines with distinct ids; returns how many."""
        from ltm import bundle

        report = self.report
        if run.failed is not None and _ends_import(run.failed):
            raise Stopped(run.lines[0][0], run.failed)
        judged: dict[int, Judged | bundle.BundleError] = {}
        if run.verdicts is not None:
            judged = dict(zip(run.todo, run.verdicts(), strict=True))
        said: list[list[str]] = []
        pending: list[tuple[int, _Push]] = []
        for at, (number, entry) in enumerate(run.lines):
            report.held = []
            said.append(report.held)
            verdict = judged.get(at)
            if isinstance(entry, _Unread):  # as the worker that judged it read it
                if isinstance(verdict, bundle.BundleError):
                    entry, verdict = verdict, None
                else:
                    assert verdict is not None and verdict.entry is not None
                    entry = verdict.entry
            assert not isinstance(verdict, bundle.BundleError)  # only a line can be one
            push = self._judge(number, entry, run.known, run.failed, at in run.same, verdict)
            if push is not None:
                pending.append((len(said) - 1, push))
        stop: tuple[int, CliError] | None = None
        if pending:
            import sqlite3

            try:
                answers = self.backend.push_many(
                    # As judged and made ready (Backend.readying): not judged, nor encoded,
                    # again.
                    [(push.ready, push.target) for _, push in pending],
                    lenient=self.lenient,
                    allow_unredacted=self.allow_unredacted,
                )
            except sqlite3.OperationalError as exc:
                # The local store could not take the batch (a full disk, a quota, its write
                # lock held past the wait): its one transaction rolled back, the batches
                # before it are in. Every later line would fail so: stop, as for a server.
                cause = CliError(f"{self.backend.label} could not be written: {exc}")
                stop, answers = (pending[0][0], cause), []
            for (at, push), answer in zip(pending, answers, strict=stop is None):
                if isinstance(answer, CliError) and _ends_import(answer):
                    stop = (at, answer)
                    break
                report.held = said[at]
                self._pushed(push, answer)
        report.held = None
        report.say_all(
            [text for lines in said[: None if stop is None else stop[0]] for text in lines]
        )
        if stop is not None:
            raise Stopped(run.lines[stop[0]][0], stop[1])
        return len(run.lines)

    def _judge(
        self,
        number: int,
        entry: Any,
        known: dict[str, bytes | None],
        failed: CliError | None,
        same: bool,
        verdict: Judged | None,
    ) -> _Push | None:
        """Everything before the push: refused or skipped here (and reported), else the push.

        ``same``: the packet is here already, byte for byte; ``verdict``: the
        packet's, when the workers judged it already.
        """
        from ltm import bundle
        from ltm.cli.client.judges import judge_here

        report = self.report
        where = f"line {number}"
        if isinstance(entry, bundle.BundleError):
            self.refuse(where, str(entry))
            return None
        name = f"{entry.id or '(no id)'} ({where})"
        move = False
        if failed is not None and entry.id:
            self.refuse(name, failed.message)
            return None
        present = known.get(entry.id) if entry.id else None
        target = None if self.local else (self.team or entry.team)
        author = self.provenance.author(entry) if self.provenance is not None else None
        if same:
            # Already here, byte for byte: it passed every check when it was stored. Unless
            # it is the caller's personal packet and the line goes to a team: then the push
            # moves it there, as `ltm push -t TEAM` does.
            try:
                move = target is not None and self.backend.holds_personally(entry.packet)
            except CliError as exc:
                self.refuse(name, exc.message)
                return None
            if not move:
                # Nothing changes, the recorded author included: a line that reads as the
                # user's never makes a teammate's copy the user's own. A copy with no record
                # gets the line's author (a run killed between storing it and recording
                # who wrote it is completed so).
                if author is not None and entry.id not in self.recorded:
                    self.copied[entry.id] = author
                report.skipped += 1
                where = f"in team {target}" if target else "among your packets"
                report.say(f"skipped {entry.id}: identical packet already present {where}")
                return None
        if verdict is None:
            verdict = judge_here(
                entry.packet,
                scan=not self.allow_unredacted,
                rules=self.rules,
                ready=self.ready,
                plain=entry.plain,
            )
        errors = verdict.refusals(lenient=self.lenient)
        if errors or verdict.ready is None:
            hint = "" if entry.conforming else " (stored in lenient mode: pass --lenient)"
            self.refuse(name, "packet is not a valid packet: " + "; ".join(errors) + hint)
            return None
        if verdict.hits:
            hits = verdict.hits
            found = ", ".join(str(hit) for hit in hits[:3]) + (", …" if len(hits) > 3 else "")
            self.refuse(
                name,
                f"the redaction pre-flight found {found} (edit the bundle, or pass"
                " --allow-unredacted)",
            )
            return None
        if present is not None and not self.replace and not move:
            self.refuse(
                name,
                "a different packet with this id is already there (kept; pass --replace to"
                " overwrite your own)",
            )
            return None
        return _Push(entry.id or "", name, entry.team, target, present, move, verdict.ready, author)

    def _pushed(self, push: _Push, answer: Pushed | Failure) -> None:
        """Report what the push of one line did."""
        from ltm.cli.client.backend import IdTaken

        report = self.report
        if isinstance(answer, IdTaken):
            self.refuse(
                push.name, "the id belongs to someone else or to another scope; nothing changed"
            )
            return
        if isinstance(answer, Failure):
            self.refuse(push.name, answer.message)
            return
        if self.provenance is not None:
            self.copied[push.id] = push.author
        if self.local and push.team:
            report.into_personal += 1
        in_team = f" in team {push.target}" if push.target else ""
        if push.move:
            report.moved += 1
            report.say(f"moved {push.id} from your personal packets into team {push.target}")
        elif push.present is None:
            report.added += 1
            report.say(f"added {push.id}{in_team}")
        else:
            report.replaced += 1
            report.say(f"replaced {push.id}{in_team}")


# Lines judged and pushed together (their ids asked for in one request, their pushes
# sent in as few as the server's body bound allows): the batch routes' bound. Into the
# local store a chunk is one transaction with one durable commit: a crash loses at most
# the chunk being written (never a line already reported), and a re-run completes it.
CHUNK = 100
LOCAL_CHUNK = 500
# Chunks the workers may judge while this process writes the one before them: with one,
# they went idle (and with them a core) whenever a write outlasted the next chunk's
# judging; with two, there is one more to go on with.
AHEAD = 2


class _Chunk(NamedTuple):
    """A run of lines looked up, and maybe being judged in the workers."""

    lines: list[tuple[int, Any]]
    ids: set[str]
    known: dict[str, bytes | None]  # what the target holds under each id
    failed: CliError | None  # the lookup failed: every line with an id is refused
    same: set[int]  # lines already there, byte for byte
    todo: list[int]  # lines to judge
    verdicts: Callable[[], list[Judged | BundleError]] | None  # their verdicts, from the workers


class _Unread(NamedTuple):
    """A bundle line not decoded in this process: its id read off its head
    (``bundle.id_hint``), the line itself decoded and judged by a worker."""

    id: str
    line: bytes


def _item(entry: Any) -> Item:
    """What a worker judges of a line (``judges.Item``)."""
    if isinstance(entry, _Unread):
        return entry.line
    return (entry.packet, entry.plain)


class _Push(NamedTuple):
    """A line that passed every check on this side: what to push, and how to report it."""

    id: str
    name: str  # how the report names the line
    team: str | None  # the team the bundle line names
    target: str | None  # where it goes (None: personal)
    present: bytes | None  # what was there before, if anything
    move: bool  # the caller's personal packet going into a team
    # The packet as judged (never judged again): made ready for the backend's push
    # (``Backend.readying``), else the ``Checked``.
    ready: Any
    author: dict[str, str] | None  # who wrote it, into the local store (None: the user)


def _canonical(data: dict[str, object]) -> bytes | None:
    """The canonical bytes of a bundle's packet object; None for what cannot be encoded."""
    from ltm import packet

    try:
        return packet.canonical_bytes(data)
    except (TypeError, ValueError, RecursionError):
        return None


def _bounded(stream: BinaryIO) -> Iterable[bytes]:
    """The stream's lines, none longer than a bundle line may be (a runaway file is refused)."""
    from ltm import bundle

    while True:
        line = stream.readline(bundle.MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > bundle.MAX_LINE_BYTES and not line.endswith(b"\n"):
            # Skip the rest of this overlong line; the reader reports it as too long.
            while line and not line.endswith(b"\n"):
                line = stream.readline(bundle.MAX_LINE_BYTES)
            yield b"x" * (bundle.MAX_LINE_BYTES + 1)
            continue
        yield line
