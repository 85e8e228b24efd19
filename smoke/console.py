#!/usr/bin/env python3
"""The web console in a real browser (Chromium through Selenium and chromedriver).

    smoke/console.py --binary .build/debug/frametap [--output DIR] [--fixtures DIR]

Runs the same scenario against two servers, one without a token and one with --auth-token
(signed in through the page's sign-in box):
  - the empty state with no sessions;
  - three live ffmpeg -re pushes, two H.264 and one H.265 (Main 10): cards with thumbnails that
    show pictures (checked on the pixels of a screenshot) and fps advancing, the H.265 card with
    its codec, profile and bit depth;
  - a session view opened from the keyboard: MJPEG playing (two screenshots differ) and the
    server counting one viewer, the format and the charts; Escape back to the grid;
  - the H.265 session's view: its format (codec, tier) and an x265 push among its commands;
  - a .264 and a .265 file pushed through the upload form: their sessions appear with the right
    size and codec;
  - a session deleted from the page: its card goes;
  - pull sessions: a camera that cannot be reached shows a failed badge and its error in words on
    its card (checked on the pixels of a screenshot too) and in its view's Source and Last error
    sections, and Retry now tries again; a live RTSP pull (GStreamer's RTSP server) shows a live
    badge, its picture, and Receiving: yes;
  - the System view counts the sessions by back end, also when the page is opened at #/system;
  - GET /events with curl, and a Last-Event-ID resume (skipped while the server answers 404);
and, without a token, a server restart (the page shows it is reconnecting and recovers without
a reload), the page at 360 px wide and in the dark theme.

This script starts and stops the servers itself (like smoke/server.sh: a free loopback port,
/healthz before use, SIGTERM and exit 0 at the end), because the restart check must bring the
same server back on the same port under the open page. Screenshots go to --output
(.test-output/console by default). Prints one PASS/FAIL/SKIP line per check and
"N passed, N failed, N skipped" last; exits 1 when anything failed.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))

from selenium.common.exceptions import TimeoutException, WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from harness.browser import chromium  # noqa: E402  (tools/ is on the path only now)
from harness.checks import Results  # noqa: E402
from harness.client import address, request, session_status  # noqa: E402
from harness.ports import free_port  # noqa: E402
from harness.proc import end  # noqa: E402
from harness.server import Server  # noqa: E402
from harness.waiting import Failure  # noqa: E402

# Generous: a loaded 2-core machine runs the server, two ffmpeg pushes and Chromium at once.
WAIT = float(os.environ.get("CONSOLE_WAIT_SECONDS", "30"))


# --- processes ---------------------------------------------------------------------------------

def came_up(server):
    """Starts the server; False (and why, with the end of its log) when it did not come up."""
    try:
        server.start()
        return True
    except Failure as error:
        print(error)
        return False


class Push:
    """A camera-like live push: ffmpeg -re sends an H.264 (or, for a .265 file, H.265) stream at
    its own pace (chunked POST)."""

    def __init__(self, base, session, stream, token=None):
        raw = "hevc" if stream.endswith(".265") else "h264"
        command = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-re", "-f", raw, "-i", stream,
                   "-c", "copy", "-f", raw, "-method", "POST", "-chunked_post", "1"]
        if token:
            command += ["-headers", f"Authorization: Bearer {token}\r\n"]
        self.process = subprocess.Popen(command + [f"{base}/sessions/{session}/nalus"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        end(self.process)


def live_stream(fixture, copies, path):
    """A long stream from a short fixture, copied end to end (each copy starts with SPS, PPS and
    an IDR). ffmpeg 5.1 cannot -stream_loop a raw .264 (its demuxer cannot seek back)."""
    with open(fixture, "rb") as source:
        data = source.read()
    with open(path, "wb") as target:
        for _ in range(copies):
            target.write(data)
    return path


# --- pictures ----------------------------------------------------------------------------------

def png_pixels(data):
    """(width, height, rows of RGB bytes) of an 8-bit RGB/RGBA PNG, decoded with zlib only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
    raw, stride = zlib.decompress(idat), width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rgb = line if channels == 3 else bytearray(value for index, value in enumerate(line) if index % 4 != 3)
        rows.append(bytes(rgb))
        previous = line
    return width, height, rows


def picture_verdict(png):
    """'ok ...' when the PNG shows a picture: at least 16 distinct colours and not one flat
    colour for 90 % of it (a blank, white or black box fails), otherwise 'blank ...'."""
    width, height, rows = png_pixels(png)
    counts = {}
    for row in rows[::2]:
        for x in range(0, width * 3, 6):
            pixel = row[x:x + 3]
            counts[pixel] = counts.get(pixel, 0) + 1
    total = sum(counts.values())
    dominant = max(counts.values()) / max(total, 1)
    verdict = "ok" if len(counts) >= 16 and dominant < 0.9 else "blank"
    return f"{verdict} ({width}x{height}, {len(counts)} colours, most common {dominant:.0%})"


def dominant_colour(png):
    """The most common colour of a PNG (an element's background, for text on it)."""
    width, _, rows = png_pixels(png)
    counts = {}
    for row in rows:
        for x in range(0, width * 3, 3):
            counts[row[x:x + 3]] = counts.get(row[x:x + 3], 0) + 1
    return tuple(max(counts, key=counts.get))


# --- the browser -------------------------------------------------------------------------------

def make_driver(profile_dir, downloads=None):
    prefs = {"download.default_directory": downloads, "download.prompt_for_download": False} if downloads else None
    driver = chromium(profile_dir, "--hide-scrollbars", prefs=prefs)
    if downloads:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
    return driver


