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
    status = 401


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
