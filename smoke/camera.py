#!/usr/bin/env python3
"""The browser's camera as a source, in headless Chromium with its fake camera
(--use-fake-device-for-media-stream --use-fake-ui-for-media-stream), through Selenium:

  a. MediaRecorder records WebM (H.264) in the page; its bytes are pushed whole with
     Content-Type video/webm and every picture equals the ffmpeg CLI's decode of the same bytes;
     pushed again in the recorder's own pieces, one request each (the first with the
     Content-Type, the rest without), the session decodes as many pictures;
  b. the console's "Share a camera" (WebCodecs H.264 Annex B): the session appears in the grid
     with its pictures, the server decodes at the camera's rate, Stop ends the stream;
  c. the same with MediaRecorder WebM (?encoder=mediarecorder, the path of browsers without
     WebCodecs);
  d. a server with --auth-token: the page signs in, and the camera share works with the token;
  e. the server restarts under a share: the page says it will share again, and does, from a
     new keyframe, into the restarted server's session.

    smoke/camera.py --binary .build/debug/frametap [--output DIR]

Starts and stops its servers itself (a free loopback port: http://127.0.0.1 is a secure context,
as getUserMedia requires). Prints one PASS/FAIL line per check and "N passed, N failed" last;
exits 1 when anything failed. Screenshots go to --output (.test-output/camera by default).
"""

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from harness.browser import chromium  # noqa: E402  (tools/ is on the path only now)
from harness.checks import Results  # noqa: E402
from harness.client import request, session_status  # noqa: E402
from harness.multipart import parts  # noqa: E402
from harness.server import Server  # noqa: E402
from harness.waiting import poll  # noqa: E402

WAIT = float(os.environ.get("CAMERA_WAIT_SECONDS", "30"))


def multipart_pictures(headers, body):
    """(count, MD5 of the concatenated pictures) of a multipart/mixed answer (a problem part left out)."""
    md5, count = hashlib.md5(), 0
    for head, payload in parts(headers["Content-Type"], body):
        if "problem+json" not in head.get("content-type", ""):
            md5.update(payload)
            count += 1
    return count, md5.hexdigest()


def ffmpeg_pictures(path):
    raw = subprocess.run(
        ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-flags", "unaligned", "-i", path, "-autoscale", "0",
         "-fps_mode", "passthrough", "-f", "rawvideo", "-"], capture_output=True, check=True).stdout
    probe = subprocess.run(
        ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-i", path, "-fps_mode", "passthrough", "-f",
         "framemd5", "-"], capture_output=True, check=True).stdout
    frames = sum(1 for line in probe.splitlines() if line and not line.startswith(b"#"))
    return frames, hashlib.md5(raw).hexdigest()


def start_server(binary, options, log_path):
    return Server(binary, options, log_path=log_path).start()


def make_driver(profile):
    return chromium(profile, "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream", script_timeout=60)


def wait(condition, timeout=WAIT):
    return poll(condition, timeout, interval=0.2)


RECORD_SCRIPT = """
const done = arguments[arguments.length - 1];
(async () => {
  const type = ['video/webm;codecs=h264', 'video/webm;codecs=avc1'].find((t) => MediaRecorder.isTypeSupported(t));
  if (!type) return done({ error: 'no H.264 WebM recording in this browser' });
  const stream = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 480, frameRate: 30 } });
  const recorder = new MediaRecorder(stream, { mimeType: type });
  const pieces = [];
  recorder.ondataavailable = (event) => { if (event.data.size) pieces.push(event.data); };
  const stopped = new Promise((resolve) => { recorder.onstop = resolve; });
  recorder.start(250);
  await new Promise((resolve) => setTimeout(resolve, 2500));
  recorder.stop();
  await stopped;
  for (const track of stream.getTracks()) track.stop();
  const encoded = [];
  for (const piece of pieces) {
    const bytes = new Uint8Array(await piece.arrayBuffer());
    let text = '';
    for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    encoded.push(btoa(text));
  }
  done({ type, pieces: encoded });
})().catch((error) => done({ error: String(error) }));
"""


