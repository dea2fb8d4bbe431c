"""bench_subscribe.py's child processes: an object made in a ``spawn``ed child process
(:func:`serve`) answers the parent's ``(method, args)`` calls over a Pipe, and
:class:`Child` is the parent's handle on it. The producer (subscribe_producer.py)
and the scale row's subscribers (subscribe_scale_subscribers.py) run this way, so that
their CPU and the GIL they hold are their own, and the CPU of each can be read from
/proc."""

from __future__ import annotations

import contextlib
import multiprocessing
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["Child", "serve"]


def serve(conn: Connection, make: Callable[..., Any], *args: Any) -> None:
    """The child process: ``make(*args)``, then answer ``(method, args)`` calls on it
    with ``("ok", result)`` or ``("error", traceback)`` until ``stop``; the object's
    ``close()`` (if it has one) runs last."""
    try:
        obj = make(*args)
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ok", None))
    try:
        while True:
            cmd, cmd_args = conn.recv()
            if cmd == "stop":
                break
            try:
                conn.send(("ok", getattr(obj, cmd)(*cmd_args)))
            except BaseException:
                conn.send(("error", traceback.format_exc()))
    finally:
        close = getattr(obj, "close", None)
        if close is not None:
            close()


class Child:
    """The parent's handle on a child process serving ``make(*args)`` (both picklable:
    ``make`` a module-level function or class). :meth:`ready` waits for the object to be
    made; :meth:`call` is :meth:`send` then :meth:`answer`, which can also be split to
    call several children at once."""

    def __init__(self, name: str, make: Callable[..., Any], *args: Any) -> None:
        self.name = name
        self._stopping = False
        ctx = multiprocessing.get_context("spawn")  # no fork of a process with threads
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child, make, *args), name=name, daemon=True)
        self.proc.start()
        child.close()

    def ready(self, timeout: float = 60.0) -> None:
        """Wait until the child made its object.

        :raises RuntimeError: it failed (the message carries its traceback) or did not
            answer within ``timeout`` seconds.
        """
        self.answer(timeout)

    def send(self, cmd: str, *args: Any) -> None:
        self.conn.send((cmd, args))

    def answer(self, timeout: float) -> Any:
        """The result of the call sent last.

        :raises RuntimeError: as :meth:`ready`.
        """
        if not self.conn.poll(timeout):
            raise RuntimeError(f"{self.name} did not answer within {timeout:.0f} s")
        try:
            status, value = self.conn.recv()
        except EOFError:
            self.proc.join(1)
            raise RuntimeError(f"{self.name} exited (code {self.proc.exitcode})") from None
        if status != "ok":
            raise RuntimeError(f"{self.name} failed:\n{value}")
        return value

    def call(self, cmd: str, *args: Any, timeout: float = 300.0) -> Any:
        self.send(cmd, *args)
        return self.answer(timeout)

    def ask_stop(self) -> None:
        """Ask the child to stop (its object closed), once, without waiting."""
        if not self._stopping:
            self._stopping = True
            with contextlib.suppress(OSError):
                self.conn.send(("stop", ()))

    def stop(self, timeout: float = 10.0) -> None:
        """:meth:`ask_stop`, then kill the child if it has not stopped within
        ``timeout`` seconds."""
        self.ask_stop()
        self.proc.join(timeout)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()
