"""Values as bytes: cloudpickle, protocol 5, with out-of-band buffers.

A value is a frame: a header, the pickle, then each out-of-band buffer
(numpy arrays and other PickleBuffer-exporting objects), each at an offset
that is a multiple of 64 so arrays read back aligned. The frame is handed to
the core worker as a list of parts, which it joins in one copy; a value read
back is a read-only view of the core worker's bytes, and arrays built from
its buffers use that memory without another copy.

Refs inside a value are listed by the C++ ref collector of the thread that
pickles it (ObjectRef.__reduce__ reports itself there), so pickling and the
put or submit that keeps the refs alive happen on one thread.
"""

import pickle
import struct

import cloudpickle

_MAGIC = b"MNT1"
_ALIGN = 64
# magic, number of buffers, pickle length
_HEAD = struct.Struct("<4sIQ")
_LEN = struct.Struct("<Q")
_PAD = bytes(_ALIGN)


def _padding(offset):
    return (-offset) % _ALIGN


# Values of these types hold no refs, no buffers and nothing cloudpickle
# must carry by value: plain pickle makes the same bytes, faster.
PLAIN_TYPES = frozenset((int, float, bool, str, bytes, type(None), complex))


def is_plain(value):
    """Whether `value` is a scalar of PLAIN_TYPES, or a short tuple, list or
    dict of them."""
    t = type(value)
    if t in PLAIN_TYPES:
        return True
    if t in (tuple, list) and len(value) <= 8:
        return all(type(v) in PLAIN_TYPES for v in value)
    if t is dict and len(value) <= 8:
        return all(type(k) in PLAIN_TYPES and type(v) in PLAIN_TYPES for k, v in value.items())
    return False


def serialize_plain(value):
    """The frame of a value is_plain() accepts."""
    data = pickle.dumps(value, protocol=5)
    return [_HEAD.pack(_MAGIC, 0, len(data)), data]


def serialize(value):
    """The frame of `value` as a list of parts (bytes-like objects)."""
    if is_plain(value):
        return serialize_plain(value)
    buffers = []
    data = cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    if not buffers:
        return [_HEAD.pack(_MAGIC, 0, len(data)), data]
    raws = [b.raw() for b in buffers]
    head = _HEAD.pack(_MAGIC, len(raws), len(data)) + b"".join(_LEN.pack(r.nbytes) for r in raws)
    parts = [head, data]
    offset = len(head) + len(data)
    for raw in raws:
        pad = _padding(offset)
        if pad:
            parts.append(_PAD[:pad])
            offset += pad
        parts.append(raw)
        offset += raw.nbytes
    return parts


def serialize_bytes(value):
    """The frame of `value` as one bytes object."""
    return b"".join(serialize(value))


def deserialize(data, copy_buffers=False):
    """The value of a frame. `data` is bytes-like; with copy_buffers the
    out-of-band buffers are copied (for views that die after the call)."""
    if len(data) < _HEAD.size:
        raise ValueError("not a manta value: %d bytes" % len(data))
    magic, count, length = _HEAD.unpack_from(data, 0)
    if magic != _MAGIC:
        raise ValueError("not a manta value (a value from another language?)")
    return _frame(data, count, length, copy_buffers)


def deserialize_any(data, copy_buffers=False):
    """A value from Python (a frame) or from another language (msgpack, as
    C++ functions return). Unambiguous: a msgpack value that starts with the
    frame's first byte is one byte long, shorter than any frame."""
    if len(data) >= _HEAD.size:
        magic, count, length = _HEAD.unpack_from(data, 0)
        if magic == _MAGIC:
            return _frame(data, count, length, copy_buffers)
    import msgpack
    try:
        return msgpack.unpackb(data, raw=False)
    except Exception as e:
        raise ValueError("a value neither Python nor msgpack: %s" % e) from None


def _frame(data, count, length, copy_buffers):
    view = memoryview(data)
    offset = _HEAD.size
    if not count:  # no out-of-band buffers: the pickle is the rest
        if offset + length > view.nbytes:
            raise ValueError("a truncated manta value")
        return pickle.loads(view[offset:offset + length])
    sizes = []
    for _ in range(count):
        sizes.append(_LEN.unpack_from(view, offset)[0])
        offset += _LEN.size
    pickled = view[offset:offset + length]
    offset += length
    buffers = []
    for size in sizes:
        offset += _padding(offset)
        buf = view[offset:offset + size]
        buffers.append(bytearray(buf) if copy_buffers else buf)
        offset += size
    if offset > view.nbytes:
        raise ValueError("a truncated manta value")
    return pickle.loads(pickled, buffers=buffers)
