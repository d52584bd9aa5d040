"""The one client: where packets go, behind one interface.

The CLI verbs and the MCP shim talk to a ``Backend`` and never care whether it
is the embedded local store or a server. Both report failures as ``CliError``
with a message that says what to do next.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from ltm.cli.errors import CliError

if TYPE_CHECKING:
    from ltm.packet import Checked
    from ltm.store import Store, User


# Records are NamedTuples, not dataclasses, here and in the other modules every hook
# and every fast verb loads: importing dataclasses (it loads inspect) and making a
# dataclass (several exec() calls each) cost a hook 12-15 ms and more on Python 3.11
# (bench/bench_imports.py).


class Pushed(NamedTuple):
    id: str
    created: bool


def check_ref(ref: str) -> None:
    """Refuse a packet id (or prefix) outside the id character set before it goes anywhere.

    The rule is ``ltm.ids``'s, the one the server applies: an id with ``/``, CR/LF
    or a bidi mark could never be fetched or deleted, and would print as something
    it is not.
    """
    from ltm.ids import id_problem

    problem = id_problem(ref, prefix=True)
    if problem is not None:
        raise CliError(problem, exit_code=2)


def check_query(query: str) -> None:
    """Refuse a search query that cannot run, in the client's words (a server says the
    same as ``q: ...``, the name of its HTTP parameter), before it goes anywhere."""
    from ltm.search import QueryError, parse

    try:
        parse(query)
    except QueryError as exc:
        message = str(exc)
        if not query.strip(' "'):
            message += ": give words to look for, e.g. 'flaky login'"
        raise CliError(message, exit_code=2) from None


def check_times(filters: Filters) -> None:
    """Refuse a ``--since``/``--until`` that is no time a listing can hold, before it goes
    anywhere: one line, exit 2 (a server says the same as ``since: ...``, with a 400)."""
    from datetime import UTC, datetime

    from ltm.times import TimeError, sort_key

    now = datetime.now(UTC)
    for flag, value in (("--since", filters.since), ("--until", filters.until)):
        if value is not None:
            try:
                sort_key(value, now)
            except TimeError as exc:
                raise CliError(f"{flag}: {exc}", exit_code=2) from None


class Held(NamedTuple):
    """One stored packet with what a bundle line says about it (``ltm export``)."""

    body: bytes  # the canonical bytes as stored
    team: str | None  # the team's name, None for personal scope
    created_by: str  # the user id that stored it
    created_at: str
    conforming: bool = True


class IdTaken(CliError):
    """The packet id exists in another scope or belongs to someone else; nothing was changed."""


# How many packets one listing request asks for while walking a scope (the protocol's maximum).
WALK_PAGE = 1000


class Filters(NamedTuple):
    """Listing filters (``ltm ls``); the service documents what each accepts."""

    project: str | None = None  # exactly this project.name
    tag: str | None = None
    since: str | None = None  # a date, an RFC 3339 time or an age (3d)
    until: str | None = None
    author: str | None = None  # a user id, a display name, or "me"

    def query(self) -> dict[str, str | None]:
        return {
            "project": self.project,
            "tag": self.tag,
            "since": self.since,
            "until": self.until,
            "author": self.author,
        }


class Listing(NamedTuple):
    rows: list[dict[str, str]]  # {"id", "created_at", "goal"} each
    next_page_token: str | None = None


def meta_row(meta: Any) -> dict[str, Any]:
    """A PacketMeta as the HTTP API shows it in lineage answers (the parent included)."""
    return {
        "id": meta.id,
        "created_at": meta.created_at,
        "goal": meta.goal,
        "parent_id": meta.parent_id,
    }


class Backend(ABC):
    """Where packets live. ``ref`` arguments take a full id or a unique prefix."""

    label: str  # shown to people: "local store (PATH)" or the server URL

    @abstractmethod
    def push(
        self,
        data: Mapping[str, Any],
        *,
        team: str | None = None,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> Pushed:
        """Store a packet the pre-flight has passed (or the user has overridden).

        ``allow_unredacted`` carries the user's override to a server that scans
        pushes itself (``X-LTM-Allow-Unredacted``).
        """

    def push_checked(
        self,
        checked: Checked,
        *,
        team: str | None = None,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> Pushed:
        """``push`` for a packet the pre-flight has checked (``preflight.accept``): a
        backend that validates in this process (the local store) does not do it twice."""
        return self.push(
            checked.data, team=team, lenient=lenient, allow_unredacted=allow_unredacted
        )

    def list(
        self, *, team: str | None = None, limit: int = 50, project: str | None = None
    ) -> list[dict[str, str]]:
        """Newest first: ``{"id", "created_at", "goal"}`` each, as the protocol lists them.

        With ``project``, only the packets whose ``project.name`` is exactly that.
        """
        return self.page(Filters(project=project), team=team, limit=limit).rows

    @abstractmethod
    def page(
        self,
        filters: Filters,
        *,
        team: str | None = None,
        limit: int = 50,
        page_token: str | None = None,
    ) -> Listing:
        """One page of a listing, filtered; ``Listing.next_page_token`` when more follow."""

    @abstractmethod
    def search(
        self, query: str, *, team: str | None = None, all_scopes: bool = False, limit: int = 20
    ) -> list[dict[str, Any]]:
        """Best first, each as ``GET /v1/search`` answers it (id, goal, field, snippet, ...)."""

    @abstractmethod
    def children(self, ref: str, *, team: str | None = None) -> list[dict[str, Any]]:
        """The readable packets that continue ``ref``, oldest first (id, created_at, goal)."""

    @abstractmethod
    def thread(self, ref: str, *, team: str | None = None) -> tuple[list[dict[str, Any]], bool]:
        """The work thread ending at ``ref``, root first (lineage rows + ``next_step``), and
        whether it is complete (False: earlier packets are gone or not visible)."""

    @abstractmethod
    def get(self, ref: str, *, team: str | None = None) -> bytes:
        """The stored bytes of one packet."""

    @abstractmethod
    def delete(self, ref: str, *, team: str | None = None) -> str:
        """Delete one packet; returns its full id."""

    @abstractmethod
    def walk(self, *, team: str | None = None) -> Iterator[Held]:
        """Every packet of one scope, newest first, a page at a time (constant memory)."""

    @abstractmethod
    def stored(self, packet_id: str) -> bytes | None:
        """The bytes of the packet with exactly this id if the caller can see it, else None."""

    def stored_many(self, packet_ids: Sequence[str]) -> dict[str, bytes | None]:
        """``stored`` for each id (``ltm import`` asks a batch at a time); a backend with a
        way to ask for many at once overrides it."""
        return {packet_id: self.stored(packet_id) for packet_id in packet_ids}

    def push_many(
        self,
        items: Sequence[tuple[Mapping[str, Any], str | None]],
        *,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> list[Pushed | CliError]:
        """``push`` for each (packet, team), in order; each one's answer or its ``CliError``
        (``IdTaken`` included), so one refusal never stops the rest. A backend with a way to
        push many at once overrides it."""
        done: list[Pushed | CliError] = []
        for data, team in items:
            try:
                done.append(
                    self.push(data, team=team, lenient=lenient, allow_unredacted=allow_unredacted)
                )
            except CliError as exc:
                done.append(exc)
        return done

    def team_names(self) -> list[str]:
        """The teams the caller belongs to (none on the local store)."""
        return []

    def holds_personally(self, packet: Mapping[str, Any]) -> bool:
        """Whether this packet (its id) is among the caller's personal packets here.

        What a push with ``-t TEAM`` does depends on it: the protocol moves the
        owner's personal packet into the team. The local store is all personal.
        """
        return self.stored(str(packet.get("id", ""))) is not None

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def whoami(self) -> dict[str, Any]:
        """Where this backend is and who it acts as (never a secret): ``{"backend", ...}``."""
        return {"backend": type(self).__name__, "label": self.label}

    def stored_by(self, packet_id: str) -> str | None:
        """The user id that stored ``packet_id``, as the backend's answer to ``get`` named
        it; None when it cannot say (a server that does not send ``X-Ltm-Created-By``)."""
        return None

    def is_me(self, user_id: str) -> bool | None:
        """Whether ``user_id`` is the caller (None: the backend cannot tell)."""
        return None


class LocalBackend(Backend):
    """The embedded SQLite store: one user, no server, no account."""

    # The store a long-lived process (the MCP server) keeps open between calls, with
    # what identifies it: (path, device, inode, process id).
    _kept: tuple[tuple[str, int, int, int], LocalBackend] | None = None

    def __init__(self, store: Store, user: User, path: str, *, kept: bool = False) -> None:
        self.store = store
        self.user = user
        self.path = path
        self.label = f"local store ({path})"
        self.kept = kept

    @classmethod
    def open(cls, *, keep: bool = False) -> LocalBackend:
        """The local store; ``keep``: the same one on every call in this process.

        A process that serves many calls keeps its store open: opening one costs a
        connection and the schema check, and closing the last connection to a WAL
        database checkpoints it (a second fsync, after the commit's). The store is
        opened again when its file is another (moved, deleted) or after a fork.
        """
        from ltm.cli.config import local_db_path, private_dir
        from ltm.store import User
        from ltm.store.sqlite import SqliteStore

        path = local_db_path()
        if keep and cls._kept is not None:
            key, backend = cls._kept
            if key == _file_key(path):
                return backend
            cls._kept = None
            if key[3] == os.getpid():
                backend.store.close()
        try:
            private_dir(path.parent)  # ltm's data folder: the owner's alone
            store = SqliteStore(path)
        except Exception as exc:  # sqlite3 errors, permissions, a newer schema
            raise CliError(f"cannot open the local store {path}: {exc}") from None
        backend = cls(store, User("local", "local", datetime.now(UTC)), str(path), kept=keep)
        if keep:
            found = _file_key(path)
            if found is not None:
                cls._kept = (found, backend)
        return backend

    @contextmanager
    def _service(self) -> Iterator[None]:
        from ltm.service.errors import ServiceError

        try:
            yield
        except ServiceError as exc:
            raise CliError(exc.message) from None

    def _no_teams(self, team: str | None) -> None:
        if team:
            raise no_team_here(team)

    def _resolve(self, ref: str) -> str:
        from ltm.service import packets

        if self.store.get_packet(ref) is not None:
            return ref
        return packets.resolve(self.store, self.user, ref)

    def push(
        self,
        data: Mapping[str, Any],
        *,
        team: str | None = None,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> Pushed:
        from ltm.service import packets
        from ltm.service.errors import Conflict

        self._no_teams(team)
        with self._service():
            # The pre-flight (with the user's rules) has judged it already; the
            # secret scan is the server's defense in depth, not this store's.
            try:
                result = packets.push(self.store, self.user, data, lenient=lenient, scan=False)
            except Conflict:  # a store shared with a server: the id is another user's
                raise IdTaken(f"packet id {data.get('id')} is taken in the {self.label}") from None
        return Pushed(result.id, result.created)

    def push_checked(
        self,
        checked: Checked,
        *,
        team: str | None = None,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> Pushed:
        from ltm.service import packets
        from ltm.service.errors import Conflict

        self._no_teams(team)
        with self._service():
            try:  # no scan here either: see push
                result = packets.push(self.store, self.user, checked, lenient=lenient, scan=False)
            except Conflict:
                raise IdTaken(
                    f"packet id {checked.data.get('id')} is taken in the {self.label}"
                ) from None
        return Pushed(result.id, result.created)

    def push_many(
        self,
        items: Sequence[tuple[Mapping[str, Any] | Checked, str | None]],
        *,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> list[Pushed | CliError]:
        """Personal pushes in one transaction and one durable commit (``ltm import``); one
        outcome per packet, in order: a ``Pushed``, an ``IdTaken`` or another ``CliError``
        (that packet alone is refused). A ``Checked`` packet is stored as judged."""
        from ltm.service import packets as service
        from ltm.service.errors import Conflict

        for _, team in items:
            self._no_teams(team)
        packets = [data for data, _ in items]
        with self._service():
            outcomes = service.push_many(self.store, self.user, packets, lenient=lenient)
        results: list[Pushed | CliError] = []
        for data, outcome in zip(packets, outcomes, strict=True):
            if isinstance(outcome, Conflict):
                packet_id = (data.data if hasattr(data, "data") else data).get("id")
                results.append(IdTaken(f"packet id {packet_id} is taken in the {self.label}"))
            elif isinstance(outcome, Exception):
                results.append(CliError(outcome.message))
            else:
                results.append(Pushed(outcome.id, outcome.created))
        return results

    def page(
        self,
        filters: Filters,
        *,
        team: str | None = None,
        limit: int = 50,
        page_token: str | None = None,
    ) -> Listing:
        from ltm.service import packets

        self._no_teams(team)
        with self._service():
            found = packets.page(
                self.store, self.user, limit=limit, page_token=page_token, **filters.query()
            )
        rows = [{"id": m.id, "created_at": m.created_at, "goal": m.goal} for m in found.items]
        return Listing(rows, found.cursor)

    def search(
        self, query: str, *, team: str | None = None, all_scopes: bool = False, limit: int = 20
    ) -> list[dict[str, Any]]:
        from ltm.service import search

        self._no_teams(team)
        with self._service():
            found = search.search(self.store, self.user, query, limit=limit)
        return [
            {
                **meta_row(hit.meta),
                "team": hit.team,
                "score": hit.score,
                "field": hit.field,
                "snippet": hit.snippet,
                "highlights": [list(span) for span in hit.highlights],
            }
            for hit in found
        ]

    def children(self, ref: str, *, team: str | None = None) -> list[dict[str, Any]]:
        from ltm.service import packets

        self._no_teams(team)
        with self._service():
            return [
                meta_row(m) for m in packets.children(self.store, self.user, self._resolve(ref))
            ]

    def thread(self, ref: str, *, team: str | None = None) -> tuple[list[dict[str, Any]], bool]:
        from ltm.search import next_step_of
        from ltm.service import packets

        self._no_teams(team)
        with self._service():
            found = packets.thread(self.store, self.user, self._resolve(ref))
        rows = [{**meta_row(p.meta), "next_step": next_step_of(p.body)} for p in found.packets]
        return rows, found.complete

    def walk(self, *, team: str | None = None) -> Iterator[Held]:
        from ltm.service import packets

        self._no_teams(team)
        cursor: str | None = None
        while True:
            with self._service():
                page = packets.page(self.store, self.user, limit=WALK_PAGE, page_token=cursor)
            for meta in page.items:
                found = self.store.get_packet(meta.id)
                if found is not None:  # deleted since the page was read: nothing to export
                    yield Held(found.body, None, meta.owner_id, meta.created_at, found.conforming)
            if page.cursor is None:
                return
            cursor = page.cursor

    def stored(self, packet_id: str) -> bytes | None:
        from ltm.service import packets
        from ltm.service.errors import NotFound

        # The caller's own personal packet, read straight (an import asks once a line);
        # anything else takes the service's rules (a store shared with a server).
        found = self.store.get_packet(packet_id)
        if found is None:
            return None
        if found.meta.team_id is None and found.meta.owner_id == self.user.id:
            return found.body
        try:
            return packets.get(self.store, self.user, packet_id).body
        except NotFound:
            return None

    def get(self, ref: str, *, team: str | None = None) -> bytes:
        from ltm.service import packets

        check_ref(ref)
        self._no_teams(team)
        with self._service():
            return packets.get(self.store, self.user, self._resolve(ref)).body

    def delete(self, ref: str, *, team: str | None = None) -> str:
        from ltm.service import packets

        check_ref(ref)
        self._no_teams(team)
        with self._service():
            packet_id = self._resolve(ref)
            packets.delete(self.store, self.user, packet_id)
        return packet_id

    def close(self) -> None:
        if not self.kept:  # a kept store stays open for the process's next call
            self.store.close()

    def whoami(self) -> dict[str, Any]:
        return {"backend": "local", "store": self.path}

    def stored_by(self, packet_id: str) -> str | None:
        return self.user.id  # one user: every packet here is theirs

    def is_me(self, user_id: str) -> bool | None:
        return user_id == self.user.id


def _file_key(path: Any) -> tuple[str, int, int, int] | None:
    """What tells one store file from another here: path, device, inode, process id."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (str(path), info.st_dev, info.st_ino, os.getpid())


def no_team_here(team: str) -> CliError:
    """The local store has no teams: say where teams are, and how to reach one."""
    from ltm.cli.client.credentials import load

    hosts = sorted(load().hosts)
    if hosts:
        return CliError(
            f"teams live on a server, and no team {team} of yours is on the ones you are signed"
            f" in to ({', '.join(hosts)}); your default, the local store, has no teams — your"
            " teams: ltm teams ls"
        )
    return CliError(
        "teams live on a server, and you are signed in to none (the local store has no teams)"
        " — sign in: ltm auth HOST, or accept an invite: ltm join URL"
    )


def needs_server(what: str) -> CliError:
    """``what`` needs a server and the default is the local store: name the servers there are."""
    from ltm.cli.client.credentials import load

    hosts = sorted(load().hosts)
    if hosts:
        also = f" (also: {', '.join(hosts[1:])})" if hosts[1:] else ""
        return CliError(
            f"{what} needs a server and your default is the local store; name one you are"
            f" signed in to with -H: ltm -H {hosts[0]} …{also}"
        )
    return CliError(
        f"{what} needs a server and you are signed in to none — sign in: ltm auth HOST,"
        " or accept an invite: ltm join URL"
    )


def open_backend(
    *,
    local: bool = False,
    timeout: float | None = None,
    team: str | None = None,
    keep: bool = False,
) -> Backend:
    """The server signed in to (``ltm auth``), else the local store; ``local`` forces the latter.

    ``team``: the verb's ``-t TEAM``, which picks the server the user belongs to
    that team on (``credentials.active``); when the files know no such team and the
    default is the local store, the servers signed in to are asked.
    ``timeout`` (seconds) overrides the configured network timeout (hooks keep it short).
    ``keep``: a long-lived process keeps the local store open (``LocalBackend.open``).
    """
    if not local:
        from ltm.cli.client.credentials import active

        target = active(team)
        if target is None and team:
            from ltm.cli.client.remote import find_team

            target = find_team(team, timeout=timeout)
        if target is not None:
            from ltm.cli.client.remote import RemoteBackend

            return RemoteBackend.open(target, timeout=timeout)
    return LocalBackend.open(keep=keep)
