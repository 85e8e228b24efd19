"""A free TCP port on loopback. Run as a script (`python3 tools/harness/ports.py`) it prints one,
for the shell scripts."""
import socket


def free_port(host="127.0.0.1"):
    """A port nothing listens on now: the kernel's pick for a socket bound and closed at once."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


if __name__ == "__main__":
    print(free_port())
