"""What a measuring script reports as it goes: timestamped progress on stderr, and the exact
commands it ran, each once, for its results file."""
import os
import sys
import time


def logger(tag):
    """log(*args): one line "[TAG HH:MM:SS] args" on stderr."""
    def log(*args):
        print("[%s %s]" % (tag, time.strftime("%H:%M:%S")), *args, file=sys.stderr, flush=True)
    return log


class Commands(list):
    """The commands of a run in the order first seen, each once."""

    def add(self, text):
        if text not in self:
            self.append(text)


def described(args, root):
    """A command line as a report shows it: paths inside `root` relative to it."""
    return " ".join(os.path.relpath(a, root) if a.startswith(root) else a for a in args)