def recorder_webm(r, driver, server, work):
    print("== a. MediaRecorder WebM in the page, pushed", flush=True)
    driver.get(server.base + "/")
    result = driver.execute_async_script(RECORD_SCRIPT)
    if not r.check("a: MediaRecorder recorded H.264 WebM", "pieces" in result, result.get("error")):
        return
    pieces = [base64.b64decode(piece) for piece in result["pieces"]]
    webm = b"".join(pieces)
    path = os.path.join(work, "recorded.webm")
    with open(path, "wb") as file:
        file.write(webm)
    frames, md5 = ffmpeg_pictures(path)
    r.check(f"a: the recording ({result['type']}, {len(webm)} bytes in {len(pieces)} pieces) has pictures", frames > 10,
            f"{frames} pictures")
    code, headers, body = request(server.base, "POST", "/sessions/webm/nalus?flush=true&format=yuv", body=webm,
                                  headers={"Content-Type": "video/webm", "Accept": "multipart/mixed"})
    got = multipart_pictures(headers, body) if code == 200 else (code, body[:200])
    r.check("a: every picture equals the ffmpeg CLI's decode of the same WebM", got == (frames, md5),
            f"got {got}, want {(frames, md5)}")
    for index, piece in enumerate(pieces):
        last = index == len(pieces) - 1
        headers = {"Content-Type": "video/webm"} if index == 0 else {}
        code, _, body = request(server.base, "POST", f"/sessions/webm-pieces/nalus{'?flush=true' if last else ''}",
                                body=piece, headers=headers)
        if code != 200:
            r.check(f"a: piece {index} pushed", False, f"{code} {body[:200]}")
            return
    decoded = (session_status(server.base, "webm-pieces") or {}).get("counters", {}).get("framesDecoded")
    r.check(f"a: the recorder's {len(pieces)} pieces pushed one request each decode the same {frames} pictures",
            decoded == frames, f"decoded {decoded}")


def share_camera(r, driver, server, output, session, encoder, token=None, label=""):
    print(f"== {label}. the console's Share a camera ({encoder})", flush=True)
    query = "" if encoder == "webcodecs" else f"?encoder={encoder}"
    driver.get(server.base + "/" + query)
    if token:
        field = WebDriverWait(driver, WAIT).until(lambda d: d.find_element(By.ID, "sign-in-token"))
        if not wait(lambda: field.is_displayed(), 10):
            r.check(f"{label}: the sign-in box appears", False)
            return
        field.send_keys(token, Keys.ENTER)
        r.check(f"{label}: signed in with the token",
                wait(lambda: not driver.find_element(By.ID, "sign-in-dialog").get_attribute("open"), 10))
    driver.find_element(By.ID, "open-camera").click()
    name = driver.find_element(By.ID, "camera-session-name")
    name.clear()
    name.send_keys(session)
    driver.find_element(By.ID, "camera-start").click()
    sharing = wait(lambda: driver.find_element(By.ID, "camera-panel").get_attribute("data-sharing") == session
                   or driver.find_element(By.ID, "camera-message").text)
    if not r.check(f"{label}: sharing started ({encoder})", sharing is True, sharing):
        return
    r.check(f"{label}: the page used {encoder}",
            driver.find_element(By.ID, "camera-panel").get_attribute("data-encoder") == encoder)
    decoding = wait(lambda: ((session_status(server.base, session, token) or {}).get("counters", {}).get("framesDecoded") or 0) >= 45)
    first = session_status(server.base, session, token) or {}
    r.check(f"{label}: the server decodes the camera's pictures", decoding,
            json.dumps({k: first.get(k) for k in ("counters", "lastError", "codec")})[:300])
    fmt = first.get("format") or {}
    r.check(f"{label}: an H.264 stream of the camera's size", first.get("codec") == "h264" and fmt.get("width", 0) >= 320,
            f"{first.get('codec')} {fmt.get('width')}x{fmt.get('height')}")
    card = f'#session-grid li[data-session="{session}"]'
    shown = wait(lambda: driver.execute_script(
        f"const card = document.querySelector('{card}'); return card && card.dataset.seq && card.querySelector('img').naturalWidth > 0"))
    driver.save_screenshot(os.path.join(output, f"{label}-{encoder}-grid.png"))
    r.check(f"{label}: its card in the grid shows pictures", shown)
    rate = first.get("rates", {}).get("picturesPerSecond", 0)
    time.sleep(2)
    rate = (session_status(server.base, session, token) or {}).get("rates", {}).get("picturesPerSecond", 0)
    r.check(f"{label}: pictures arrive at {rate:.1f} per second (the fake camera sends about 30)", rate >= 10)
    driver.find_element(By.ID, "camera-stop").click()
    time.sleep(1.5)  # the last push (with ?flush=true) lands
    before = (session_status(server.base, session, token) or {}).get("counters", {}).get("framesDecoded")
    time.sleep(1.5)
    after = (session_status(server.base, session, token) or {}).get("counters", {}).get("framesDecoded")
    r.check(f"{label}: Stop sharing ends the stream: no picture after it", before == after, f"{before} then {after}")


