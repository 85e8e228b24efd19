#!/usr/bin/python3
"""A live RTSP server for the real-server tests: GStreamer's RTSP server library (GstRtspServer,
python3-gi) serving a moving test pattern encoded live with x264enc or x265enc.

    smoke/rtsp-server.py --port 8554 [--codec h264|h265] [--size 320x240] [--fps 25] [--path /cam]
    smoke/rtsp-server.py --port 8554 --file stream.mkv      # an H.264 Matroska file, played in real time
    smoke/rtsp-server.py --port 8554 --cameras 12           # /cam1 ... /cam12, each its own encoder
    smoke/rtsp-server.py --port 8554 --credentials 'viewer:s3cret'   # only with these (Basic; else 401)

Serves rtsp://127.0.0.1:PORT/PATH until SIGTERM or SIGINT; prints "ready" on stdout once it
listens. With --cameras N it serves N cameras, /PATH1 to /PATHN, each a pipeline of its own
(started by its first client) whose ball has a colour of its own, so their pictures differ. With --file every client gets the file from its start (one pipeline each), paced by
its timestamps (make bench's P1). Debian's python3 (/usr/bin/python3) has the gi bindings; a venv's python may not.
"""

import argparse
import signal
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--codec", choices=["h264", "h265"], default="h264")
    parser.add_argument("--size", default="320x240")
    parser.add_argument("--fps", type=int, default=25)
    parser.add_argument("--path", default="/cam")
    parser.add_argument("--bitrate", type=int, default=600, help="kbit/s")
    parser.add_argument("--file", help="play this H.264 Matroska file instead of encoding a test pattern")
    parser.add_argument("--cameras", type=int, default=0, help="serve this many cameras, PATH1 ... PATHN")
    parser.add_argument("--credentials", help="USER:PASSWORD a client must send (Basic); others get 401")
    args = parser.parse_args()
    width, height = args.size.split("x")
    Gst.init(None)

    def source(number=0):
        # Camera N's ball has a colour of its own, so that no two cameras show the same picture.
        colour = f" foreground-color={0xFF000000 | (number * 0x3A6B91) & 0xFFFFFF}" if number else ""
        return (
            f"videotestsrc is-live=true pattern=ball{colour} ! video/x-raw,width={width},height={height},"
            f"framerate={args.fps}/1,format=I420"
        )

    if args.codec == "h264":
        encode = (
            f"x264enc tune=zerolatency speed-preset=ultrafast bitrate={args.bitrate} key-int-max={args.fps} "
            "! rtph264pay name=pay0 pt=96 config-interval=1"
        )
    else:
        encode = (
            f"x265enc tune=zerolatency speed-preset=ultrafast bitrate={args.bitrate} key-int-max={args.fps} "
            "! rtph265pay name=pay0 pt=96 config-interval=1"
        )
    server = GstRtspServer.RTSPServer()
    permissions = None
    if args.credentials:
        user, password = args.credentials.split(":", 1)
        token = GstRtspServer.RTSPToken()
        token.set_string(GstRtspServer.RTSP_TOKEN_MEDIA_FACTORY_ROLE, "viewer")
        auth = GstRtspServer.RTSPAuth()
        auth.add_basic(GstRtspServer.RTSPAuth.make_basic(user, password), token)
        server.set_auth(auth)
        permissions = GstRtspServer.RTSPPermissions()
        permissions.add_role_from_structure(
            Gst.Structure.new_from_string("viewer, media.factory.access=(boolean)true, media.factory.construct=(boolean)true"))
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))

    def mount(path, launch, shared):
        factory = GstRtspServer.RTSPMediaFactory()
        factory.set_launch(launch)
        factory.set_shared(shared)
        if permissions:
            factory.set_permissions(permissions)
        server.get_mount_points().add_factory(path, factory)

    for number in range(1, args.cameras + 1):
        mount(f"{args.path}{number}", f"( {source(number)} ! {encode} )", True)
    if not args.cameras:
        if args.file:
            mount(args.path, f"( filesrc location={args.file} ! matroskademux ! h264parse config-interval=-1 "
                             "! rtph264pay name=pay0 pt=96 )", False)
        else:
            mount(args.path, f"( {source()} ! {encode} )", True)
    if server.attach(None) == 0:
        print(f"cannot listen on port {args.port}", file=sys.stderr)
        sys.exit(1)
    loop = GLib.MainLoop()
    for number in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, number, loop.quit)
    print("ready", flush=True)
    loop.run()


if __name__ == "__main__":
    main()
