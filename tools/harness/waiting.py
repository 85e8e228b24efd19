"""Waits that end: every one has a deadline and says what it waited for."""
import time


class Failure(Exception):
    """A broken promise of the server under test, or a wait that ran out: the check stops and
    says which."""


def poll(condition, seconds, interval=0.1):
    """condition()'s first truthy value within `seconds`, else its last (falsy) value."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        remaining = deadline - time.monotonic()
        if value or remaining <= 0:
            return value
        time.sleep(min(interval, remaining))


def wait_for(condition, seconds, what, interval=0.1):
    """condition()'s first truthy value; Failure naming `what` when none came within `seconds`."""
    value = poll(condition, seconds, interval)
    if not value:
        raise Failure(f"{what}: not within {seconds:g} s")
    return value
