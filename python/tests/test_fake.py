"""The package in-process, on the fake core worker: serialization, options,
errors and refs without daemons."""

import numpy as np
import pytest

import manta
from manta import exceptions
from manta._private import serialization
from manta._private.testing import init_fake


@pytest.fixture(scope="module", autouse=True)
def fake():
    init_fake()
    yield
    manta.shutdown()


@manta.remote
def double(x):
    return 2 * x


@manta.remote(num_returns=2)
def split(x):
    return x, -x


@manta.remote(num_returns=2)
def wrong_count(x):
    return x, x, x


@manta.remote
class Box:

    def __init__(self, v):
        self.v = v

    def get(self):
        return self.v

    def boom(self):
        raise RuntimeError("from the actor")


class MyError(Exception):
    pass


@manta.remote
def raises_mine():
    raise MyError("mine")


def test_frames_round_trip_values_and_out_of_band_buffers():
    a = np.arange(1000, dtype=np.int32)
    parts = serialization.serialize({"a": a, "s": "x"})
    assert len(parts) >= 3  # header, pickle, the array's buffer
    back = serialization.deserialize(b"".join(parts))
    np.testing.assert_array_equal(back["a"], a)
    with pytest.raises(ValueError, match="not a manta value"):
        serialization.deserialize(b"\x93\x01\x02")  # msgpack, say
    with pytest.raises(ValueError):
        serialization.deserialize(b"".join(parts)[:-10])


def test_puts_read_back_whichever_side_encodes_or_decodes():
    # Plain values are framed and unpickled in the binding; the rest (out-
    # of-band buffers, refs inside, errors) in serialization.py: both read
    # the same frames, and a get keeps the refs' order and the first error.
    plain = [42, -1.5, "s", b"b", None, True, 2j, (1, "x"), [None], {"k": 2}]
    assert manta.get([manta.put(v) for v in plain]) == plain
    assert manta.get(double.remote(manta.put(21))) == 42  # a worker reads a binding-made frame
    for v in plain:
        data = b"".join(serialization.serialize_plain(v))
        assert serialization.deserialize(data) == v
    a = np.arange(10, dtype=np.int64)
    got = manta.get([manta.put(1), manta.put(a), manta.put("z")])
    assert got[0] == 1 and got[2] == "z"
    np.testing.assert_array_equal(got[1], a)
    with pytest.raises(MyError):
        manta.get([manta.put(1), raises_mine.remote(), manta.put(a), double.remote("x")])


def test_tasks_and_returns():
    assert manta.get(double.remote(21)) == 42
    assert manta.get(split.remote(3)) == [3, -3]
    with pytest.raises(exceptions.RayTaskError, match="num_returns=2"):
        manta.get(wrong_count.remote(1))


def test_user_exception_class_survives():
    with pytest.raises(MyError) as info:
        manta.get(raises_mine.remote())
    assert isinstance(info.value, exceptions.RayTaskError)
    assert "raises_mine" in str(info.value)


def test_actor_calls_and_errors():
    box = Box.remote([1, 2])
    assert manta.get(box.get.remote()) == [1, 2]
    with pytest.raises(RuntimeError, match="from the actor"):
        manta.get(box.boom.remote())
    with pytest.raises(AttributeError):
        box.missing


def test_refs_inside_values_resolve():
    inner = manta.put(5)
    assert manta.get(manta.get(manta.put({"r": inner}))["r"]) == 5
    assert manta.get(double.remote(inner)) == 10


def test_functions_are_exported_once_by_content_hash():
    from manta._private.state import state
    before = len(state.exported)
    for _ in range(3):
        manta.get(double.remote(1))
    assert len(state.exported) == before
    assert all(len(h) == 64 for h in state.exported)


def test_options_are_checked():
    with pytest.raises(ValueError, match="non-negative"):
        double.options(num_cpus=float("nan"))
    with pytest.raises(ValueError, match="num_cpus"):
        double.options(resources={"CPU": 1})
    with pytest.raises(ValueError, match="async def"):

        @manta.remote
        class Async:

            async def f(self):
                pass

    with pytest.raises(ValueError, match="lifetime"):
        Box.options(lifetime="forever").remote(1)
    with pytest.raises(ValueError, match="get_if_exists"):
        Box.options(get_if_exists=True).remote(1)
