"""Ray Train v2's errors (ray.train.v2.api.exceptions): what fit() raises
when a run fails."""


class TrainingFailedError(RuntimeError):
    """The run failed. `result`: the Result it got to (metrics, the latest
    committed checkpoint, its path)."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


class WorkerGroupError(TrainingFailedError):
    """Loops failed past FailureConfig(max_failures). `worker_failures`: the
    last attempt's failed ranks, each to the exception its loop raised (an
    instance of the loop's own exception class, with its traceback)."""

    def __init__(self, message, worker_failures, result=None):
        super().__init__(message, result)
        self.worker_failures = worker_failures

    def __str__(self):
        parts = [self.args[0]]
        for rank, error in sorted(self.worker_failures.items()):
            parts.append("\n--- rank %d ---\n%s" % (rank, error))
        return "\n".join(parts)


class ControllerError(TrainingFailedError):
    """The run ended without a loop failing: its resources did not come in
    time, or the controller died."""
