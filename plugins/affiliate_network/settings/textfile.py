"""Read a configuration file as UTF-8 text, or say exactly where it is not UTF-8."""

from __future__ import annotations

from pathlib import Path

from affiliate_network.exceptions import NotUtf8Error

_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def decode_utf8(data: bytes) -> str:
    """``data`` decoded as UTF-8 (a leading byte-order mark is dropped).

    :raises NotUtf8Error: naming the byte offset, the line and the byte, with a hint for the
        usual causes (a file saved as UTF-16 or Latin-1/Windows-1252).
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        offset = err.start
        line = data.count(b"\n", 0, offset) + 1
        if data.startswith(_UTF16_BOMS):
            hint = "it looks like UTF-16; save it as UTF-8"
        else:
            hint = "save it as UTF-8 (it may be Latin-1 or Windows-1252)"
        message = (
            f"not UTF-8 text: byte {offset} (line {line}) is 0x{data[offset]:02x}, "
            f"which cannot start or continue a UTF-8 character; {hint}"
        )
        raise NotUtf8Error(message, offset, line) from None


def read_utf8(path: str | Path) -> str:
    """The file's text (see :func:`decode_utf8`); ``OSError`` when it cannot be read."""
    return decode_utf8(Path(path).read_bytes())
