"""Exceptions raised by Manta's Python API, with Ray's names and hierarchy.

    RayError (alias MantaError)
    ├── RayTaskError                  a task raised; as_instanceof_cause() is also the user's class
    ├── TaskCancelledError
    ├── GetTimeoutError               also a TimeoutError
    ├── RayActorError
    │   ├── ActorDiedError
    │   └── ActorUnavailableError
    ├── WorkerCrashedError
    ├── ObjectLostError
    │   ├── OwnerDiedError
    │   ├── ObjectFetchTimedOutError
    │   └── ReferenceCountingAssertionError   also an AssertionError
    ├── RuntimeEnvSetupError
    ├── NodeDiedError
    ├── PendingCallsLimitExceeded
    ├── TaskUnschedulableError
    ├── ActorUnschedulableError
    ├── CrossLanguageError
    └── RaySystemError

`from_error(error_type, message, data)` turns an error of the core worker
(its ErrorType code, message and payload) into one of these;
`make_task_error(exc, ...)` builds, in a worker, the RayTaskError whose
cloudpickle is the payload of an application error. Every class pickles
and unpickles (the state is restored without calling __init__, so
subclasses may have any signature).

Only the standard library is needed to import this module; cloudpickle is
imported when a payload is made or read.
"""

import os
import pickle
import socket
import threading
import traceback as _traceback
import weakref

__all__ = [
    "RayError",
    "MantaError",
    "RayTaskError",
    "TaskCancelledError",
    "GetTimeoutError",
    "RayActorError",
    "ActorDiedError",
    "ActorUnavailableError",
    "WorkerCrashedError",
    "ObjectLostError",
    "OwnerDiedError",
    "ObjectFetchTimedOutError",
    "ReferenceCountingAssertionError",
    "RuntimeEnvSetupError",
    "NodeDiedError",
    "PendingCallsLimitExceeded",
    "TaskUnschedulableError",
    "ActorUnschedulableError",
    "CrossLanguageError",
    "RaySystemError",
    "ErrorType",
    "from_error",
    "make_task_error",
]


class ErrorType:
    """The core worker's ErrorType codes (runtime/include/manta/internal/core_worker.h)."""

    NONE = 0
    APPLICATION_ERROR = 1
    WORKER_DIED = 2
    ACTOR_DIED = 3
    OWNER_DIED = 4
    INFEASIBLE = 5
    OBJECT_LOST = 6
    TASK_CANCELLED = 7
    NODE_DIED = 8
    INVALID_ARGUMENT = 9
    TIMEOUT = 100


def _restore(cls, args, state):
    """Rebuilds an exception pickled by RayError.__reduce__."""
    obj = cls.__new__(cls)
    obj.args = args
    obj.__dict__.update(state)
    return obj


def _identity(value):
    return value


class _Cause:
    """Pickles a task's exception so that it unpickles even when its class's
    __init__ does not accept its args (then its args and __dict__ are
    restored without calling __init__)."""

    __slots__ = ("exc",)

    def __init__(self, exc):
        self.exc = exc

    def __reduce__(self):
        exc = self.exc
        if isinstance(exc, BaseException) and not isinstance(exc, RayError):
            cp = _cloudpickle()
            try:
                cp.loads(cp.dumps(exc))
            except Exception:  # noqa: BLE001 - rebuild it field by field instead
                return (_restore, (type(exc), exc.args, dict(getattr(exc, "__dict__", {}))))
        return (_identity, (exc,))


class RayError(Exception):
    """Base class of every error Manta raises for a task, an actor or an object."""

    def __reduce__(self):
        return (_restore, (type(self), self.args, dict(self.__dict__)))


MantaError = RayError


class _MessageError(RayError):
    """An error whose text is a message given at construction."""

    default_message = ""

    def __init__(self, message=None):
        self.message = message if message else self.default_message
        super().__init__(self.message)

    def __str__(self):
        return self.message


class CrossLanguageError(RayError):
    """An error raised by code of another language (a C++ task)."""

    def __init__(self, message="", language="C++"):
        self.language = language
        self.message = message
        super().__init__(message)

    def __str__(self):
        return f"An exception raised from {self.language}:\n{self.message}"


class TaskCancelledError(RayError):
    """The task, or one it depends on, was cancelled."""

    def __init__(self, task_id=None, message=None):
        self.task_id = task_id
        self.message = message
        super().__init__(*(a for a in (task_id,) if a is not None))

    def __str__(self):
        if self.message:
            return self.message
        if self.task_id is None:
            return "This task or its dependency was cancelled"
        return f"Task: {self.task_id} was cancelled"


def _node_ip():
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


