"""@manta.remote on a class: Ray's ActorClass, ActorHandle and ActorMethod."""

import inspect

from manta import _core
from manta._private import api, options as opts
from manta._private.remote_function import export, pack_args, _refs
from manta._private.state import state


class ActorMethod:
    _fast = None  # this session's builtin for remote() (see __init__)

    def __init__(self, handle, name, options=None):
        self._handle = handle
        self._name = name
        self._method_name = "py:m:" + name
        self._options = options or {}
        if not self._options and handle._num_returns.get(name, 1) == 1:
            # A builtin taking the common call (scalar arguments) straight to
            # the core worker, and any other to _remote() (None when manta is
            # not initialized).
            self._fast = _core.front_call(self._remote, handle._actor_id, self._method_name, None)

    def __reduce__(self):
        return (ActorMethod, (self._handle, self._name, self._options))

    def __call__(self, *args, **kwargs):
        raise TypeError("Actor methods cannot be called directly. Instead of running "
                        "'object.%s()', try 'object.%s.remote()'." % (self._name, self._name))

    def options(self, **options):
        opts.check(options, opts.METHOD_OPTIONS, "actor methods")
        merged = dict(self._options)
        merged.update(options)
        return ActorMethod(self._handle, self._name, merged)

    def remote(self, *args, **kwargs):
        fast = self._fast
        if fast is not None:
            return fast(*args, **kwargs)
        return self._remote(*args, **kwargs)

    def _remote(self, *args, **kwargs):
        num_returns = self._options.get("num_returns", self._handle._num_returns.get(self._name, 1))
        parts, collection, ref_args = pack_args(args, kwargs, self._name)
        refs = _core.submit_actor_task(self._handle._actor_id, self._method_name, parts, collection, ref_args,
                                       max(1, num_returns))
        if num_returns == 0:
            return None
        return _refs(refs, num_returns)


class ActorHandle:
    """A handle to an actor; it pickles, so it may be passed to tasks."""

    def __init__(self, actor_id, class_name, methods, num_returns=None):
        self._actor_id = actor_id
        self._class_name = class_name
        self._methods = tuple(methods) if methods is not None else None
        self._num_returns = dict(num_returns or {})

    def __getattr__(self, name):
        if name.startswith("__") or (self._methods is not None and name not in self._methods):
            raise AttributeError("'%s' object has no attribute '%s'" % (self._class_name, name))
        method = ActorMethod(self, name)
        self.__dict__[name] = method  # found directly next time
        return method

    def __reduce__(self):
        return (ActorHandle, (self._actor_id, self._class_name, self._methods, self._num_returns))

    def __eq__(self, other):
        return isinstance(other, ActorHandle) and other._actor_id == self._actor_id

    def __hash__(self):
        return hash(self._actor_id)

    def __repr__(self):
        return "Actor(%s, %s)" % (self._class_name, self._actor_id.hex())


def _method_names(cls):
    names = []
    for name, member in inspect.getmembers(cls):
        if name.startswith("__") and name != "__call__":
            continue
        if inspect.isfunction(member) or inspect.ismethod(member):
            if inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member):
                raise ValueError("async def actor methods are not supported by Manta "
                                 "(%s.%s)" % (cls.__name__, name))
            names.append(name)
    return names


def method(*, num_returns=None, **unsupported):
    """@manta.method(num_returns=N) on an actor method."""
    if unsupported:
        raise ValueError("Invalid option keyword(s) for manta.method: %s" % ", ".join(unsupported))

    def mark(m):
        m.__manta_num_returns__ = num_returns
        return m

    return mark


class ActorClass:

    def __init__(self, cls, options):
        opts.check(options, opts.ACTOR_OPTIONS, "actors")
        self._cls = cls
        self._options = dict(options)
        self._methods = _method_names(cls)
        self._num_returns = {
            n: getattr(cls, n).__manta_num_returns__
            for n in self._methods
            if getattr(getattr(cls, n), "__manta_num_returns__", None) is not None
        }
        self._name = None
        self.__name__ = cls.__name__
        self.__qualname__ = cls.__qualname__
        self.__module__ = cls.__module__
        self.__doc__ = cls.__doc__

    def __setstate__(self, saved):
        self.__dict__.update(saved)
        # Pickled where it was exported, to this same cluster: not again.
        if self._name is not None:
            state.exported.setdefault(self._name[5:], True)

    def __call__(self, *args, **kwargs):
        raise TypeError("Actors cannot be instantiated directly. Instead of '%s()', use "
                        "'%s.remote()'." % (self.__name__, self.__name__))

    def options(self, **options):
        opts.check(options, opts.ACTOR_OPTIONS, "actors")
        merged = dict(self._options)
        merged.update(options)
        outer = self

        class _Bound:

            def remote(self, *args, **kwargs):
                return outer._create(merged, args, kwargs)

        return _Bound()

    def remote(self, *args, **kwargs):
        return self._create(self._options, args, kwargs)

    def _create(self, options, args, kwargs):
        api.auto_init()
        if self._name is None or self._name[5:] not in state.exported:  # once per cluster joined
            self._name = export(self._cls, "c")
        lifetime = options.get("lifetime")
        if lifetime not in (None, "detached", "non_detached"):
            raise ValueError("actor lifetime must be 'detached' or 'non_detached', got %r" % (lifetime,))
        if options.get("get_if_exists") and not options.get("name"):
            raise ValueError("The actor name must be specified to use `get_if_exists`.")
        core = {
            "resources": opts.resources(options, 0),
            "class_name": self.__qualname__,
            "env_vars": opts.env_vars(options),
            "namespace": options.get("namespace") or state.namespace,
            "detached": lifetime == "detached",
        }
        for key in ("max_restarts", "max_task_retries", "max_concurrency", "name"):
            if options.get(key) is not None:
                core[key] = options[key]
        if options.get("label_selector"):
            core["label_selector"] = dict(options["label_selector"])
        if options.get("get_if_exists"):
            core["get_if_exists"] = True
        opts.strategy(options, core)
        parts, collection, ref_args = pack_args(args, kwargs, self.__qualname__)
        actor_id = _core.create_actor(self._name, parts, collection, ref_args, core)
        return ActorHandle(actor_id, self.__qualname__, self._methods, self._num_returns)


def get_actor(name, namespace=None):
    api.auto_init()
    if not name:
        raise ValueError("Please supply a non-empty value to get_actor")
    try:
        actor_id = _core.get_named_actor(name, namespace or state.namespace)
    except KeyError:
        raise ValueError("Failed to look up actor with name '%s'. This could because 1. You are "
                         "trying to look up a named actor you didn't create. 2. The named actor "
                         "died. 3. You did not use a namespace matching the namespace of the "
                         "actor." % name) from None
    return ActorHandle(actor_id, name, None)


def kill(actor, *, no_restart=True):
    api.auto_init()
    if not isinstance(actor, ActorHandle):
        raise ValueError("manta.kill() only supported for actors. For tasks, try manta.cancel(). "
                         "Got: %r." % type(actor).__name__)
    _core.kill_actor(actor._actor_id, no_restart)