class Page:
    def __init__(self, driver, base, shots, prefix):
        self.driver, self.base, self.shots, self.prefix = driver, base, shots, prefix
        self.console_log = []

    def js(self, script, *arguments):
        return self.driver.execute_script(script, *arguments)

    def wait(self, condition, timeout=WAIT):
        """The condition's value once truthy, or None after `timeout` seconds."""
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.2).until(lambda _: condition())
        except TimeoutException:
            return None

    def wait_js(self, script, *arguments, timeout=WAIT):
        return self.wait(lambda: self.js(script, *arguments), timeout)

    def find(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def screenshot(self, name):
        path = os.path.join(self.shots, f"{self.prefix}-{name}.png")
        self.driver.save_screenshot(path)
        return path

    def element_png(self, css):
        return self.find(css).screenshot_as_png

    def keep(self, name, png):
        with open(os.path.join(self.shots, f"{self.prefix}-{name}.png"), "wb") as file:
            file.write(png)

    def press(self, *keys):
        self.driver.switch_to.active_element.send_keys(*keys)

    def collect_log(self):
        try:
            self.console_log += self.driver.get_log("browser")
        except WebDriverException:
            pass


def card_count(page):
    return page.js("return document.querySelectorAll('#session-grid .card').length")


def card_state(page, session):
    return page.js("""
        const card = document.querySelector(`#session-grid .card[data-session="${arguments[0]}"]`);
        if (!card) return null;
        const img = card.querySelector('.thumb-img');
        return {seq: Number(card.dataset.seq || 0), fps: card.dataset.fps === '' ? null : Number(card.dataset.fps),
                resolution: card.dataset.resolution, loaded: !img.hidden && img.complete && img.naturalWidth > 0,
                fpsText: card.querySelector('[data-field="fps"]').textContent, codec: card.dataset.codec,
                formatText: card.querySelector('[data-field="format"]').textContent,
                pull: card.dataset.pull, pullText: card.querySelector('[data-field="pull"]').hidden ? null
                    : card.querySelector('[data-field="pull"]').textContent,
                errorText: card.querySelector('[data-field="error"]').hidden ? null
                    : card.querySelector('[data-field="error"]').textContent,
                problem: card.querySelector('[data-field="problem"]').hidden ? null
                    : card.querySelector('[data-field="problem"]').textContent,
                placeholder: card.querySelector('.thumb-placeholder').hidden ? null
                    : card.querySelector('.thumb-placeholder').textContent};
    """, session)


# --- the scenario ------------------------------------------------------------------------------

def scenario(results, server, token, fixtures, work, shots, options):
    label = "auth" if token else "open"
    r = lambda name, ok, detail="": results.check(f"{label}: {name}", ok, detail)
    base = server.base
    downloads = os.path.join(work, f"downloads-{label}")
    os.makedirs(downloads, exist_ok=True)
    driver = make_driver(os.path.join(work, f"profile-{label}"), downloads)
    page = Page(driver, base, shots, label)
    pushes = []
    try:
        events_status = events_answer(base, token)
        driver.get(base + "/")

        # --- sign-in (auth only) and the empty state --------------------------------------
        if token:
            r("the sign-in box opens on the 401", page.wait_js("return document.getElementById('sign-in-dialog').open") is True)
            page.find("#sign-in-token").send_keys("wrong-token", Keys.ENTER)
            message = page.wait_js("const t = document.getElementById('sign-in-message').textContent; return /not accept/.test(t) && t")
            r("a wrong token is refused in words", bool(message), f"message {message!r}")
            field = page.find("#sign-in-token")
            field.clear()
            field.send_keys(token, Keys.ENTER)
            r("the right token closes the box",
              page.wait_js("return !document.getElementById('sign-in-dialog').open") is True)
            r("the sign-out button shows", page.wait_js("return !document.getElementById('sign-out').hidden") is True)
        empty = page.wait_js("return !document.getElementById('empty-state').hidden && card_count_zero()".replace(
            "card_count_zero()", "document.querySelectorAll('#session-grid .card').length === 0"))
        r("no sessions: the empty state shows", empty is True)
        page.screenshot("empty")
        want_mode = "polling" if events_status == 404 else "events"
        mode = page.wait_js("return document.documentElement.dataset.sync === arguments[0] && arguments[0]", want_mode)
        r(f"sync mode is '{want_mode}' (GET /events answers {events_status})", mode == want_mode,
          f"mode {page.js('return document.documentElement.dataset.sync')}")

        # --- three live pushes (two H.264, one H.265): cards, thumbnails, fps --------------------
        cams = [("cam-a", "high_320x240.264"), ("cam-b", "slices4_320x240.264"), ("cam-h", "main10_320x240.265")]
        # cam-b decodes on demand: its thumbnail's long polls are what keep it decoding.
        created, _, _ = request(base, "PUT", "/sessions/cam-b", body=b'{"decode": "on-demand"}',
                                headers={"Content-Type": "application/json"}, token=token)
        r("cam-b is created on demand", created == 201, f"status {created}")
        for session, fixture in cams:
            extension = fixture.rsplit(".", 1)[1]
            stream = live_stream(os.path.join(fixtures, fixture), 400, os.path.join(work, f"{label}-{session}.{extension}"))
            pushes.append(Push(base, session, stream, token))
        r("three live pushes: three cards appear", page.wait(lambda: card_count(page) == 3) is True,
          f"{card_count(page)} cards")
        for session, _ in cams:
            loaded = page.wait(lambda: (card_state(page, session) or {}).get("loaded"))
            r(f"{session}: the thumbnail loaded", loaded is True)
            png = page.element_png(f'#session-grid .card[data-session="{session}"] .thumb-img')
            page.keep(f"thumbnail-{session}", png)
            verdict = picture_verdict(png)
            r(f"{session}: the thumbnail shows a picture: {verdict}", verdict.startswith("ok"))
            first = card_state(page, session)
            later = page.wait(lambda: (lambda state: state if state and state["seq"] > first["seq"] else None)(card_state(page, session)))
            r(f"{session}: the thumbnail follows the stream (seq {first['seq']} -> {later and later['seq']})", bool(later))
            fps = page.wait(lambda: (lambda state: state if state and state["fps"] and state["fps"] > 5 else None)(card_state(page, session)))
            r(f"{session}: fps shows the live rate ({fps and fps['fpsText']})", bool(fps),
              f"card {card_state(page, session)}")
            r(f"{session}: the card shows 320x240", (card_state(page, session) or {}).get("resolution") == "320x240")
        status_b = session_status(base, "cam-b", token) or {}
        r("cam-b (on demand): its thumbnail keeps it decoding",
          status_b.get("decode") == "on-demand" and status_b.get("decoding") is True, f"status {status_b.get('decoder')}")
        summary = page.wait(lambda: (lambda state: state if state and state["codec"] == "h265" and "10-bit" in state["formatText"]
                                     else None)(card_state(page, "cam-h")))
        r(f"cam-h: the H.265 card shows codec, profile and bit depth ({summary and summary['formatText']})",
          bool(summary) and summary["formatText"].startswith("H.265") and "Main 10" in summary["formatText"])
        h264 = card_state(page, "cam-a") or {}
        r(f"cam-a: the H.264 card shows its codec ({h264.get('formatText')})",
          h264.get("codec") == "h264" and str(h264.get("formatText")).startswith("H.264 · 320×240 · High @ L"))
        page.screenshot("grid")

        # --- the session view from the keyboard -------------------------------------------------
        page.js("document.querySelector('#session-grid .card[data-session=\"cam-a\"] .card-link').focus()")
        page.press(Keys.ARROW_RIGHT)
        focused = page.js("return document.activeElement.closest('.card')?.dataset.session")
        r("ArrowRight moves to the next card", focused == "cam-b", f"focus on {focused}")
        page.press(Keys.ARROW_LEFT)
        page.press(Keys.ENTER)
        r("Enter opens the session view (#/sessions/cam-a)",
          page.wait_js("return location.hash === '#/sessions/cam-a'") is True, page.js("return location.hash"))
        playing = page.wait_js("const img = document.getElementById('mjpeg'); return img && img.naturalWidth > 0")
        r("MJPEG: the <img> shows a picture (naturalWidth > 0)", playing is True)
        first = page.element_png("#mjpeg") if playing else b""
        if first:
            page.keep("mjpeg-1", first)
            verdict = picture_verdict(first)
            r(f"MJPEG: the picture is not blank: {verdict}", verdict.startswith("ok"))
            second = page.wait(lambda: (lambda png: png if png != first else None)(page.element_png("#mjpeg")))
            if second:
                page.keep("mjpeg-2", second)
            r("MJPEG: two screenshots of the stream differ (it plays)", bool(second))
        viewers = page.wait(lambda: (session_status(base, "cam-a", token) or {}).get("subscribers") == 1, timeout=WAIT)
        r("MJPEG: the server counts one viewer", viewers is True,
          f"subscribers {(session_status(base, 'cam-a', token) or {}).get('subscribers')}")
        facts = page.wait_js("const t = document.querySelector('.format-facts').textContent; return /High/.test(t) && /320×240/.test(t) && t")
        r("the format shows profile and size", bool(facts))
        points = page.wait_js("return Number(document.querySelector('.chart').dataset.points || 0) >= 3")
        drawn = page.js("return document.querySelector('.chart').dataset.points")
        r("the fps chart draws samples", points is True, f"points {drawn}")
        commands = page.js("return [...document.querySelectorAll('.commands code')].map(c => c.textContent).join('\\n')")
        r("commands name this server and session", f"{base}/sessions/cam-a/nalus" in commands and "frames.mjpeg" in commands)
        r("an H.264 session's commands push H.264", "-f h264" in commands and "libx265" not in commands)
        page.screenshot("session")
        check_snapshot(r, page, downloads)
        check_history_scrubber(r, page)
        page.js("document.activeElement.blur()")  # Escape in a text field stays there
        page.press(Keys.ESCAPE)
        back = page.wait_js("return (location.hash === '' || location.hash === '#/') && !document.getElementById('sessions-page').hidden")
        r("Escape returns to the grid", back is True, page.js("return location.hash"))
        focus = page.wait_js("return document.activeElement.closest('.card')?.dataset.session === 'cam-a'")
        r("focus returns to the card that was opened", focus is True)
        gone = page.wait(lambda: (session_status(base, "cam-a", token) or {}).get("subscribers") == 0)
        r("leaving the view ends the MJPEG viewer", gone is True)

        check_hevc_session_view(r, page, base)

        # --- push a file from the browser ---------------------------------------------------------
        page.find("#open-upload").click()
        page.find("#upload-file").send_keys(os.path.join(fixtures, "odd_crop_322x242.264"))
        name = page.find("#upload-session-name")
        r("the file name suggests a session name", name.get_attribute("value") == "odd_crop_322x242",
          name.get_attribute("value"))
        name.clear()
        name.send_keys("bad name")
        page.find("#upload-start").click()
        message = page.wait_js("return document.getElementById('upload-name-message').textContent")
        r("an invalid session name is refused before any upload", bool(message) and "allowed" in message, message)
        name.clear()
        name.send_keys("upload.1")
        page.find("#upload-start").click()
        result = page.wait_js("const t = document.getElementById('upload-result').textContent; return /decoded/.test(t) && t")
        r(f"the upload finished: {result}", bool(result) and "15 pictures" in result)
        r("the progress bar is full", page.js("const b = document.getElementById('upload-bar'); return b.value === b.max && b.max > 1") is True)
        preview = page.wait_js("const img = document.getElementById('upload-preview'); return !img.hidden && img.naturalWidth > 0")
        r("the upload shows the session's pictures", preview is True)
        card = page.wait(lambda: (lambda state: state if state and state["resolution"] == "322x242" else None)(card_state(page, "upload.1")))
        r("the uploaded session's card appears with 322x242", bool(card), f"card {card_state(page, 'upload.1')}")
        page.screenshot("upload")
        check_hevc_upload(r, page, fixtures)
        page.find("#upload-close").click()

        check_drop_onto_busy_session(r, page, fixtures)
        check_camera_share_takes_over_its_lost_upload(r, page, base, token)
        check_system_view(r, page, base)
        check_pulls(r, page, base, token, work)
        check_declared_session(r, page, server, base, token)

        # --- delete from the page -----------------------------------------------------------------
        page.find('#session-grid .card[data-session="upload.1"] .card-link').click()
        page.wait_js("return !!document.getElementById('delete-session')")
        page.find("#delete-session").click()
        r("delete asks for confirmation", page.wait_js("return document.getElementById('confirm-dialog').open") is True)
        page.find("#confirm-accept").click()
        card_gone = page.wait_js("return !document.querySelector('#session-grid .card[data-session=\"upload.1\"]') && !document.getElementById('sessions-page').hidden")
        r("the deleted session's card goes", card_gone is True)
        r("the server no longer has it", request(base, "GET", "/sessions/upload.1", token=token)[0] == 404)

        # --- the event stream -----------------------------------------------------------------------
        check_events(r, results, base, token, fixtures, label, events_status)

        if options.get("layouts"):
            check_module_functions(r, page)
        if options.get("restart"):
            check_restart(r, page, server, pushes, work, fixtures, token)
        if options.get("layouts"):
            check_layouts(r, page)
        if token:
            # A token the server stops accepting (an expired JWT): the box reopens saying why.
            page.js("sessionStorage.setItem('frametap.token', 'no-longer-accepted')")
            page.js("location.hash = '#/system'")
            reason = page.wait_js("const d = document.getElementById('sign-in-dialog');"
                                  " const t = document.getElementById('sign-in-message').textContent;"
                                  " return d.open && /no longer accepts/.test(t) && t")
            r("a token no longer accepted reopens the box saying why", bool(reason), f"message {reason!r}")
            page.find("#sign-in-token").send_keys(token, Keys.ENTER)
            r("signing in again closes it", page.wait_js("return !document.getElementById('sign-in-dialog').open") is True)
            page.find("#sign-out").click()
            r("sign-out asks for the token again", page.wait_js("return document.getElementById('sign-in-dialog').open") is True)

        page.collect_log()
        errors = [entry["message"] for entry in page.console_log
                  if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]]
        r("no script errors in the browser console", not errors, "; ".join(errors[:5]))
    finally:
        for push in pushes:
            push.stop()
        page.collect_log()
        with open(os.path.join(shots, f"{label}-browser-console.log"), "w") as file:
            for entry in page.console_log:
                file.write(f"{entry['level']} {entry['message']}\n")
        driver.quit()


