"""Run something in a forked child and learn whether it raised `RuntimeError`."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable


def runtime_error_in_a_fork(action: Callable[[], object]) -> str:
    """The message of the RuntimeError `action` raised in a forked child ("" for none); any
    other failure of the child fails the caller."""
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # Python 3.12 warns about forking with threads running
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: tell the parent, then leave without running its cleanup
        status = 1
        try:
            try:
                action()
                message = ""
            except RuntimeError as error:
                message = str(error)
            os.write(write_end, message.encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        told = reader.read().decode()
    if os.waitpid(pid, 0)[1] != 0:
        raise AssertionError("the forked child failed otherwise (see its output)")
    return told
