"""The options of @manta.remote and .options(), checked and turned into the
core worker's: an option is never accepted and ignored."""

import numbers

TASK_OPTIONS = {
    "num_cpus", "num_gpus", "memory", "resources", "num_returns", "max_retries", "retry_exceptions", "name",
    "scheduling_strategy", "label_selector", "runtime_env", "accelerator_type"
}
ACTOR_OPTIONS = {
    "num_cpus", "num_gpus", "memory", "resources", "max_restarts", "max_task_retries", "max_concurrency", "name",
    "namespace", "lifetime", "get_if_exists", "scheduling_strategy", "label_selector", "runtime_env"
}
METHOD_OPTIONS = {"num_returns", "name"}


def check(options, known, what):
    for key in options:
        if key not in known:
            raise ValueError("Invalid option keyword %s for %s. Valid ones are %s." %
                             (key, what, ", ".join(sorted(known))))
    for key in ("num_cpus", "num_gpus", "memory"):
        v = options.get(key)
        if v is not None and (not isinstance(v, numbers.Number) or isinstance(v, bool) or v != v or v < 0):
            raise ValueError("The keyword '%s' only accepts None or a non-negative number, got %r" % (key, v))
    n = options.get("num_returns")
    if n is not None:
        if n in ("dynamic", "streaming"):
            raise ValueError("num_returns=%r (dynamic and streaming generators) is not supported "
                             "by Manta" % (n,))
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError("num_returns must be a non-negative int, got %r" % (n,))
    retry = options.get("retry_exceptions")
    if retry is not None and not isinstance(retry, bool):
        if not isinstance(retry, (list, tuple)) or not retry or not all(
                isinstance(c, type) and issubclass(c, BaseException) for c in retry):
            raise TypeError("retry_exceptions must be either a boolean or a list of exceptions")
    resources = options.get("resources")
    if resources is not None:
        if not isinstance(resources, dict):
            raise TypeError("resources must be a dict")
        for k, v in resources.items():
            if k in ("CPU", "GPU"):
                raise ValueError("Use the 'num_cpus' and 'num_gpus' keyword arguments instead of "
                                 "'resources' for CPUs and GPUs")
            if not isinstance(v, numbers.Number) or v != v or v < 0:
                raise ValueError("resource %r must be a non-negative number, got %r" % (k, v))
    env = options.get("runtime_env")
    if env is not None:
        from manta._private.api import _check_runtime_env
        _check_runtime_env(env)
        if "working_dir" in env:
            raise ValueError("a working_dir is set for the whole job (manta.init(runtime_env=...) "
                             "or the Jobs API), not per task or actor")
    if options.get("accelerator_type") is not None:
        raise ValueError("accelerator_type is not supported by Manta: use resources "
                         "(e.g. {'TPU': 4}) or label_selector")


def resources(options, default_cpus):
    out = {}
    cpus = options.get("num_cpus")
    out["CPU"] = float(default_cpus if cpus is None else cpus)
    if options.get("num_gpus"):
        out["GPU"] = float(options["num_gpus"])
    if options.get("memory"):
        out["memory"] = float(options["memory"])
    for k, v in (options.get("resources") or {}).items():
        out[k] = float(v)
    return out


def env_vars(options):
    """The task's or actor's own variables (the job's reach every worker of
    the job through the core worker)."""
    return dict((options.get("runtime_env") or {}).get("env_vars", {}))


def strategy(options, core):
    """Sets the placement fields of `core` (a dict of core options) from
    scheduling_strategy."""
    s = options.get("scheduling_strategy")
    if s is None or s == "DEFAULT":
        return
    from manta.util import scheduling_strategies as ss
    if s == "SPREAD":
        core["strategy"] = 1
        return
    if isinstance(s, ss.PlacementGroupSchedulingStrategy):
        core["placement_group_id"] = s.placement_group.id.binary()
        core["bundle_index"] = s.placement_group_bundle_index
        return
    if isinstance(s, ss.NodeAffinitySchedulingStrategy):
        core["strategy"] = 2
        core["strategy_node_id"] = s.node_id
        core["strategy_soft"] = bool(s.soft)
        return
    if isinstance(s, ss.NodeLabelSchedulingStrategy):
        s.check_supported()  # raises, naming what to use instead
    raise ValueError("scheduling_strategy must be \"DEFAULT\", \"SPREAD\", a "
                     "PlacementGroupSchedulingStrategy or a NodeAffinitySchedulingStrategy, got %r" % (s,))
