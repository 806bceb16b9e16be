#!/usr/bin/env python3
"""The web UI's cost at scale (docs/performance.md, "The web UI at 10,000 nodes").

Starts a real RM (target/{debug,release}/resourcemanager) on 127.0.0.1:0, registers NODES
synthetic NodeManagers through the node-tracker REST API (8 GPUs each, four GPU models,
their NM addresses unreachable so nothing launches), submits APPS applications to a queue
that admits one at a time, then for each UI page: times the REST calls the page makes
(median of 5), and loads the page in headless chromium, reading the time the page itself
measured from its first fetch to its DOM updated (`data-render-ms` on <main>).

Only the Python standard library. Usage:
  python3 scripts/ui-bench.py [--nodes 10000] [--apps 20000] [--profile debug|release]
"""

import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA L40S", "Tesla V100-SXM2-32GB"]


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=60) as r:
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)


def start_rm(tmp, profile):
    binary = os.path.join(ROOT, "target", profile, "resourcemanager")
    conf = os.path.join(tmp, "conf")
    os.makedirs(conf)
    with open(os.path.join(conf, "yarn-site.xml"), "w") as f:
        f.write("<configuration></configuration>\n")
    props = {
        "root.queues": "default,bulk",
        "root.default.capacity": "90",
        "root.bulk.capacity": "10",
        "root.bulk.max-parallel-apps": "1",
        "root.bulk.maximum-applications": "1000000",
    }
    with open(os.path.join(conf, "capacity-scheduler.xml"), "w") as f:
        f.write("<configuration>\n")
        for k, v in props.items():
            f.write(f"<property><name>yarn.scheduler.capacity.{k}</name><value>{v}</value></property>\n")
        f.write("</configuration>\n")
    addr_file = os.path.join(tmp, "address")
    args = [binary, "--conf-dir", conf, "--address-file", addr_file]
    for k, v in {
        "yarn.resourcemanager.webapp.address": "127.0.0.1:0",
        "spindle.resourcemanager.state-store.path": os.path.join(tmp, "rm.sqlite"),
        "yarn.resource-types": "yarn.io/gpu",
        "yarn.resourcemanager.max-completed-applications": "1000000",
        "yarn.nm.liveness-monitor.expiry-interval-ms": "3600000",
    }.items():
        args += ["-D", f"{k}={v}"]
    log = open(os.path.join(tmp, "rm.log"), "w")
    rm = subprocess.Popen(args, stdout=log, stderr=log)
    for _ in range(200):
        if os.path.exists(addr_file) and open(addr_file).read().strip():
            return rm, "http://" + open(addr_file).read().strip()
        if rm.poll() is not None:
            sys.exit("the RM exited: see " + log.name)
        time.sleep(0.1)
    sys.exit("the RM did not start")


def register(base, i):
    host = f"gpu-{i:05d}.example"
    body = {
        "nodeId": f"{host}:8041",
        # Nothing listens there: an AM the RM places on it fails to launch at once.
        "httpAddress": "127.0.0.1:9",
        "resource": {"memory": 1024 * 1024, "vCores": 128, "resourceInformations": {
            "resourceInformation": [{"name": "yarn.io/gpu", "value": 8}]}},
        "nmVersion": "bench",
        "rack": f"/rack-{i // 40:03d}",
        "nodeAttributes": {"nm.yarn.io/gpu-model": MODELS[i % len(MODELS)]},
    }
    call(base, "POST", "/ws/v1/node-tracker/register", body)


def submit(base, i):
    _, new = call(base, "POST", "/ws/v1/cluster/apps/new-application")
    call(base, "POST", "/ws/v1/cluster/apps?user.name=u%d" % (i % 50), {
        "application-id": new["application-id"],
        "application-name": f"bench-{i:06d}",
        "queue": "bulk",
        "max-app-attempts": 1,
        "am-container-spec": {"commands": {"command": "sleep 600"}},
        "resource": {"memory": 128, "vCores": 1},
    })


def timed(base, path, n=5):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        urllib.request.urlopen(base + path, timeout=60).read()
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)


def chromium_render_ms(chrome, url, profile_dir):
    args = [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile_dir}",
            "--virtual-time-budget=8000", "--dump-dom", url]
    t = time.perf_counter()
    dom = subprocess.run(args, capture_output=True, text=True, timeout=120).stdout
    wall = (time.perf_counter() - t) * 1000
    m = re.search(r'data-render-ms="(\d+)"', dom)
    return (int(m.group(1)) if m else None), wall


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--apps", type=int, default=20000)
    p.add_argument("--profile", default="debug")
    p.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="spindle-ui-bench-")
    rm, base = start_rm(tmp, a.profile)
    try:
        t = time.time()
        with cf.ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda i: register(base, i), range(a.nodes)))
        print(f"registered {a.nodes} nodes in {time.time() - t:.1f}s", flush=True)
        t = time.time()
        with cf.ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda i: submit(base, i), range(a.apps)))
        print(f"submitted {a.apps} applications in {time.time() - t:.1f}s", flush=True)
        _, nodes = call(base, "GET", "/ws/v1/cluster/nodes?limit=1")
        node = nodes["nodes"]["node"][0]["id"]
        _, apps = call(base, "GET", "/ws/v1/cluster/apps?limit=1&sort=-id")
        app = apps["apps"]["app"][0]["id"]
        pages = {
            "overview": ["/ws/v1/cluster/metrics", "/ws/v1/cluster/nodes-summary",
                         "/ws/v1/cluster/appstatistics"],
            "queues": ["/ws/v1/cluster/scheduler"],
            "apps": ["/ws/v1/cluster/apps?sort=-id&offset=0&limit=50&deSelects=resourceRequests"],
            "apps?sort=-startedTime&page=100": [
                "/ws/v1/cluster/apps?sort=-startedTime&offset=5000&limit=50&deSelects=resourceRequests"],
            f"app/{app}": [f"/ws/v1/cluster/apps/{app}", f"/ws/v1/cluster/apps/{app}/appattempts"],
            "nodes": ["/ws/v1/cluster/nodes?offset=0&limit=50"],
            "nodes?page=150": ["/ws/v1/cluster/nodes?offset=7500&limit=50"],
            f"node/{node}": [f"/ws/v1/cluster/nodes/{node}"],
        }
        profile_dir = os.path.join(tmp, "chromium")
        print(f"{'page':<42} {'REST calls (median ms)':<34} {'in-page render ms':>17} {'chromium wall ms':>16}")
        for route, calls in pages.items():
            rest = " + ".join(f"{timed(base, c):.0f}" for c in calls)
            render, wall = chromium_render_ms(a.chromium, f"{base}/ui/#/{route}", profile_dir)
            print(f"#/{route:<40} {rest:<34} {str(render):>17} {wall:>16.0f}", flush=True)
        full = timed(base, "/ws/v1/cluster/nodes", 1)
        print(f"(for scale: the whole /ws/v1/cluster/nodes list, which no page fetches: {full:.0f} ms)")
    finally:
        rm.terminate()
        rm.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
