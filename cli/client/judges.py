"""Judging a bundle's packets in other processes while this one writes (``ltm import``).

The pre-flight of a packet (schema, id, the redaction scan) is pure CPU, and its
verdict depends on nothing but the packet and the user's own rules. So a large
import hands each run of packets to worker processes, one per core, and stores
(or sends) the verdicts of one run while the next is judged: the writer no
longer waits for the scan, and the scan gets every core. The verdicts are the
very ones the importer would reach alone (``preflight.judge``, same rules), and
the importer still decides, reports and writes in the bundle's order.

What else a packet needs before its write, and that needs no store, is done in
the worker too (``Backend.readying``): for the local store its encoding, identity,
search text and packed body; for a server its JSON as the batch request carries
it. What comes back is that and the verdict's parts (``Judged``), not the tree of
the packet, so the writer is left the decisions, the report and the SQL.

Small bundles, and machines with one core, are judged in this process:
starting workers costs more than they save there. A worker that fails (killed,
out of memory) costs nothing but time: its packets are judged here instead, so
the outcome, errors included, is what judging here gives.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from ltm.bundle import BundleError, Entry
    from ltm.packet import Checked
    from ltm.redact import Hit, Rule

# What makes a checked packet ready for the backend's push (``Backend.readying``).
Ready = Callable[["Checked"], Any]
# What a worker judges: a packet and whether it is plain (``bundle.Entry.plain``), or a
# bundle line, decoded by the worker (``judge_item``).
Item = tuple[Mapping[str, Any], bool] | bytes

# How many more container objects may be alive than at the last collection before
# Python's cyclic garbage collector runs again, during an import (its default: 700). An
# import holds thousands alive at any moment (the chunks in flight, each packet's
# verdict and rows), and every collection walked them again, and now and then the whole
# heap (the commit that made this change gives the counts). Its packets make no
# reference cycles to collect, so a collection is rare; what was alive before the
# import starts (modules, compiled rules) is left out of them for good (``gc.freeze``:
# a forked worker's collections then leave the pages it shares with the importer
# alone, https://docs.python.org/3/library/gc.html#gc.freeze).
GC_THRESHOLD = 50_000


@contextlib.contextmanager
def rare_collections() -> Iterator[None]:
    """While an import runs: the collector as ``GC_THRESHOLD`` says; as it was after."""
    import gc

    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


# A bundle smaller than this is judged in this process (about 350 packets of 3 KB,
# a quarter of a second of judging): starting the workers costs tens of milliseconds.
MIN_BYTES = 1 << 20
MAX_WORKERS = 4

_scan = True
_rules: list[Rule] = []
_ready: Ready | None = None


class Judged(NamedTuple):
    """A packet's verdict (``preflight.Verdict``), as the importer acts on it: small to
    send from a worker (no tree of the packet), and the packet made ready to push."""

    errors: list[str]  # the schema's
    id_error: str | None
    hits: list[Hit]
    # What the backend's push takes: the packet made ready (``Backend.readying``), else
    # the ``Checked``; None: not a packet at all.
    ready: Any
    # For a bundle line judged from its bytes (``judge_item``): the line as read, its
    # packet left out (the verdict and ``ready`` carry what the importer needs of it).
    entry: Entry | None = None

    def refusals(self, *, lenient: bool) -> list[str]:
        from ltm.preflight import refusals

        return refusals(self.errors, self.id_error, packet=self.ready is not None, lenient=lenient)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Judges:
    """A pool of worker processes that judge packets; ``judge`` returns the verdicts later."""

    def __init__(
        self,
        pool: ProcessPoolExecutor,
        workers: int,
        *,
        scan: bool,
        rules: list[Rule],
        ready: Ready | None = None,
    ) -> None:
        self.pool = pool
        self.workers = workers
        self.scan = scan
        self.rules = rules
        self.ready = ready

    @classmethod
    def start(
        cls, *, size: int | None, scan: bool, rules: list[Rule], ready: Ready | None = None
    ) -> Judges | None:
        """Workers for a bundle of ``size`` bytes, or None where judging here is faster."""
        workers = min(cores(), MAX_WORKERS)
        if workers < 2 or size is None or size < MIN_BYTES:
            return None
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # fork where the platform has it: the workers start with everything already
        # imported, and with the importer's own rules (a fork passes them as they are).
        # Elsewhere, spawn: each worker reads the rules again from the same settings
        # (no compiled pattern is pickled).
        methods = multiprocessing.get_all_start_methods()
        method = "fork" if "fork" in methods and sys.platform != "darwin" else "spawn"
        try:
            pool = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context(method),
                initializer=_start,
                initargs=(scan, rules if method == "fork" else None, ready),
            )
            # The workers start now (the pool starts them all on its first call), and get
            # ready (``_start``) while this process looks up and sends the first lines.
            pool.submit(_started)
        except (OSError, ImportError):  # no semaphores here (a container without /dev/shm)
            return None  # judged in this process, as a small bundle is
        return cls(pool, workers, scan=scan, rules=rules, ready=ready)

    def judge(self, packets: Sequence[Item]) -> Callable[[], list[Judged | BundleError]]:
        """Start judging ``packets`` (``Item``s, split among the workers); call the result
        to wait."""
        parts = _split(list(packets), self.workers)
        futures: list[Future[list[Judged | BundleError]] | None] = []
        for part in parts:
            try:
                futures.append(self.pool.submit(_judge_all, part))
            except Exception:  # the pool is broken (a worker died): this part is judged here
                futures.append(None)

        def verdicts() -> list[Judged | BundleError]:
            out: list[Judged | BundleError] = []
            for part, future in zip(parts, futures, strict=True):
                out.extend(self._outcome(part, future))
            return out

        return verdicts

    def _outcome(
        self, part: list[Item], future: Future[list[Judged | BundleError]] | None
    ) -> list[Judged | BundleError]:
        if future is not None:
            try:
                return future.result()
            except Exception:  # the worker's failure, whatever it was: judge here
                pass
        return [
            judge_item(item, scan=self.scan, rules=self.rules, ready=self.ready) for item in part
        ]

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def judge_here(
    packet: Mapping[str, Any],
    *,
    scan: bool,
    rules: list[Rule],
    ready: Ready | None = None,
    plain: bool = False,
) -> Judged:
    """One packet's verdict, as the importer reaches it in this process or in a worker.

    A packet that may be pushed (no hits, no bad id) is made ready with ``ready``
    here; one that ``ready`` refuses (an id the store cannot take) stays a
    ``Checked``, whose push then gives the very same refusal. Without ``ready``,
    its canonical bytes are encoded here (a backend that stores checked packets
    needs them).
    """
    from ltm.cli.client import preflight
    from ltm.service.errors import ServiceError

    verdict = preflight.judge(packet, scan=scan, rules=rules, plain=plain)
    checked = verdict.checked
    made: Any = checked
    if checked is not None and not verdict.hits and verdict.id_error is None:
        try:
            made = ready(checked) if ready is not None else checked
        except ServiceError:
            made = checked
        if made is checked:
            checked.body()  # the canonical bytes too, while in the worker
    return Judged(verdict.errors, verdict.id_error, verdict.hits, made)


def judge_item(
    item: Item, *, scan: bool, rules: list[Rule], ready: Ready | None = None
) -> Judged | BundleError:
    """``judge_here`` of a packet (with whether it is plain), or of the packet of a bundle
    line, which is decoded here: the line's ``BundleError`` if it cannot be read, else
    the verdict with the line as read (``Judged.entry``)."""
    if not isinstance(item, bytes):
        packet, plain = item
        return judge_here(packet, scan=scan, rules=rules, ready=ready, plain=plain)
    from dataclasses import replace

    from ltm import bundle

    entry = read_line(item)
    if isinstance(entry, bundle.BundleError):
        return entry
    judged = judge_here(entry.packet, scan=scan, rules=rules, ready=ready, plain=entry.plain)
    return judged._replace(entry=replace(entry, packet={}))


def read_line(line: bytes) -> Entry | BundleError:
    """A bundle line's entry, or its ``BundleError`` (what the importer reports for it)."""
    from ltm import bundle

    try:
        return bundle.read_entry(line)
    except bundle.BundleError as exc:
        return exc


