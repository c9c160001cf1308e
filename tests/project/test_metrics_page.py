"""docs/metrics.md names every metric our processes export, and only those, with its type and
labels; examples/prometheus-alerts.yml alerts on the conditions an operator must act on, with
metrics of that page only, passes ``promtool check rules``, and each of its alerts fires where
it should on made-up series (``promtool test rules``).

The metrics are read from the ``/metrics`` of real servers on loopback: ``notary serve`` with
every feature that adds metrics (witnesses, publishing, the scrub) in one process, and again
as ``notary serve --workers 2`` (prometheus-client's multiprocess mode); a witness; and
``ledger monitor --metrics`` watching that notary.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ledger.cli.monitor import register as register_monitor
from ledger.cli.monitor import run as run_monitor
from ledger.core.cosignature import CosignatureSigner
from notary.serving.config import Settings
from notary.serving.startup import init_data_dir
from tests.notary_server import NotaryProcess, create_api_key, free_port, start_notary
from tests.servers import bound_socket
from tests.waiting import eventually
from tests.witness_servers import WitnessProc

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "metrics.md"
ALERTS = REPO / "examples" / "prometheus-alerts.yml"
SECTIONS = {"`notary serve`": "notary", "Witness": "witness", "Monitor": "monitor"}
"""The page's sections (its ``##`` headings) that list a process's metrics."""
ONLY_WITH_WITNESSES = {"notary_witness_requests_total", "notary_witnessed_checkpoint_size",
                       "notary_witnessed_checkpoint_cosignatures"}


@dataclass(frozen=True)
class Metric:
    kind: str
    labels: frozenset[str]


def page() -> dict[str, dict[str, Metric]]:
    """Each process's table: metric name -> type and labels."""
    tables: dict[str, dict[str, Metric]] = {}
    section: str | None = None
    for line in PAGE.read_text().splitlines():
        if line.startswith("## "):
            section = SECTIONS.get(line[3:].strip())
            if section is not None:
                tables[section] = {}
            continue
        row = re.match(r"^\| `([a-z_0-9]+)` \| (\w+) \| ([^|]*) \|", line)
        if row and section is not None:
            name, kind, labels = row.groups()
            assert name not in tables[section], f"{name} twice on the page"
            tables[section][name] = Metric(kind, frozenset(re.findall(r"`(\w+)`", labels)))
    assert set(tables) == set(SECTIONS.values()), f"sections found: {sorted(tables)}"
    return tables


def exported(text: str) -> dict[str, Metric]:
    """What a scrape exports: the metric names as declared (counters with ``_total``), their
    types, and the labels their samples carry (a histogram's ``le`` aside)."""
    found: dict[str, Metric] = {}
    families = list(text_string_to_metric_families(text))
    timed = {f.name for f in families if f.type in ("counter", "histogram")}
    for family in families:
        if family.name.endswith("_created") and family.name[:-len("_created")] in timed:
            continue  # prometheus-client's creation time of a counter or histogram
        name = family.name + "_total" if family.type == "counter" else family.name
        labels = {k for s in family.samples for k in s.labels if k != "le"}
        found[name] = Metric(family.type, frozenset(labels))
    return found


def check_against_page(scraped: dict[str, Metric], table: dict[str, Metric], process: str,
                       *, complete: bool = True) -> None:
    """Every metric exported is on the page with its type and labels; with ``complete``,
    every metric on the page is exported."""
    unlisted = sorted(set(scraped) - set(table))
    assert not unlisted, f"{process} exports metrics docs/metrics.md does not list: {unlisted}"
    if complete:
        missing = sorted(set(table) - set(scraped))
        assert not missing, f"docs/metrics.md lists metrics {process} does not export: {missing}"
    for name, metric in scraped.items():
        assert metric.kind == table[name].kind, (process, name, metric.kind, table[name].kind)
        assert metric.labels <= table[name].labels, (process, name, sorted(metric.labels))


