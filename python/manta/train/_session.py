"""The calls a training loop makes in its worker (Ray Train's report,
get_context, get_checkpoint), over the C++ trainer's: the report is the
same barrier on every rank, the context the C++ worker's.

A checkpoint reported from a directory outside the run's directory is first
copied into <storage_path>/<name>/checkpoint_<n> (every rank copies its own
files into the same n, as Ray persists each rank's shard), and that copy is
what is committed and what get_checkpoint() hands back. n counts this
group's reports on from the checkpoint the group started with, so every
rank names the same directory.
"""

import inspect
import os
import re
import shutil
import threading

from manta import _core
from manta.train._checkpoint import Checkpoint

_lock = threading.Lock()
# This process's loop: whether its run is elastic, its reports in this
# group, the index of its next checkpoint directory, and the checkpoint its
# group started from when the controller named one (an elastic re-form).
_state = {"active": False, "elastic": False, "reports": 0, "base": 0, "restore": None}


class GroupEnded(BaseException):
    """Raised out of report() in an elastic run when the group re-forms (a
    host died, drained or came back): the loop stops at its step boundary
    and runs again on the new group. Not an Exception, so a loop's
    `except Exception` lets it through."""


_CHECKPOINT_DIR = re.compile(r"^checkpoint_(\d+)$")


class TrainContext:
    """Where this worker stands in the current group (Ray's TrainContext)."""

    def __init__(self, d):
        self._d = d

    def get_world_rank(self):
        return self._d["world_rank"]

    def get_world_size(self):
        return self._d["world_size"]

    def get_local_rank(self):
        return self._d["local_rank"]

    def get_local_world_size(self):
        return self._d["local_world_size"]

    def get_node_rank(self):
        return self._d["node_rank"]

    def get_experiment_name(self):
        return self._d["run_name"]

    def get_storage_path(self):
        """The run's directory, <storage_path>/<name>."""
        return self._d["storage_path"]

    def get_run_id(self):
        return self._d["run_id"]

    def get_attempt_number(self):
        return self._d["attempt_number"]

    def get_slice_id(self):
        return self._d["slice_id"]

    def get_num_slices(self):
        return self._d["num_slices"]

    def get_coordinator_address(self):
        return self._d["coordinator_address"]

    def __repr__(self):
        return "TrainContext(%s)" % ", ".join("%s=%r" % kv for kv in sorted(self._d.items()))


def get_context():
    """The current group's context; RuntimeError outside a training loop."""
    return TrainContext(_core.train_get_context())


class PreemptionInfo:
    """A preemption notice for the current group: nodes of it are draining
    and leave by `deadline` (unix seconds; None when no deadline was given).
    `preempted_ranks`: the world ranks on those nodes."""

    def __init__(self, d):
        self.deadline = d["deadline_ms"] / 1000.0 if d["deadline_ms"] else None
        self.preempted_ranks = list(d["ranks"])
        self.node_ids = list(d["node_ids"])
        self.reason = d["reason"]

    def __repr__(self):
        return "PreemptionInfo(deadline=%r, preempted_ranks=%r, reason=%r)" % (self.deadline, self.preempted_ranks,
                                                                               self.reason)


def get_preemption_info():
    """The preemption notice for this worker's group as of its latest
    report() (every rank sees the same one after the same report), or None
    when none of the group's nodes is draining."""
    d = _core.train_get_preemption_info()
    return None if d is None else PreemptionInfo(d)


def get_checkpoint():
    """The latest committed checkpoint (None before the first)."""
    with _lock:
        path = _state["restore"]
    if path is None:
        path = _core.train_get_checkpoint()
    return Checkpoint(path) if path else None


def _numbers(metrics):
    if not isinstance(metrics, dict):
        raise TypeError("report(metrics): metrics must be a dict, got %s" % type(metrics).__name__)
    out = {}
    for k, v in metrics.items():
        try:
            out[str(k)] = float(v)
        except (TypeError, ValueError):
            raise TypeError("report(metrics): the value of %r is %s; Manta's trainer reports numbers" %
                            (k, type(v).__name__)) from None
    return out


def _persist(checkpoint, dir_name):
    """The directory `checkpoint` is committed as: itself when it lies in
    the run's directory, else a copy there."""
    run_dir = os.path.abspath(_core.train_get_context()["storage_path"])
    src = os.path.abspath(checkpoint.path)
    if os.path.dirname(src) == run_dir:
        return src
    if not os.path.isdir(src):
        raise ValueError("report(checkpoint=...): %s is not a directory" % src)
    with _lock:
        n = _state["base"] + _state["reports"]
    dst = os.path.join(run_dir, dir_name or "checkpoint_%06d" % n)
    shutil.copytree(src, dst, dirs_exist_ok=True)
    return dst


def report(metrics, checkpoint=None, checkpoint_dir_name=None):
    """Reports this rank's metrics and, optionally, its part of a checkpoint.
    A barrier: returns once every rank made its report of the same round."""
    numbers = _numbers(metrics)
    path = None
    if checkpoint is not None:
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError("report(checkpoint=...) takes a manta.train.Checkpoint")
        path = _persist(checkpoint, checkpoint_dir_name)
    with _lock:
        _state["reports"] += 1
        elastic = _state["elastic"]
    if not elastic:
        _core.train_report(numbers, path)
        return
    commit, pause, committed = _core.train_commit_step(numbers, path, False)
    if committed is not None:
        with _lock:
            _state["restore"] = None  # the session's own is newer
    if not commit:
        raise GroupEnded("the group ended before every rank reported")
    if pause:
        raise GroupEnded("the group re-forms")


def _begin(elastic, restore):
    with _lock:
        _state.update(elastic=elastic, restore=restore)
    base = 0
    latest = get_checkpoint()
    if latest:
        m = _CHECKPOINT_DIR.match(os.path.basename(latest.path.rstrip("/")))
        if m:
            base = int(m.group(1)) + 1
    with _lock:
        _state.update(active=True, reports=0, base=base)


def _end():
    with _lock:
        _state["active"] = False


def takes_config(fn):
    """Whether the loop takes the config (one parameter) or nothing."""
    try:
        params = [
            p for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    except (TypeError, ValueError):
        return True
    if len(params) > 1:
        raise ValueError("train_loop_per_worker must take at most one argument (the config), "
                         "it takes %d" % len(params))
    return len(params) == 1


class Loop:
    """What a worker runs: the user's loop, called with its config (or
    nothing), with this process's session set around it."""

    def __init__(self, fn, with_config, elastic):
        self.fn = fn
        self.with_config = with_config
        self.elastic = elastic
        self.__qualname__ = getattr(fn, "__qualname__", "train_loop_per_worker")

    def __call__(self, config):
        restore = None
        if self.elastic:
            restore = _restore_of(_core.train_current_join())
        while True:
            _begin(self.elastic, restore)
            try:
                if self.with_config:
                    self.fn(config)
                else:
                    self.fn()
                return
            except GroupEnded as e:
                why = str(e)
            finally:
                _end()
            # The group re-forms: this process waits for its place in the
            # next one (None: it is not in it) and runs the loop again
            # there, from the latest committed checkpoint.
            with _lock:
                reports = _state["reports"]
            join = _core.train_await_next_group(reports, why, None)
            if join is None:
                return
            restore = _restore_of(join)


def _restore_of(join):
    """The checkpoint a group's join names ("" for none: from scratch), or
    None when the session's own latest applies."""
    if join["source"] == _core.TRAIN_JOIN_RESTORE:
        return join["restore_from"]
    if join["source"] == _core.TRAIN_JOIN_INIT:
        return ""
    return None
