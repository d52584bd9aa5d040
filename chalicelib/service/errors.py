"""Errors that carry the protocol's HTTP status and ``error`` message."""

from __future__ import annotations


class ServiceError(Exception):
    """A refusal with the status and the message the protocol names."""

    status = 500

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers: dict[str, str] = dict(headers or {})  # extra response headers


class BadRequest(ServiceError):
    status = 400


class Unauthorized(ServiceError):
    """No usable bearer token, answered with its ``WWW-Authenticate: Bearer`` challenge.

    RFC 6750 §3 (https://www.rfc-editor.org/rfc/rfc6750#section-3): a 401 carries
    the challenge; ``error="invalid_token"`` when a token was given but is not
    valid, and no error code when the request had no token at all.
    """

    status = 401

    def __init__(self, message: str, *, token_given: bool = False) -> None:
        challenge = 'Bearer error="invalid_token"' if token_given else "Bearer"
        super().__init__(message, headers={"WWW-Authenticate": challenge})


class Forbidden(ServiceError):
    status = 403


class InsufficientScope(Forbidden):
    """The token is valid but was not granted what the request needs.

    RFC 6750 §3.1 (https://www.rfc-editor.org/rfc/rfc6750#section-3.1):
    ``insufficient_scope`` is answered with 403 and a ``WWW-Authenticate: Bearer``
    challenge that may name the scope necessary to access the resource.
    """

    def __init__(self, need: str) -> None:
        super().__init__(
            "insufficient scope",
            headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{need}"'},
        )
        self.need = need


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class Gone(ServiceError):
    status = 410


class PayloadTooLarge(ServiceError):
    status = 413


class InsufficientStorage(ServiceError):
    """The caller's per-user storage bound is reached (WebDAV's quota status).

    RFC 4331 §6 (https://www.rfc-editor.org/rfc/rfc4331#section-6) answers a
    write past a quota with 507 Insufficient Storage (RFC 4918 §11.5). Not
    403: the caller has the right, and room made by a delete lets it through.
    """

    status = 507
