"""Card files for tests, built by hand so a test can hold exactly the chunks it needs."""

import struct
import zlib

from app.characters.core.cards import read_card, read_png_text_chunks


def _chunk(ctype: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data))


def v2_only_png(card_png: bytes) -> bytes:
    """The same picture carrying only the SillyTavern V2 `chara` chunk (no `ccv3`)."""
    chara = read_png_text_chunks(card_png)["chara"]
    image = read_card(card_png).image
    iend = image.rindex(b"IEND") - 4
    return image[:iend] + _chunk(b"tEXt", b"chara\x00" + chara.encode("latin-1")) + image[iend:]