def _split(items: list[Any], parts: int) -> list[list[Any]]:
    size = -(-len(items) // parts) if items else 1
    return [items[i : i + size] for i in range(0, len(items), size)]


def _start(scan: bool, rules: list[Rule] | None, ready: Ready | None = None) -> None:
    """In a worker, as it starts: the user's rules (``rules``, else read again), and the
    built-in ones compiled. Each worker compiles its own, all at once: the importer judges
    nothing itself, so it has none compiled to hand down."""
    global _scan, _rules, _ready
    from ltm.cli.client import preflight

    _orphaned_exit(os.getppid())

    _scan = scan
    _ready = ready
    if rules is None:
        rules = preflight.user_rules() if scan else []
    _rules = rules
    if scan:
        from ltm import redact

        redact.ready_for_many()
    import gc

    gc.freeze()  # a spawned worker has imported what it needs by now (see GC_THRESHOLD)
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])


def _started() -> None:
    """What the pool runs first, to start its workers."""


def _orphaned_exit(parent: int) -> None:
    """End this worker as soon as the import that started it is gone (even by kill -9).

    The workers hold each other's ends of the pool's pipes, so none of them would
    read an end of file and stop on its own, and each holds the import's stdout,
    so whoever reads it would wait for ever.
    """
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.1)
        os._exit(1)

    threading.Thread(target=watch, name="ltm-import-parent", daemon=True).start()


def _judge_all(items: list[Item]) -> list[Judged | BundleError]:
    return [judge_item(item, scan=_scan, rules=_rules, ready=_ready) for item in items]
