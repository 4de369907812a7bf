"""The training kernels' MaxText trainer as a Python training loop, where
the GKE tutorials call MaxText's train.py main:

    from manta.train.maxtext import main as maxtext_main

    def train_loop_per_worker(config):
        maxtext_main(config["argv"])

It trains as the C++ maxtext_trainer's loop does (manta/maxtext.h), in this
worker, with the group's distributed environment: every step is reported
through the trainer, checkpoints go to base_output_directory, and in an
elastic run survivors keep their state in memory while joiners take it
from peers.
"""

from manta import _core


def _maxtext_args(argv):
    """MaxText's arguments: argv without the program name, when it has one
    (main(argv) gets sys.argv from absl's app.run)."""
    args = [str(a) for a in argv]
    if len(args) > 1 and not args[0].endswith((".yml", ".yaml")) and "=" not in args[0]:
        args = args[1:]
    return args


def check_config(argv):
    """Raises ValueError naming the key when `argv` does not load as a config."""
    _core.train_check_maxtext_config(_maxtext_args(argv))


def main(argv):
    """Trains as `argv` says: [program,] base.yml, then key=value overrides.
    Raises when the config is bad, the kernels fail or a report failed."""
    _core.train_run_maxtext(_maxtext_args(argv))
