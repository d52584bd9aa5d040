"""Clients named by the URL of their metadata document (Client ID Metadata Documents): the
fetch an anonymous request makes this server do, and how it is held (one deadline, bounded
concurrency, failures remembered, the vetted address connected to, public addresses only)."""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest
from test_remote_mcp import pkce
from timing import scaled

pytest.importorskip("mcp.server.auth")

TRICKLE_GAP = 1.0  # seconds between two bytes of the hostile server


@pytest.fixture(autouse=True)
def fresh_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no remembered failure and nothing running."""
    from ltm.mcp import cimd

    monkeypatch.setattr(cimd, "_failed", {})
    monkeypatch.setattr(cimd, "_by_address", {})
    monkeypatch.setattr(cimd, "_running", 0)


@pytest.fixture
def metadata_site(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """An https site on loopback (a self-signed certificate the test trusts) that serves
    client metadata documents: ``site["docs"][path] = document``."""
    import datetime
    import ipaddress
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "site.pem", tmp_path / "site.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    site: dict[str, Any] = {"docs": {}, "hits": 0, "cert": str(cert_file), "trickle": set()}

    class Docs(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site["hits"] += 1
            doc = site["docs"].get(self.path)
            body = json.dumps(doc).encode() if doc is not None else b"{}"
            self.send_response(200 if doc is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.path not in site["trickle"]:
                self.wfile.write(body)
                return
            # A hostile document server: one byte at a time, each well inside any
            # per-read timeout, for far longer than the whole fetch may take.
            for byte in body:
                try:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(TRICKLE_GAP)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Docs)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    site["base"] = f"https://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


def test_a_client_named_by_its_metadata_document(
    metadata_site: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ltm.mcp.oauth import StoreProvider
    from ltm.store.sqlite import SqliteStore

    monkeypatch.setenv("SSL_CERT_FILE", metadata_site["cert"])  # trust the test site only
    url = metadata_site["base"] + "/oauth/client.json"
    metadata_site["docs"]["/oauth/client.json"] = {
        "client_id": url,
        "client_name": "A client with a URL for an id",
        "redirect_uris": ["http://127.0.0.1/callback"],
        "token_endpoint_auth_method": "none",
    }
    store = SqliteStore(tmp_path / "s.db")
    try:
        here = StoreProvider(
            store,
            issuer="http://127.0.0.1:9",
            resource="http://127.0.0.1:9/mcp",
            consent_url="x",
            fetch_loopback=True,  # a server listening on loopback itself
        )
        client = anyio.run(here.get_client, url)
        assert client is not None and client.client_name == "A client with a URL for an id"
        assert client.scope == "read write" and client.token_endpoint_auth_method == "none"
        # Loopback redirect URIs on any port, as for registered clients.
        assert client.validate_redirect_uri("http://127.0.0.1:50123/callback")  # type: ignore[arg-type]
        hits = metadata_site["hits"]
        assert anyio.run(here.get_client, url) is not None and metadata_site["hits"] == hits
        # A document that names another id is no client; neither is plain http.
        other = metadata_site["base"] + "/oauth/other.json"
        metadata_site["docs"]["/oauth/other.json"] = {
            "client_id": "https://elsewhere.example/c.json",
            "redirect_uris": ["http://127.0.0.1/callback"],
        }
        assert anyio.run(here.get_client, other) is None
        assert anyio.run(here.get_client, url.replace("https://", "http://")) is None
        # A public server never fetches from loopback or a private network: refused
        # before any connection is made.
        public = StoreProvider(
            store,
            issuer="https://ltm.example.org",
            resource="https://ltm.example.org/mcp",
            consent_url="x",
        )
        fresh = metadata_site["base"] + "/oauth/fresh.json"
        metadata_site["docs"]["/oauth/fresh.json"] = {
            **metadata_site["docs"]["/oauth/client.json"],
            "client_id": fresh,
        }
        hits = metadata_site["hits"]
        assert anyio.run(public.get_client, fresh) is None and metadata_site["hits"] == hits
        assert anyio.run(public.get_client, "https://10.1.2.3/client.json") is None
    finally:
        store.close()


def document(site: dict[str, Any], path: str) -> str:
    url = site["base"] + path
    site["docs"][path] = {
        "client_id": url,
        "client_name": "a client",
        "redirect_uris": ["http://127.0.0.1/callback"],
        "token_endpoint_auth_method": "none",
    }
    return url


def test_a_trickling_document_server_gets_one_deadline_for_the_whole_fetch(
    metadata_site: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One byte a second never lets a per-read timeout fire: only a deadline on the whole
    fetch (connect, TLS, headers, body) ends it."""
    from ltm.mcp import cimd, oauth

    monkeypatch.setenv("SSL_CERT_FILE", metadata_site["cert"])
    url = document(metadata_site, "/slow.json")
    metadata_site["trickle"].add("/slow.json")
    started = time.monotonic()
    assert oauth.client_metadata(url, allow_loopback=True) is None
    took = time.monotonic() - started
    assert cimd.DEADLINE - 0.5 <= took <= cimd.DEADLINE + scaled(2)
    # Remembered as failed: asked again at once, nothing is fetched.
    hits = metadata_site["hits"]
    again = time.monotonic()
    assert oauth.client_metadata(url, allow_loopback=True) is None
    assert metadata_site["hits"] == hits and time.monotonic() - again < scaled(1)


