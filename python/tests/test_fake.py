"""The package in-process, on the fake core worker: serialization, options,
errors and refs without daemons."""

import pickle

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


SCALARS = [
    None, True, False, 0, 1, 255, 256, 65535, 65536, -1, -128, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**32, 2**40,
    -2**40, 2**63 - 1, -2**63, 0.0, -0.0, 1.5,
    float("inf"), 1e-300, "", "s", "é" * 40, "x" * 255, b"", b"\x00\xff", b"y" * 255
]


def test_scalars_are_pickled_as_pickle_pickles_them():
    # put_scalar writes the bytes pickle.dumps writes and get_ready reads
    # them (and pickle's) back; what it does not take goes to pickle.
    from manta import _core
    for v in SCALARS:
        data = pickle.dumps(v, protocol=5)
        assert _core.pickle_scalar(v) == data, v
        back = _core.unpickle_scalar(data)
        assert back == v and type(back) is type(v), v
        for protocol in (2, 3, 4):  # older protocols memoize str and bytes otherwise: pickle reads those
            if protocol == 4 or not isinstance(v, (str, bytes)):
                assert _core.unpickle_scalar(pickle.dumps(v, protocol=protocol)) == v
        assert manta.get(_core.put_scalar(v)) == v
    for v in [2**63, -2**63 - 1, "x" * 256, b"y" * 256, "\ud800", 1j, (1,), [1], MyError("x")]:
        assert _core.pickle_scalar(v) is None, v
        assert _core.put_scalar(v) is None
    for data in [
            b"", b"\x80\x05", b"\x80\x05K\x01", b"\x80\x05K\x01.x", b"\x80\x05\x8c\x05ab.",
            b"\x80\x05\x8c\x02\xff\xfe.",
            pickle.dumps((1, 2), protocol=5),
            pickle.dumps(2**64, protocol=5)
    ]:
        assert _core.unpickle_scalar(data) is _core.MISS, data
    assert _core.get_ready(42) is _core.MISS


def test_scalar_arguments_are_pickled_as_pack_args_pickles_them():
    from manta import _core
    from manta._private.remote_function import pack_args
    for args in [(), (1,), (None, True, False), (2**40, -7, 2.5, "é", b"\x00", "x" * 255, b"y" * 255, 0)]:
        data = pickle.dumps((list(args), {}), protocol=5)
        assert _core.pickle_args(*args) == data, args
        parts = pack_args(args, {}, "f")[0]
        assert serialization.deserialize(b"".join(parts)) == (list(args), {})
    same = "shared"
    assert pickle.loads(_core.pickle_args(same, same)) == ([same, same], {})
    for args in [tuple(range(9)), ([1],), (1j,), (2**64,), ("x" * 256,), (MyError("x"),)]:
        assert _core.pickle_args(*args) is None, args


def test_calls_take_the_builtin_path_and_the_rest_the_general_one():
    from manta import _core
    manta.get(double.remote(1))  # the first call installs the builtin
    assert type(double._fast).__name__ == "builtin_function_or_method"
    # Scalars take the builtin; keywords, containers, refs and other types
    # go to the general path: every one gives the same answer.
    assert manta.get([double.remote(x) for x in (4, 2.5, "ab", b"c", True)]) == [8, 5.0, "abab", b"cc", 2]
    assert manta.get([double.remote(x=4), double.remote([1]), double.remote(manta.put(3))]) == [8, [1, 1], 6]
    assert manta.get(split.remote(2)) == [2, -2]
    # The worker runs a loaded task it announced last without the executor.
    manta.get(double.remote(0))
    before = _core.fast_calls()
    assert manta.get([double.remote(1) for _ in range(3)]) == [2, 2, 2]
    assert _core.fast_calls() - before == 3
    box = Box.remote(7)
    assert type(box.get._fast).__name__ == "builtin_function_or_method"
    assert manta.get(box.get.remote()) == 7
    assert manta.get(box.get.options(num_returns=1).remote()) == 7
    with pytest.raises(TypeError):
        manta.get(box.get.remote(1))  # get() takes no argument: the worker says so
    # A remote function, an actor method and their remote() pickle without
    # this session's builtin.
    import cloudpickle
    again = cloudpickle.loads(cloudpickle.dumps(double))
    assert "_fast" not in again.__dict__ and manta.get(again.remote(5)) == 10
    assert manta.get(cloudpickle.loads(cloudpickle.dumps(double.remote))(6)) == 12
    assert manta.get(cloudpickle.loads(cloudpickle.dumps(box.get)).remote()) == 7
    assert manta.get(cloudpickle.loads(cloudpickle.dumps(box.get.remote))()) == 7


def test_tasks_and_returns():
    assert manta.get(double.remote(21)) == 42
    assert manta.get(split.remote(3)) == [3, -3]
    with pytest.raises(exceptions.RayTaskError, match="num_returns=2"):
        manta.get(wrong_count.remote(1))


def test_user_exception_class_survives():
    from manta import _core
    manta.get(double.remote(0))  # the worker's last announced task is another
    for call in range(2):
        before = _core.fast_calls()
        with pytest.raises(MyError) as info:
            manta.get(raises_mine.remote())
        assert isinstance(info.value, exceptions.RayTaskError)
        assert "raises_mine" in str(info.value)
        assert 'raise MyError("mine")' in str(info.value)  # the remote traceback
        # The first call announces the task in the executor; the second runs
        # it from C++, without the executor's frames.
        assert _core.fast_calls() - before == call


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
