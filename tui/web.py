"""The web server of ``ralph-tui --serve``: textual-serve's, quiet but for one line, its page loading
nothing from outside this machine, every request needing the serve's token (docs/design/serve.md)."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import re
import signal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import web
from aiohttp.typedefs import Handler
from aiohttp.web_runner import GracefulExit
from textual_serve.server import Server

_EXTERNAL = re.compile(r"<link[^>]*//fonts\.googleapis\.com[^>]*>\s*")
"""textual-serve's page asks Google for a font it also ships in its static files: dropped, so a page
served here reaches no other host (the font comes from ``/static/fonts``)."""

_FOCUS = """<script>
const ralphFocus = setInterval(() => {
  if (document.body.classList.contains("-first-byte")) {
    clearInterval(ralphFocus);
    document.querySelector(".xterm-helper-textarea")?.focus();
  }
}, 50);
</script>
"""
"""The page takes the keyboard once its app has started, as a terminal does (an unfocused page's app
shows no keys in its footer and hears none until clicked)."""


TOKEN_PARAMETER = "token"
"""The query parameter of the address printed at start that carries the serve's token."""

REFUSED = (
    "ralph-tui: no token or a wrong one: open the address ralph-tui --serve printed (it ends in ?token=...)\n"
)
"""What a request without the token (or its cookie) gets, with 403."""


class WebServer(Server):
    """textual-serve's server, quiet but for one line, its URLs taken from the address the browser
    used (so a page opened through a wildcard host's name or address works), answering only a
    request that carries ``token``: in the URL (``?token=``), or in the cookie the first such
    request set (how the page's own assets and websocket carry it)."""

    def __init__(
        self, command: str, host: str, port: int, announcement: str, *, local: bool, token: str
    ) -> None:
        super().__init__(command, host=host, port=port, title="ralph-tui")
        self.announcement = announcement
        self.local = local
        self.token = token.encode()
        self.cookie = f"ralph-tui-{port}"
        """The cookie's name: one per port, as two serves on one machine share the browser's cookies."""
        self.stopped_by: int | None = None
        self.tabs: set[asyncio.Task[Any]] = set()

    def initialize_logging(self) -> None:
        """Only textual-serve's warnings and errors, one line each."""
        logging.basicConfig(level=logging.WARNING, format="ralph-tui: %(message)s")

    async def on_startup(self, app: web.Application) -> None:
        """No banner: ``announce`` prints one line once the port is bound."""

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        env = aiohttp_jinja2.get_env(app)
        env.loader = jinja2.FunctionLoader(self._template)
        app.middlewares.append(self._local_names)
        app.middlewares.append(self._authorised)
        return app

    @web.middleware
    async def _local_names(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Served on this machine only, a request must name it (``localhost``, a loopback address):
        a site whose name was made to point at 127.0.0.1 (DNS rebinding) gets nothing."""
        if self.local and not _loopback(urlsplit(f"//{request.host}").hostname or ""):
            raise web.HTTPMisdirectedRequest(text=f"ralph-tui: {request.host} is not this machine's name\n")
        return await handler(request)

    @web.middleware
    async def _authorised(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Only a request carrying the token gets anything, page, assets, downloads and websocket
        alike (other local users reach the port too); one that carried it in its URL sets the
        cookie that carries it from then on (the page's own requests)."""
        in_url = self._is_token(request.query.get(TOKEN_PARAMETER))
        if not (in_url or self._is_token(request.cookies.get(self.cookie))):
            raise web.HTTPForbidden(text=REFUSED)
        response = await handler(request)
        if in_url and not response.prepared:  # (a websocket's answer went out before it ran)
            response.set_cookie(self.cookie, self.token.decode(), path="/", httponly=True, samesite="Strict")
        return response

    def _is_token(self, given: str | None) -> bool:
        """Whether ``given`` is the token (compared in constant time)."""
        return given is not None and hmac.compare_digest(given.encode(errors="replace"), self.token)

    def _template(self, name: str) -> str:
        """textual-serve's page, less its request to an outside host, taking the keyboard as it opens."""
        page = _EXTERNAL.sub("", (Path(self.templates_path) / name).read_text(encoding="utf-8"))
        return page.replace("</body>", _FOCUS + "</body>")

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        """The page, its URLs on the address the browser used."""
        base = f"{request.scheme}://{request.host}"
        socket_base = ("wss" if request.scheme == "https" else "ws") + f"://{request.host}"
        return {
            "font_size": _int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": socket_base + str(request.app.router["websocket"].url_for()),
            "config": {"static": {"url": f"{base}/static/"}},
            "application": {"name": self.title},
        }

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """A tab's app, for pages served here only: another site's page open in the same browser may
        not drive it (a browser lets any page open a websocket to any address, and says whose page
        it is in ``Origin``)."""
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != request.host:
            raise web.HTTPForbidden(text=f"ralph-tui: a page from {origin} may not open this app\n")
        tab = asyncio.current_task()
        assert tab is not None
        self.tabs.add(tab)
        try:
            return await super().handle_websocket(request)
        finally:
            self.tabs.discard(tab)

    async def on_shutdown(self, app: web.Application) -> None:
        """Stopping: each open tab's page is told, and its app quits, at once (not at the timeout)."""
        for tab in list(self.tabs):
            tab.cancel()
        await asyncio.gather(*self.tabs, return_exceptions=True)

    def announce(self, *_: object) -> None:
        """The one line said once the port is bound."""
        print(self.announcement, flush=True)

    def stop(self, signum: int) -> None:
        """Stop serving on ``signum``."""
        self.stopped_by = signum
        raise GracefulExit()

    def serve(self, debug: bool = False) -> None:
        """Serve until Ctrl-C (or SIGTERM)."""
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self.stop, signum)
        web.run_app(
            self._make_app(),
            host=self.host,
            port=self.port,
            handle_signals=False,
            loop=loop,
            print=self.announce,
            access_log=None,
            shutdown_timeout=3,
        )


def _loopback(name: str) -> bool:
    """Whether ``name`` is ``localhost`` or a loopback address."""
    try:
        return name == "localhost" or ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _int(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default