def test_fetches_at_once_are_bounded_per_address_and_per_process(
    metadata_site: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ltm.mcp import cimd, oauth

    monkeypatch.setenv("SSL_CERT_FILE", metadata_site["cert"])
    slow = [document(metadata_site, f"/slow{n}.json") for n in range(8)]
    metadata_site["trickle"].update(f"/slow{n}.json" for n in range(8))
    quick = document(metadata_site, "/quick.json")
    threads = [
        threading.Thread(
            target=oauth.client_metadata,
            args=(url,),
            kwargs={"allow_loopback": True, "client_address": "203.0.113.7"},
        )
        for url in slow
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    # One address holds at most PER_ADDRESS fetches: its others were refused at once.
    assert metadata_site["hits"] == cimd.PER_ADDRESS
    # Another address is served while they trickle, up to the process bound.
    assert oauth.client_metadata(quick, allow_loopback=True, client_address="198.51.100.1")
    for thread in threads:
        thread.join(scaled(cimd.DEADLINE + 5))
    assert time.monotonic() - started <= cimd.DEADLINE + scaled(3)
    # The process bound: with PER_PROCESS fetches running, one more is not made.
    monkeypatch.setattr(cimd, "_running", cimd.PER_PROCESS)
    fresh = document(metadata_site, "/fresh.json")
    hits = metadata_site["hits"]
    assert oauth.client_metadata(fresh, allow_loopback=True, client_address="192.0.2.9") is None
    assert metadata_site["hits"] == hits


def test_the_connection_goes_to_the_address_that_was_checked(
    metadata_site: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: a name that resolves to a public address when checked and to
    loopback a moment later must never be fetched from loopback."""
    from ltm.mcp import oauth

    monkeypatch.setenv("SSL_CERT_FILE", metadata_site["cert"])
    port = int(metadata_site["base"].rsplit(":", 1)[1])
    url = f"https://rebind.example:{port}/doc.json"
    metadata_site["docs"]["/doc.json"] = {
        "client_id": url,
        "redirect_uris": ["http://127.0.0.1/callback"],
    }
    answers = iter(["192.0.2.1", "8.8.8.8"] + ["127.0.0.1"] * 10)
    lookups: list[str] = []

    def rebinding(host: str, *args: Any, **kwargs: Any) -> Any:
        lookups.append(host)
        if host != "rebind.example":
            return real(host, *args, **kwargs)
        address = next(answers)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    next(answers)  # the first answer (TEST-NET, not public) is for nobody
    assert oauth.client_metadata(url) is None
    assert metadata_site["hits"] == 0
    assert lookups.count("rebind.example") == 1


def test_a_slow_resolver_is_held_to_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Name resolution is inside the one deadline: a resolver that does not answer makes
    the fetch refused when the deadline passes, not when the resolver gives up; the
    lookup left running keeps its place in the bounds until it ends."""
    from ltm.mcp import cimd

    deadline = scaled(0.5)
    monkeypatch.setattr(cimd, "DEADLINE", deadline)
    answer = threading.Event()  # set when the test lets the resolver answer
    asked = threading.Event()
    real = socket.getaddrinfo

    def stuck(host: str, *args: Any, **kwargs: Any) -> Any:
        if host != "slow-dns.example":
            return real(host, *args, **kwargs)
        asked.set()
        answer.wait(scaled(10) + deadline)  # far past the deadline, on the old code too
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.1", 443))]  # TEST-NET

    monkeypatch.setattr(socket, "getaddrinfo", stuck)
    started = time.monotonic()
    try:
        with pytest.raises(cimd.Refused, match="resolve"):
            cimd.fetch("https://slow-dns.example/client.json", client_address="203.0.113.7")
        took = time.monotonic() - started
        assert asked.is_set() and not answer.is_set()  # returned with the lookup unanswered
        assert took <= deadline + scaled(2)
        # The lookup still runs: its fetch still counts against both bounds.
        assert cimd._running == 1 and cimd._by_address == {"203.0.113.7": 1}
    finally:
        answer.set()
    waited = time.monotonic() + scaled(10)
    while cimd._running and time.monotonic() < waited:
        time.sleep(0.01)
    assert cimd._running == 0 and cimd._by_address == {}


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2606:4700::1111", True),
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1
        ("64:ff9b::a01:203", False),  # NAT64 of 10.1.2.3
        ("64:ff9b::808:808", True),  # NAT64 of 8.8.8.8
        ("64:ff9b:1::a01:203", False),  # the local-use NAT64 prefix
        ("2002:7f00:1::", False),  # 6to4 of 127.0.0.1
        ("2002:c0a8:101::", False),  # 6to4 of 192.168.1.1
        ("2002:808:808::", True),  # 6to4 of 8.8.8.8
        ("::ffff:10.0.0.1", False),
        ("::1", False),
        ("fe80::1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
    ],
)
def test_an_embedded_ipv4_is_judged_as_itself(address: str, public: bool) -> None:
    from ltm.mcp.cimd import public_address

    assert public_address(ipaddress.ip_address(address)) is public


def test_only_authorize_fetches_the_document(
    metadata_site: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token and revocation endpoints know such a client by its id: an anonymous
    /token or /revoke naming a URL makes no connection."""
    from ltm.mcp import oauth
    from ltm.store.sqlite import SqliteStore

    monkeypatch.setenv("SSL_CERT_FILE", metadata_site["cert"])
    url = document(metadata_site, "/client.json")
    store = SqliteStore(tmp_path / "s.db")
    try:
        here = oauth.StoreProvider(
            store,
            issuer="http://127.0.0.1:9",
            resource="http://127.0.0.1:9/mcp",
            consent_url="x",
            fetch_loopback=True,
        )

        async def asked_at(path: str) -> Any:
            oauth.REQUEST.set((path, "203.0.113.5"))
            return await here.get_client(url)

        for path in ("/token", "/revoke"):
            client = anyio.run(asked_at, path)
            assert client is not None and client.token_endpoint_auth_method == "none"
            assert client.redirect_uris is None and metadata_site["hits"] == 0
        client = anyio.run(asked_at, "/authorize")
        assert client is not None and client.client_name == "a client"
        assert metadata_site["hits"] == 1
    finally:
        store.close()


def test_request_headers_never_make_a_public_server_fetch_from_loopback(
    metadata_site: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that does not listen on loopback, reached with ``Host: 127.0.0.1`` (and a
    forwarded https): the issuer it derives names loopback, but the fetch decision is the
    listening address's, so the loopback document is never fetched; and plain http with a
    loopback Host gets no OAuth at all there."""
    from ltm.mcp.asgi import serve
    from ltm.mcp.http import build_app
    from ltm.store.sqlite import SqliteStore

    monkeypatch.setenv("SSL_CERT_FILE", metadata_site["cert"])
    url = document(metadata_site, "/client.json")
    store = SqliteStore(tmp_path / "s.db")
    try:
        _, challenge = pkce()
        query = (
            "response_type=code&code_challenge_method=S256&state=s"
            f"&code_challenge={challenge}&client_id={quote(url, safe='')}"
            f"&redirect_uri={quote('http://127.0.0.1/callback', safe='')}"
        )

        def ask(app: Any, path: str, query: str = "") -> Any:
            return serve(
                app,
                method="GET",
                path=path,
                query=query,
                headers={"host": "127.0.0.1"},
                body=b"",
                scheme="https",
                client=("203.0.113.9", 0),
            )

        public = build_app(store, "https://127.0.0.1", on_loopback=False)
        refused = ask(public, "/authorize", query)
        assert refused.status == 400 and metadata_site["hits"] == 0
        plain = build_app(store, "http://127.0.0.1", on_loopback=False)
        assert ask(plain, "/.well-known/oauth-authorization-server").status == 404
        # The same on a server listening on loopback: fetched, and on to consent.
        from ltm.mcp import cimd

        monkeypatch.setattr(cimd, "_failed", {})  # the refusal above is remembered
        local = build_app(store, "https://127.0.0.1", on_loopback=True)
        taken = ask(local, "/authorize", query)
        assert taken.status == 302 and metadata_site["hits"] == 1
    finally:
        store.close()


def test_a_document_is_held_to_a_registrations_bounds(
    metadata_site: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ltm.mcp import oauth

    monkeypatch.setenv("SSL_CERT_FILE", metadata_site["cert"])
    many = document(metadata_site, "/many.json")
    metadata_site["docs"]["/many.json"]["redirect_uris"] = [
        f"http://127.0.0.1/cb{n}" for n in range(11)
    ]
    named = document(metadata_site, "/named.json")
    metadata_site["docs"]["/named.json"]["client_name"] = "n" * 201
    hostile = document(metadata_site, "/hostile.json")
    metadata_site["docs"]["/hostile.json"]["redirect_uris"] = ["javascript:alert(1)//"]
    for url in (many, named, hostile):
        assert oauth.client_metadata(url, allow_loopback=True) is None
    assert oauth.client_metadata(document(metadata_site, "/fine.json"), allow_loopback=True)


def test_slow_fetches_never_hold_every_worker_of_the_server() -> None:
    """Anonymous requests can each start a fetch that takes its whole deadline: the
    fetches one process runs at once stay fewer than ``ltm server run``'s worker
    threads, so health checks and pushes are still served meanwhile."""
    from ltm.cli.server.commands import DEFAULT_THREADS
    from ltm.mcp import cimd

    assert cimd.PER_ADDRESS < cimd.PER_PROCESS < DEFAULT_THREADS
