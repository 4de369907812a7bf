"""@manta.remote on a function: Ray's RemoteFunction."""

import hashlib

import cloudpickle

from manta import _core
from manta._private import api, options as opts, serialization
from manta._private.state import state

FUNCTION_NS = _core.FUNCTION_KV_NAMESPACE  # the GCS checks names against content


def export(obj, kind):
    """Exports a function or class to the GCS KV once per process under the
    hash of its pickle; returns its "py:<kind>:<hash>" name."""
    pickled = cloudpickle.dumps(obj, protocol=5)
    digest = hashlib.sha256(pickled).hexdigest()
    if digest not in state.exported:
        _core.kv_put(FUNCTION_NS, digest.encode(), pickled, False)
        state.exported[digest] = True
    return "py:%s:%s" % (kind, digest)


class _RefArg:
    """Stands in the pickled arguments for a top-level ObjectRef argument,
    which travels beside them and arrives as its value."""
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __reduce__(self):
        return (_RefArg, (self.index,))


_NO_ARGS = serialization.serialize_plain(([], {}))


def pack_args(args, kwargs, where):
    """(parts, collection, ref_args): the pickled arguments, the refs inside
    them, and the top-level refs passed as values."""
    if not kwargs:
        if not args:
            return _NO_ARGS, None, []
        if all(type(a) in serialization.PLAIN_TYPES for a in args):
            return serialization.serialize_plain((list(args), {})), None, []
    ref_args = []

    def swap(v):
        if isinstance(v, _core.ObjectRef):
            ref_args.append(v)
            return _RefArg(len(ref_args) - 1)
        return v

    args = [swap(a) for a in args]
    kwargs = {k: swap(v) for k, v in kwargs.items()}
    collection = _core.RefCollection()
    try:
        with collection:
            parts = serialization.serialize((args, kwargs))
    except Exception as e:
        raise TypeError("Could not serialize the arguments of %s: %s" % (where, _culprit(args, kwargs, e))) from e
    return parts, collection, ref_args


def _culprit(args, kwargs, error):
    for i, a in enumerate(args):
        try:
            cloudpickle.dumps(a)
        except Exception:
            return "argument %d (%r) cannot be pickled: %s" % (i, type(a).__name__, error)
    for k, v in kwargs.items():
        try:
            cloudpickle.dumps(v)
        except Exception:
            return "argument '%s' (%r) cannot be pickled: %s" % (k, type(v).__name__, error)
    return str(error)


def unpack_args(views):
    """The (args, kwargs) a call's views carry (views die after the call:
    buffers are copied)."""
    args, kwargs = serialization.deserialize(views[0], copy_buffers=True)
    if len(views) == 1:
        return args, kwargs
    values = [serialization.deserialize_any(v, copy_buffers=True) for v in views[1:]]

    def fill(v):
        return values[v.index] if isinstance(v, _RefArg) else v

    return [fill(a) for a in args], {k: fill(v) for k, v in kwargs.items()}


def _refs(refs, num_returns):
    if num_returns == 1:
        return refs[0]
    return refs


class RemoteFunction:
    _fast = None  # this session's builtin for remote() (see _submit)

    def __init__(self, function, options):
        opts.check(options, opts.TASK_OPTIONS, "remote functions")
        self._function = function
        self._options = dict(options)
        self._name = None
        self._core_options = None
        self.__name__ = getattr(function, "__name__", "remote_function")
        self.__qualname__ = getattr(function, "__qualname__", self.__name__)
        self.__module__ = getattr(function, "__module__", None)
        self.__doc__ = getattr(function, "__doc__", None)

    def __getstate__(self):
        # Captured by another task's function: the core worker's options of
        # this process stay here (the receiver computes its own).
        state = dict(self.__dict__)
        state["_core_options"] = None
        state.pop("_fast", None)  # this session's builtin (see _submit)
        state.pop("_fast_for", None)
        return state

    def __setstate__(self, saved):
        self.__dict__.update(saved)
        # Pickled where it was exported, to this same cluster: not again.
        if self._name is not None:
            state.exported.setdefault(self._name[5:], True)

    def __call__(self, *args, **kwargs):
        raise TypeError("Remote functions cannot be called directly. Instead of running "
                        "'%s.%s()', try '%s.%s.remote()'." %
                        (self.__module__, self.__name__, self.__module__, self.__name__))

    def options(self, **options):
        opts.check(options, opts.TASK_OPTIONS, "remote functions")
        merged = dict(self._options)
        merged.update(options)
        outer = self

        class _Bound:

            def remote(self, *args, **kwargs):
                return outer._submit(merged, args, kwargs)

        return _Bound()

    def remote(self, *args, **kwargs):
        fast = self._fast
        if fast is not None:
            return fast(*args, **kwargs)
        return self._submit(self._options, args, kwargs)

    def _remote(self, *args, **kwargs):
        return self._submit(self._options, args, kwargs)

    def _submit(self, options, args, kwargs):
        api.auto_init()
        if self._name is None or self._name[5:] not in state.exported:  # once per cluster joined
            self._name = export(self._function, "f")
        num_returns = options.get("num_returns", 1)
        cached = self._core_options
        if cached is None or cached[0] is not options:
            cached = self._core_options = (options, self._core_options_of(options, num_returns))
        if options is self._options and num_returns == 1 and self.__dict__.get("_fast_for") is not state.exported:
            # From now on in this session, a builtin takes the common call
            # (scalar arguments) straight to the core worker, any other here.
            self._fast = _core.front_call(self._remote, None, self._name, cached[1])
            self._fast_for = state.exported
        parts, collection, ref_args = pack_args(args, kwargs, self.__qualname__)
        refs = _core.submit_task(self._name, parts, collection, ref_args, cached[1])
        if num_returns == 0:
            return None
        return _refs(refs, num_returns)

    def _core_options_of(self, options, num_returns):
        """The core worker's options for `options` (computed once per options)."""
        core = {
            "resources": opts.resources(options, 1),
            "num_returns": max(1, num_returns),
            "name": options.get("name") or self.__qualname__,
            "env_vars": opts.env_vars(options),
        }
        if options.get("max_retries") is not None:
            core["max_retries"] = int(options["max_retries"])
        if options.get("label_selector"):
            core["label_selector"] = dict(options["label_selector"])
        retry = options.get("retry_exceptions")
        if retry:
            core["retry_exceptions"] = True
            if retry is not True:
                core["retry_exception_filter"] = cloudpickle.dumps(tuple(retry))
        opts.strategy(options, core)
        return _core.TaskOptions(core)