def jpeg_size(data):
    """(width, height) from a JPEG's start-of-frame marker, or None."""
    if data[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 9 < len(data) and data[i] == 0xFF:
        marker, length = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])[0]
        if 0xC0 <= marker <= 0xC3:
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return width, height
        i += 2 + length
    return None


def check_snapshot(r, page, downloads):
    """The snapshot form downloads latest.jpg at the width asked for, and says why it cannot."""
    field = page.find("#snapshot-width")
    field.clear()
    field.send_keys("160")
    page.find("#snapshot-download").click()
    saved = page.wait(lambda: [name for name in os.listdir(downloads) if name.endswith(".jpg")] or None)
    size = jpeg_size(open(os.path.join(downloads, saved[0]), "rb").read()) if saved else None
    r(f"snapshot: a 160 px JPEG is downloaded ({saved and saved[0]}, {size})", size == (160, 120))
    field.clear()
    field.send_keys("5000")
    page.find("#snapshot-download").click()
    message = page.wait_js("const t = document.getElementById('snapshot-message').textContent; return t.startsWith('No snapshot') && t")
    r(f"snapshot: a refused width is explained in words ({message})", bool(message) and "{" not in message)


def check_history_scrubber(r, page):
    """The scrubber over the recent past shows a picture from the history, and an older one when
    it is moved back."""
    ready = page.wait_js("""
        const slider = document.getElementById('history-scrubber');
        const picture = document.getElementById('history-picture');
        return slider && !slider.disabled && Number(slider.max) > 0 && !picture.hidden && picture.naturalWidth > 0
            && /Picture #\\d+/.test(document.getElementById('history-caption').textContent)""")
    r("history: the scrubber shows a picture of the recent past", ready is True,
      page.js("return document.getElementById('history-summary').textContent"))
    newest = page.js("return Number((document.getElementById('history-caption').textContent.match(/#(\\d+)/) || [])[1] || 0)")
    page.js("""
        const slider = document.getElementById('history-scrubber');
        slider.value = '0';
        slider.dispatchEvent(new Event('input'));""")
    older = page.wait_js("""
        const n = Number((document.getElementById('history-caption').textContent.match(/#(\\d+)/) || [])[1] || 0);
        return n > 0 && n < arguments[0] && n""", newest)
    r(f"history: moved to its start, it shows an older picture (#{newest} -> #{older})", bool(older))
    png = page.element_png("#history-picture")
    page.keep("history", png)
    verdict = picture_verdict(png)
    r(f"history: the picture is not blank: {verdict}", verdict.startswith("ok"))


