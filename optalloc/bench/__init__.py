"""Benchmark suites. Each `optalloc.bench.<name>_bench` module has `run(...) -> list[dict]`
(one row per size) and prints its table with `python -m optalloc.bench.<name>_bench`;
`optalloc bench` collects them."""
