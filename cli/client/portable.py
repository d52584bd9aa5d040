"""Export and import: a user's packets out of one store and into another, as a bundle.

The bundle format is ``ltm.bundle``'s. Both directions stream: export holds
one page of listing and one packet at a time, import one line at a time, so
memory stays flat at 100,000 packets (``bench/bench_portable.py``).

Import sends every packet through the same door as ``ltm push``: validation,
the redaction pre-flight (``--allow-unredacted`` is the one override), then
the backend's push, whose rule is that an id owned by someone else, or held
in another scope, is never overwritten (the server's 409). A packet already
present with the same bytes is skipped, so a second import changes nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, BinaryIO, NamedTuple

from ltm.cli.errors import CliError
from ltm.cli.terminal.progress import Progress

if TYPE_CHECKING:
    from ltm.bundle import Entry
    from ltm.cli.client.backend import Backend
    from ltm.packet import Checked


# -- export ------------------------------------------------------------------------


def export(backend: Backend, scopes: list[str | None], out: IO[bytes]) -> dict[str, int]:
    """Write the header and every packet of ``scopes`` (None: personal) to ``out``.

    Returns how many packets each scope had (``"personal"`` or the team's name).
    """
    from ltm import bundle

    source = "local" if backend.whoami().get("backend") == "local" else backend.label
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out.write(bundle.header_line(source=source, exported_at=stamp).encode())
    counts: dict[str, int] = {}
    progress = Progress("exported", unit=" packets")
    total = 0
    try:
        for team in scopes:
            name = team or "personal"
            counts[name] = 0
            for held in backend.walk(team=team):
                line = bundle.entry_line(
                    body=held.body,
                    team=held.team,
                    created_by=held.created_by,
                    created_at=held.created_at,
                    conforming=held.conforming,
                )
                out.write(line.encode())
                counts[name] += 1
                total += 1
                progress.update(total)
    finally:
        progress.done()
    return counts


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
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.partial, self.path)
        except OSError as exc:
            self.abandon()
            raise CliError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def abandon(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
        self.partial.unlink(missing_ok=True)


# -- import ------------------------------------------------------------------------


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

    def say(self, text: str) -> None:
        """One report line; ids and messages come from the bundle, so through ``safe``."""
        from ltm.cli.terminal.output import safe

        if self.progress is not None:
            self.progress.clear()
        print(safe(text), file=self.out)

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


def _one_line(message: str) -> str:
    return "; ".join(part.strip() for part in message.splitlines() if part.strip())


# Packets per transaction on the local store: one durable commit (an fsync) for this
# many, so a crash loses at most this many, and a re-run adds them (what landed is skipped).
BATCH = 500


class _Push(NamedTuple):
    """A line whose packet waits in the batch: what its report line needs."""

    entry: Entry
    name: str
    present: bytes | None


class _Said(NamedTuple):
    """A line already judged (skipped or refused): its count and report line."""

    count: str  # the Report attribute it adds one to
    text: str


class Importer:
    """Loads bundle lines into one backend; every outcome goes to ``report``.

    Into the local store, the packets that pass go in batches (``BATCH``), each one
    transaction with one durable commit, and each line's report waits for the commit
    that holds it: a line says "added" only once it is on disk, and the lines keep the
    bundle's order. A server gets one push per packet.
    """

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
        from ltm.cli.client.backend import LocalBackend

        self.backend = backend
        self.report = report
        self.local = backend.whoami().get("backend") == "local"
        self.batched = isinstance(backend, LocalBackend)
        self.team = team
        self.lenient = lenient
        self.allow_unredacted = allow_unredacted
        self.replace = replace
        self.rules = preflight.user_rules()  # read the user's patterns once, not per packet
        self.waiting: list[_Push | _Said] = []  # this batch's lines, in order
        self.batch: list[Checked] = []  # the packets of its _Push lines, in order
        self.batch_ids: set[str] = set()

    def run(self, stream: BinaryIO, *, size: int | None) -> None:
        """Every packet line of the bundle in ``stream``, in order."""
        from ltm import bundle

        first = stream.readline(bundle.MAX_LINE_BYTES)
        try:
            bundle.read_header(first)
        except bundle.BundleError as exc:
            raise CliError(str(exc)) from None
        progress = Progress("imported", total=size, unit=" packets")
        self.report.progress = progress
        read = len(first)
        done = 0
        try:
            for number, line in bundle.lines(_bounded(stream)):
                read += len(line) + 1
                self.one(number, line)
                done += 1
                progress.update(done, part=read)
            self.flush()
        finally:
            progress.done()

    def flush(self) -> None:
        """Write the waiting packets (one transaction), then report their lines in order."""
        from ltm.cli.client.backend import IdTaken

        waiting, batch = self.waiting, self.batch
        self.waiting, self.batch, self.batch_ids = [], [], set()
        pushed = self.backend.push_many(batch, lenient=self.lenient) if batch else []  # type: ignore[attr-defined]
        outcomes = iter(pushed)
        for item in waiting:
            if isinstance(item, _Said):
                self._tell(item.count, item.text)
                continue
            outcome = next(outcomes)
            if isinstance(outcome, IdTaken):
                self._tell("refused", f"refused {item.name}: {ID_TAKEN}")
            elif isinstance(outcome, CliError):
                self._tell("refused", f"refused {item.name}: {outcome.message}")
            else:
                self._pushed(item.entry, item.present, None, False)

    def _tell(self, count: str, text: str) -> None:
        setattr(self.report, count, getattr(self.report, count) + 1)
        self.report.say(text)

    def note(self, count: str, text: str) -> None:
        """One line's outcome: told now, or after the batch before it is written."""
        if self.waiting:
            self.waiting.append(_Said(count, text))
            if len(self.waiting) >= BATCH:
                self.flush()
        else:
            self._tell(count, text)

    def refuse(self, name: str, reason: str) -> None:
        self.note("refused", f"refused {name}: {reason}")

    def one(self, number: int, line: bytes) -> None:
        from ltm import bundle
        from ltm.cli.client import preflight
        from ltm.cli.client.backend import IdTaken

        where = f"line {number}"
        try:
            entry = bundle.read_entry(line)
        except bundle.BundleError as exc:
            self.refuse(where, str(exc))
            return
        if entry.id in self.batch_ids:
            self.flush()  # the same id again: this line must see the earlier one stored
        name = f"{entry.id or '(no id)'} ({where})"
        move = False
        try:
            present = self.backend.stored(entry.id) if entry.id else None
        except CliError as exc:
            self.refuse(name, exc.message)
            return
        target = None if self.local else (self.team or entry.team)
        if present is not None and present == _canonical(entry.packet):
            # Already here, byte for byte: it passed every check when it was stored. Unless
            # it is the caller's personal packet and the line goes to a team: then the push
            # moves it there, as `ltm push -t TEAM` does.
            try:
                move = target is not None and self.backend.holds_personally(entry.packet)
            except CliError as exc:
                self.refuse(name, exc.message)
                return
            if not move:
                where = f"in team {target}" if target else "among your packets"
                text = f"skipped {entry.id}: identical packet already present {where}"
                self.note("skipped", text)
                return
        verdict = preflight.judge(entry.packet, scan=not self.allow_unredacted, rules=self.rules)
        errors = verdict.refusals(lenient=self.lenient)
        if errors or verdict.checked is None:
            hint = "" if entry.conforming else " (stored in lenient mode: pass --lenient)"
            self.refuse(name, "packet is not a valid packet: " + "; ".join(errors) + hint)
            return
        if verdict.hits:
            hits = verdict.hits
            found = ", ".join(str(hit) for hit in hits[:3]) + (", …" if len(hits) > 3 else "")
            self.refuse(
                name,
                f"the redaction pre-flight found {found} (edit the bundle, or pass"
                " --allow-unredacted)",
            )
            return
        checked = verdict.checked
        if present is not None and not self.replace and not move:
            self.refuse(
                name,
                "a different packet with this id is already there (kept; pass --replace to"
                " overwrite your own)",
            )
            return
        if self.batched:
            self.waiting.append(_Push(entry, name, present))
            self.batch.append(checked)
            self.batch_ids.add(entry.id)
            if len(self.waiting) >= BATCH:
                self.flush()
            return
        try:
            self.backend.push(
                checked.data,
                team=target,
                lenient=self.lenient,
                allow_unredacted=self.allow_unredacted,
            )
        except IdTaken:
            self.refuse(name, ID_TAKEN)
            return
        except CliError as exc:
            self.refuse(name, exc.message)
            return
        self._pushed(entry, present, target, move)

    def _pushed(self, entry: Entry, present: bytes | None, target: str | None, move: bool) -> None:
        report = self.report
        if self.local and entry.team:
            report.into_personal += 1
        in_team = f" in team {target}" if target else ""
        if move:
            self._tell("moved", f"moved {entry.id} from your personal packets into team {target}")
        elif present is None:
            self._tell("added", f"added {entry.id}{in_team}")
        else:
            self._tell("replaced", f"replaced {entry.id}{in_team}")


ID_TAKEN = "the id belongs to someone else or to another scope; nothing changed"


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