# Frames of Manta's own Python that a remote traceback leaves out, as Ray
# leaves out its worker's frames.
_INTERNAL_FRAMES = ("manta/_worker.py", "manta/_private/", "manta/_api", "manta/exceptions.py")


class RayTaskError(RayError):
    """A task raised an exception while it ran.

    Attributes: function_name, traceback_str (the remote traceback), cause
    (the exception the task raised), proctitle, pid, ip, actor_repr.
    `get` raises `as_instanceof_cause()`, which is also an instance of the
    cause's class, so `except ValueError` catches a task's ValueError.
    """

    def __init__(self, function_name, traceback_str, cause, proctitle=None, pid=None, ip=None, actor_repr=None,
                 actor_id=None):
        self.function_name = function_name
        self.traceback_str = traceback_str if traceback_str is not None else ""
        self.cause = cause
        self.proctitle = proctitle or f"manta::{function_name}"
        self.pid = pid if pid is not None else os.getpid()
        self.ip = ip if ip is not None else _node_ip()
        self.actor_repr = actor_repr
        self._actor_id = actor_id
        super().__init__(function_name, self.traceback_str, cause, self.proctitle, self.pid, self.ip)

    def __reduce__(self):
        boxed = _Cause(self.cause)
        args = tuple(boxed if a is self.cause and a is not None else a for a in self.args)
        state = dict(self.__dict__, cause=boxed)
        return (_restore, (type(self), args, state))

    def make_dual_exception_type(self):
        """The class that derives from both RayTaskError and the cause's class.

        Raises TypeError when the cause's class cannot be subclassed.
        """
        return _dual_class(type(self.cause))

    def as_instanceof_cause(self):
        """An exception of a class derived from RayTaskError and the cause's class.

        It carries the cause's attributes (looked up on the cause) and prints
        as this error does. Returns self when the cause is missing, is a
        RayTaskError already, or its class cannot be subclassed.
        """
        cause_cls = type(self.cause)
        if self.cause is None or issubclass(RayTaskError, cause_cls) or issubclass(cause_cls, RayTaskError):
            return self
        try:
            dual = _dual_class(cause_cls)
        except TypeError:
            return self
        return dual(self.cause, self)

    def _header(self):
        line = f"{self.proctitle}() (pid={self.pid}, ip={self.ip}"
        if self.actor_repr:
            line += f", actor_id={self._actor_id}, repr={self.actor_repr}"
        return line + ")"

    def __str__(self):
        lines = self.traceback_str.strip().split("\n")
        out = []
        skip_code = False
        for i, line in enumerate(lines):
            if line.startswith("Traceback "):
                out.append(self._header())
                skip_code = False
            elif line.startswith("  File ") and any(f in line for f in _INTERNAL_FRAMES):
                skip_code = i + 1 < len(lines) and lines[i + 1].startswith("    ")
            elif skip_code:
                skip_code = False
            else:
                out.append(line)
        if self.function_name and not any(line.startswith("Traceback ") for line in lines):
            out.insert(0, self._header())
        return "\n".join(out)


_dual_lock = threading.Lock()
_dual_classes = weakref.WeakKeyDictionary()  # cause class -> its dual class


def _restore_dual(cause, task_error):
    return task_error.as_instanceof_cause()


class _DualMixin:
    """Behaviour of every RayTaskError(<cause class>) class."""

    def __init__(self, cause, task_error):
        # The cause's own __init__ is not called: the cause is already built.
        self.__dict__.update(task_error.__dict__)
        self.cause = cause
        self.args = tuple(getattr(cause, "args", ()))

    def __getattr__(self, name):
        # Only reached for names the instance lacks: the cause's attributes.
        cause = self.__dict__.get("cause")
        if cause is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(cause, name)

    def __str__(self):
        return RayTaskError.__str__(self)

    def __reduce__(self):
        state = {k: v for k, v in self.__dict__.items() if k != "cause"}
        task_error = _restore(RayTaskError, (), state)
        task_error.cause = self.cause
        return (_restore_dual, (_Cause(self.cause), task_error))


def _dual_class(cause_cls):
    with _dual_lock:
        cls = _dual_classes.get(cause_cls)
        if cls is None:
            name = f"RayTaskError({cause_cls.__name__})"
            cls = type(name, (_DualMixin, RayTaskError, cause_cls), {"__qualname__": name, "__module__": __name__})
            _dual_classes[cause_cls] = cls
        return cls


class WorkerCrashedError(_MessageError):
    """The worker died unexpectedly while it ran the task."""

    default_message = ("The worker died unexpectedly while executing this task. "
                       "Check the worker logs in the session directory for more information.")


