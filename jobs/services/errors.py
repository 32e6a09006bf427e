"""Refusals a client can act on; each carries a machine-readable code and an HTTP status."""


class ServiceError(Exception):
    code = "error"
    status = 400
    retry_after: int | None = None  # seconds after which the same request may succeed

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        if code:
            self.code = code


class ValidationFailed(ServiceError):
    code = "invalid"
    status = 400


class Forbidden(ServiceError):
    code = "permission_denied"
    status = 403


class NotFound(ServiceError):
    code = "not_found"
    status = 404


class Conflict(ServiceError):
    code = "conflict"
    status = 409


class StorageUnavailable(ServiceError):
    """The storage outputs and logs are kept in did not answer: the same request succeeds
    once it does."""
    code = "storage_unavailable"
    status = 503
    retry_after = 30
