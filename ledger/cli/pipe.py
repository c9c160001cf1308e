"""A reader of our output that went away (``notary backup | head -1``) ends a command quietly.

Unix tools die of SIGPIPE when the reader of their stdout closes it; Python ignores SIGPIPE and
raises BrokenPipeError from the next write instead (or prints "Exception ignored" from the final
flush at exit). Both commands' ``main`` turn that into the status a shell reports for a tool
killed by SIGPIPE, with no traceback, and only when it is stdout that broke: a broken socket
elsewhere stays an error.
"""

from __future__ import annotations

import os
import select
import sys

__all__ = ["STDOUT_CLOSED", "stdout_reader_gone"]

STDOUT_CLOSED = 128 + 13  # 128 + SIGPIPE: what `yes | head -1` reports for `yes`


def stdout_reader_gone(exc: BaseException) -> bool:
    """True when ``exc`` is a BrokenPipeError because stdout's reader closed the pipe; stdout
    then points at /dev/null, so the interpreter's last flush has nowhere to fail."""
    if not isinstance(exc, BrokenPipeError):
        return False
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # replaced or closed: not a pipe of ours
        return False
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    if not any(events & select.POLLERR for _, events in poll.poll(0)):
        return False
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return True