class RayActorError(RayError):
    """The actor failed before it finished the task (dead or unreachable)."""

    BASE_ERROR_MSG = "The actor experienced an error before finishing this task."

    def __init__(self, actor_id=None, error_msg=None, actor_init_failed=False, preempted=False):
        self.actor_id = actor_id
        self.error_msg = error_msg or self.BASE_ERROR_MSG
        self._actor_init_failed = actor_init_failed
        self._preempted = preempted
        super().__init__(self.error_msg)

    @property
    def actor_init_failed(self):
        return self._actor_init_failed

    @property
    def preempted(self):
        return self._preempted

    def __str__(self):
        return self.error_msg


class ActorDiedError(RayActorError):
    """The actor died, before or while running the task.

    `cause` is a RayTaskError when the actor's __init__ raised, or a message.
    """

    BASE_ERROR_MSG = "The actor died unexpectedly before finishing this task."

    def __init__(self, cause=None, actor_id=None, preempted=False):
        init_failed = isinstance(cause, RayTaskError)
        if init_failed:
            msg = f"The actor died because of an error raised in its creation task, {cause}"
            actor_id = actor_id or getattr(cause, "_actor_id", None)
        elif cause:
            msg = f"{self.BASE_ERROR_MSG}\n{cause}"
        else:
            msg = self.BASE_ERROR_MSG
        super().__init__(actor_id, msg, init_failed, preempted)

    @staticmethod
    def from_task_error(task_error):
        return ActorDiedError(task_error)


class ActorUnavailableError(RayActorError):
    """The actor cannot be reached now but may be later; the task may or may not have run."""

    def __init__(self, error_message="", actor_id=None):
        if isinstance(actor_id, bytes):
            actor_id = actor_id.hex()
        msg = (f"The actor {actor_id} is unavailable: {error_message}. "
               "The task may or may not have been executed on the actor.")
        super().__init__(actor_id, msg)


class RaySystemError(RayError):
    """Manta itself failed (a daemon died, a value could not be decoded, ...)."""

    def __init__(self, client_exc, traceback_str=None):
        self.client_exc = client_exc
        self.traceback_str = traceback_str
        super().__init__(client_exc)

    def __str__(self):
        msg = f"System error: {self.client_exc}"
        if self.traceback_str:
            msg += f"\ntraceback: {self.traceback_str}"
        return msg


class NodeDiedError(_MessageError):
    """The node that ran the task died or cannot be reached."""

    default_message = "The node running this task died."


class ObjectLostError(RayError):
    """Every copy of the object was lost (node failure or system error).

    Attributes: object_ref_hex, owner_address, call_site; `message`, when
    set, is the core worker's own explanation.
    """

    def __init__(self, object_ref_hex="", owner_address="", call_site="", message=None):
        self.object_ref_hex = object_ref_hex
        self.owner_address = owner_address
        self.call_site = call_site or ""
        self.message = message
        super().__init__(object_ref_hex)

    def _base_str(self):
        msg = f"Failed to retrieve object {self.object_ref_hex}. " if self.object_ref_hex else \
            "Failed to retrieve an object. "
        if self.call_site:
            msg += f"The ObjectRef was created at: {self.call_site}"
        if self.message:
            msg += ("\n" if self.call_site else "") + self.message
        return msg.rstrip()

    def _explanation(self):
        return ("All copies of the object have been lost due to node failure. Check the logs "
                "under the session directory (/tmp/manta/session_latest/logs) for more information.")

    def __str__(self):
        return self._base_str() + "\n\n" + self._explanation()


class OwnerDiedError(ObjectLostError):
    """The process that owned the object (created it with .remote() or put) exited."""

    def _explanation(self):
        return ("The object's owner has exited. This is the Python worker that first created the "
                "ObjectRef via `.remote()` or `manta.put()`. Check the logs under the session "
                "directory (/tmp/manta/session_latest/logs) for more information.")


class ObjectFetchTimedOutError(ObjectLostError):
    """Fetching the object timed out: no location of it was found."""

    def _explanation(self):
        return "Fetch for the object timed out because no locations were found for it."


class ReferenceCountingAssertionError(ObjectLostError, AssertionError):
    """The object was deleted while a reference to it still existed."""

    def _explanation(self):
        return ("The object has already been deleted by the reference counting protocol. "
                "This should not happen.")


class GetTimeoutError(RayError, TimeoutError):
    """get() or wait() did not finish before its timeout."""


class RuntimeEnvSetupError(RayError):
    """The runtime environment of a task or actor could not be set up."""

    def __init__(self, error_message=None):
        self.error_message = error_message
        super().__init__(*(a for a in (error_message,) if a))

    def __str__(self):
        return "\n".join(m for m in ("Failed to setup runtime environment.", self.error_message) if m)


