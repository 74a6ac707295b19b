"""Listening addresses: whether one can be listened on, said in one line before a server starts on it.

``spark serve`` and ``spark worker --metrics-port`` check their port first, so a port another program holds is
one line naming the option to change, not a server library's traceback (granian's is Python and Rust).
"""

from __future__ import annotations

import errno
import socket


class ListenError(RuntimeError):
    """An address that cannot be listened on; the message names the option that chose it."""


def check_listen(host: str, port: int, option: str) -> None:
    """Raise ``ListenError`` unless ``host:port`` can be listened on now (the check releases it at once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # As servers do: a port left in TIME_WAIT by a previous run is free; one a program listens on is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            why = {
                errno.EADDRINUSE: "another program is listening there",
                errno.EACCES: "a port below 1024 needs privileges",
                errno.EADDRNOTAVAIL: "no interface of this machine has that address",
            }.get(exc.errno or 0, exc.strerror or str(exc))
            message = f"cannot listen on {host}:{port}: {why}; choose another with {option}"
            raise ListenError(message) from None
