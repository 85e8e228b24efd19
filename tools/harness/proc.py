"""A process's resources as Linux shows them in /proc, ending a child process, and the machine a
run is on."""
import os
import re
import subprocess


def _status(pid):
    with open(f"/proc/{pid}/status") as status:
        return status.read()


def rss_kb(pid):
    """VmRSS in kB (0 when the kernel shows none, as for a zombie)."""
    match = re.search(r"^VmRSS:\s+(\d+)", _status(pid), re.M)
    return int(match.group(1)) if match else 0


def thread_count(pid):
    return int(re.search(r"^Threads:\s+(\d+)", _status(pid), re.M).group(1))


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid):
    """User and system CPU time so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def minor_faults(pid):
    """Minor page faults so far: each is a page the kernel mapped (most often zeroed) for the
    process, so reused memory causes none."""
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[7])


def alive(pid):
    """The process exists and is neither a zombie nor dead."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def end(process, timeout=10):
    """Ends a child (a subprocess.Popen) that may still run: SIGTERM, then SIGKILL when it has not
    exited within `timeout` seconds. Returns its exit status."""
    if process.poll() is None:
        process.terminate()
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait(timeout=timeout)


def load_average():
    """The 1, 5 and 15 minute load averages, as one string."""
    with open("/proc/loadavg") as loadavg:
        return " ".join(loadavg.read().split()[:3])


def cpu_model():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


def memory_gib():
    """MemTotal in whole GiB."""
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal"):
                return int(line.split()[1]) // 1024 // 1024
    return 0
