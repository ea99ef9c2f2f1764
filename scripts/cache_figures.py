"""The kernel cache's figures in docs/reliability.md: clear() of a large cache, and store() /
load() times in a full one. Uses a fresh directory under --dir (a scratch disk, not the user's
cache); writes entries of --cubin-bytes random bytes directly, as a cache that many compiles
filled would hold them.

    python scripts/cache_figures.py                       # 60,000 entries to clear, 20,000 full
    PYTHONPATH=<another tree> python scripts/cache_figures.py   # the same figures for it
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import tempfile
import time


def fill(cache, root: str, n: int, cubin: bytes):
    for i in range(n):
        key = hashlib.sha256(str(i).encode()).hexdigest()
        shard = os.path.join(root, key[:2])
        os.makedirs(shard, mode=0o700, exist_ok=True)
        with open(os.path.join(shard, key + ".cubin"), "wb") as f:
            f.write(cache.encode(key, cubin, "", "figures"))


def count(root: str) -> int:
    return sum(len([f for f in names if f.endswith(".cubin")]) for _, _, names in os.walk(root))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--clear-entries", type=int, default=60_000)
    ap.add_argument("--full-entries", type=int, default=20_000)
    ap.add_argument("--stores", type=int, default=300)
    ap.add_argument("--cubin-bytes", type=int, default=20_000)
    args = ap.parse_args()
    cubin = os.urandom(args.cubin_bytes)
    for what in ("clear", "full"):
        root = tempfile.mkdtemp(prefix="tl-cache-figures-", dir=args.dir)
        os.environ["TILELANG_CACHE_DIR"] = root
        from tilelang.runtime import cache

        try:
            if what == "clear":
                fill(cache, root, args.clear_entries, cubin)
                t = time.perf_counter()
                cache.clear()
                print(f"clear() of {args.clear_entries} entries: "
                      f"{time.perf_counter() - t:.2f} s")
                continue
            fill(cache, root, args.full_entries, cubin)
            stores, loads = [], []
            for i in range(args.full_entries, args.full_entries + args.stores):
                key = hashlib.sha256(str(i).encode()).hexdigest()
                t = time.perf_counter()
                cache.store(key, cubin, "", "figures")
                stores.append(time.perf_counter() - t)
                t = time.perf_counter()
                assert cache.load(key) is not None
                loads.append(time.perf_counter() - t)
            print(f"cache of {args.full_entries}: store() median "
                  f"{statistics.median(stores) * 1e3:.2f} ms, load() median "
                  f"{statistics.median(loads) * 1e3:.3f} ms, {count(root)} entries after "
                  f"{args.stores} stores")
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
