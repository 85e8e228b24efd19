"""The test and benchmark scripts' shared pieces (Python standard library only).

Scripts put the folder above this one on their path, found from their own file:

    sys.path.insert(0, os.path.join(<repository>, "tools"))
    from harness.server import Server

  ports      free_port(); `python3 tools/harness/ports.py` prints one, for shell scripts
  waiting    Failure (what every check raises), poll() and wait_for(): waits with a deadline
  server     Server: `frametap serve` started, healthy, stopped (SIGTERM, then SIGKILL), its log;
             benchmark_server(): one started the way the benchmarks run it
  client     requests over http.client: request(), post_file(), wait_for_picture()
  rawhttp    HTTP over raw sockets: a strict answer reader, raw exchanges, ChunkedPush
  multipart  the parts of a multipart/mixed answer, framing checked
  annexb     start codes, NAL units, access units of H.264 and H.265, Stream
  rbsp       exp-Golomb bit writing and reading, with emulation prevention
  metrics    Prometheus text: values, histograms, their quantiles
  proc       a process's memory, CPU, threads and fds (/proc); end(): a child ended; the machine
  stats      median, percentile and the figures' format
  report     a measuring script's progress lines and the commands it ran
  density    real-time pushes of N sessions from one loop, and the search for the largest N kept up
  attackers  slow clients from other loopback addresses, their probe, and request floods
  checks     Results: PASS/FAIL/SKIP lines and their counts
  browser    headless Chromium through Selenium (imports selenium: only for the browser suites)
"""
