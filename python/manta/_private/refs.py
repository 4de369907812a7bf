"""How an ObjectRef unpickles: borrowed from its owner (manta._core).
A plain Python function, so pickle names it by reference."""

from manta import _core


def unpickle_ref(object_id, owner):
    return _core._unpickle_ref(object_id, owner)
