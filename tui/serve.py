"""``ralph-tui --serve``: the same app as a web page, through Textual's own serving library
(textual-serve; its server in ``tui/web.py``). Each browser tab runs ``ralph-tui`` with the user's
arguments, less the serve options, as a process of its own."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import secrets
import shlex
import signal
import sys
from collections.abc import Sequence

from ledger import error_reason

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
"""textual-serve's own default port."""


def add_options(parser: argparse.ArgumentParser) -> None:
    """``--serve``, ``--host`` and ``--port``."""
    group = parser.add_argument_group("in a browser")
    group.add_argument(
        "--serve",
        action="store_true",
        help="serve ralph-tui (with the other arguments given) as a web page instead; each browser tab "
        "runs its own ralph-tui",
    )
    group.add_argument(
        "--host",
        help=f"with --serve: the address to listen on (default {DEFAULT_HOST}, this machine only; "
        "0.0.0.0 for every network interface: plain HTTP, so the address's token can be overheard)",
    )
    group.add_argument(
        "--port",
        type=_port,
        help=f"with --serve: the port to listen on (default {DEFAULT_PORT})",
    )


def misused(args: argparse.Namespace) -> str | None:
    """The usage error in the serve options, if any: ``--host`` or ``--port`` without ``--serve``."""
    if not args.serve and (args.host is not None or args.port is not None):
        return "--host and --port go with --serve"
    return None


def _port(text: str) -> int:
    """``--port``'s value: 1 to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a port number from 1 to 65535")
    return port


def app_argv(argv: Sequence[str]) -> list[str]:
    """The command line given, less the serve options: what each browser tab runs. The options are
    removed as argparse reads them (``--port=N``, ``--port N``; never abbreviated, as ralph-tui's own
    options are not), everything else stays in its order."""
    own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    own.add_argument("--serve", action="store_true")
    own.add_argument("--host")
    own.add_argument("--port")
    return own.parse_known_args(list(argv))[1]


def app_command(argv: Sequence[str]) -> str:
    """The shell command of one tab's app: this Python running ``tui.main`` (``-P``: never a ``tui``
    package of the folder it runs in) with ``app_argv(argv)``."""
    return shlex.join([sys.executable, "-P", "-m", "tui.main", *app_argv(argv)])


def url(host: str, port: int) -> str:
    """The address to open: a wildcard host is reached on this machine as 127.0.0.1."""
    if host in ("0.0.0.0", "::", ""):
        host = DEFAULT_HOST
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass
    return f"http://{host}:{port}"


def is_local(host: str) -> bool:
    """Whether ``host`` is this machine only (a loopback address or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


TOKEN_BYTES = 24
"""The serve's secret: 24 random bytes (192 bits), 32 characters in its URL."""


def serve(host: str | None, port: int | None, argv: Sequence[str]) -> int:
    """Serve ``ralph-tui ARGV`` (less the serve options) on ``host:port`` until Ctrl-C: 130 then
    (143 on SIGTERM), 1 when the address cannot be listened on. ``None`` is the default host or port.
    Only a request with the token made here and printed in the address gets an answer."""
    host = DEFAULT_HOST if host is None else host
    port = DEFAULT_PORT if port is None else port
    from tui.web import TOKEN_PARAMETER, WebServer  # aiohttp and textual-serve: only when serving

    token = secrets.token_urlsafe(TOKEN_BYTES)
    where = "" if is_local(host) else f" (listening on {host}: plain HTTP, the token can be overheard)"
    address = f"{url(host, port)}/?{TOKEN_PARAMETER}={token}"
    announcement = f"ralph-tui: serving on {address}{where}; Ctrl-C stops"
    server = WebServer(app_command(argv), host, port, announcement, local=is_local(host), token=token)
    try:
        server.serve()
    except OSError as exc:
        in_use = exc.errno == errno.EADDRINUSE
        reason = "in use (choose another with --port N)" if in_use else error_reason(exc)
        print(f"ralph-tui: cannot serve on {host}:{port}: {reason}", file=sys.stderr)
        return 1
    if server.stopped_by == signal.SIGTERM:
        return 143
    print("ralph-tui: stopped serving", file=sys.stderr)
    return 130
