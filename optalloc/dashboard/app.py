"""`optalloc serve`: the dashboard's pages live, and /metrics, as a read-only ASGI app (starlette).

The pages are the static site's, rendered in memory from the state DB (opened read-only) and
the config, and rebuilt when a new epoch is recorded or a config file changes; a rebuild that
fails (say, the config was saved half-edited) keeps the last good pages. The queue page takes
the same query as the static one (`?project=&state=&code=&class=&sort=&order=`), validated:
an unknown parameter or value is a 400 naming it. Any other path is a 404, any method but
GET/HEAD a 405, and an unexpected error a plain 500; no response ever carries a traceback.
Endpoints are plain functions, so starlette runs them in its thread pool: a rebuild (a second
or two) never blocks the event loop, and one lock makes concurrent requests share it.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from optalloc.dashboard.data import DEFAULT_HISTORY, Dashboard, gather
from optalloc.dashboard.history import HistoryRow, cache_text
from optalloc.dashboard.metrics import exposition
from optalloc.dashboard.pages import render_queue, render_site
from optalloc.dashboard.queue import parse_query
from optalloc.dashboard.readonly import ReadOnlyStore
from optalloc.errors import OptallocError

log = logging.getLogger(__name__)

HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": ("default-src 'none'; script-src 'self' 'unsafe-inline'; "
                                "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                                "font-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                                "form-action 'self'; frame-ancestors 'none'"),
}


@dataclass(frozen=True)
class Built:
    key: tuple
    dash: Dashboard
    pages: dict[str, str]


class Source:
    """The current dashboard: rebuilt when the state DB records a new epoch or a config file
    changes. `load_config` is called with the config path on each rebuild."""

    def __init__(self, config_path: str, state_path: str, history: int = DEFAULT_HISTORY,
                 load_config: Callable | None = None):
        from optalloc.config import load_config as default_loader

        self.config_path = config_path
        self.state_path = state_path
        self.history = history
        self.load_config = load_config or default_loader
        self._lock = threading.Lock()
        self._built: Built | None = None
        self._known: dict[int, HistoryRow] = {}
        self._sources: tuple[str, ...] = (config_path,)

    def _key(self) -> tuple:
        stamps = []
        for p in (self.config_path, *self._sources):
            try:
                stamps.append((p, os.stat(p).st_mtime_ns))
            except OSError:
                stamps.append((p, None))
        with ReadOnlyStore(self.state_path) as store:
            return (store.last_epoch_id(), tuple(stamps))

    def current(self) -> Built:
        with self._lock:
            try:
                key = self._key()
                if self._built is not None and self._built.key == key:
                    return self._built
                config = self.load_config(self.config_path)
                self._sources = tuple(config.sources)
                with ReadOnlyStore(self.state_path) as store:
                    dash = gather(config, store, history=self.history, known_history=self._known)
                self._known = {r.epoch_id: r for r in dash.history}
                pages = render_site(dash, refresh_s=config.policy.epoch_s)
                self._built = Built(key, dash, pages)
            except OptallocError as err:
                if self._built is None:
                    raise
                log.warning("optalloc serve: keeping the last pages: %s", err)
            return self._built


def _no_query(request: Request) -> None:
    if request.query_params:
        name = next(iter(request.query_params.keys()))
        raise HTTPException(400, f"this page takes no query parameters (got {name!r})")


def create_app(source: Source) -> Starlette:
    plotly_cache: dict[str, bytes] = {}

    def built() -> Built:
        try:
            return source.current()
        except OptallocError as err:
            raise HTTPException(503, f"dashboard unavailable: {err}") from None

    def page(request: Request) -> Response:
        name = request.path_params.get("name", "index") + ".html"
        b = built()
        if name not in b.pages:
            raise HTTPException(404, f"no page {name}; start at /")
        if name == "queue.html" and request.query_params:
            params = request.query_params
            repeated = [k for k in params.keys() if len(params.getlist(k)) > 1]
            if repeated:
                raise HTTPException(400, f"query parameter {repeated[0]!r} given more than once")
            try:
                q = parse_query(dict(params), [r.name for r in b.dash.org], b.dash.codes)
            except OptallocError as err:
                raise HTTPException(400, str(err)) from None
            html = render_queue(b.dash, q, refresh_s=b.dash.policy.epoch_s)
            return HTMLResponse(html, headers=HEADERS)
        _no_query(request)
        return HTMLResponse(b.pages[name], headers=HEADERS)

    def plotly_js(request: Request) -> Response:
        _no_query(request)
        if "js" not in plotly_cache:
            from optalloc.dashboard.site import plotly_js as get

            plotly_cache["js"] = get().encode("utf-8")
        return Response(plotly_cache["js"], media_type="application/javascript",
                        headers={**HEADERS, "Cache-Control": "public, max-age=86400"})

    def history_json(request: Request) -> Response:
        _no_query(request)
        return Response(cache_text(list(built().dash.history)), media_type="application/json",
                        headers=HEADERS)

    def metrics(request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        _no_query(request)
        return Response(exposition(built().dash), media_type=CONTENT_TYPE_LATEST,
                        headers=HEADERS)

    async def http_error(request: Request, exc: HTTPException) -> Response:
        return PlainTextResponse(f"{exc.status_code}: {exc.detail}\n", status_code=exc.status_code,
                                 headers={**HEADERS, **(exc.headers or {})})

    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("optalloc serve: error answering %s", request.url.path)
        return PlainTextResponse("500: internal error (details are in the server's log)\n",
                                 status_code=500, headers=HEADERS)

    methods = ["GET", "HEAD"]
    routes = [
        Route("/", page, methods=methods),
        Route("/metrics", metrics, methods=methods),
        Route("/plotly.min.js", plotly_js, methods=methods),
        Route("/history.json", history_json, methods=methods),
        Route("/{name:str}.html", page, methods=methods),
    ]
    return Starlette(debug=False, routes=routes,
                     exception_handlers={HTTPException: http_error, Exception: server_error})