def share_across_a_restart(r, driver, server, output, session):
    print("== e. the server restarts under a camera share", flush=True)
    driver.get(server.base + "/")
    driver.find_element(By.ID, "open-camera").click()
    name = driver.find_element(By.ID, "camera-session-name")
    name.clear()
    name.send_keys(session)
    driver.find_element(By.ID, "camera-start").click()
    decoding = lambda: ((session_status(server.base, session) or {}).get("counters", {}).get("framesDecoded") or 0) >= 30
    if not r.check("e: sharing started and decodes", wait(decoding)):
        return
    r.check("e: the server stopped with exit 0 under the share", server.stop() == 0)
    panel = lambda: driver.find_element(By.ID, "camera-panel")
    said = wait(lambda: panel().get_attribute("data-reconnecting") == "true"
                and driver.find_element(By.ID, "camera-message").text, 15)
    r.check("e: the page says it will share again", bool(said) and "Sharing again" in said, said)
    driver.save_screenshot(os.path.join(output, "e-reconnecting.png"))
    server.start()
    r.check("e: the restarted server decodes the share again (from a keyframe)", wait(decoding, 40),
            json.dumps(session_status(server.base, session))[:300])
    r.check("e: the page says nothing more of it",
            wait(lambda: panel().get_attribute("data-reconnecting") == "false"
                 and not driver.find_element(By.ID, "camera-message").text, 15))
    errors = (session_status(server.base, session) or {}).get("counters", {}).get("framesDroppedBeforeKeyframe")
    r.check("e: its first push started at a keyframe", errors == 0, f"framesDroppedBeforeKeyframe {errors}")
    driver.find_element(By.ID, "camera-stop").click()
    r.check("e: Stop ends the share", wait(lambda: panel().get_attribute("data-sharing") is None, 10))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--output", default=os.path.join(root, ".test-output", "camera"))
    arguments = parser.parse_args()
    os.makedirs(arguments.output, exist_ok=True)
    r = Results()
    work = tempfile.mkdtemp(prefix="frametap-camera-")
    try:
        server = start_server(arguments.binary, [], os.path.join(arguments.output, "server.log"))
        driver = make_driver(os.path.join(work, "profile"))
        try:
            recorder_webm(r, driver, server, work)
            share_camera(r, driver, server, arguments.output, "phone-1", "webcodecs", label="b")
            share_camera(r, driver, server, arguments.output, "phone-2", "mediarecorder", label="c")
            share_across_a_restart(r, driver, server, arguments.output, "phone-4")
        finally:
            driver.quit()
        r.check("the server stopped with exit 0", server.stop() == 0)
        token = f"camera-{os.getpid()}"
        server = start_server(arguments.binary, ["--auth-token", token], os.path.join(arguments.output, "server-auth.log"))
        driver = make_driver(os.path.join(work, "profile-auth"))
        try:
            share_camera(r, driver, server, arguments.output, "phone-3", "webcodecs", token=token, label="d")
        finally:
            driver.quit()
        r.check("the token server stopped with exit 0", server.stop() == 0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{r.passed} passed, {r.failed} failed")
    sys.exit(1 if r.failed else 0)


if __name__ == "__main__":
    main()
