"""CRC-32 checks of mcap files: dynid seals the mcap files it writes and verifies those it reads.

The mcap format carries three kinds of CRC-32 (zlib's), each zero when the writer did not compute
it:

* each Chunk record's ``uncompressed_crc``: the chunk's records before compression;
* the Data End record's ``data_section_crc``: every byte from the leading magic up to the Data End
  record (header, chunks, message indexes, metadata);
* the Footer's ``summary_crc``: the summary section (schemas, channels, chunk indexes, statistics)
  and the footer up to that field.

``rosbags`` writes zeros everywhere; :func:`seal` fills all three in place after writing.
:func:`verify` walks a file once (in blocks, bounded memory) and checks every CRC it carries: a
mismatch, or a record that runs past its section, is a ``BagReadError`` naming the file and the
damaged chunk (byte offset, log-time range, topics) or section. What carries no CRC is reported by
:meth:`McapCheck.unverified`, so a reader can say that it could not be verified.
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from lz4.frame import LZ4FrameDecompressor

if sys.version_info >= (3, 14):  # pragma: no cover
    from compression import zstd
else:
    from backports import zstd

from dynid.data.errors import BagReadError

MAGIC = b"\x89MCAP0\r\n"
_OP_FOOTER, _OP_CHANNEL, _OP_MESSAGE, _OP_CHUNK, _OP_DATA_END = 0x02, 0x04, 0x05, 0x06, 0x0F
_FOOTER_LEN = 1 + 8 + 20  # opcode, length, summary_start, summary_offset_start, summary_crc
_BLOCK = 1 << 20
_RECORD = struct.Struct("<BQ")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_CHUNK_HEAD = struct.Struct("<QQQI")  # message_start_time, message_end_time, uncompressed size, crc


@dataclass
class McapCheck:
    """What :func:`verify` (or :func:`seal`) found in one mcap file.

    Attributes:
        path: the file.
        library: the writer's name from the header record (e.g. ``"rosbags-0.11.9"``).
        chunks: chunk records in the data section.
        chunks_without_crc: chunks whose ``uncompressed_crc`` is zero (not verifiable).
        loose_messages: message records outside chunks (covered by the data-section CRC only).
        data_crc: whether the data section carries a CRC (it matched).
        summary_crc: whether the summary section carries a CRC (it matched).
    """

    path: Path
    library: str = ""
    chunks: int = 0
    chunks_without_crc: int = 0
    loose_messages: int = 0
    data_crc: bool = False
    summary_crc: bool = False

    def unverified(self) -> str | None:
        """One line naming what carries no CRC (damage there cannot be detected), or ``None``."""
        parts = []
        if not self.data_crc:
            if self.chunks_without_crc:
                parts.append(f"{self.chunks_without_crc} of {self.chunks} chunks")
            if self.loose_messages:
                parts.append(f"{self.loose_messages} messages outside chunks")
        if not self.summary_crc:
            parts.append("the index (summary section)")
        if not parts:
            return None
        return (
            f"{self.path}: {' and '.join(parts)} carry no CRC (written by "
            f"{self.library or 'an unnamed writer'}), so damage there cannot be detected"
        )


class _DamageError(Exception):
    """A CRC mismatch or a malformed record; the message says where (without the file name)."""


class _File:
    """Bounds-checked reads of a file opened in binary mode."""

    def __init__(self, fh: BinaryIO, size: int) -> None:
        self.fh = fh
        self.size = size

    def read(self, pos: int, n: int) -> bytes:
        if n < 0 or pos + n > self.size:
            raise _DamageError(f"a field at byte {pos} runs past the end of the file")
        self.fh.seek(pos)
        data = self.fh.read(n)
        if len(data) != n:
            raise _DamageError(f"a field at byte {pos} runs past the end of the file")
        return data

    def crc(self, start: int, end: int, crc: int = 0) -> int:
        """CRC-32 of bytes ``[start, end)``, continued from ``crc``, read in blocks."""
        self.fh.seek(start)
        pos = start
        while pos < end:
            block = self.fh.read(min(_BLOCK, end - pos))
            if not block:
                raise _DamageError(f"the file ends at byte {pos}, before byte {end}")
            crc = zlib.crc32(block, crc)
            pos += len(block)
        return crc

    def write(self, pos: int, data: bytes) -> None:
        self.fh.seek(pos)
        self.fh.write(data)


def _decompress(data: bytes, compression: str, size: int) -> bytes:
    """Decompressed chunk records, at most ``size + 1`` bytes (never more than claimed)."""
    try:
        if compression == "":
            return data
        if compression == "zstd":
            return zstd.ZstdDecompressor().decompress(data, max_length=size + 1)
        if compression == "lz4":
            return LZ4FrameDecompressor().decompress(data, max_length=size + 1)
    except Exception as err:  # the decompressors raise assorted errors on damaged input
        raise _DamageError(f"cannot decompress ({type(err).__name__}: {err})") from err
    raise _DamageError(f"unknown compression {compression!r}")


def _records(data: bytes) -> tuple[dict[int, str], set[int]]:
    """Best effort on possibly damaged chunk records: channel topics and channels of messages."""
    topics: dict[int, str] = {}
    used: set[int] = set()
    pos = 0
    try:
        while pos + 9 <= len(data):
            op, length = _RECORD.unpack_from(data, pos)
            body = data[pos + 9 : pos + 9 + length]
            if op == _OP_CHANNEL and len(body) >= 8:
                (n,) = _U32.unpack_from(body, 4)
                topics[_U16.unpack_from(body, 0)[0]] = body[8 : 8 + n].decode("utf-8", "replace")
            elif op == _OP_MESSAGE and len(body) >= 2:
                used.add(_U16.unpack_from(body, 0)[0])
            pos += 9 + length
    except (struct.error, OverflowError):
        pass
    return topics, used


class _Walk:
    """One pass over a file: verifies (or, when sealing, writes) every CRC."""

    def __init__(self, f: _File, path: Path, seal: bool) -> None:
        self.f = f
        self.check = McapCheck(path)
        self.seal = seal
        self.topics: dict[int, str] = {}  # channel id -> topic, from channel records seen so far
        self.summary = (0, 0)  # [start, end) of the summary section, for topics on an error

    def run(self) -> McapCheck:
        f = self.f
        if f.size < 2 * len(MAGIC) + _FOOTER_LEN or f.read(0, 8) != MAGIC:
            raise _DamageError("not an mcap file (leading magic or length)")
        if f.read(f.size - 8, 8) != MAGIC:
            raise _DamageError("trailing magic is damaged (truncated file?)")
        footer = f.size - 8 - _FOOTER_LEN
        op, length = _RECORD.unpack(f.read(footer, 9))
        summary_start, _ = struct.unpack("<QQ", f.read(footer + 9, 16))
        if (op, length) != (_OP_FOOTER, 20) or summary_start > footer:
            raise _DamageError(f"the footer at byte {footer} is damaged")
        data_end = summary_start or footer
        self.summary = (summary_start or footer, footer)
        crc = zlib.crc32(MAGIC)
        pos = 8
        while pos < data_end:
            op, length = _RECORD.unpack(f.read(pos, 9))
            end = pos + 9 + length
            if end > data_end:
                raise _DamageError(
                    f"the record at byte {pos} (opcode {op:#04x}) runs past its section"
                )
            if op == _OP_DATA_END:
                self._data_end(pos, length, crc)
                pos = end
                break
            if op == 0x01:
                self._header(pos + 9, length)
            elif op == _OP_CHUNK:
                self._chunk(pos, end)
            elif op == _OP_CHANNEL:
                self.topics.update(_records(f.read(pos, end - pos))[0])
            elif op == _OP_MESSAGE:
                self.check.loose_messages += 1
            crc = f.crc(pos, end, crc)
            pos = end
        if summary_start and pos != summary_start:
            raise _DamageError(
                f"the data section ends at byte {pos}, the summary starts at {data_end}"
            )
        self._summary(summary_start or footer, footer)
        return self.check

    def _header(self, pos: int, length: int) -> None:
        try:
            (n,) = _U32.unpack(self.f.read(pos, 4))
            (m,) = _U32.unpack(self.f.read(pos + 4 + n, 4))
            self.check.library = self.f.read(pos + 8 + n, min(m, 200)).decode("utf-8", "replace")
        except (_DamageError, struct.error):
            self.check.library = "?"  # a damaged header fails the data-section CRC, if present

    def _chunk(self, pos: int, end: int) -> None:
        f, c = self.f, pos + 9
        t0, t1, size, stored = _CHUNK_HEAD.unpack(f.read(c, 28))
        (n,) = _U32.unpack(f.read(c + 28, 4))
        compression = f.read(c + 32, n).decode("ascii", "replace")
        (records,) = _U64.unpack(f.read(c + 32 + n, 8))
        start = c + 40 + n
        if start + records != end:
            raise _DamageError(f"the chunk at byte {pos} has a records field that does not fit it")
        self.check.chunks += 1
        if not stored and not self.seal:
            self.check.chunks_without_crc += 1
            return
        data = b""
        if compression == "" and records == size:
            got = f.crc(start, end)
        else:
            data = _decompress(f.read(start, records), compression, size)
            got = zlib.crc32(data) if len(data) == size else None
        if self.seal:
            if got is None:
                raise _DamageError(
                    f"the chunk at byte {pos} does not decompress to its stated size"
                )
            f.write(c + 24, _U32.pack(got))
        elif got != stored:
            where = self._where(pos, t0, t1, data or f.read(start, records), compression, size)
            detail = (
                "does not decompress to its stated size"
                if got is None
                else f"fails its CRC check (stored {stored:#010x}, computed {got:#010x})"
            )
            raise _DamageError(f"{where} {detail}")

    def _where(self, pos: int, t0: int, t1: int, data: bytes, compression: str, size: int) -> str:
        """``"the chunk at byte N (messages logged a..b ns on topics [...])"``, best effort."""
        if compression:
            try:
                data = _decompress(data, compression, size)
            except _DamageError:
                data = b""
        inner, used = _records(data)
        start, end = self.summary
        try:
            summary = _records(self.f.read(start, min(end - start, 16 * _BLOCK)))[0]
        except _DamageError:
            summary = {}
        topics = {**summary, **self.topics, **inner}
        names = sorted({topics.get(i, f"channel {i}") for i in used})
        return f"the chunk at byte {pos} (messages logged {t0}..{t1} ns on topics {names})"

    def _data_end(self, pos: int, length: int, crc: int) -> None:
        if length < 4:
            raise _DamageError(f"the data-end record at byte {pos} is damaged")
        if self.seal:
            self.f.write(pos + 9, _U32.pack(crc))
            self.check.data_crc = True
            return
        (stored,) = _U32.unpack(self.f.read(pos + 9, 4))
        if stored and stored != crc:
            raise _DamageError(
                f"the data section (bytes 0..{pos}: header, chunks, message indexes, metadata) "
                f"fails its CRC check (stored {stored:#010x}, computed {crc:#010x})"
            )
        self.check.data_crc = bool(stored)

    def _summary(self, start: int, footer: int) -> None:
        crc = self.f.crc(start, footer + 25)  # through the footer's summary_offset_start
        if self.seal:
            self.f.write(footer + 25, _U32.pack(crc))
            self.check.summary_crc = True
            return
        (stored,) = _U32.unpack(self.f.read(footer + 25, 4))
        if stored and stored != crc:
            raise _DamageError(
                f"the index (summary section, bytes {start}..{footer}, and the footer) fails its "
                f"CRC check (stored {stored:#010x}, computed {crc:#010x})"
            )
        self.check.summary_crc = bool(stored)


def _run(path: Path, mode: str, seal: bool, fail: Callable[[str], Exception]) -> McapCheck:
    try:
        with path.open(mode) as fh:
            size = fh.seek(0, 2)
            return _Walk(_File(fh, size), path, seal).run()
    except _DamageError as err:
        raise fail(f"{path}: bag is corrupt: {err}") from None
    except (OSError, struct.error, OverflowError) as err:
        raise fail(f"{path}: bag is truncated or corrupt: {type(err).__name__}: {err}") from err


def verify(path: str | Path) -> McapCheck:
    """Check every CRC an mcap file carries.

    Returns:
        What was (and was not) covered; see :meth:`McapCheck.unverified`.

    Raises:
        BagReadError: a CRC mismatch or a malformed record, naming the file and the chunk (byte
            offset, log times, topics) or section.
    """
    return _run(Path(path), "rb", False, BagReadError)


def seal(path: str | Path, fail: Callable[[str], Exception] = BagReadError) -> McapCheck:
    """Compute and write (in place) every chunk CRC, the data-section CRC and the summary CRC.

    ``fail`` builds the exception raised when the file cannot be read or is malformed (the
    writer passes ``BagWriteError``).
    """
    return _run(Path(path), "r+b", True, fail)
