"""Errors that carry the protocol's HTTP status and ``error`` message."""

from __future__ import annotations


class ServiceError(Exception):
    """A refusal with the status and the message the protocol names."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ServiceError):
    status = 400


class Unauthorized(ServiceError):
    status = 401


class Forbidden(ServiceError):
    status = 403


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class Gone(ServiceError):
    status = 410


class PayloadTooLarge(ServiceError):
    status = 413
