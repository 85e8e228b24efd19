// Apart from shim.c: <linux/tcp.h>, whose struct tcp_info has the byte counts, cannot be
// included together with glibc's <netinet/tcp.h>.
#include "CMicroHTTPD.h"
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

uint64_t ft_tcp_bytes_received(int fd) {
    struct tcp_info info;
    socklen_t size = sizeof info;
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0 ||
        size < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) {
        return UINT64_MAX;
    }
    return info.tcpi_bytes_received;
}
