#!/usr/bin/python3
"""`report` end to end, on a short real fashion_mlp run and a two-point sweep (standard library only).

  report_check.py BIN WORK records   the pages' SVG parses as XML, one curve per logged metric, a
                                      10x10 confusion heatmap with class names, the sweep's legend
                                      and table, no network reference; a torn metrics.jsonl, a
                                      folder that is not a run and an empty sweep; watch's curves
  report_check.py BIN WORK browser   headless Chromium renders both pages: the same DOM checks on
                                      what the browser built, a screenshot kept under WORK, and
                                      Chromium's own network log shows no request beyond the file.
                                      Exits 77 (ctest SKIP) when no chromium is installed.
"""
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

BIN, WORK, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
RUNS = os.path.join(WORK, "runs")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def nitro(*args, rc=0):
    p = subprocess.run([BIN, *args], cwd=WORK, capture_output=True, text=True, timeout=300)
    if p.returncode != rc:
        fail("`%s` exited %d, expected %d\nstdout:\n%s\nstderr:\n%s" % (" ".join(args), p.returncode, rc, p.stdout, p.stderr))
    return p.stdout + p.stderr


def expect(text, pattern, what):
    if pattern not in text:
        fail("%s: expected %r in:\n%s" % (what, pattern, text[:3000]))


class Dom(html.parser.HTMLParser):
    """Elements with their attributes and section (the nearest enclosing <section id=...>), and texts."""

    def __init__(self):
        super().__init__()
        self.elements, self.stack, self.texts = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        section = next((s for t, s in reversed(self.stack) if s), None)
        if tag == "section" and "id" in a:
            section = a["id"]
        self.elements.append((tag, a, section))
        if tag not in ("meta", "rect", "circle", "polyline", "line", "br", "img", "link", "path"):
            self.stack.append((tag, section if tag == "section" else None))

    def handle_startendtag(self, tag, attrs):
        a = dict(attrs)
        section = next((s for t, s in reversed(self.stack) if s), None)
        self.elements.append((tag, a, section))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        self.texts.append(data)

    def find(self, tag, cls=None, section=None):
        return [a for t, a, s in self.elements
                if t == tag and (cls is None or cls in a.get("class", "").split()) and (section is None or s == section)]


def dom_of(text):
    d = Dom()
    d.feed(text)
    return d


def check_svg(page, what):
    svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
    if not svgs:
        fail(what + ": no SVG")
    for s in svgs:
        try:
            ET.fromstring(s)
        except ET.ParseError as e:
            fail("%s: an SVG does not parse as XML (%s):\n%s" % (what, e, s[:400]))
    return len(svgs)


def check_offline(page, what):
    expect(page, "Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\"", what)
    if re.search(r"\b(src|href)\s*=\s*[\"']?\s*(https?:)?//", page, re.I):
        fail(what + ": the page references a network resource")
    if re.search(r"<script|<link\b|@import|url\(", page, re.I):
        fail(what + ": the page loads a script, a stylesheet or a url()")


def logged_series(run):
    """(split, metric) pairs logged as numbers, scheduled values apart (the manifest's `schedules`)."""
    manifest = json.load(open(os.path.join(run, "manifest.json")))
    keys = [k.strip() for k in manifest["run_keywords"]["schedules"]["value"].split(",")]
    metrics, schedules = set(), set()
    for line in open(os.path.join(run, "metrics.jsonl")):
        j = json.loads(line)
        if j.get("type") != "metrics":
            continue
        for k, v in j.items():
            if k in ("type", "split", "step", "epoch", "wall_time") or not (v is None or isinstance(v, (int, float))):
                continue
            (schedules if j["split"] == "train" and k in keys else metrics).add((j["split"], k))
    return metrics, schedules