class PendingCallsLimitExceeded(RayError):
    """The actor has more pending calls than its max_pending_calls option allows."""


class TaskUnschedulableError(RayError):
    """No node can ever run the task (infeasible resources, a dead affinity node, ...)."""

    def __init__(self, error_message=""):
        self.error_message = error_message
        super().__init__(error_message)

    def __str__(self):
        return f"The task is not schedulable: {self.error_message}"


class ActorUnschedulableError(RayError):
    """No node can ever host the actor."""

    def __init__(self, error_message=""):
        self.error_message = error_message
        super().__init__(error_message)

    def __str__(self):
        return f"The actor is not schedulable: {self.error_message}"


RAY_EXCEPTION_TYPES = [
    RayError,
    RayTaskError,
    TaskCancelledError,
    GetTimeoutError,
    RayActorError,
    ActorDiedError,
    ActorUnavailableError,
    WorkerCrashedError,
    ObjectLostError,
    OwnerDiedError,
    ObjectFetchTimedOutError,
    ReferenceCountingAssertionError,
    RuntimeEnvSetupError,
    NodeDiedError,
    PendingCallsLimitExceeded,
    TaskUnschedulableError,
    ActorUnschedulableError,
    CrossLanguageError,
    RaySystemError,
]


def _cloudpickle():
    try:
        import cloudpickle
        return cloudpickle
    except ImportError:  # values of importable classes still round-trip
        return pickle


def make_task_error(exc, function_name, traceback_text=None, pid=None, ip=None, actor_repr=None, actor_id=None):
    """The RayTaskError a worker sends back when `function_name` raised `exc`;
    its cloudpickled bytes are the payload of an application error, which
    from_error(ErrorType.APPLICATION_ERROR, message, payload) turns back into
    the exception to raise.

    `traceback_text` defaults to the formatted traceback of `exc`; `pid` and
    `ip` (empty: unknown) to this process's. A RayTaskError raised by a
    nested get keeps its original cause, so the caller still gets the user's
    class. The result always pickles: a cause that cannot be pickled, even
    field by field, is replaced by a RayError holding its text.
    """
    if traceback_text is None:
        traceback_text = "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__))
    cause = exc.cause if isinstance(exc, RayTaskError) else exc
    cp = _cloudpickle()
    try:
        cp.loads(cp.dumps(_Cause(cause)))
    except Exception as e:  # noqa: BLE001 - any failure means "not transportable"
        cause = RayError(f"{type(cause).__name__}: {cause} (the exception could not be pickled: {e})")
    return RayTaskError(function_name, traceback_text, cause, pid=pid or None, ip=ip or None, actor_repr=actor_repr,
                        actor_id=actor_id)


def _task_error_from(message, data):
    """The exception an application error's payload holds, ready to raise."""
    if data:
        try:
            value = _cloudpickle().loads(data)
        except Exception as e:  # noqa: BLE001 - e.g. the class is not importable here
            value = RayTaskError(
                "", message or "",
                RaySystemError(f"the task's exception could not be unpickled: {type(e).__name__}: {e}"))
            return value
        if isinstance(value, RayTaskError):
            return value.as_instanceof_cause()
        if isinstance(value, BaseException):
            return value
    return RayTaskError("", message or "", None)


def from_error(error_type, message, data=b"", *, actor=False):
    """The exception for an error of the core worker.

    `error_type` is the ErrorType code, `message` its text and `data` its
    payload (for an application error, a cloudpickled RayTaskError or
    exception; a payload that does not unpickle gives a RayTaskError with
    the message). `actor` says the error is about creating an actor, which
    makes an infeasible request an ActorUnschedulableError.
    """
    message = message or ""
    if error_type == ErrorType.APPLICATION_ERROR:
        return _task_error_from(message, data)
    if error_type == ErrorType.WORKER_DIED:
        return WorkerCrashedError(message or None)
    if error_type == ErrorType.ACTOR_DIED:
        return ActorDiedError(message or None)
    if error_type == ErrorType.OWNER_DIED:
        return OwnerDiedError(message=message)
    if error_type == ErrorType.INFEASIBLE:
        return ActorUnschedulableError(message) if actor else TaskUnschedulableError(message)
    if error_type == ErrorType.OBJECT_LOST:
        return ObjectLostError(message=message)
    if error_type == ErrorType.TASK_CANCELLED:
        return TaskCancelledError(message=message or None)
    if error_type == ErrorType.NODE_DIED:
        return NodeDiedError(message or None)
    if error_type == ErrorType.TIMEOUT:
        return GetTimeoutError(message or "Get timed out")
    if error_type == ErrorType.INVALID_ARGUMENT:
        return RaySystemError(message)
    return RaySystemError(f"error type {error_type}: {message}")
