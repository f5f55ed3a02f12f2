"""Pictures users upload (avatars): checked with Pillow before anything is stored."""

from __future__ import annotations

import io

from PIL import Image as PILImage
from PIL import UnidentifiedImageError
from sqlmodel import Session

from app.images.models import Image
from app.platform.core.errors import NotFound, UserError

MAX_IMAGE_BYTES = 12 * 1024 * 1024
# A small file can claim 30000 x 30000 pixels: decoding it (for verify, a card export, a
# thumbnail) would take gigabytes. Avatars need far less; Pillow's own limit is 89 million.
MAX_IMAGE_PIXELS = 40_000_000
_LIMIT_WORDS = "pictures over 40 megapixels (about 6300 × 6300) are refused"
_MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}


def _too_big(width: int, height: int) -> str:
    return f"The picture is {width} × {height} pixels; {_LIMIT_WORDS}."


def store_image(session: Session, raw: bytes) -> Image:
    if not raw:
        raise UserError("The picture is empty.")
    if len(raw) > MAX_IMAGE_BYTES:
        raise UserError(
            f"The picture is {len(raw) / 1024 / 1024:.1f} MB; pictures larger than 12 MB are refused."
        )
    try:
        with PILImage.open(io.BytesIO(raw)) as img:  # reads the header only: no pixels decoded yet
            fmt = img.format
            width, height = img.size
            if width * height > MAX_IMAGE_PIXELS:
                raise UserError(_too_big(width, height))
            img.verify()
    except PILImage.DecompressionBombError as err:
        # Pillow refuses on its own above twice its limit, before the size can be read.
        raise UserError(f"The picture has too many pixels; {_LIMIT_WORDS}.") from err
    except (UnidentifiedImageError, OSError, SyntaxError) as err:
        raise UserError("This file is not a picture Sugo can read (PNG, JPEG, WEBP or GIF).") from err
    if fmt not in _MIME:
        raise UserError(f"Pictures in {fmt} format are not supported; use PNG, JPEG, WEBP or GIF.")
    image = Image(mime=_MIME[fmt], width=width, height=height, data=raw)
    session.add(image)
    session.flush()
    return image


def get_image(session: Session, image_id: int) -> Image:
    image = session.get(Image, image_id)
    if image is None:
        raise NotFound(f"Picture {image_id} does not exist.")
    return image
