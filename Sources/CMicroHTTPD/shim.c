#include "CMicroHTTPD.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>

uint16_t ft_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

ssize_t ft_tls_send(void *tls_session, const void *data, size_t size);
int ft_tls_again(ssize_t status);

ssize_t ft_mhd_send_raw(struct MHD_Connection *connection, const void *data, size_t size, int timeout_ms) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == NULL) {
        return -1;
    }
    const int fd = info->connect_fd;
    // Over TLS the bytes go through the connection's GnuTLS session (NULL without TLS).
    const union MHD_ConnectionInfo *tls = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    void *tls_session = tls == NULL ? NULL : tls->tls_session;
    const char *bytes = data;
    size_t sent = 0;
    while (sent < size) {
        if (tls_session != NULL) {
            ssize_t written = ft_tls_send(tls_session, bytes + sent, size - sent);
            if (written > 0) {
                sent += (size_t)written;
                continue;
            }
            if (ft_tls_again(written)) {
                struct pollfd waiting = { .fd = fd, .events = POLLOUT };
                if (poll(&waiting, 1, timeout_ms) > 0) {
                    continue;
                }
            }
            break;
        }
        ssize_t written = send(fd, bytes + sent, size - sent, MSG_NOSIGNAL);
        if (written > 0) {
            sent += (size_t)written;
            continue;
        }
        if (written < 0 && errno == EINTR) {
            continue;
        }
        if (written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd waiting = { .fd = fd, .events = POLLOUT };
            if (poll(&waiting, 1, timeout_ms) > 0) {
                continue;
            }
        }
        break;
    }
    return sent == 0 && size > 0 ? -1 : (ssize_t)sent;
}

int ft_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

void ft_mhd_skip_argument_parsing(const char *uri) {
    char *question = strchr(uri, '?');
    if (question != NULL) {
        // The read buffer is the connection's and writable; the parameter is const only in
        // libmicrohttpd's callback type.
        question[1] = '\0';
    }
}

int ft_mhd_target_holds_nul(const char *uri, size_t length) {
    return memcmp(uri + length + 1, "HTTP/", 5) != 0;
}

size_t ft_mhd_request_head_size(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info == NULL ? 0 : info->header_size;
}

int ft_mhd_client_address(struct MHD_Connection *connection, uint8_t out[16]) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL) {
        return 0;
    }
    if (info->client_addr->sa_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)info->client_addr;
        memset(out, 0, 10);
        out[10] = 0xff;
        out[11] = 0xff;
        memcpy(out + 12, &v4->sin_addr, 4);
        return 1;
    }
    if (info->client_addr->sa_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)info->client_addr)->sin6_addr, 16);
        return 1;
    }
    return 0;
}

int ft_mhd_peer_closed(struct MHD_Connection *connection) {
    int fd = ft_mhd_connection_fd(connection);
    if (fd < 0) {
        return 0;
    }
    char byte;
    ssize_t got = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got == 0) {
        return 1;
    }
    return got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

long ft_mhd_unsent_bytes(struct MHD_Connection *connection) {
    int fd = ft_mhd_connection_fd(connection);
    int queued = 0;
    if (fd < 0 || ioctl(fd, SIOCOUTQ, &queued) != 0) {
        return -1;
    }
    return queued;
}

int ft_mhd_shutdown_write(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : shutdown(info->connect_fd, SHUT_WR);
}

// MHD hands over a printf format plus va_list; format it here so Swift receives a finished line.
static void ft_log_trampoline(void *cls, const char *format, va_list ap) {
    const struct ft_mhd_logger_slot *slot = cls;
    char line[1024];
    vsnprintf(line, sizeof line, format, ap);
    size_t length = strlen(line);
    while (length > 0 && (line[length - 1] == '\n' || line[length - 1] == '\r')) {
        line[--length] = '\0';
    }
    slot->callback(slot->cls, line);
}

struct MHD_Daemon *ft_mhd_start(const struct ft_mhd_config *config,
                                struct ft_mhd_logger_slot *logger_slot,
                                int *error_out) {
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    const struct sockaddr *bind_address = NULL;
    unsigned int flags = config->flags;

    *error_out = 0;
    if (config->bind_host != NULL) {
        memset(&v4, 0, sizeof v4);
        memset(&v6, 0, sizeof v6);
        if (inet_pton(AF_INET, config->bind_host, &v4.sin_addr) == 1) {
            v4.sin_family = AF_INET;
            v4.sin_port = htons(config->port);
            bind_address = (const struct sockaddr *)&v4;
        } else if (inet_pton(AF_INET6, config->bind_host, &v6.sin6_addr) == 1) {
            v6.sin6_family = AF_INET6;
            v6.sin6_port = htons(config->port);
            bind_address = (const struct sockaddr *)&v6;
            // "::" is every address, IPv4 ones included (as IPv4-mapped): libmicrohttpd would
            // otherwise set IPV6_V6ONLY and refuse every IPv4 client.
            flags |= IN6_IS_ADDR_UNSPECIFIED(&v6.sin6_addr) ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
        } else {
            *error_out = FT_MHD_BAD_BIND_HOST;
            return NULL;
        }
    }

    // The option list is built as an MHD_OPTION_ARRAY so optional entries can simply be left
    // out; a variadic list cannot skip an entry in the middle.
    struct MHD_OptionItem options[16];
    size_t count = 0;
    // The logger goes first: libmicrohttpd only routes its own messages to it from the point it
    // is set, and warns (on the standard logger) when it is not the first option.
    if (config->logger != NULL && logger_slot != NULL) {
        logger_slot->callback = config->logger;
        logger_slot->cls = config->logger_cls;
        options[count++] = (struct MHD_OptionItem){
            MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)ft_log_trampoline, logger_slot };
        flags |= MHD_USE_ERROR_LOG;
    }
    options[count++] = (struct MHD_OptionItem){
        MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)config->completed, config->completed_cls };
    if (config->uri_logger != NULL) {
        options[count++] = (struct MHD_OptionItem){
            MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)config->uri_logger, config->uri_logger_cls };
    }
    options[count++] = (struct MHD_OptionItem){
        MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)config->thread_pool_size, NULL };
    options[count++] = (struct MHD_OptionItem){
        MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)config->connection_timeout_seconds, NULL };
    if (config->tls) {
        flags |= MHD_USE_TLS;
        options[count++] = (struct MHD_OptionItem){
            MHD_OPTION_HTTPS_CERT_CALLBACK, 0, ft_tls_retrieve_callback() };
    }
    if (config->notify_connection != NULL) {
        options[count++] = (struct MHD_OptionItem){
            MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)config->notify_connection, config->notify_connection_cls };
    }
    if (config->per_ip_connection_limit > 0) {
        options[count++] = (struct MHD_OptionItem){
            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)config->per_ip_connection_limit, NULL };
    }
    if (config->connection_limit > 0) {
        options[count++] = (struct MHD_OptionItem){
            MHD_OPTION_CONNECTION_LIMIT, (intptr_t)config->connection_limit, NULL };
    }
    if (config->connection_memory_limit > 0) {
        options[count++] = (struct MHD_OptionItem){
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)config->connection_memory_limit, NULL };
    }
    if (bind_address != NULL) {
        options[count++] = (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, (void *)bind_address };
    }
    options[count++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };

    struct MHD_Daemon *daemon = MHD_start_daemon(
        flags, config->port, NULL, NULL,
        config->access_handler, config->access_handler_cls,
        MHD_OPTION_ARRAY, options,
        MHD_OPTION_END);
    if (daemon == NULL) {
        *error_out = FT_MHD_START_FAILED;
    }
    return daemon;
}
