"""manta.exceptions: Ray's hierarchy, the dual-class task error, pickling, from_error."""

import pickle
import threading

import cloudpickle
import pytest

from manta import exceptions as E


class CustomError(ValueError):
    """A user exception whose __init__ does not take its args back."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


class PlainError(Exception):
    pass


def _raise(exc):
    raise exc


def _task_payload(exc, function_name="f", pid=4242, ip="10.1.2.3"):
    try:
        _raise(exc)
    except BaseException as e:  # noqa: BLE001
        # What the worker sends: the cloudpickled error make_task_error builds.
        return cloudpickle.dumps(E.make_task_error(e, function_name, None, pid, ip))


@pytest.mark.parametrize("child, parents", [
    (E.RayTaskError, [E.RayError]),
    (E.TaskCancelledError, [E.RayError]),
    (E.GetTimeoutError, [E.RayError, TimeoutError]),
    (E.RayActorError, [E.RayError]),
    (E.ActorDiedError, [E.RayActorError, E.RayError]),
    (E.ActorUnavailableError, [E.RayActorError, E.RayError]),
    (E.WorkerCrashedError, [E.RayError]),
    (E.ObjectLostError, [E.RayError]),
    (E.OwnerDiedError, [E.ObjectLostError]),
    (E.ObjectFetchTimedOutError, [E.ObjectLostError]),
    (E.ReferenceCountingAssertionError, [E.ObjectLostError, AssertionError]),
    (E.RuntimeEnvSetupError, [E.RayError]),
    (E.NodeDiedError, [E.RayError]),
    (E.PendingCallsLimitExceeded, [E.RayError]),
    (E.TaskUnschedulableError, [E.RayError]),
    (E.ActorUnschedulableError, [E.RayError]),
    (E.CrossLanguageError, [E.RayError]),
    (E.RaySystemError, [E.RayError]),
])
def test_hierarchy(child, parents):
    for parent in parents:
        assert issubclass(child, parent)
    assert issubclass(child, Exception)


def test_make_task_error_defaults():
    try:
        _raise(KeyError("k"))
    except KeyError as e:
        err = E.make_task_error(e, "g", None, 0, "")
    assert type(err) is E.RayTaskError and isinstance(err.cause, KeyError)
    assert err.pid > 0 and err.ip  # unknown pid and ip are this process's
    assert "in _raise" in err.traceback_str


def test_manta_error_is_ray_error():
    assert E.MantaError is E.RayError


def test_dual_instance_is_both_classes():
    err = E.from_error(E.ErrorType.APPLICATION_ERROR, "f raised", _task_payload(CustomError("boom", 7)))
    assert isinstance(err, CustomError)
    assert isinstance(err, ValueError)
    assert isinstance(err, E.RayTaskError)
    assert type(err).__name__ == "RayTaskError(CustomError)"
    assert err.code == 7  # the cause's attributes
    assert isinstance(err.cause, CustomError) and not isinstance(err.cause, E.RayTaskError)
    assert err.function_name == "f" and err.pid == 4242 and err.ip == "10.1.2.3"
    with pytest.raises(ValueError) as info:
        raise err
    assert info.value is err


def test_dual_str_shows_remote_traceback():
    err = E.from_error(E.ErrorType.APPLICATION_ERROR, "", _task_payload(CustomError("boom", 7)))
    text = str(err)
    lines = text.splitlines()
    assert lines[0] == "manta::f() (pid=4242, ip=10.1.2.3)"
    assert "in _raise" in text  # the frame that raised
    assert lines[-1].endswith("CustomError: boom")
    assert "Traceback (most recent call last)" not in text


def test_dual_class_is_shared_per_cause_class():
    a = E.from_error(1, "", _task_payload(CustomError("a", 1)))
    b = E.from_error(1, "", _task_payload(CustomError("b", 2)))
    assert type(a) is type(b)


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
def test_dual_instance_pickles(dumps):
    err = E.from_error(1, "", _task_payload(CustomError("boom", 7)))
    back = pickle.loads(dumps(err))
    assert isinstance(back, CustomError) and isinstance(back, E.RayTaskError)
    assert back.code == 7 and back.pid == 4242
    assert str(back) == str(err)
    assert back.traceback_str == err.traceback_str


def test_task_error_pickles():
    err = E.RayTaskError("g", "Traceback (most recent call last):\n  x\nKeyError: 'k'", KeyError("k"), pid=1,
                         ip="1.1.1.1")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is E.RayTaskError
    assert back.function_name == "g" and isinstance(back.cause, KeyError)
    assert str(back) == str(err)
    dual = back.as_instanceof_cause()
    assert isinstance(dual, KeyError) and isinstance(dual, E.RayTaskError)


@pytest.mark.parametrize("err", [
    E.TaskCancelledError("abc"),
    E.GetTimeoutError("late"),
    E.ActorDiedError("the actor was killed"),
    E.ActorUnavailableError("restarting", b"\x01\x02"),
    E.WorkerCrashedError(),
    E.ObjectLostError("00ff", "", "", message="gone"),
    E.OwnerDiedError(message="owner exited"),
    E.ObjectFetchTimedOutError("00aa"),
    E.ReferenceCountingAssertionError("00bb"),
    E.RuntimeEnvSetupError("pip failed"),
    E.NodeDiedError("node 1 died"),
    E.PendingCallsLimitExceeded("too many"),
    E.TaskUnschedulableError("no node has TPU: 8"),
    E.ActorUnschedulableError("no node has TPU: 8"),
    E.CrossLanguageError("std::runtime_error: x"),
    E.RaySystemError("raylet died", "tb"),
])
def test_every_error_pickles(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err)
    assert back.__dict__ == err.__dict__


def test_nested_task_error_keeps_the_user_class():
    inner = E.from_error(1, "", _task_payload(CustomError("deep", 3), function_name="inner"))
    outer = E.from_error(1, "", _task_payload(inner, function_name="outer"))
    assert isinstance(outer, CustomError) and isinstance(outer, E.RayTaskError)
    assert outer.function_name == "outer"
    assert "manta::inner()" in str(outer)  # the inner remote traceback is in the text


def test_unpicklable_cause_becomes_a_ray_error():

    class Unpicklable(Exception):

        def __init__(self, message):
            super().__init__(message)
            self.lock = threading.Lock()  # no pickling, whichever way

    err = E.from_error(1, "", _task_payload(Unpicklable("x")))
    assert isinstance(err, E.RayTaskError)
    assert isinstance(err.cause, E.RayError)
    assert "could not be pickled" in str(err.cause)


def test_cause_with_a_custom_reduce_that_fails_still_arrives():

    class NoReduce(Exception):

        def __reduce__(self):
            raise TypeError("no pickling here")

    err = E.from_error(1, "", _task_payload(NoReduce("x")))
    assert isinstance(err, NoReduce) and err.args == ("x",)


def test_cause_with_a_strict_init_round_trips():
    # CustomError(message, code) cannot be rebuilt from its args alone.
    err = E.from_error(1, "", _task_payload(CustomError("strict", 9)))
    assert err.cause.code == 9 and err.cause.args == ("strict",)


def test_bad_payload_falls_back_to_the_message():
    err = E.from_error(E.ErrorType.APPLICATION_ERROR, "f raised ValueError: x", b"not a pickle")
    assert type(err) is E.RayTaskError
    assert "f raised ValueError: x" in str(err)
    assert isinstance(err.cause, E.RaySystemError)


def test_plain_exception_payload():
    err = E.from_error(1, "m", cloudpickle.dumps(PlainError("p")))
    assert type(err) is PlainError


def test_empty_payload_gives_task_error_with_message():
    err = E.from_error(1, "remote raised something", b"")
    assert isinstance(err, E.RayTaskError)
    assert str(err) == "remote raised something"


@pytest.mark.parametrize("code, cls", [
    (E.ErrorType.WORKER_DIED, E.WorkerCrashedError),
    (E.ErrorType.ACTOR_DIED, E.ActorDiedError),
    (E.ErrorType.OWNER_DIED, E.OwnerDiedError),
    (E.ErrorType.INFEASIBLE, E.TaskUnschedulableError),
    (E.ErrorType.OBJECT_LOST, E.ObjectLostError),
    (E.ErrorType.TASK_CANCELLED, E.TaskCancelledError),
    (E.ErrorType.NODE_DIED, E.NodeDiedError),
    (E.ErrorType.INVALID_ARGUMENT, E.RaySystemError),
    (E.ErrorType.TIMEOUT, E.GetTimeoutError),
    (12345, E.RaySystemError),
])
def test_from_error_mapping(code, cls):
    err = E.from_error(code, "the core's message", b"")
    assert type(err) is cls
    assert "the core's message" in str(err)


def test_codes_match_the_core():
    assert (E.ErrorType.APPLICATION_ERROR, E.ErrorType.WORKER_DIED, E.ErrorType.ACTOR_DIED, E.ErrorType.OWNER_DIED,
            E.ErrorType.INFEASIBLE, E.ErrorType.OBJECT_LOST, E.ErrorType.TASK_CANCELLED, E.ErrorType.NODE_DIED,
            E.ErrorType.INVALID_ARGUMENT, E.ErrorType.TIMEOUT) == (1, 2, 3, 4, 5, 6, 7, 8, 9, 100)


def test_infeasible_actor():
    assert type(E.from_error(E.ErrorType.INFEASIBLE, "no room", b"", actor=True)) is E.ActorUnschedulableError


def test_timeout_is_a_timeout_error():
    with pytest.raises(TimeoutError):
        raise E.from_error(E.ErrorType.TIMEOUT, "get timed out after 1 s", b"")


def test_unsubclassable_cause_returns_the_task_error():

    class Final(Exception):

        def __init_subclass__(cls, **kwargs):
            raise TypeError("final")

    err = E.RayTaskError("f", "tb", Final("x"), pid=1, ip="1.1.1.1")
    assert err.as_instanceof_cause() is err


def test_actor_died_from_creation_error():
    task_error = E.RayTaskError("A.__init__", "Traceback (most recent call last):\nValueError: bad", ValueError("bad"),
                                pid=1, ip="1.1.1.1")
    err = E.ActorDiedError.from_task_error(task_error)
    assert err.actor_init_failed
    assert "creation task" in str(err)
