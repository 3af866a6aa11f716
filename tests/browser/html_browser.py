#!/usr/bin/env python3
"""check --html and sweep --html pages as a browser shows them, in headless Chromium.

    html_browser.py LOCKSTEP        (run from the source tree; ctest: browser.html_report)

The CLI writes a check page (a deadlock and a hang from scenarios/corpus/) and a sweep page;
Chromium loads each from file://. It checks that no console message is logged (the pages have
no script, so any message is an error), that the DOM Chromium builds (--dump-dom) holds the
wait-for graph's SVG nodes, the timeline's rows and the stuck op, as many as the file has, and
that a screenshot is not blank: the PNG decodes and shows the stuck op's red. Exits 77 (ctest:
skipped) with a message when Chromium is absent (Debian: apt-get install chromium).
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
STUCK_RED = (0xDD, 0x33, 0x33)  # a stuck op's fill (checker/html_report.cc)


def fail(message):
    print(f"html_browser: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def chromium_binary():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(chromium, profile, args, url):
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
               "--enable-logging=stderr", "--v=0", *args, url]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        fail(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr}")
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line]
    if console:
        fail(f"{url}: console messages:\n" + "\n".join(console))
    return result.stdout


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA PNG, unfiltered."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG")
    at, idat, width, height, channels = 8, b"", 0, 0, 0
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        chunk = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", chunk[:10])
            if depth != 8 or color not in (2, 6):
                fail(f"{path}: bit depth {depth}, colour type {color}: expected 8-bit RGB or RGBA")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        at += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        filter_type = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            if filter_type == 1:
                line[i] = (line[i] + left) & 0xFF
            elif filter_type == 2:
                line[i] = (line[i] + up) & 0xFF
            elif filter_type == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif filter_type == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def check_screenshot(path):
    if not os.path.exists(path) or os.path.getsize(path) < 2000:
        fail(f"{path}: no screenshot, or a nearly empty one")
    width, height, channels, rows = png_pixels(path)
    colours, red = set(), 0
    for row in rows:
        for x in range(0, width * channels, channels):
            pixel = tuple(row[x:x + 3])
            colours.add(pixel)
            red += pixel == STUCK_RED
    if len(colours) < 8:
        fail(f"{path}: {len(colours)} colours: a blank page")
    if red < 100:
        fail(f"{path}: {red} pixels of the stuck op's red: the timeline is not drawn")
    return width, height, len(colours), red


def main():
    if len(sys.argv) != 2:
        fail("usage: html_browser.py LOCKSTEP")
    lockstep = sys.argv[1]
    chromium = chromium_binary()
    if chromium is None:
        print("html_browser: skipped: no chromium on PATH (Debian: apt-get install --no-install-recommends chromium)")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="lockstep-browser-") as tmp:
        check_page = os.path.join(tmp, "check.html")
        sweep_page = os.path.join(tmp, "sweep.html")
        made = subprocess.run([lockstep, "check", "scenarios/corpus/head-to-head-sends.yaml",
                               "scenarios/corpus/uneven-batches.yaml", "--quiet", "--html", check_page],
                              capture_output=True, text=True)
        if made.returncode != 1 or not os.path.exists(check_page):
            fail(f"lockstep check --html exited {made.returncode}:\n{made.stdout}{made.stderr}")
        made = subprocess.run([lockstep, "sweep", "scenarios/examples/pipeline-interleaved-sweep.yaml", "-D", "pp=2",
                               "-D", "chunks=2", "-D", "microbatches=4,5", "--quiet", "--html", sweep_page],
                              capture_output=True, text=True)
        if made.returncode != 1 or not os.path.exists(sweep_page):
            fail(f"lockstep sweep --html exited {made.returncode}:\n{made.stdout}{made.stderr}")
        source = open(check_page, encoding="utf-8").read()
        profile = os.path.join(tmp, "profile")

        dom = run_chromium(chromium, profile, ["--dump-dom"], "file://" + check_page)
        if "<script" in dom:
            fail("the check page's DOM has a script")
        counts = {}
        for what, pattern in (("graph nodes", r'<g class="node'), ("timeline rows", r'<g class="timeline-row"'),
                              ("stuck ops", r'<g class="span stuck"'), ("SVG pictures", r"<svg ")):
            in_dom, in_file = len(re.findall(pattern, dom)), len(re.findall(pattern, source))
            if in_dom == 0 or in_dom != in_file:
                fail(f"the check page's DOM has {in_dom} {what}, its file {in_file}")
            counts[what] = in_dom
        if dom.count('<svg class="wait-for"') != 2 or dom.count('<svg class="timeline"') != 2:
            fail("the check page's DOM lacks a graph or a timeline of its two bugs")

        sweep_dom = run_chromium(chromium, profile, ["--dump-dom"], "file://" + sweep_page)
        if sweep_dom.count('<tr class="point"') != 2 or '<div class="bug-class" data-kind="deadlock"' not in sweep_dom:
            fail("the sweep page's DOM lacks its two points or its bug class")

        shot = os.path.join(tmp, "check.png")
        run_chromium(chromium, profile, [f"--screenshot={shot}", "--window-size=1000,2400", "--hide-scrollbars"],
                     "file://" + check_page)
        width, height, colours, red = check_screenshot(shot)
        print(f"html_browser: ok: {counts}; screenshot {width}x{height}, {colours} colours, {red} stuck-red pixels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