def check_hevc_session_view(r, page, base):
    """The H.265 session's view: its format says codec and tier, its status says how the codec is
    known, and its commands push H.265 (an x265 ffmpeg push, a file push that says video/H265)."""
    page.js("location.hash = '#/sessions/cam-h'")
    facts = page.wait_js("""const t = document.querySelector('.format-facts')?.textContent ?? '';
        return /H\\.265/.test(t) && /Main 10/.test(t) && /Tier/.test(t) && /10-bit/.test(t) && t""")
    r("cam-h: the format shows codec H.265, Main 10, its tier and 10-bit", bool(facts))
    status = page.wait_js("const t = document.querySelector('.status-facts')?.textContent ?? ''; return /detected from its parameter sets/.test(t) && t")
    r("cam-h: the status says the codec was detected", bool(status))
    commands = page.wait_js("""const t = [...document.querySelectorAll('.commands code')].map(c => c.textContent).join('\\n');
        return /libx265/.test(t) && t""")
    r("cam-h: the commands push with x265 (-c:v libx265 -f hevc, chunked POST) to this session",
      bool(commands) and "-c:v libx265" in commands and "-f hevc" in commands and "-chunked_post 1" in commands
      and f"{base}/sessions/cam-h/nalus" in commands and "video/H265" in commands, str(commands)[:300])
    playing = page.wait_js("const img = document.getElementById('mjpeg'); return img && img.naturalWidth > 0")
    r("cam-h: the MJPEG of the H.265 session plays in the view", playing is True)
    page.screenshot("session-hevc")
    page.js("location.hash = '#/'")
    page.wait_js("return !document.getElementById('sessions-page').hidden")


def check_hevc_upload(r, page, fixtures):
    """A .265 file through the upload form: its session appears, H.265 at its size."""
    page.find("#upload-file").send_keys(os.path.join(fixtures, "radl_176x144.265"))
    name = page.find("#upload-session-name")
    name.clear()
    name.send_keys("upload.2")
    page.find("#upload-start").click()
    result = page.wait_js("const t = document.getElementById('upload-result').textContent; return /upload\\.2/.test(t) && /decoded/.test(t) && t")
    r(f"a .265 upload finished: {result}", bool(result) and "30 pictures" in result and "H.265" in result)
    card = page.wait(lambda: (lambda state: state if state and state["codec"] == "h265" and state["resolution"] == "176x144"
                              else None)(card_state(page, "upload.2")))
    r("the .265 upload's card appears as H.265 176x144", bool(card), f"card {card_state(page, 'upload.2')}")


def check_drop_onto_busy_session(r, page, fixtures):
    """A file dropped on a session's page goes to that session; a refused push (this one is busy
    with a live push: 409 session_busy) is explained in words."""
    page.js("location.hash = '#/sessions/cam-b'")
    page.wait_js("return !!document.getElementById('delete-session')")
    with open(os.path.join(fixtures, "baseline_176x144.264"), "rb") as file:
        data = list(file.read())
    page.js("""
        const transfer = new DataTransfer();
        transfer.items.add(new File([new Uint8Array(arguments[0])], 'dropped.264'));
        for (const type of ['dragenter', 'dragover', 'drop']) {
          window.dispatchEvent(new DragEvent(type, { dataTransfer: transfer, bubbles: true, cancelable: true }));
        }
    """, data)
    ready = page.wait_js("""return !document.getElementById('upload-panel').hidden
        && document.getElementById('upload-session-select').value === 'cam-b'
        && document.getElementById('upload-file-message').textContent.startsWith('dropped.264')""")
    r("a file dropped on a session's page is ready to push to that session", ready is True)
    page.find("#upload-start").click()
    message = page.wait_js("const t = document.getElementById('upload-result').textContent; return t.startsWith('The push failed') && t")
    r(f"a refused push is explained in words ({message})", bool(message) and "{" not in message)
    page.find("#upload-close").click()


def camera_pushes_script(body, failed):
    """An asynchronous WebDriver script that runs `body` with the console's camera.js imported as
    `camera` and the page's pushes recorded in `urls` (at its own fetch); it returns what `body`
    returns, or the JavaScript expression `failed` (with `error`) when it throws."""
    return """
        const done = arguments[arguments.length - 1];
        (async () => {
          const camera = await import('/console/camera.js');
          const urls = [];
          const original = window.fetch;
          window.fetch = (url, init) => {
            if (String(url).includes('/nalus')) urls.push(String(url));
            return original(url, init);
          };
          try {
    """ + body + """
          } finally {
            window.fetch = original;
          }
        })().then(done, (error) => done(""" + failed + """));
    """


