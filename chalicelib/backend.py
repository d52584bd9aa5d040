"""Where packets live, behind one interface: the client side of every door.

The CLI verbs, the stdio MCP shim and the remote ``/mcp`` talk to a ``Backend``
and never care what is behind it: the CLI's embedded store, a server over HTTP
(``ltm.cli.client.remote``), or a store reached through the service layer as
the caller of a request (``ServiceBackend``, what ``/mcp`` uses on the server).
Failures are ``Failure``s whose message says what to do next.
"""

from __future__ import annotations

import builtins  # list: a method's name in Backend, the type in its annotations
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import Failure
from .store import User

if TYPE_CHECKING:
    from .packet import Checked
    from .service.access import Credential
    from .store import Store


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
    from .ids import id_problem

    problem = id_problem(ref, prefix=True)
    if problem is not None:
        raise Failure(problem, exit_code=2)


def check_query(query: str) -> None:
    """Refuse a search query that cannot run, in the client's words (a server says the
    same as ``q: ...``, the name of its HTTP parameter), before it goes anywhere."""
    from .search import QueryError, parse

    try:
        parse(query)
    except QueryError as exc:
        message = str(exc)
        if not query.strip(' "'):
            message += ": give words to look for, e.g. 'flaky login'"
        raise Failure(message, exit_code=2) from None


class Held(NamedTuple):
    """One stored packet with what a bundle line says about it (``ltm export``)."""

    body: bytes  # the canonical bytes as stored
    team: str | None  # the team's name, None for personal scope
    created_by: str  # the user id that stored it
    created_at: str
    conforming: bool = True


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


