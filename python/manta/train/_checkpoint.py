"""Checkpoint: a directory holding one checkpoint (Ray's
ray.train.Checkpoint, for local and mounted directories)."""

import contextlib
import os
import shutil
import tempfile


class Checkpoint:
    """A directory; `path` is where it is."""

    def __init__(self, path, filesystem=None):
        if filesystem is not None:
            raise ValueError("Manta checkpoints are local or mounted directories: filesystem must be None")
        self.path = os.fspath(path)
        self.filesystem = None

    @classmethod
    def from_directory(cls, path):
        return cls(os.path.abspath(os.fspath(path)))

    @contextlib.contextmanager
    def as_directory(self):
        """Yields the directory (the checkpoint itself: do not write into it)."""
        yield self.path

    def to_directory(self, path=None):
        """Copies the checkpoint into `path` (default: a new temporary
        directory); returns that path."""
        path = path or tempfile.mkdtemp(prefix="checkpoint_")
        shutil.copytree(self.path, path, dirs_exist_ok=True)
        return path

    def __eq__(self, other):
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self):
        return hash(self.path)

    def __repr__(self):
        return "Checkpoint(filesystem=local, path=%s)" % self.path

    def __fspath__(self):
        return self.path
