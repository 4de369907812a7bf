"""Calling C++ from Python: functions, actor factories and methods a C++
program registered with MANTA_REMOTE, by name, with msgpack values (ints,
floats, str, bytes, lists, dicts), as Ray's ray.cross_language does.

    add = manta.cpp_function("Add", program="build/bin/example_counter")
    manta.get(add.remote(1, 2))                      # 3
    Counter = manta.cpp_actor_class("Counter::Create", program="build/bin/example_counter")
    c = Counter.remote(10)
    manta.get(c.Incr.remote(5))                      # 15: calls "Counter::Incr"

The C++ program runs as the task's worker (a raylet starts it as the
program's own workers are started). `program` defaults to
$MANTA_CPP_PROGRAM. A value of the wrong type for the C++ parameter fails
the call with an error naming the function; a value msgpack cannot carry
(a Python object) raises TypeError at .remote().
"""

import os

import msgpack

from manta import _core
from manta._private import api


def _program(program):
    program = program or os.environ.get("MANTA_CPP_PROGRAM")
    if not program:
        raise ValueError("name the C++ program that registered the function: program=... or "
                         "$MANTA_CPP_PROGRAM")
    path = os.path.abspath(program)
    if not os.access(path, os.X_OK):
        raise ValueError("the C++ program %r is not an executable file" % program)
    return path


def _values(args, where):
    out = []
    for i, a in enumerate(args):
        if isinstance(a, _core.ObjectRef):
            out.append(a)  # its value must be msgpack (a C++ task's result)
            continue
        try:
            out.append(msgpack.packb(a, use_bin_type=True))
        except (TypeError, ValueError, OverflowError) as e:
            raise TypeError("argument %d of %s (%r) cannot cross to C++: %s" % (i, where, type(a).__name__, e)) \
                from None
    return out


def _resources(num_cpus, resources):
    out = {"CPU": float(num_cpus)}
    out.update({k: float(v) for k, v in (resources or {}).items()})
    return out


class CppFunction:

    def __init__(self, name, program=None, num_cpus=1, resources=None, max_retries=3):
        if not name:
            raise ValueError("cpp_function needs the function's registered name")
        self._name = name
        self._program = _program(program)
        self._options = _core.TaskOptions({
            "resources": _resources(num_cpus, resources), "max_retries": int(max_retries), "name": name,
            "worker_executable": self._program, "worker_args": []
        })

    def remote(self, *args):
        api.auto_init()
        return _core.submit_task_raw(self._name, _values(args, self._name), self._options)[0]


class CppActorMethod:

    def __init__(self, handle, name):
        self._handle, self._name = handle, name

    def remote(self, *args):
        return _core.submit_actor_task_raw(self._handle._actor_id, self._name, _values(args, self._name))[0]


class CppActorHandle:

    def __init__(self, actor_id, class_name):
        self._actor_id = actor_id
        self._class_name = class_name

    def __getattr__(self, method):
        if method.startswith("_"):
            raise AttributeError(method)
        return CppActorMethod(self, "%s::%s" % (self._class_name, method))

    def __reduce__(self):
        return (CppActorHandle, (self._actor_id, self._class_name))


class CppActorClass:

    def __init__(self, factory_name, class_name=None, program=None, num_cpus=0, resources=None, max_restarts=0,
                 name=None):
        if "::" not in factory_name and class_name is None:
            raise ValueError("name the factory as 'Class::Create', or pass class_name")
        self._factory = factory_name
        self._class = class_name or factory_name.rsplit("::", 1)[0]
        self._options = {
            "resources": _resources(num_cpus, resources), "max_restarts": int(max_restarts), "class_name": self._class,
            "worker_executable": _program(program), "worker_args": []
        }
        if name:
            self._options["name"] = name

    def remote(self, *args):
        api.auto_init()
        actor_id = _core.create_actor_raw(self._factory, _values(args, self._factory), self._options)
        return CppActorHandle(actor_id, self._class)


def cpp_function(name, program=None, **options):
    return CppFunction(name, program, **options)


def cpp_actor_class(factory_name, class_name=None, program=None, **options):
    return CppActorClass(factory_name, class_name, program, **options)