def parent_problem(backend: Backend, data: Mapping[str, Any], where: str) -> str | None:
    """What is wrong with the packet's ``parent_id`` (a line starting ``parent_id ID``),
    else None: it names no packet the caller can read in ``backend``, ``where`` (its thread
    would break there), or the packet itself (found once stored, a thread looping on itself;
    the schema's threads are a DAG). ``save`` refuses such a packet, through every door
    (the CLI, the MCP tools)."""
    from .preflight import own_parent

    parent = data.get("parent_id")
    if not isinstance(parent, str) or not parent:
        return None
    looping = own_parent(data)
    if looping is not None:
        return looping
    if backend.stored(parent) is not None:
        return None
    return f"parent_id {parent} names no packet you can read in {where}"


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
        backend that validates in this process (a store) does not do it twice."""
        return self.push(
            checked.data, team=team, lenient=lenient, allow_unredacted=allow_unredacted
        )

    def push_many(
        self,
        items: Sequence[tuple[Mapping[str, Any] | Checked, str | None]],
        *,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> list[Pushed | Failure]:
        """``push`` for each (packet, team), in order; each one's answer or its ``Failure``
        (``IdTaken`` included), so one refusal never stops the rest. A backend with a way to
        push many at once overrides it."""
        done: list[Pushed | Failure] = []
        for data, team in items:
            packet = data.data if hasattr(data, "data") else data
            try:
                done.append(
                    self.push(packet, team=team, lenient=lenient, allow_unredacted=allow_unredacted)
                )
            except Failure as exc:
                done.append(exc)
        return done

    def readying(self) -> Callable[[Checked], Any] | None:
        """What makes a checked packet ready for this backend's ``push_many`` ahead of it,
        in another process (``ltm import``'s workers): a function that can be pickled,
        whose answer ``push_many`` takes in place of the ``Checked``. None: nothing to do
        ahead; ``push_many`` takes the ``Checked`` itself."""
        return None

    def stored_many(self, packet_ids: Sequence[str]) -> dict[str, bytes | None]:
        """``stored`` for each id (``ltm import`` asks a batch at a time); a backend with a
        way to ask for many at once overrides it."""
        return {packet_id: self.stored(packet_id) for packet_id in packet_ids}

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
        self,
        query: str,
        *,
        team: str | None = None,
        all_scopes: bool = False,
        limit: int = 20,
        mode: str | None = None,
        private: bool = False,
    ) -> builtins.list[dict[str, Any]]:
        """Best first, each as ``/v1/search`` answers it (id, goal, field, snippet, ...).
        ``mode``: ``service.search``'s. ``private``: words never to put in a URL (a
        prompt's): a server asked in the query string gets them without what a secret
        check flags."""

    def fill_vectors(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Compute the vectors a search by meaning needs that this store lacks (a store
        saved to before the ``semantic`` extra); how many. A server fills its own."""
        return 0

    def fail(self, message: str) -> Failure:
        """The failure to raise with ``message`` (the CLI's are ``CliError``)."""
        return Failure(message)

    # A server over HTTP decides for itself whether it searches by meaning.
    meaning_decided_elsewhere = False

    def find(
        self,
        query: str,
        *,
        team: str | None = None,
        all_scopes: bool = False,
        limit: int = 20,
        mode: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """A search as people and agents ask for one (``ltm search``, the MCP ``search``
        tool): by words and meaning (``hybrid``) where meaning is available, by the words
        alone where it is not. ``mode`` insists on one: meaning asked for where the
        ``semantic`` extra is missing fails, naming it. A local store first computes the
        vectors it lacks (once, reported to ``progress``); a server without the extra is
        asked again for the words alone, as it always answered."""
        from . import semantic

        local = not self.meaning_decided_elsewhere
        wanted = mode or ("hybrid" if not local or semantic.enabled() else "lexical")
        try:
            if wanted != "lexical" and local:
                if off := semantic.why_off():
                    raise self.fail(off)
                try:
                    self.fill_vectors(progress)
                except semantic.Unavailable as exc:  # installed, but its files cannot be read
                    raise self.fail(str(exc)) from None
            return self.search(query, team=team, all_scopes=all_scopes, limit=limit, mode=wanted)
        except Failure as exc:
            if mode is not None or semantic.EXTRA not in exc.message:
                raise
        return self.search(query, team=team, all_scopes=all_scopes, limit=limit)

    @abstractmethod
    def children(self, ref: str, *, team: str | None = None) -> builtins.list[dict[str, Any]]:
        """The readable packets that continue ``ref``, oldest first (id, created_at, goal)."""

    @abstractmethod
    def thread(
        self, ref: str, *, team: str | None = None
    ) -> tuple[builtins.list[dict[str, Any]], bool]:
        """The work thread ending at ``ref``, root first (lineage rows + ``next_step``), and
        whether it is complete (False: it stops before its root, as
        ``service.packets.thread`` says)."""

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

    def team_names(self) -> builtins.list[str]:
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

    def identify(self) -> dict[str, Any] | None:
        """Who the server says the token belongs to (``GET /v1/whoami``'s answer); None
        where there is no server to ask (the local store) or it will not say."""
        return None

    def stored_by(self, packet_id: str) -> str | None:
        """The user id that stored ``packet_id``, as the backend's answer to ``get`` named
        it; None when it cannot say (a server that does not send ``X-Ltm-Created-By``)."""
        return None

    def is_me(self, user_id: str) -> bool | None:
        """Whether ``user_id`` is the caller (None: the backend cannot tell)."""
        return None

    def authors(self, packet_ids: Sequence[str]) -> dict[str, str]:
        """Who stored each of ``packet_ids`` (user ids); {} where the backend cannot say."""
        return {}

    def members(self, team: str) -> builtins.list[dict[str, Any]]:
        """A team's members (``user_id``, ``display``, ``role``); none where teams are not."""
        return []

    def published(self, packet_id: str) -> tuple[str, str] | None:
        """(published at, public URL) of a packet read here; None where nothing is published."""
        return None

    def copied_from(self, packet_id: str) -> dict[str, str] | None:
        """Who wrote this copy of another's packet (``{"id", "name", "host"}``); None for the
        caller's own, and wherever copies are not kept apart (only the local store keeps them)."""
        return None

    def copies(self, packet_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """Those of ``packet_ids`` that are copies of another's packet (``copied_from``)."""
        return {}


class ServiceBackend(Backend):
    """A store reached through the service layer, as one caller: the rules of the server.

    The caller is a trusted ``User`` (the CLI's embedded store) or a ``Credential``
    (the bearer token of a request to the server's ``/mcp``, checked at every call, so
    a revoked token stops working at once). Failures are ``Failure``s carrying the
    service's message.
    """

    def __init__(self, store: Store, caller: User | Credential, label: str) -> None:
        self.store = store
        self.caller = caller
        self.label = label
        self._authors: dict[str, str] = {}

    scan = True  # the server's secret scan, its defense in depth behind the pre-flight

    @contextmanager
    def _service(self) -> Iterator[None]:
        from .service.errors import ServiceError

        try:
            yield
        except ServiceError as exc:
            raise self.fail(exc.message) from None

    def _no_teams(self, team: str | None) -> None:
        """A hook for stores without teams (the CLI's embedded one refuses ``team``)."""

    def _resolve(self, ref: str, team: str | None = None) -> str:
        from .service import packets

        if self.store.get_packet(ref) is not None:
            return ref
        return packets.resolve(self.store, self.caller, ref, team=team)

    def _id_taken(self, data: Mapping[str, Any]) -> Failure:
        return self.fail(f"packet id {_id_of(data)} is taken in {self.label}")

    def push(
        self,
        data: Mapping[str, Any],
        *,
        team: str | None = None,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> Pushed:
        from .service import packets
        from .service.errors import Conflict

        self._no_teams(team)
        with self._service():
            # The pre-flight has judged it already; ``scan`` adds the server's own secret
            # scan, its defense in depth (off for the CLI's embedded store).
            try:
                result = packets.push(
                    self.store, self.caller, data, team=team, lenient=lenient, scan=self.scan
                )
            except Conflict:  # the id is another user's, or in another scope
                raise self._id_taken(data) from None
        return Pushed(result.id, result.created)

    def push_checked(
        self,
        checked: Checked,
        *,
        team: str | None = None,
        lenient: bool = False,
        allow_unredacted: bool = False,
    ) -> Pushed:
        return self.push(checked, team=team, lenient=lenient)  # type: ignore[arg-type]

    def page(
        self,
        filters: Filters,
        *,
        team: str | None = None,
        limit: int = 50,
        page_token: str | None = None,
    ) -> Listing:
        from .service import packets

        self._no_teams(team)
        with self._service():
            found = packets.page(
                self.store,
                self.caller,
                team=team,
                limit=limit,
                page_token=page_token,
                project=filters.project,
                tag=filters.tag,
                since=filters.since,
                until=filters.until,
                author=filters.author,
            )
        rows = [{"id": m.id, "created_at": m.created_at, "goal": m.goal} for m in found.items]
        return Listing(rows, found.cursor)

    def fill_vectors(self, progress: Callable[[int, int], None] | None = None) -> int:
        from . import semantic

        if not semantic.enabled() or not self.store.vectors_missing():
            return 0
        return self.store.fill_vectors(progress)

    def search(
        self,
        query: str,
        *,
        team: str | None = None,
        all_scopes: bool = False,
        limit: int = 20,
        mode: str | None = None,
        private: bool = False,
    ) -> list[dict[str, Any]]:
        from .service import search

        self._no_teams(team)
        with self._service():
            found = search.search(
                self.store,
                self.caller,
                query,
                team=team,
                all_scopes=all_scopes,
                limit=limit,
                mode=mode,
            )
        return [{**meta_row(hit.meta), **hit.where(), "score": hit.score} for hit in found]

    def children(self, ref: str, *, team: str | None = None) -> list[dict[str, Any]]:
        from .service import packets

        self._no_teams(team)
        with self._service():
            return [
                meta_row(m)
                for m in packets.children(self.store, self.caller, self._resolve(ref, team))
            ]

    def thread(self, ref: str, *, team: str | None = None) -> tuple[list[dict[str, Any]], bool]:
        from .search import next_step_of
        from .service import packets

        self._no_teams(team)
        with self._service():
            found = packets.thread(self.store, self.caller, self._resolve(ref, team))
        rows = [{**meta_row(p.meta), "next_step": next_step_of(p.body)} for p in found.packets]
        return rows, found.complete

    def walk(self, *, team: str | None = None) -> Iterator[Held]:
        from .service import packets

        self._no_teams(team)
        cursor: str | None = None
        while True:
            with self._service():
                page = packets.page(
                    self.store, self.caller, team=team, limit=WALK_PAGE, page_token=cursor
                )
            for meta in page.items:
                found = self.store.get_packet(meta.id)
                if found is not None:  # deleted since the page was read: nothing to export
                    held = Held(found.body, team, meta.owner_id, meta.created_at, found.conforming)
                    yield held
            if page.cursor is None:
                return
            cursor = page.cursor

    def stored(self, packet_id: str) -> bytes | None:
        from .service import packets
        from .service.errors import NotFound

        try:
            return packets.get(self.store, self.caller, packet_id).body
        except NotFound:
            return None

    def stored_many(self, packet_ids: Sequence[str]) -> dict[str, bytes | None]:
        """``stored`` for each id, a batch of reads at a time (``packets.get_many``)."""
        from .service import packets

        found: dict[str, bytes | None] = {}
        wanted = list(dict.fromkeys(packet_ids))
        for start in range(0, len(wanted), packets.MAX_BATCH):
            chunk = wanted[start : start + packets.MAX_BATCH]
            with self._service():
                held = packets.get_many(self.store, self.caller, chunk)
            found.update(
                (packet_id, one.body if one is not None else None)
                for packet_id, one in zip(chunk, held, strict=True)
            )
        return found

    def get(self, ref: str, *, team: str | None = None) -> bytes:
        from .service import packets

        check_ref(ref)
        self._no_teams(team)
        with self._service():
            found = packets.get(self.store, self.caller, self._resolve(ref, team))
        self._authors[found.meta.id] = found.meta.owner_id
        return found.body

    def delete(self, ref: str, *, team: str | None = None) -> str:
        from .service import packets

        check_ref(ref)
        self._no_teams(team)
        with self._service():
            packet_id = self._resolve(ref, team)
            packets.delete(self.store, self.caller, packet_id)
        return packet_id

    def user(self) -> User:
        """The caller's user (a token is checked again: it may have been revoked)."""
        from .service.access import user_of

        if isinstance(self.caller, User):
            return self.caller
        with self._service():
            return user_of(self.store, self.caller, need="read")

    def whoami(self) -> dict[str, Any]:
        user = self.user()
        return {"backend": "server", "user": {"id": user.id, "display": user.display}}

    def stored_by(self, packet_id: str) -> str | None:
        return self._authors.get(packet_id)

    def is_me(self, user_id: str) -> bool | None:
        return user_id == self.user().id

    def members(self, team: str) -> list[dict[str, Any]]:
        """A team's members, as the API lists them (``user_id``, ``display``, ``role``)."""
        from .service import teams

        with self._service():
            found = teams.members(self.store, self.caller, team)
        return [{"user_id": m.user_id, "display": m.display, "role": m.role} for m in found]

    def team_names(self) -> list[str]:
        from .service import teams

        with self._service():
            return [t.name for t in teams.list_(self.store, self.caller)]


def _id_of(data: Any) -> object:
    """The id of a packet given as a mapping, a ``Checked`` (its ``data``) or a packet
    made ready (``packets.Prepared``)."""
    from .service.packets import Prepared  # only a refused push asks

    if isinstance(data, Prepared):
        return data.packet.meta.id
    return (data.data if hasattr(data, "data") else data).get("id")
