"""Manta: a distributed actor runtime for multi-host TPU training, with
Ray's Python API on a native core.

    import manta

    manta.init()

    @manta.remote
    def square(x):
        return x * x

    print(manta.get([square.remote(i) for i in range(4)]))
"""

from manta import _core
from manta._core import ObjectRef
from manta import exceptions
from manta._private.api import (init, shutdown, is_initialized, get, put, wait, cancel, nodes, cluster_resources,
                                available_resources)
from manta._private.actor import ActorClass, ActorHandle, get_actor, kill, method
from manta._private.remote_function import RemoteFunction
from manta.runtime_context import get_runtime_context
from manta.cross_language import cpp_function, cpp_actor_class

__version__ = _core.VERSION


def remote(*args, **options):
    """@manta.remote or @manta.remote(num_cpus=..., ...) on a function or class."""
    if len(args) == 1 and not options and callable(args[0]):
        return _make(args[0], {})
    if args:
        raise TypeError("The @manta.remote decorator must be applied either with no arguments "
                        "and no parentheses, or only with keyword arguments.")
    return lambda target: _make(target, options)


def _make(target, options):
    import inspect
    if inspect.isclass(target):
        return ActorClass(target, options)
    if inspect.isfunction(target) or callable(target):
        if inspect.iscoroutinefunction(target):
            raise ValueError("async def remote functions are not supported by Manta")
        return RemoteFunction(target, options)
    raise TypeError("The @manta.remote decorator must be applied to either a function or a class.")


__all__ = [
    "init", "shutdown", "is_initialized", "remote", "get", "put", "wait", "cancel", "get_actor", "kill", "method",
    "nodes", "cluster_resources", "available_resources", "ObjectRef", "exceptions", "get_runtime_context",
    "cpp_function", "cpp_actor_class", "ActorClass", "ActorHandle", "RemoteFunction"
]
