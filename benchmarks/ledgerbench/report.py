"""The ledger benchmark's targets (what it must reach) and its tables, from the result JSON.

Rendering works on the JSON alone, so ``--render`` can print an earlier run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks._common import fmt_ratio, fmt_us, si, table
from benchmarks.ledgerbench.workload import BATCHES, ENTRY_SIZE


def target(name: str, measured: float | None, goal: float, *, higher: bool, unit: str,
           fmt: Callable[[float], str] = lambda x: f"{x:,.1f}") -> dict[str, Any]:
    if measured is None or measured != measured:
        return {"target": name, "measured": None, "goal": goal, "met": None, "margin": "n/a"}
    met = measured >= goal if higher else measured <= goal
    if higher:
        margin = f"{measured / goal:.2f}× the goal" if met else \
            f"missed by {100 * (1 - measured / goal):.0f}% ({fmt(measured)} of {fmt(goal)} {unit})"
    else:
        margin = f"{goal / measured:.2f}× under" if met else \
            f"missed by {100 * (measured / goal - 1):.0f}% ({fmt(measured)} vs {fmt(goal)} {unit})"
    return {"target": name, "measured": measured, "unit": unit, "goal": goal, "met": met,
            "margin": margin}


def analyse(res: dict[str, Any]) -> None:
    by = {(a["system"], a["batch"]): a for a in res["appends"]}
    sha_limit = res["limits"]["sha256_65B_hashes_per_s"] / 2
    ratios: dict[str, Any] = {"appends": {}, "proofs_small": {}, "appends_vs_sha256_limit": {}}
    for b in BATCHES:
        api = by.get(("ours: Sequencer.append", b))
        cp = by.get(("ours: Log.append_many", b))
        pm = by.get(("pymerkle 7 SqliteTree", b))
        r: dict[str, Any] = {}
        if api and pm:
            r["api_over_pymerkle"] = api["entries_per_s"] / pm["entries_per_s"]
        if cp and pm:
            r["commit_path_over_pymerkle"] = cp["entries_per_s"] / pm["entries_per_s"]
        ratios["appends"][str(b)] = r
        ratios["appends_vs_sha256_limit"][str(b)] = {
            "api": api["entries_per_s"] / sha_limit if api else None,
            "commit_path": cp["entries_per_s"] / sha_limit if cp else None,
        }
    ratios["sha256_limit_appends_per_s"] = sha_limit
    small = res["sizes"]["small"]
    ours_s = next((p for p in res["proofs"] if p["system"] == "ours" and p["size"] == small), None)
    pm_s = next((p for p in res["proofs"] if p["system"] == "pymerkle" and p["size"] == small),
                None)
    if ours_s and pm_s:
        for kind in ("inclusion", "consistency"):
            ratios["proofs_small"][kind] = {
                "median": pm_s[kind]["median_us"] / ours_s[kind]["median_us"],
                "p99": pm_s[kind]["p99_us"] / ours_s[kind]["p99_us"],
            }
    res["ratios"] = ratios

    large = res["sizes"]["large"]
    ours_l = next((p for p in res["proofs"] if p["system"] == "ours" and p["size"] == large), None)
    t = []
    api1000 = by.get(("ours: Sequencer.append", 1000))
    cp1000 = by.get(("ours: Log.append_many", 1000))
    t.append(target("appends/s, durable batches of 1,000, signed checkpoint per batch "
                    "(Sequencer.append)", api1000 and api1000["entries_per_s"], 200_000,
                    higher=True, unit="entries/s", fmt=lambda x: f"{x:,.0f}"))
    t.append(target("  same, Log.append_many (one waiter per batch)",
                    cp1000 and cp1000["entries_per_s"], 200_000, higher=True, unit="entries/s",
                    fmt=lambda x: f"{x:,.0f}"))
    for b in BATCHES:
        t.append(target(f"appends ≥ 2× pymerkle, batch {b} (Sequencer.append)",
                        ratios["appends"][str(b)].get("api_over_pymerkle"), 2.0, higher=True,
                        unit="×", fmt=lambda x: f"{x:.2f}"))
        t.append(target(f"  same, batch {b} (Log.append_many)",
                        ratios["appends"][str(b)].get("commit_path_over_pymerkle"), 2.0,
                        higher=True, unit="×", fmt=lambda x: f"{x:.2f}"))
    for kind in ("inclusion", "consistency"):
        t.append(target(f"{kind} proofs ≥ 10× pymerkle at {si(small)} (median)",
                        ratios["proofs_small"].get(kind, {}).get("median"), 10.0, higher=True,
                        unit="×", fmt=lambda x: f"{x:.1f}"))
    for kind in ("inclusion", "consistency"):
        t.append(target(f"{kind} proof median at {si(large)}, warm, random ≤ 100 µs",
                        ours_l and ours_l[kind]["median_us"], 100.0, higher=False, unit="µs"))
    big = next((p for p in res["proofs"] if p["system"] == "ours, every tile cached"
                and p["size"] == large), None)
    for kind in ("inclusion", "consistency"):
        if big:
            t.append(target(f"  {kind}, every tile cached ({big['cached_tiles']:,} tiles, "
                            f"+{big['rss_growth_mib']:.0f} MiB RSS)", big[kind]["median_us"],
                            100.0, higher=False, unit="µs"))
    v = res.get("verify")
    t.append(target("inclusion-proof verifications/s ≥ 50,000", v and v["inclusion_per_s"],
                    50_000, higher=True, unit="/s", fmt=lambda x: f"{x:,.0f}"))
    d = res["disk"].get("ours_large")
    t.append(target(f"bytes on disk per entry beyond the entry ≤ 40 (at {si(large)})",
                    d and d["overhead_bytes_per_entry"], 40.0, higher=False, unit="B"))
    rss = res["builds"].get("ours_large")
    t.append(target(f"peak RSS growing to {si(large)} ≤ 200 MB",
                    rss and rss["vmhwm_kib"] * 1024 / 1e6, 200.0, higher=False, unit="MB"))
    res["targets"] = t


def render(res: dict[str, Any], *, markdown: bool = False) -> str:
    hd = "##### " if markdown else ""
    out = []
    lim = res["limits"]
    out.append(hd + "Machine limits")
    out.append(table(["limit", "rate"], [
        ["SHA-256, 65-byte messages (hashlib)", f"{si(lim['sha256_65B_hashes_per_s'])} hashes/s"],
        ["  → appends at 2 hashes per leaf",
         f"{si(res['ratios']['sha256_limit_appends_per_s'])}/s"],
        ["Ed25519 sign (pynacl)", f"{si(lim['ed25519_signs_per_s'])} signs/s"],
        ["SQLite commit, WAL + synchronous=FULL (start / end of run)",
         f"{si(lim['sqlite_fsync_commits_per_s'])} / "
         f"{si(lim.get('sqlite_fsync_commits_per_s_at_end'))} commits/s"],
    ], markdown=markdown))
    out.append("")
    out.append(hd + f"Durable appends, {ENTRY_SIZE}-byte entries "
               "(entries/s; batches/s in brackets)")
    by = {(a["system"], a["batch"]): a for a in res["appends"]}
    rows = []
    for b in BATCHES:
        api = by.get(("ours: Sequencer.append", b))
        cp = by.get(("ours: Log.append_many", b))
        pm = by.get(("pymerkle 7 SqliteTree", b))
        r = res["ratios"]["appends"][str(b)]
        lim_r = res["ratios"]["appends_vs_sha256_limit"][str(b)]

        def cell(a: dict[str, Any] | None) -> str:
            return f"{si(a['entries_per_s'])} ({si(a['batches_per_s'])})" if a else "n/a"

        rows.append([f"{b:,}", cell(api), cell(cp), cell(pm),
                     fmt_ratio(r.get("api_over_pymerkle")),
                     fmt_ratio(r.get("commit_path_over_pymerkle")),
                     f"{100 * lim_r['api']:.1f}% / {100 * lim_r['commit_path']:.1f}%"
                     if lim_r["api"] else "n/a"])
    out.append(table(["batch", "ours append()", "ours append_many()", "pymerkle",
                      "append()/pm", "commit/pm", "of SHA-256 limit"], rows, markdown=markdown))
    out.append("")
    out.append(hd + "Proof latency, warm process, random indexes / (old, new) size pairs "
               "(median / p99)")
    rows = []
    order = {"ours": 0, "ours, every tile cached": 1, "pymerkle": 2}
    for p in sorted(res["proofs"], key=lambda p: (p["size"], order.get(p["system"], 3))):
        for kind in ("inclusion", "consistency", "inclusion_recent"):
            if kind not in p:
                continue
            s = p[kind]
            label = {"inclusion": "inclusion", "consistency": "consistency",
                     "inclusion_recent": f"inclusion, newest {si(s.get('span_entries'))}"}[kind]
            pm = next((q for q in res["proofs"] if q["size"] == p["size"]
                       and q["system"] == "pymerkle" and kind in q), None)
            ratio = ""
            if p["system"].startswith("ours") and pm:
                ratio = fmt_ratio(pm[kind]["median_us"] / s["median_us"])
            growth = p.get("rss_growth_mib")
            rows.append([si(p["size"]), p["system"], label, fmt_us(s["median_us"]),
                         fmt_us(s["p99_us"]), ratio,
                         "" if growth is None else f"+{growth:.0f} MiB"])
    out.append(table(["size", "system", "proof", "median", "p99", "pm/ours (median)",
                      "RSS after warm-up"], rows, markdown=markdown))
    out.append("")
    v = res.get("verify") or {}
    d = res["disk"]
    b = res["builds"]
    rows = [
        ["inclusion proofs verified/s (ledger.core.proofs)", f"{si(v.get('inclusion_per_s'))}/s"],
        ["consistency proofs verified/s (ledger.core.proofs)",
         f"{si(v.get('consistency_per_s'))}/s"],
    ]
    pm_small = next((p for p in res["proofs"] if p["system"] == "pymerkle"
                     and p["size"] == res["sizes"]["small"]), None)
    if pm_small:
        rows.append(["inclusion proofs verified/s (pymerkle)",
                     f"{si(pm_small['verify_inclusion_per_s'])}/s"])
    for key, label in (("ours_small", "ours"), ("ours_large", "ours"),
                       ("pymerkle_small", "pymerkle"), ("pymerkle_large", "pymerkle")):
        if key in d:
            rows.append([f"disk beyond the entry, {label} at {si(d[key]['entries'])}",
                         f"{d[key]['overhead_bytes_per_entry']:.1f} B/entry "
                         f"({d[key]['bytes_per_entry']:.1f} B total)"])
    for key, label in (("ours_small", "ours"), ("ours_large", "ours"),
                       ("pymerkle_small", "pymerkle"), ("pymerkle_large", "pymerkle")):
        if key in b:
            x = b[key]
            extra = f", first root {x['first_root_seconds']:.1f} s" if "first_root_seconds" in x \
                else ""
            rows.append([f"build {si(x['size'])} ({label}, batches of {x['batch']:,})",
                         f"{si(x['entries_per_s'])}/s, {x['seconds']:.0f} s{extra}, "
                         f"peak RSS {x['vmhwm_kib'] / 1024:.0f} MiB"])
    out.append(table(["other", "value"], rows, markdown=markdown))
    out.append("")
    out.append(hd + "Targets")
    out.append(table(["target", "measured", "met", "margin"], [
        [t["target"], "n/a" if t["measured"] is None else f"{t['measured']:,.2f} {t['unit']}",
         {True: "yes", False: "NO", None: "n/a"}[t["met"]], t["margin"]]
        for t in res["targets"]], markdown=markdown))
    return "\n".join(out)


def render_profile(prof: dict[str, Any], *, markdown: bool = False) -> str:
    hd = "##### " if markdown else ""
    out = []
    if "appends" in prof:
        a = prof["appends"]
        out.append(hd + f"Append path, Sequencer.append at batch {a['batch']:,}: {a['entries']:,} "
                   f"entries in {a['seconds']:.2f} s ({si(a['entries_per_s'])}/s), wall time "
                   f"by phase ({a.get('phase_method', 'not profiled')})")
        out.append(table(["phase", "µs/entry", "% of wall"], [
            [p["phase"], f"{p['us_per_entry']:.2f}", f"{p['pct']:.1f}"] for p in a["phases"]
        ], markdown=markdown))
        out.append("")
        out.append(hd + "cProfile, top functions by own time (main thread; SQLite runs in "
                   "aiosqlite's thread, so it shows as the event loop's epoll wait)")
        out.append(table(["function", "calls", "own s", "own %"], [
            [r["function"], f"{r['ncalls']:,}", f"{r['tottime_s']:.3f}",
             f"{r['tottime_pct']:.1f}"] for r in a["cprofile_top"]], markdown=markdown))
        out.append("")
    if "proofs" in prof:
        p = prof["proofs"]
        out.append(hd + f"Proof path, inclusion proofs at {si(p['size'])} (random indexes, warm): "
                   f"{p['proofs']:,} proofs, mean {p['mean_us']:.1f} µs, time by phase "
                   f"({p.get('phase_method', 'wall time')})")
        out.append(table(["phase", "µs/proof", "calls", "% of wall"], [
            [x["phase"], f"{x['us_per_proof']:.1f}", f"{x['calls']:,}", f"{x['pct']:.1f}"]
            for x in p["phases"]], markdown=markdown))
        out.append("")
        out.append(hd + "cProfile, top functions by own time")
        out.append(table(["function", "calls", "own s", "own %"], [
            [r["function"], f"{r['ncalls']:,}", f"{r['tottime_s']:.3f}",
             f"{r['tottime_pct']:.1f}"] for r in p["cprofile_top"]], markdown=markdown))
    return "\n".join(out)
