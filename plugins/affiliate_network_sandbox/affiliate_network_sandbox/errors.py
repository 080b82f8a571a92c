"""Error responses in the spec's two spellings.

Errors raised by an endpoint use ``{"error": ...}``; errors raised before the endpoint runs
(401, 403, 405, router 404, and gateway 429/503/504) use ``{"Error": ...}``.
"""

from __future__ import annotations

from affiliate_network_sandbox import choices


class ApiError(Exception):
    """An HTTP error answer.

    :param status: HTTP status code.
    :param message: human-readable message.
    :param field: ``error`` (endpoint) or ``Error`` (before the endpoint).
    :param headers: extra response headers.
    """

    def __init__(
        self,
        status: int,
        message: str,
        field: str = "error",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = headers or {}

    def body(self) -> dict[str, str]:
        return {self.field: self.message}


def invalid(detail: str | None = None) -> ApiError:
    """400 ``Invalid parameters.`` (optionally with a detail after it, same shape)."""
    msg = choices.MSG_INVALID if not detail else f"{choices.MSG_INVALID} {detail}"
    return ApiError(400, msg)


def not_found() -> ApiError:
    """404 from an endpoint: the record does not exist."""
    return ApiError(404, choices.MSG_NOT_FOUND)


def before(status: int, message: str, headers: dict[str, str] | None = None) -> ApiError:
    """An error raised before the endpoint runs (``Error`` spelling)."""
    return ApiError(status, message, "Error", headers)
