#!/usr/bin/env python3
"""The web UI's cost at scale (docs/performance.md, "The web UI at 10,000 nodes").

Starts a real RM (target/{debug,release}/resourcemanager) on 127.0.0.1:0, registers NODES
synthetic NodeManagers through the node-tracker REST API (8 GPUs each, four GPU models,
their NM addresses unreachable so nothing launches), submits APPS applications to a queue
that admits one at a time, then for each UI page: times the REST calls the page makes
(median of 5), and loads the page in headless chromium driven over the DevTools protocol
(real time), reading the time the page itself measured from its first fetch to its DOM
updated (`data-render-ms` on <main>) and the time from navigation start to that render.

Only the Python standard library. Usage:
  python3 scripts/ui-bench.py [--nodes 10000] [--apps 20000] [--profile debug|release]
"""

import argparse
import concurrent.futures as cf
import json
import os

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


class Cdp:
    """A minimal Chrome DevTools Protocol client over a WebSocket (standard library only)."""

    def __init__(self, ws_url):
        import base64
        import socket
        import urllib.parse
        u = urllib.parse.urlparse(ws_url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
                           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        resp = b""
        while b"\r\n\r\n" not in resp:
            resp += self.sock.recv(4096)
        assert b" 101 " in resp.split(b"\r\n")[0], resp
        self.buf = resp.split(b"\r\n\r\n", 1)[1]
        self.next_id = 0

    def _recv_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("devtools closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _recv_frame(self):
        b0, b1 = self._recv_exact(2)
        n = b1 & 0x7F
        if n == 126:
            n = int.from_bytes(self._recv_exact(2), "big")
        elif n == 127:
            n = int.from_bytes(self._recv_exact(8), "big")
        return b0 & 0x0F, self._recv_exact(n)

    def call(self, method, **params):
        self.next_id += 1
        data = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big"))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
        while True:
            op, payload = self._recv_frame()
            if op == 1:
                msg = json.loads(payload)
                if msg.get("id") == self.next_id:
                    return msg.get("result", {})


def chromium_render_ms(chrome, url, profile_dir):
    """Loads `url` in a real-time headless chromium (DevTools protocol) and waits for the
    page's first render. Answers (the page's own figure: first fetch to DOM updated, ms;
    navigation start to that render, ms)."""
    port_file = os.path.join(profile_dir, "DevToolsActivePort")
    if os.path.exists(port_file):
        os.remove(port_file)
    p = subprocess.Popen([chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                          "--no-first-run", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                          f"--user-data-dir={profile_dir}", "--remote-debugging-port=0",
                          "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        port = open(port_file).read().split()[0]
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list").read())
        page = next(t for t in targets if t["type"] == "page")
        cdp = Cdp(page["webSocketDebuggerUrl"])
        cdp.call("Page.navigate", url=url)
        expr = ("(() => { const m = document.getElementById('main'); "
                "return m && m.dataset.renderMs ? [Number(m.dataset.renderMs), "
                "Math.round(performance.now())] : null; })()")
        deadline = time.time() + 30
        while time.time() < deadline:
            r = cdp.call("Runtime.evaluate", expression=expr, returnByValue=True)
            v = r.get("result", {}).get("value")
            if v:
                return v[0], v[1]
            time.sleep(0.02)
        return None, None
    finally:
        p.terminate()
        p.wait(timeout=30)


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
        print(f"{'page':<42} {'REST calls (median ms)':<34} {'page refresh ms':>15} {'load to render ms':>17}")
        for route, calls in pages.items():
            rest = " + ".join(f"{timed(base, c):.0f}" for c in calls)
            render, loaded = chromium_render_ms(a.chromium, f"{base}/ui/#/{route}", profile_dir)
            print(f"#/{route:<40} {rest:<34} {str(render):>15} {str(loaded):>17}", flush=True)
        full = timed(base, "/ws/v1/cluster/nodes", 1)
        print(f"(for scale: the whole /ws/v1/cluster/nodes list, which no page fetches: {full:.0f} ms)")
    finally:
        rm.terminate()
        rm.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