async def scrape(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(url + "/metrics") as r:
        assert r.status == 200
        return await r.text()


async def test_the_page_lists_exactly_what_notary_witness_and_monitor_export(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    tables = page()
    sock = bound_socket()
    base = Settings(data=tmp_path / "notary", listen=f"127.0.0.1:{sock.getsockname()[1]}")
    first = init_data_dir(base)
    assert first is not None
    witness = WitnessProc(CosignatureSigner.generate("witness.test/w0"), tmp_path / "w0.db",
                          first.vkey)
    await witness.start()
    settings = Settings(data=base.data, listen=base.listen, witnesses=(witness.spec,),
                        witness_quorum=1, witness_interval=0.05, witness_timeout=0.5,
                        publish=str(tmp_path / "published"), scrub_rate=100)
    # Before the notary runs: the command would block this loop, the notary's too.
    key = create_api_key(settings.data, "a")
    notary = await start_notary(settings, http, first.vkey, sock)
    port = free_port()
    parser = argparse.ArgumentParser()
    register_monitor(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["monitor", "--log", notary.url, "--vkey", first.vkey,
                              "--interval", "0.1", "--no-state", "--metrics", f"127.0.0.1:{port}",
                              "--evidence-dir", str(tmp_path / "evidence")])
    stop = asyncio.Event()
    monitor = asyncio.create_task(run_monitor(args, out=io.StringIO(), err=io.StringIO(),
                                              stop=stop))
    try:
        for n in range(3):
            await notary.issue(key, n)

        async def settled() -> str | None:
            text = await scrape(http, notary.url)
            m = {s.name: s.value for f in text_string_to_metric_families(text)
                 for s in f.samples}
            return text if m.get("notary_witnessed_checkpoint_size") == 3 and m.get(
                "ledger_published_size") == 3 else None

        text = await eventually(settled, "a witnessed and published checkpoint of 3")
        check_against_page(exported(text), tables["notary"], "notary serve")
        check_against_page(exported(await scrape(http, witness.url)), tables["witness"],
                           "the witness")

        async def monitored() -> str | None:
            try:
                text = await scrape(http, f"http://127.0.0.1:{port}")
            except aiohttp.ClientError:
                return None
            return text if "notary_monitor_verified_size 3.0" in text else None

        text = await eventually(monitored, "the monitor to verify the notary's checkpoint")
        check_against_page(exported(text), tables["monitor"], "the monitor")
    finally:
        stop.set()
        await asyncio.wait_for(monitor, 10)
        await notary.runner.cleanup()
        await witness.stop()


def test_workers_export_only_metrics_of_the_page(tmp_path: Path) -> None:
    """Under ``--workers 2`` /metrics merges the workers' files (multiprocess mode): the same
    names and types, and every metric of the page but those of witnessing (off here)."""
    table = page()["notary"]
    args = ("--workers", "2", "--publish", str(tmp_path / "published"))
    with NotaryProcess(tmp_path / "data", args=args) as server:
        key = server.create_api_key("a")
        for n in range(3):
            body = {"server": "srv", "tool": "t", "call_sha256": f"{n:064x}"}
            assert server.post("/v1/tool-calls", json_body=body, api_key=key).status == 201
        scraped: dict[str, Metric] = {}
        for _ in range(100):  # until the publishing worker has had its round
            scraped = exported(server.get("/metrics").text)
            if "ledger_published_size" in scraped:
                break
            time.sleep(0.1)
    check_against_page(scraped, table, "notary serve --workers 2", complete=False)
    missing = sorted(set(table) - set(scraped) - ONLY_WITH_WITNESSES)
    assert not missing, f"notary serve --workers 2 does not export {missing}"


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_alert_rules_use_metrics_of_the_page_and_cover_what_an_operator_acts_on() -> None:
    names = {name for table in page().values() for name in table}
    rules = alert_rules()
    used: set[str] = set()
    for rule in rules:
        assert rule["labels"]["severity"] in {"page", "ticket"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        for metric in re.findall(r"\b((?:notary|ledger|witness)_[a-z0-9_]+)", rule["expr"]):
            base = re.sub(r"_(bucket|sum|count)$", "", metric)
            assert base in names, f"{rule['alert']} uses {metric}, which is not on the page"
            used.add(base)
    # Scrub damage, writer refusing or halted, monitor alarm, witness lag, publish lag, clock.
    for needed in ("ledger_scrub_damage", "ledger_writer_refusing", "ledger_writer_halted",
                   "notary_monitor_alarm_active", "notary_witnessed_checkpoint_size",
                   "notary_checkpoint_timestamp_seconds", "ledger_published_size",
                   "notary_clock_refusals_total"):
        assert needed in used, f"no alert rule on {needed}"
    listed = set(re.findall(r"^\| `([A-Za-z]+)` \|", PAGE.read_text().split("## Alerts")[1],
                            re.M))
    assert listed == {rule["alert"] for rule in rules}, "the page's alert table and the file differ"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not installed: install Debian's 'prometheus' package "
                    "(./scripts/test does, as root) to check examples/prometheus-alerts.yml")
    return found


def test_promtool_accepts_the_alert_rules() -> None:
    done = subprocess.run([promtool(), "check", "rules", str(ALERTS)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


# Series (one sample a minute) and, per alert, (minute, instances it fires for): each alert
# fires for the instance in trouble, and not for the healthy one beside it.
SCENARIOS: dict[str, tuple[dict[str, str], int, list[dict[str, str]]]] = {
    "NotaryScrubDamage": ({'ledger_scrub_damage{instance="bad"}': "0 0 1 1",
                           'ledger_scrub_damage{instance="ok"}': "0 0 0 0"},
                          3, [{"instance": "bad"}]),
    "NotaryWriterHalted": ({'ledger_writer_halted{instance="bad"}': "0 1 1",
                            'ledger_writer_halted{instance="ok"}': "0 0 0"},
                           2, [{"instance": "bad"}]),
    "NotaryWriterRefusing": ({'ledger_writer_refusing{instance="bad"}': "1x5",
                              'ledger_writer_refusing{instance="ok"}': "0x5"},
                             3, [{"instance": "bad"}]),
    "NotaryClockRefusals": ({'notary_clock_refusals_total{instance="bad"}': "0 0 1 1",
                             'notary_clock_refusals_total{instance="ok"}': "0 0 0 0"},
                            3, [{"instance": "bad"}]),
    "NotaryHttpErrors": (
        {'notary_http_requests_total{instance="bad",status="500"}': "0+10x30",
         'notary_http_requests_total{instance="bad",status="201"}': "0+100x30",
         'notary_http_requests_total{instance="ok",status="201"}': "0+100x30"},
        25, [{"instance": "bad"}]),
    "NotaryCheckpointStale": ({'notary_checkpoint_timestamp_seconds{instance="bad"}': "0x30",
                               'notary_checkpoint_timestamp_seconds{instance="ok"}': "0+60x30"},
                              15, [{"instance": "bad"}]),
    "NotaryWitnessLag": ({'ledger_tree_size{instance="bad"}': "0+10x30",
                          'notary_witnessed_checkpoint_size{instance="bad"}': "0x30",
                          'ledger_tree_size{instance="ok"}': "0+10x30",
                          'notary_witnessed_checkpoint_size{instance="ok"}': "0+10x30"},
                         20, [{"instance": "bad"}]),
    "NotaryWitnessFailing": (
        {'notary_witness_requests_total{instance="n",witness="down",result="failed"}': "0+1x30",
         'notary_witness_requests_total{instance="n",witness="up",result="failed"}': "0+1x30",
         'notary_witness_requests_total{instance="n",witness="up",result="cosigned"}': "0+1x30"},
        20, [{"instance": "n", "witness": "down"}]),
    "NotaryPublishLag": ({'notary_witnessed_checkpoint_size{instance="bad"}': "0+10x30",
                          'ledger_published_size{instance="bad"}': "0x30",
                          'notary_witnessed_checkpoint_size{instance="ok"}': "0+10x30",
                          'ledger_published_size{instance="ok"}': "0+10x30"},
                         20, [{"instance": "bad"}]),
    "NotaryPublishStale": (
        {'ledger_publish_last_success_timestamp_seconds{instance="bad"}': "0x30",
         'ledger_publish_last_success_timestamp_seconds{instance="ok"}': "0+60x30"},
        10, [{"instance": "bad"}]),
    "NotaryPublishConflict": ({'ledger_publish_conflicts_total{instance="bad"}': "0 0 1 1",
                               'ledger_publish_conflicts_total{instance="ok"}': "0 0 0 0"},
                              3, [{"instance": "bad"}]),
    "MonitorAlarm": ({'notary_monitor_alarm_active{instance="bad"}': "0 1",
                      'notary_monitor_alarm_active{instance="ok"}': "0 0"},
                     1, [{"instance": "bad"}]),
    "MonitorStale": (
        {'notary_monitor_last_success_timestamp_seconds{instance="bad"}': "0x30",
         'notary_monitor_last_success_timestamp_seconds{instance="ok"}': "0+60x30"},
        20, [{"instance": "bad"}]),
}


def test_each_alert_fires_for_the_instance_in_trouble_only(tmp_path: Path) -> None:
    """``promtool test rules`` on made-up series: every alert of the file has a scenario, and
    fires when (and only where) it should. The annotations are left out of the copy tested
    (promtool would compare their rendered text; ``check rules`` checks their templates)."""
    rules = yaml.safe_load(ALERTS.read_text())
    severity = {}
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
            severity[rule["alert"]] = rule["labels"]["severity"]
    assert set(SCENARIOS) == set(severity), "an alert without a scenario, or the reverse"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    tests = []
    for alert, (series, minute, firing) in SCENARIOS.items():
        tests.append({
            "interval": "1m",
            "input_series": [{"series": k, "values": v} for k, v in series.items()],
            "alert_rule_test": [
                {"eval_time": "0m", "alertname": alert, "exp_alerts": []},
                {"eval_time": f"{minute}m", "alertname": alert, "exp_alerts": [
                    {"exp_labels": {**labels, "severity": severity[alert]}}
                    for labels in firing]},
            ],
        })
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(
        {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}))
    done = subprocess.run([promtool(), "test", "rules", "tests.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
