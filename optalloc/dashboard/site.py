"""The static site: every page, plotly.min.js and history.json written into one directory.

Each file is replaced atomically (written beside it, fsynced, renamed over it), so a reader
(a browser, a web server) sees the old or the new file, never a torn one; files that did not
change are not rewritten (plotly.min.js is copied once). Pages of org nodes that left the
config are removed. Files are 0644: the dashboard holds no job command, environment or log; a
folder it creates is 0700 whatever the umask (to serve it, `chmod 755` it or point the
dashboard at a folder the web server can read).
`history.json` holds the epoch summaries, so the next write parses only newer plans.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from optalloc.dashboard.data import DEFAULT_HISTORY, Dashboard, gather
from optalloc.dashboard.history import cache_text, load_cache
from optalloc.dashboard.pages import render_site
from optalloc.errors import OptallocError
from optalloc.outdir import make_private_dirs

PLOTLY_JS = "plotly.min.js"
HISTORY_JSON = "history.json"


def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def _write(path: Path, data: bytes) -> bool:
    """Replace `path` atomically with `data` unless it already holds exactly that."""
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except OSError:
        pass
    # a random name created O_EXCL (mkstemp): a link planted at a predictable name cannot
    # redirect the write
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return True


def write_site(dash: Dashboard, out: str | os.PathLike) -> dict[str, Path]:
    """Write the site for `dash` into `out` (created if missing); returns the page paths."""
    out = Path(out)
    try:
        if not out.is_dir():  # a folder optalloc creates is 0700 whatever the umask
            make_private_dirs(out)
    except OSError as err:
        raise OptallocError(f"--dashboard/--out {out}: cannot create the directory "
                            f"({err.strerror}); choose a writable directory") from None
    if not os.access(out, os.W_OK):
        raise OptallocError(f"{out}: directory is not writable; choose another output directory")
    pages = render_site(dash, refresh_s=None)
    paths = {}
    for name, html in pages.items():
        paths[name] = out / name
        _write(out / name, html.encode("utf-8"))
    js = out / PLOTLY_JS
    if not js.exists():
        _write(js, plotly_js().encode("utf-8"))
    _write(out / HISTORY_JSON, cache_text(list(dash.history)).encode("utf-8"))
    for old in out.glob("org-*.html"):
        if old.name not in pages:
            old.unlink()
    return paths


def build_site(config, store, out: str | os.PathLike,
               history: int = DEFAULT_HISTORY) -> tuple[Dashboard, dict[str, Path]]:
    """Gather from the (read-only) store, reusing `out`'s history.json, and write the site."""
    known = load_cache(Path(out) / HISTORY_JSON)
    dash = gather(config, store, history=history, known_history=known)
    return dash, write_site(dash, out)
