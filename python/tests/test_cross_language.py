"""A Python driver calls a C++ program's MANTA_REMOTE functions and actors
by name (examples/counter.cc: Add, Counter::Create, Counter::Incr)."""

import os

import pytest

import manta
from conftest import bin_dir


@pytest.fixture(scope="module")
def program(cluster):
    path = os.path.join(bin_dir(), "example_counter")
    if not os.access(path, os.X_OK):
        pytest.skip("example_counter is not built")
    manta.init(address=cluster.address, _temp_dir=cluster.temp_dir)
    yield path
    manta.shutdown()


def test_a_cpp_function_by_name_with_msgpack_values(program):
    add = manta.cpp_function("Add", program=program)
    assert manta.get(add.remote(1, 2)) == 3
    three = add.remote(1, 2)
    assert manta.get(add.remote(three, 4)) == 7  # a C++ result passed on by ref

    @manta.remote
    def double(x):
        return 2 * x

    assert manta.get(double.remote(three)) == 6  # read by a Python task


def test_a_cpp_actor_by_name(program):
    Counter = manta.cpp_actor_class("Counter::Create", program=program)
    c = Counter.remote(10)
    assert manta.get(c.Incr.remote(5)) == 15
    assert manta.get(c.Value.remote()) == 15


def test_a_type_mismatch_is_a_clear_error(program):
    add = manta.cpp_function("Add", program=program)
    with pytest.raises(manta.exceptions.RayTaskError, match="Add"):
        manta.get(add.remote("one", 2))
    with pytest.raises(TypeError, match="cannot cross to C\\+\\+"):
        add.remote(object(), 2)
    with pytest.raises(ValueError, match="C\\+\\+ program"):
        manta.cpp_function("Add", program="/nonexistent")