def check_run_dom(d, run, what):
    metrics, schedules = logged_series(run)
    curves = {(a["data-split"], a["data-metric"]) for a in d.find("g", "curve", "metrics")}
    if curves != metrics or len(d.find("g", "curve", "metrics")) != len(metrics):
        fail("%s: curves %s, logged %s" % (what, sorted(curves), sorted(metrics)))
    sched = {(a["data-split"], a["data-metric"]) for a in d.find("g", "curve", "schedules")}
    if sched != schedules or not schedules:
        fail("%s: scheduled curves %s, logged %s" % (what, sorted(sched), sorted(schedules)))
    maps = d.find("svg", "heatmap")
    if not maps:
        fail(what + ": no confusion heatmap")
    for m in maps:
        if m["data-classes"] != "10":
            fail(what + ": a heatmap of %s classes" % m["data-classes"])
    cells = d.find("rect", "cell", "confusion")
    if len(cells) != 100 * len(maps):
        fail("%s: %d heatmap cells for %d maps of 10x10" % (what, len(cells), len(maps)))
    text = "".join(d.texts)
    for name in ("T-shirt/top", "Ankle boot"):
        expect(text, name, what + " (class names)")
    if not d.find("g", "curve", "timing"):
        fail(what + ": no samples/s curve")


def check_sweep_dom(d, what):
    legend = " ".join(a.get("data-label", "") for a in d.find("g", "legend-item", "curves"))
    for v in ("width=128", "width=256"):
        expect(legend, v, what + " (legend)")
    rows = d.find("tr", "point", "final")
    if len(rows) != 2:
        fail("%s: %d rows in the final metrics table" % (what, len(rows)))
    labels = {a["data-label"] for a in d.find("g", "curve", "curves")}
    if labels != {"width=128", "width=256"}:
        fail("%s: curves labelled %s" % (what, sorted(labels)))


# ---- the records: one run, one sweep of two points ------------------------------------------------
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
nitro("run", "--variant", "smoke", "--steps", "400", "--eval-every", "100", "--run-dir", RUNS, "--id", "r", "--quiet")
run = os.path.join(RUNS, "fashion_mlp-smoke-r")
nitro("sweep", "widths", "--variant", "smoke", "--steps", "60", "--eval-every", "30", "--run-dir", RUNS, "--quiet")

out = nitro("report", "--run-dir", RUNS, "fashion_mlp-smoke-r", "--out", "run.html")
expect(out, "report run.html: the run", "report RUN")
out = nitro("report", "--run-dir", RUNS, "widths", "-o", "sweep.html")
expect(out, "report sweep.html: the sweep", "report SWEEP")
run_page = open(os.path.join(WORK, "run.html"), encoding="utf-8").read()
sweep_page = open(os.path.join(WORK, "sweep.html"), encoding="utf-8").read()

if MODE == "records":
    # the default output: <slug>.html in the current folder, nothing written into the run folder
    before = sorted(os.listdir(run))
    nitro("report", "--run-dir", RUNS, "latest")
    if sorted(os.listdir(run)) != before:
        fail("report wrote into the run folder")
    for page, what in ((run_page, "run page"), (sweep_page, "sweep page")):
        check_svg(page, what)
        check_offline(page, what)
    check_run_dom(dom_of(run_page), run, "run page")
    check_sweep_dom(dom_of(sweep_page), "sweep page")

    # a crash mid-line: the torn last line is skipped and named, the rest is drawn
    torn = os.path.join(RUNS, "torn")
    shutil.copytree(run, torn)
    with open(os.path.join(torn, "metrics.jsonl"), "rb+") as f:
        data = f.read()
        f.seek(0)
        f.truncate()
        f.write(data[: data.rindex(b"\n", 0, len(data) - 1) + 40])  # the last line cut after 39 bytes
    with open(os.path.join(torn, "status.json"), "w") as f:
        f.write('{"state": "running", "ste')  # a status cut short too
    nitro("report", os.path.join(RUNS, "torn"), "--out", "torn.html")
    page = open(os.path.join(WORK, "torn.html"), encoding="utf-8").read()
    check_svg(page, "torn page")
    expect(page, "has no newline (39 bytes): cut short by a crash, or still being written; skipped", "torn page")
    expect(page, "status.json is not a JSON object (damaged or cut short); left out", "torn page")
    if not dom_of(page).find("g", "curve", "metrics"):
        fail("torn page: no curves")

    # not a run: a coded error with the fix, exit 3
    os.makedirs(os.path.join(WORK, "empty"))
    out = nitro("report", os.path.join(WORK, "empty"), rc=3)
    expect(out, "E-REC-007: the folder %s is not a run: it has neither manifest.json nor metrics.jsonl" % os.path.join(WORK, "empty"), "not a run")
    out = nitro("report", RUNS, rc=3)
    expect(out, "E-REC-007: the folder %s is not a run" % RUNS, "the runs folder")
    expect(out, "run folders)", "the runs folder")
    # an empty sweep, and one whose points left no folder
    with open(os.path.join(RUNS, "sweep-none-1.json"), "w") as f:
        json.dump({"sweep": "none", "experiment": "FashionMLP", "points": []}, f)
    out = nitro("report", "--run-dir", RUNS, "none", rc=3)
    expect(out, "E-REC-008: the sweep summary %s lists no points" % os.path.join(RUNS, "sweep-none-1.json"), "empty sweep")
    with open(os.path.join(RUNS, "sweep-gone-1.json"), "w") as f:
        json.dump({"sweep": "gone", "experiment": "FashionMLP", "points": [{"index": 0, "slug": "missing-p0", "state": "finished"}]}, f)
    out = nitro("report", "--run-dir", RUNS, "gone", rc=3)
    expect(out, "E-REC-008: none of the 1 points of the sweep", "a sweep without folders")

    # watch draws the curves
    out = nitro("watch", "--run-dir", RUNS, "fashion_mlp-smoke-r")
    expect(out, "curves:\n  train/loss  ", "watch")
    expect(out, "  (monitor)", "watch")
    if not re.search("[\u2581-\u2588]{2,}", out):
        fail("watch: no sparkline in:\n" + out)
    print("ok: run page (%d SVG), sweep page (%d SVG), torn, not a run, empty sweep, watch" % (check_svg(run_page, "run"), check_svg(sweep_page, "sweep")))
    sys.exit(0)