def check_camera_share_takes_over_its_lost_upload(r, page, base, token):
    """A camera share names the tab as its publisher: started again after a lost connection, it
    takes over the upload the server still holds (no 409 for the body timeout's length), and the
    lost upload's connection, if it is still there, hears why; another client's push is refused
    while the tab's hold lasts."""
    publisher = page.driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/console/camera.js').then((camera) => done(camera.tabPublisher()), (error) => done(String(error)));
    """)
    r(f"the tab has a publisher name ({publisher})", str(publisher).startswith("console-"))
    lost = socket.create_connection(address(base), timeout=10)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    lost.sendall((f"POST /sessions/cam-lost/nalus?publisher={publisher} HTTP/1.1\r\nHost: x\r\n{auth}"
                  "Content-Type: video/H264\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n").encode()
                 + bytes([0, 0, 0, 1, 9, 0x10]) + b"\r\n")
    try:
        held = page.wait(lambda: (session_status(base, "cam-lost", token) or {}).get("uploading") is True, timeout=10)
        r("a lost upload holds its session", held is True)
        outcome = page.driver.execute_async_script(camera_pushes_script("""
            let refusal = null;
            const queue = new camera.PushQueue('cam-lost', 'video/H264', { onError: (error) => { refusal = error.code; } });
            const deadline = Date.now() + 10000;
            for (const wanted of [1, 2]) {
              queue.add(new Blob([new Uint8Array([0, 0, 0, 1, 9, 0x10])]));
              while (refusal === null && queue.requests < wanted && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
            }
            return [refusal, queue.requests, urls];
        """, failed="[String(error), 0, []]"))
        refusal, requests, urls = outcome
        r("a share started again takes over its own lost upload, naming the tab's publisher",
          refusal is None and requests == 2 and all(f"publisher={publisher}" in url for url in urls),
          f"refusal {refusal}, requests {requests}, urls {urls}")
        answer = b""
        while b"push_taken_over" not in answer:
            piece = lost.recv(4096)
            if not piece:
                break
            answer += piece
        r("the lost upload's connection hears 409 push_taken_over",
          answer.startswith(b"HTTP/1.1 409") and b"push_taken_over" in answer, answer[:200])
        status, _, body = request(base, "POST", "/sessions/cam-lost/nalus?publisher=another-client",
                                  body=bytes([0, 0, 0, 1, 9, 0x10]), token=token)
        problem = json.loads(body) if status == 409 else {}
        r("another client's push is refused while the tab holds the session",
          problem.get("code") == "session_busy" and problem.get("publisher") == publisher, f"{status} {body[:200]}")
    finally:
        lost.close()
        request(base, "DELETE", "/sessions/cam-lost", token=token)


def check_system_view(r, page, base):
    page.js("location.hash = '#/system'")
    shown = page.wait_js("""const t = document.getElementById('system-page').textContent;
        return /Limits/.test(t) && /Max sessions\\s*16/.test(t) && /Render nodes/.test(t)""")
    r("the system view shows limits and hardware", shown is True)
    by_backend = "return document.getElementById('sessions-by-backend')?.textContent ?? ''"
    listed = "const t = document.getElementById('sessions-by-backend')?.textContent ?? ''; " \
             "return /software/.test(t) && /cam-a/.test(t) && /cam-h/.test(t) && t"
    counted = page.wait_js(listed)
    r(f"the system view lists the sessions by back end ({counted})", bool(counted), page.js(by_backend))
    page.screenshot("system")
    # Opened at #/system, the page may have /system before its session list: the section follows.
    page.driver.get(base + "/#/system")
    counted = page.wait_js(listed)
    r("opened at #/system, the page still lists the sessions by back end", bool(counted), page.js(by_backend))
    page.js("location.hash = '#/'")
    page.wait_js("return !document.getElementById('sessions-page').hidden")


def pixels_near(png, colour, distance=48):
    """How many pixels of a PNG are within `distance` (per channel, summed) of an RGB colour."""
    width, _, rows = png_pixels(png)
    return sum(1 for row in rows for x in range(0, width * 3, 3)
               if sum(abs(row[x + channel] - colour[channel]) for channel in range(3)) <= distance)


# The light theme's --danger (style.css): error badges and a failing camera's problem.
DANGER = (0xC0, 0x21, 0x2F)


def source_of(base, session, token):
    return (session_status(base, session, token) or {}).get("source") or {}


def check_pulls(r, page, base, token, work):
    """Pull sessions: a camera that cannot be reached, on its card (DOM and pixels) and in its
    view (Source, Last error, Retry now); then a live one from GStreamer's RTSP server."""
    json_headers = {"Content-Type": "application/json"}
    closed = free_port()
    body = json.dumps({"source": {"url": f"rtsp://viewer:secret@127.0.0.1:{closed}/stream1", "transport": "tcp"}})
    created = request(base, "PUT", "/sessions/door", body=body.encode(), headers=json_headers, token=token)
    r("a pull of a camera that cannot be reached is created", created[0] == 201, f"status {created[0]}")
    failing = page.wait(lambda: (lambda state: state if state and state["pullText"] == "failed" and state["problem"]
                                 else None)(card_state(page, "door")))
    r(f"the failing camera's card shows a failed badge and its error in words ({failing and failing['problem']})",
      bool(failing) and failing["errorText"] == "error: source_unreachable"
      and failing["problem"].startswith("The source cannot be reached: Connection refused."),
      f"card {card_state(page, 'door')}")
    r("... instead of only 'Waiting for the first picture…'",
      bool(failing) and failing["placeholder"] == "No picture: the source is not live.", f"card {card_state(page, 'door')}")
    page.js("document.querySelector('#session-grid .card[data-session=\"door\"]').scrollIntoView({block: 'center'})")
    png = page.element_png('#session-grid .card[data-session="door"]')
    page.keep("failing-camera", png)
    red = pixels_near(png, DANGER)
    r(f"the screenshot of the failing camera's card shows its error in red ({red} pixels)", red >= 150)

    page.js("location.hash = '#/sessions/door'")
    last_error = page.wait_js("const t = document.querySelector('.error-facts')?.textContent ?? ''; "
                              "return /source_unreachable/.test(t) && t")
    r("its view's Last error is the source's error (not 'No error so far')", bool(last_error),
      page.js("return document.querySelector('.error-facts')?.textContent"))
    source = page.wait_js("const t = document.querySelector('.source-facts')?.textContent ?? ''; "
                          "return /retrying/.test(t) && /cannot be reached/.test(t) && /rtsp:\\/\\/\\*\\*\\*@/.test(t) && t")
    r("its view's Source section says where the pull stands, why, and the URL without credentials", bool(source),
      page.js("return document.querySelector('.source-facts')?.textContent"))
    r("the status list holds no nested source table",
      page.js("return !document.querySelector('.status-facts').textContent.includes('rtsp://')") is True)
    page.screenshot("failing-camera-view")
    # Retry now cuts a back-off short: wait for one with seconds left, then click.
    waiting = page.wait(lambda: (lambda source: source if source.get("state") == "retrying" and source.get("nextAttemptAt")
                                 and parse_time(source["nextAttemptAt"]) - time.time() > 2.5 else None)(
                                     source_of(base, "door", token)))
    if r("the pull waits a back-off of some seconds", bool(waiting), f"source {source_of(base, 'door', token)}"):
        clickable = page.wait_js("return !document.getElementById('retry-source').disabled")
        page.find("#retry-source").click()
        retried = page.wait(lambda: source_of(base, "door", token).get("reconnects", 0) > waiting["reconnects"], timeout=5)
        early = parse_time(waiting["nextAttemptAt"]) - time.time()
        r(f"Retry now tries again at once ({early:.1f} s before the back-off would have)",
          clickable is True and bool(retried) and early > 0.5)

    rtsp_port = free_port()
    camera = subprocess.Popen(["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)), "rtsp-server.py"),
                               "--port", str(rtsp_port), "--path", "/stream1"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        r("GStreamer's RTSP server starts", "ready" in camera.stdout.readline())
        body = json.dumps({"source": {"url": f"rtsp://127.0.0.1:{rtsp_port}/stream1"}})
        created = request(base, "PUT", "/sessions/gate", body=body.encode(), headers=json_headers, token=token)
        r("a pull of a live RTSP camera is created", created[0] == 201, f"status {created[0]}")
        page.js("location.hash = '#/'")
        live = page.wait(lambda: (lambda state: state if state and state["pullText"] == "live" and state["loaded"]
                                  else None)(card_state(page, "gate")))
        r("the live camera's card shows a live badge and its picture", bool(live), f"card {card_state(page, 'gate')}")
        page.js("document.querySelector('#session-grid .card[data-session=\"gate\"]')?.scrollIntoView({block: 'center'})")
        if live:
            thumbnail = page.element_png('#session-grid .card[data-session="gate"] .thumb-img')
            page.keep("thumbnail-gate", thumbnail)
            # The RTSP server's pattern is a white ball moving on black: both show, and it moves.
            ball, black = pixels_near(thumbnail, (255, 255, 255)), pixels_near(thumbnail, (0, 0, 0))
            moved = page.wait(lambda: page.element_png('#session-grid .card[data-session="gate"] .thumb-img') != thumbnail)
            r(f"gate: the thumbnail shows the camera's moving ball ({ball} white, {black} black pixels)",
              ball >= 200 and black >= 10_000 and bool(moved))
            r("the live camera's card has no error", live["errorText"] is None and live["problem"] is None, f"card {live}")
        page.screenshot("pulls")
        page.js("location.hash = '#/sessions/gate'")
        receiving = page.wait_js("const t = document.querySelector('.status-facts')?.textContent ?? ''; "
                                 "return /pulled live from its source/.test(t) && t")
        r("a live pull's view says Receiving: yes", bool(receiving),
          page.js("return document.querySelector('.status-facts')?.textContent"))
        page.js("location.hash = '#/'")
        page.wait_js("return !document.getElementById('sessions-page').hidden")
    finally:
        end(camera)
        for session in ("door", "gate"):
            request(base, "DELETE", f"/sessions/{session}", token=token)


def parse_time(text):
    """Seconds since the epoch of an RFC 3339 time such as 2026-01-01T12:00:00.250Z."""
    from datetime import datetime
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def check_declared_session(r, page, server, base, token):
    """A session the configuration file declares (added by a SIGHUP): its card and view say so,
    and the view offers no delete (the server would answer 409); taken out of the file, it goes."""
    with open(server.config_path, "w") as file:
        file.write("sessions:\n  yard:\n    codec: h264\n")
    os.kill(server.pid, signal.SIGHUP)
    badge = page.wait_js("""
        const card = document.querySelector('#session-grid .card[data-session="yard"]');
        const badge = card?.querySelector('.badge-standing');
        return card?.dataset.origin === 'declared' && badge && !badge.hidden && badge.textContent""")
    r("a declared session's card shows the 'declared' badge", badge == "declared", f"badge {badge!r}")
    page.js("document.querySelector('#session-grid .card[data-session=\"yard\"]').scrollIntoView({block: 'center'})")
    page.keep("declared-card", page.element_png('#session-grid .card[data-session="yard"]'))
    page.find('#session-grid .card[data-session="yard"] .card-link').click()
    view = page.wait_js("""
        const button = document.getElementById('delete-session');
        const badge = document.querySelector('.view-head .badge-standing');
        return button && button.disabled && badge && !badge.hidden && /configuration file/.test(document.body.textContent)
            && badge.textContent""")
    r("its view shows the badge and offers no delete, naming the file", view == "declared", f"view {view!r}")
    status, _, body = request(base, "DELETE", "/sessions/yard", token=token)
    r("the server answers its DELETE 409 declared_session",
      status == 409 and json.loads(body).get("code") == "declared_session", f"{status} {body[:120]!r}")
    page.js("location.hash = '#/'")
    with open(server.config_path, "w") as file:
        file.write("sessions: {}\n")
    os.kill(server.pid, signal.SIGHUP)
    gone = page.wait_js("return !document.querySelector('#session-grid .card[data-session=\"yard\"]')")
    r("taken out of the file, its card goes", gone is True)


def check_module_functions(r, page):
    """The console's pure functions, imported from the page's own modules (the instances the
    page runs: a module is evaluated once, so importing app.js again starts nothing)."""
    cases = page.driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        Promise.all(['api', 'format', 'upload', 'charts', 'commands', 'app', 'source'].map((name) => import(`/console/${name}.js`)))
          .then(([api, format, upload, charts, commands, app, source]) => done([
            ['valid ids', ['cam1', 'a.b~c_d-e', 'x'.repeat(128)].every(api.isValidSessionId), true],
            ['invalid ids', ['', '.', '..', 'a b', 'a/b', 'x'.repeat(129), 'é'].some(api.isValidSessionId), false],
            ['name from a file', upload.sessionNameFromFile('Front door (2).264'), 'Front-door-2'],
            ['name from a dot file', upload.sessionNameFromFile('...264'), 'upload'],
            ['name already taken', upload.sessionNameFromFile('cam.264', new Set(['cam', 'cam-2'])), 'cam-3'],
            ['key label', format.humanizeKey('libavcodecVAAPI'), 'libavcodec VA-API'],
            ['key label 2', format.humanizeKey('maxNalBytes'), 'Max NAL bytes'],
            ['bit rate', format.formatBitRate(1234567), '1.23 Mbit/s'],
            ['bytes', format.formatBytes(2147483648), '2.00 GiB'],
            ['age', format.formatAge(95000), '95 s'],
            ['chart scale', [0.3, 7, 25.2, 180].map(charts.niceCeiling).join(' '), '0.5 10 50 200'],
            ['route', JSON.stringify(app.parseRoute('#/sessions/a.b%7Ec')), '{"name":"session","id":"a.b~c"}'],
            ['route fallback', app.parseRoute('#/nowhere').name, 'sessions'],
            ['commands', commands.sessionCommands('cam1', 'https://ft.example', true)[0][1],
             'ffmpeg -re -i camera.264 -c copy -f h264 -method POST -chunked_post 1 -headers "Authorization: Bearer $FRAMETAP_TOKEN" https://ft.example/sessions/cam1/nalus'],
            ['H.265 commands', commands.sessionCommands('cam1', 'https://ft.example', false, 'h265')[0][1],
             'ffmpeg -re -i camera.mp4 -c:v libx265 -preset ultrafast -tune zerolatency -f hevc -method POST -chunked_post 1 https://ft.example/sessions/cam1/nalus'],
            ['H.265 file push', commands.sessionCommands('cam1', 'https://ft.example', false, 'h265')[1][1],
             "curl --data-binary @file.265 -H 'Content-Type: video/H265' 'https://ft.example/sessions/cam1/nalus?flush=true'"],
            ['content types', ['a.265', 'B.HEVC', 'c.h265', 'd.264', 'e.avc', 'f.bin'].map(api.streamContentType).join(' '),
             'video/H265 video/H265 video/H265 video/H264 video/H264 application/octet-stream'],
            ['summary', format.formatSummary({codec: 'h265', width: 320, height: 240, profile: 'Main 10', level: '2.1', bitDepth: 10}),
             'H.265 · 320×240 · Main 10 @ L2.1 · 10-bit'],
            ['summary before the format', format.formatSummary(null, 'h265'), 'H.265 · no picture format yet'],
            ['pull badges', ['live', 'connecting', 'retrying'].map((state) => source.pullBadge({ state, failures: 1 }).text).join(' ')
              + ' ' + source.pullBadge({ state: 'retrying', failures: 2 }).text, 'live connecting retrying failed'],
            ['no pull badge for a push session', source.pullBadge(null), null],
            ['refused credentials fail at once', source.pullBadge({ state: 'retrying', failures: 1,
              lastError: { code: 'source_unauthorized' } }).text, 'failed'],
            ['an idle pull waiting out refused credentials has failed', source.pullBadge({ state: 'idle',
              nextAttemptAt: '2030-01-01T00:04:00Z', lastError: { code: 'source_unauthorized' } },
              Date.parse('2030-01-01T00:00:00Z')).text, 'failed'],
            ['a pull problem in words', source.sourceProblem({ state: 'retrying', nextAttemptAt: '2030-01-01T00:00:10Z',
              lastError: { code: 'source_unreachable', message: 'Connection refused' } }, Date.parse('2030-01-01T00:00:02Z')),
             'The source cannot be reached: Connection refused. Next try in 8 s.'],
            ['no problem while live', source.sourceProblem({ state: 'live', lastError: { code: 'source_ended' } }), null],
            ['an idle on-demand pull: its badge, and no problem', source.pullBadge({ state: 'idle' }).text + ' '
              + source.sourceProblem({ state: 'idle', lastError: { code: 'source_ended' } }), 'idle null'],
            ['recovered from an error', source.recoveredFrom({ at: '2030-01-01T00:00:01Z' },
              { state: 'live', connectedAt: '2030-01-01T00:00:05Z' }), true],
          ]), (error) => done([['import', String(error), 'modules']]));
    """)
    for name, got, want in cases:
        r(f"module function: {name}", got == want, f"got {got!r}, want {want!r}")

    # A camera share refused with 409 (another client pushes to that session) ends without a
    # flush, which would end that client's stream; refused otherwise, it flushes its own stream.
    # Requests are counted at the page's own fetch.
    requests = page.driver.execute_async_script(camera_pushes_script("""
        // cam-a is busy: the scenario's ffmpeg pushes it live all along.
        const queue = new camera.PushQueue('cam-a', 'video/H264');
        let refusal = null;
        queue.onError = (error) => { refusal = error.code; };
        queue.add(new Blob([new Uint8Array([0, 0, 0, 1, 9, 0x10])]));
        const deadline = Date.now() + 10000;
        while (refusal === null && queue.requests === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        await queue.finish();
        return [refusal, urls];
    """, failed="[null, [String(error)]]"))
    refusal, urls = requests
    r("a camera push refused as session_busy sends no flush after it",
      refusal == "session_busy" and len(urls) == 1 and "flush" not in urls[0], f"refusal {refusal}, requests {urls}")


def check_restart(r, page, server, pushes, work, fixtures, token):
    """The server goes away and comes back on the same port: the page says it is reconnecting,
    then recovers by itself (no reload) and shows a new push."""
    page.js("window.consoleTestMarker = 'same page'")
    for push in pushes:
        push.stop()
    pushes.clear()
    exit_code = server.stop()
    r("SIGTERM: the server exited 0", exit_code == 0, f"exit {exit_code}")
    banner = page.wait_js("const b = document.getElementById('connection-banner'); return !b.hidden && b.textContent")
    r(f"server down: the page says so ({banner})", bool(banner) and "Reconnecting" in banner)
    page.screenshot("reconnecting")
    r("the server starts again on the same port", came_up(server))
    recovered = page.wait_js("return document.getElementById('connection-banner').hidden && document.documentElement.dataset.connection === 'online'", timeout=45)
    r("the page reconnects by itself", recovered is True)
    empty = page.wait_js("return document.querySelectorAll('#session-grid .card').length === 0 && !document.getElementById('empty-state').hidden")
    r("the restarted server's (empty) session list shows", empty is True)
    stream = os.path.join(work, "open-cam-a.264")
    pushes.append(Push(server.base, "cam-c", stream, token))
    loaded = page.wait(lambda: (card_state(page, "cam-c") or {}).get("loaded"))
    r("a push after the restart shows its card and picture", loaded is True)
    r("no page reload happened", page.js("return window.consoleTestMarker") == "same page")


def check_layouts(r, page):
    """360 px wide without horizontal scrolling, and a dark page in the dark theme."""
    page.driver.set_window_size(360, 800)
    fits = page.wait_js("return document.documentElement.scrollWidth <= window.innerWidth + 1")
    r("360 px wide: no horizontal scrolling", fits is True,
      f"scrollWidth {page.js('return document.documentElement.scrollWidth')} > {page.js('return window.innerWidth')}")
    page.screenshot("narrow")
    page.driver.set_window_size(1280, 900)
    page.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    dark = page.wait_js("return matchMedia('(prefers-color-scheme: dark)').matches")
    page.keep("dark", page.driver.get_screenshot_as_png())
    # The heading's box is mostly page background around its (light) text.
    red, green, blue = dominant_colour(page.element_png("#sessions-heading"))
    r(f"dark theme: the page background is dark (rgb {red},{green},{blue})", dark is True and red + green + blue < 150)
    page.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


# --- GET /events with curl ---------------------------------------------------------------------

def curl_auth(token):
    return ["-H", f"Authorization: Bearer {token}"] if token else []


def events_answer(base, token):
    """The status GET /events answers (reads only the headers; an event stream never ends)."""
    result = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "3", *curl_auth(token),
                             f"{base}/events"], capture_output=True, text=True)
    try:
        return int(result.stdout.strip() or 0)
    except ValueError:
        return 0


def parse_sse(text):
    """[(id, event, data-text)] from server-sent events text (comment lines skipped)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields = {"id": None, "event": "message", "data": []}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                fields["data"].append(value)
            elif name in ("id", "event"):
                fields[name] = value
        if fields["data"] or fields["id"] is not None:
            events.append((fields["id"], fields["event"], "\n".join(fields["data"])))
    return events


def check_events(r, results, base, token, fixtures, label, status):
    if status == 404:
        results.skip(f"{label}: GET /events and Last-Event-ID resume",
                     "the server answers 404: /events is not on this branch yet (run again once it is merged)")
        return
    if not r(f"GET /events answers 200 (got {status})", status == 200):
        return
    session = f"events-{label}"
    headers_path = tempfile.mktemp()
    stream = subprocess.Popen(["curl", "-sN", "-m", "40", "-D", headers_path, "-H", "Accept: text/event-stream",
                               *curl_auth(token), f"{base}/events"], stdout=subprocess.PIPE)
    try:
        # The stream must be open before the events it should carry happen: wait for its headers.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (os.path.exists(headers_path) and "\r\n\r\n" in open(headers_path, errors="replace").read()):
            time.sleep(0.05)
        with open(os.path.join(fixtures, "high_320x240.264"), "rb") as file:
            push = request(base, "POST", f"/sessions/{session}/nalus?flush=true", body=file.read(), token=token)
        deleted = request(base, "DELETE", f"/sessions/{session}", token=token)
        r("events: push and delete of a session", push[0] == 200 and deleted[0] == 204, f"{push[0]} {deleted[0]}")
        text, deadline = b"", time.monotonic() + 15
        os.set_blocking(stream.stdout.fileno(), False)
        while time.monotonic() < deadline and b"session.removed" not in text:
            chunk = stream.stdout.read()
            if chunk:
                text += chunk
            time.sleep(0.1)
    finally:
        stream.kill()
        stream.wait()
    headers = open(headers_path, errors="replace").read().lower()
    os.unlink(headers_path)
    r("events: Content-Type is text/event-stream", "content-type: text/event-stream" in headers)
    events = parse_sse(text.decode("utf-8", "replace"))
    ours = []
    for event_id, kind, data in events:
        try:
            payload = json.loads(data)
        except ValueError:
            r(f"events: data is one line of JSON ({kind})", False, data[:200])
            return
        if payload.get("session") == session:
            ours.append((event_id, kind, payload))
    kinds = [kind for _, kind, _ in ours]
    for wanted in ["session.created", "upload.started", "picture.first", "upload.ended", "session.removed"]:
        r(f"events: {wanted} for the pushed session", wanted in kinds, f"saw {kinds}")
    r("events: every event has a decimal id and data with session and at",
      all(event_id and event_id.isdigit() and "at" in payload for event_id, _, payload in ours))
    ids = [int(event_id) for event_id, _, _ in ours if event_id and event_id.isdigit()]
    r("events: ids increase", ids == sorted(ids) and len(set(ids)) == len(ids), f"ids {ids}")
    if not ours:
        return
    first_id = ours[0][0]
    resumed = subprocess.run(["curl", "-sN", "-m", "4", "-H", f"Last-Event-ID: {first_id}", *curl_auth(token),
                              f"{base}/events"], capture_output=True)
    replay = parse_sse(resumed.stdout.decode("utf-8", "replace"))
    replay_ids = [int(event_id) for event_id, kind, _ in replay if event_id and event_id.isdigit()]
    replay_kinds = [kind for _, kind, _ in replay]
    resumed_ok = bool(replay) and (replay_kinds[0] == "resync" or (replay_ids and replay_ids[0] == int(first_id) + 1))
    r(f"events: Last-Event-ID {first_id} resumes right after it (or says resync)", resumed_ok,
      f"replayed {list(zip(replay_ids, replay_kinds))[:8]}")
    if replay_kinds and replay_kinds[0] != "resync":
        r("events: the resumed stream replays the session's removal", "session.removed" in replay_kinds, f"saw {replay_kinds}")


# --- main --------------------------------------------------------------------------------------

def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--output", default=os.path.join(root, ".test-output", "console"))
    parser.add_argument("--fixtures", default=os.path.join(root, "Tests", "Fixtures"))
    arguments = parser.parse_args()
    os.makedirs(arguments.output, exist_ok=True)
    for old in os.listdir(arguments.output):
        if old.endswith((".png", ".log")):
            os.unlink(os.path.join(arguments.output, old))
    results = Results()
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="frametap-console-")
    try:
        runs = [(None, {"restart": True, "layouts": True}), (f"console-{os.getpid()}-token", {})]
        for token, options in runs:
            label = "auth" if token else "open"
            print(f"== {label}: server {'with --auth-token' if token else 'without a token'}", flush=True)
            config_path = os.path.join(work, f"{label}-frametap.yaml")
            with open(config_path, "w") as file:
                file.write("sessions: {}\n")
            server = Server(arguments.binary, ["--max-sessions", "16", "--config", config_path,
                                                "--allow-sources", "rtsp://127.0.0.1"]
                            + (["--auth-token", token] if token else []),
                            log_path=os.path.join(arguments.output, f"{label}-server.log"))
            server.config_path = config_path
            if not results.check(f"{label}: the server starts", came_up(server)):
                continue
            try:
                scenario(results, server, token, arguments.fixtures, work, arguments.output, options)
            except Exception as error:  # a crash in one scenario is a failure, the next one still runs
                results.check(f"{label}: the scenario ran to the end", False, f"{type(error).__name__}: {error}")
            finally:
                exit_code = server.stop()
                results.check(f"{label}: SIGTERM: the server exited 0", exit_code == 0, f"exit {exit_code}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"screenshots in {arguments.output} ({time.monotonic() - started:.0f} s)")
    print(f"{results.passed} passed, {results.failed} failed, {results.skipped} skipped")
    return 0 if results.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
