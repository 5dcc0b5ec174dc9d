"""The dashboard: what the allocator decided, as pages (a static site or `optalloc serve`) and
as Prometheus metrics, all rendered from one `Dashboard` gathered from the config and the state
DB (data.py). Modules: data (gather), queue, cluster, utilization, history (the pieces),
charts (plotly figures), pages (jinja2 templates), site (static writer), app (ASGI, serve),
metrics (Prometheus exposition), readonly (the state DB opened read-only)."""