# ---- the browser --------------------------------------------------------------------------------
chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
if not chromium:
    print("SKIP: no chromium (Debian: apt-get install chromium)")
    sys.exit(77)


def browse(page, *extra):
    profile = os.path.join(WORK, "profile-" + os.path.basename(page))
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--user-data-dir=" + profile, "--window-size=1280,1800",
            # the browser's own background traffic (updates, sync, spelling dictionaries, accounts) off,
            # so that its network log holds what the page asks for, and nothing else
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
            "--no-default-browser-check", "--disable-client-side-phishing-detection", "--disable-domain-reliability",
            "--no-pings", "--disable-breakpad", "--disable-spell-checking", "--disable-features=Translate,OptimizationHints,MediaRouter,AccountConsistency",
            *extra, "file://" + os.path.abspath(page)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail("chromium exited %d:\n%s" % (p.returncode, p.stderr[-3000:]))
    return p.stdout


def page_requests(netlog):
    """The URLs the page asked for, from Chromium's network log: requests with the page (a file://
    origin, "null") as their initiator. The browser's own requests ("not an origin") are not the page's."""
    log = json.load(open(netlog, encoding="utf-8", errors="replace"))
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return sorted({e["params"]["url"] for e in log["events"]
                   if e["type"] == start and "url" in e.get("params", {}) and e["params"].get("initiator") != "not an origin"})


# The check can fail: a page without the policy that asks for an image is caught asking.
probe = os.path.join(WORK, "probe.html")
with open(probe, "w") as f:
    f.write('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png"></body></html>')
browse(probe, "--dump-dom", "--log-net-log=" + probe + ".netlog.json")
if "http://127.0.0.1:9/x.png" not in page_requests(probe + ".netlog.json"):
    fail("the network log does not show a page's request for an image: the check below could not fail")

for name, check in (("run.html", lambda d: check_run_dom(d, run, "run page in chromium")),
                    ("sweep.html", lambda d: check_sweep_dom(d, "sweep page in chromium"))):
    page = os.path.join(WORK, name)
    netlog = os.path.join(WORK, name + ".netlog.json")
    dom = browse(page, "--dump-dom", "--log-net-log=" + netlog)
    if "<svg" not in dom:
        fail(name + ": chromium built no SVG:\n" + dom[:2000])
    check(dom_of(dom))
    # Chromium's own record of its requests: nothing but the file itself
    outside = page_requests(netlog)
    if outside:
        fail("%s: chromium asked for %s" % (name, outside))
    shot = os.path.join(WORK, name.replace(".html", ".png"))
    browse(page, "--screenshot=" + shot, "--hide-scrollbars")
    with open(shot, "rb") as f:
        head = f.read(8)
    if head != b"\x89PNG\r\n\x1a\n" or os.path.getsize(shot) < 10000:
        fail(name + ": no screenshot")
    print("ok: %s rendered in chromium, %d bytes of screenshot at %s, no request beyond the file" % (name, os.path.getsize(shot), shot))
