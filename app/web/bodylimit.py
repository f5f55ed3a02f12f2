"""A limit on request bodies, enforced while they arrive: a declared Content-Length over the limit
is refused before a byte is read, and a body streamed without one is counted as it comes.
Without it every upload was read whole into memory before any route could check its size.
File uploads (multipart) get a larger limit than everything else."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MAX_BODY_BYTES", "MAX_UPLOAD_BYTES", "BodyLimit", "RequestTooLarge"]

# A message is at most 256 KB, which JSON escapes or form encoding can triple.
MAX_BODY_BYTES = 2 * 1024 * 1024
# The largest file Sugo imports is a 64 MB chat; the form around it adds a little.
MAX_UPLOAD_BYTES = 65 * 1024 * 1024


class RequestTooLarge(HTTPException):
    """Raised from `receive` once the body passes its limit; the detail is one sentence for the user."""

    def __init__(self, limit: int, upload: bool) -> None:
        kind = "Uploads" if upload else "Requests other than file uploads"
        super().__init__(413, f"The request is too large: {kind} are limited to {limit // (1024 * 1024)} MB.")


class BodyLimit:
    """Refuse a request body over its limit: multipart uploads `max_upload_bytes`, others `max_bytes`."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int = MAX_BODY_BYTES, max_upload_bytes: int = MAX_UPLOAD_BYTES
    ):
        self.app = app
        self.max_bytes = max_bytes
        self.max_upload_bytes = max_upload_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        upload = headers.get("content-type", "").startswith("multipart/form-data")
        limit = self.max_upload_bytes if upload else self.max_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            # Answered before the body is read; the server closes the connection after it.
            too_large = RequestTooLarge(limit, upload)
            await JSONResponse({"detail": too_large.detail}, status_code=413)(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise RequestTooLarge(limit, upload)
            return message

        await self.app(scope, counted, send)
