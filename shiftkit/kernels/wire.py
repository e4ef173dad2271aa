"""Framing between the trusted parent and a worker, and the tensor codecs.

A frame is ``MAGIC | u32 header length | u64 blob length | JSON header | blob``. The parent reads frames
through :class:`Channel` with a deadline on every byte and hard caps on both lengths, so a partial frame,
a huge announced length or garbage is a :class:`ProtocolError` (a finding), never a hang or a buffer the
worker sized. Nothing but these JSON headers crosses from a worker to the parent: outputs are read by the
parent from memory it owns (:mod:`shm`). Parent to worker, the weights and init inputs travel as
``torch.save`` bytes (loaded with ``weights_only=True``).
"""

from __future__ import annotations

import io
import json
import os
import select
import struct
import time

MAGIC = b"SKF1"
HELLO_ANCHOR, HELLO_PAYLOAD = b"SKANCHR0", b"SKPAYLD1"  # a worker's setup greetings (credentials attached)
_HDR = struct.Struct("<4sIQ")
MAX_HEADER = 1 << 16  # a reply header is a small JSON object


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed frame within the limits."""


class ChannelTimeout(Exception):
    """The deadline passed before a whole frame arrived."""


class ChannelClosed(Exception):
    """The peer closed its end (or died)."""


def pack(header: dict, blob: bytes = b"") -> bytes:
    h = json.dumps(header).encode()
    return _HDR.pack(MAGIC, len(h), len(blob)) + h + blob


def unpack(data: bytes) -> tuple[dict, bytes]:
    """Pure: one whole frame -> (header, blob); ProtocolError if malformed."""
    if len(data) < _HDR.size:
        raise ProtocolError("short frame")
    magic, hn, bn = _HDR.unpack_from(data)
    if magic != MAGIC or hn > MAX_HEADER or _HDR.size + hn + bn != len(data):
        raise ProtocolError("malformed frame")
    return _header(data[_HDR.size:_HDR.size + hn]), data[_HDR.size + hn:]


def _header(raw: bytes) -> dict:
    try:
        h = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError, RecursionError):  # incl. deep nesting and oversized integers
        raise ProtocolError("frame header is not JSON within the parser's limits") from None
    if not isinstance(h, dict):
        raise ProtocolError("frame header is not an object")
    return h


def _ready(fd: int, events: int, timeout_s: float) -> bool:
    p = select.poll()  # not select(): fds above 1023 in a long-lived server
    p.register(fd, events | select.POLLHUP | select.POLLERR)
    return bool(p.poll(int(timeout_s * 1000) + 1 if timeout_s > 0 else 0))


class Channel:
    """Frames over a stream fd. ``recv`` honours an absolute ``deadline`` (time.monotonic) on every read."""

    def __init__(self, fd: int, max_blob: int = 1 << 30):
        self.fd = fd
        self.max_blob = max_blob
        self.idle = None  # called about every ``idle_s`` while a read with a deadline waits
        self.idle_s = 0.1

    def _read(self, n: int, deadline: float | None) -> bytes:
        out = bytearray()
        while len(out) < n:
            if deadline is not None:
                rem = deadline - time.monotonic()
                if rem <= 0:
                    raise ChannelTimeout(f"deadline passed with {len(out)}/{n} bytes of a frame read")
                if not _ready(self.fd, select.POLLIN, min(rem, self.idle_s) if self.idle else rem):
                    if self.idle:
                        self.idle()
                    continue
            try:
                b = os.read(self.fd, min(n - len(out), 1 << 22))
            except InterruptedError:
                continue
            except OSError as e:
                raise ChannelClosed(str(e)) from None
            if not b:
                raise ChannelClosed("peer closed the channel")
            out += b
        return bytes(out)

    def recv(self, deadline: float | None = None, max_blob: int | None = None) -> tuple[dict, bytes]:
        cap = self.max_blob if max_blob is None else max_blob
        magic, hn, bn = _HDR.unpack(self._read(_HDR.size, deadline))
        if magic != MAGIC:
            raise ProtocolError(f"bad frame magic {magic!r}")
        if hn > MAX_HEADER:
            raise ProtocolError(f"frame header of {hn} bytes exceeds {MAX_HEADER}")
        if bn > cap:
            raise ProtocolError(f"frame blob of {bn} bytes exceeds the cap of {cap}")
        header = _header(self._read(hn, deadline))
        return header, self._read(bn, deadline) if bn else b""

    def pending(self) -> bool:
        """Is there unread data (a frame nobody asked for)?"""
        return _ready(self.fd, select.POLLIN, 0)

    def send(self, header: dict, blob: bytes = b"", deadline: float | None = None) -> None:
        data = memoryview(pack(header, blob))
        while data:
            if deadline is not None:
                rem = deadline - time.monotonic()
                if rem <= 0:
                    raise ChannelTimeout("deadline passed while sending")
                if not _ready(self.fd, select.POLLOUT, rem):
                    continue
            try:
                n = os.write(self.fd, data[: 1 << 20])
            except InterruptedError:
                continue
            except OSError as e:
                raise ChannelClosed(str(e)) from None
            data = data[n:]


def dumps_tensors(obj) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def loads_tensors_untrusted(blob: bytes):
    """Safe load (weights_only): a tensor subclass or any other object is refused with an exception."""
    import torch

    return torch.load(io.BytesIO(blob), weights_only=True)
