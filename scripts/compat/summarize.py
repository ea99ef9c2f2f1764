"""Summarises a dry_run.py result file: counts per outcome, then each failing test with its
first error line, grouped by the error's first words (the cause).

    python scripts/compat/summarize.py OUT.jsonl
"""
import collections
import json
import sys


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    print(collections.Counter(r["outcome"] for r in rows))
    groups = collections.defaultdict(list)
    for r in rows:
        if r["outcome"] in ("passed", "skipped"):
            continue
        err = (r.get("error") or "").splitlines()[0] if r.get("error") else ""
        failed = [b for b in r.get("builds", []) if not b["ok"]]
        if failed:
            err = failed[0]["error"].splitlines()[0]
        groups[err[:110]].append(r["test"])
    for cause, tests in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"\n[{len(tests)}] {cause}")
        for t in tests:
            print(f"    {t}")


if __name__ == "__main__":
    main()
