#ifndef FRAMETAP_CMICROHTTPD_H
#define FRAMETAP_CMICROHTTPD_H
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

// Shims for the parts of libmicrohttpd's API that Swift cannot use directly. Each one says
// why it exists; everything else is called from Swift as imported.

/// MHD_SIZE_UNKNOWN is a macro Swift cannot import.
static inline uint64_t ft_mhd_size_unknown(void) { return MHD_SIZE_UNKNOWN; }

/// MHD_CONTENT_READER_END_OF_STREAM / END_WITH_ERROR are cast macros Swift cannot import.
static inline ssize_t ft_mhd_reader_end_of_stream(void) { return MHD_CONTENT_READER_END_OF_STREAM; }
static inline ssize_t ft_mhd_reader_end_with_error(void) { return MHD_CONTENT_READER_END_WITH_ERROR; }

/// MHD_get_daemon_info is variadic and returns a union pointer; Swift can call neither shape
/// comfortably. Returns 0 when the daemon does not know its port.
uint16_t ft_mhd_bound_port(struct MHD_Daemon *daemon);

/// Receives one formatted libmicrohttpd log line. MHD's own logger type takes a va_list,
/// which Swift cannot format; the C side formats it and hands over a plain string.
typedef void (*ft_mhd_log_callback)(void *cls, const char *message);

/// MHD_OPTION_URI_LOG_CALLBACK's function: it receives the request target as sent (before
/// libmicrohttpd percent-decodes it) and returns the request's initial `*con_cls`.
typedef void *(*ft_mhd_uri_log_callback)(void *cls, const char *uri, struct MHD_Connection *connection);

/// Everything `ft_mhd_start` passes to the variadic MHD_start_daemon, as one fixed struct
/// (Swift cannot call C variadic functions, and function-pointer options are not CVarArg).
struct ft_mhd_config {
    /// MHD_FLAG bits; MHD_USE_IPv6 is added automatically for an IPv6 bind address.
    unsigned int flags;
    /// 0 asks the kernel for an ephemeral port (read it back with ft_mhd_bound_port).
    uint16_t port;
    /// Numeric IPv4 or IPv6 address to bind ("127.0.0.1", "::1", "0.0.0.0", "::"),
    /// or NULL for every IPv4 address.
    const char *bind_host;
    MHD_AccessHandlerCallback access_handler;
    void *access_handler_cls;
    MHD_RequestCompletedCallback completed;
    void *completed_cls;
    ft_mhd_uri_log_callback uri_logger;
    void *uri_logger_cls;
    /// MHD_OPTION_NOTIFY_CONNECTION: told when each connection opens and closes (NULL: not told).
    MHD_NotifyConnectionCallback notify_connection;
    void *notify_connection_cls;
    /// NULL: MHD's default (stderr when MHD_USE_ERROR_LOG is set). Otherwise MHD_USE_ERROR_LOG
    /// is added and every MHD message goes to logger(logger_cls, line).
    ft_mhd_log_callback logger;
    void *logger_cls;
    unsigned int thread_pool_size;
    unsigned int connection_limit;          /* 0: MHD's default */
    unsigned int per_ip_connection_limit;   /* 0: no limit per client address */
    size_t connection_memory_limit;         /* 0: MHD's default (32 KiB) */
    unsigned int connection_timeout_seconds;/* 0: never time out */
    /// Non-zero: serve HTTPS, with the credentials given to ft_tls_use.
    int tls;
};

/// Writes `size` bytes straight to the connection's socket, bypassing libmicrohttpd, and
/// returns how many were written (or -1). It exists because libmicrohttpd 0.9.75 cannot queue
/// a response while the request body is still arriving (MHD_queue_response refuses outside the
/// headers-processed and full-request states), yet a server that stops listening to an upload
/// (its session was deleted, a limit was passed, it shuts down) must tell the client at once
/// instead of swallowing the rest of an endless body. Call it only from the connection's own
/// access-handler call, when no response was queued and none will be: libmicrohttpd writes
/// nothing to the socket while it reads a body, so nothing interleaves. The caller then reads
/// and drops what follows for a bounded amount and closes the connection. Waits up to
/// `timeout_ms` for a full socket buffer.
ssize_t ft_mhd_send_raw(struct MHD_Connection *connection, const void *data, size_t size, int timeout_ms);

/// Ends the sending side of the connection's socket (shutdown SHUT_WR) after an answer was
/// written with ft_mhd_send_raw, so that libmicrohttpd's own later write fails instead of
/// reaching the client. libmicrohttpd 0.9.75 answers a `Content-Length` it cannot parse itself,
/// with its status line and headers twice (a bug), without calling the application first.
int ft_mhd_shutdown_write(struct MHD_Connection *connection);

/// 1 when the client has closed its side of the connection (or reset it), without reading
/// anything: a peek at the socket. 0 while it is open or cannot be told. A suspended connection
/// is not watched by libmicrohttpd, so a stream that has nothing to send asks this.
int ft_mhd_peer_closed(struct MHD_Connection *connection);

/// Bytes written to the connection's socket that the client has not yet acknowledged (the
/// kernel's send queue, SIOCOUTQ), or -1 when it cannot be told.
long ft_mhd_unsent_bytes(struct MHD_Connection *connection);

/// The socket of a connection, or -1.
int ft_mhd_connection_fd(struct MHD_Connection *connection);

/// Bytes the socket has received since it was opened (TCP_INFO's tcpi_bytes_received), or
/// UINT64_MAX when it cannot be told.
uint64_t ft_tcp_bytes_received(int fd);

/// The client's address as 16 bytes (an IPv4 address as ::ffff:a.b.c.d), to count connections
/// per address. Returns 0 when it is not an IP address.
int ft_mhd_client_address(struct MHD_Connection *connection, uint8_t out[16]);

/// The size of the request's head (request line, header lines and the blank line after them),
/// as it lies in the connection's read buffer from the method the access handler was passed;
/// 0 when libmicrohttpd does not know it. libmicrohttpd parses the head in place (each line
/// end, each header's colon and the spaces of the request line become NUL bytes; a folded
/// header's name is copied elsewhere), so within these bytes FrameTap can tell how each header
/// it was handed was written. Valid from the access handler's first call until the request ends.
size_t ft_mhd_request_head_size(struct MHD_Connection *connection);

/// For the URI log callback, which libmicrohttpd 0.9.75 calls with the request target before it
/// splits off the query and stores every `name=value` piece as an argument record in the
/// connection's memory pool. FrameTap never reads those records (it parses the query from its
/// own copy of the target), yet 500 or so pieces exhaust the pool, and libmicrohttpd then gives
/// up on the request in a way that never answers and never reports the request completed (a
/// 431 it cannot send, then a close that skips MHD_OPTION_NOTIFY_COMPLETED). Ending the target
/// right after its first '?' leaves libmicrohttpd an empty query to parse. `uri` is the
/// callback's argument: it points into the connection's own read buffer, which libmicrohttpd
/// writes into at that '?' itself right after the callback returns. Copy the target first.
void ft_mhd_skip_argument_parsing(const char *uri);

/// For the URI log callback: whether the request target the client sent goes on past the NUL
/// that ends `uri` (`length` is its strlen), that is, whether it holds a NUL byte. In the
/// request line libmicrohttpd hands over, the target is followed by the NUL that replaced the
/// space before the HTTP version, then the version itself (checked to be `HTTP/x.y` before the
/// callback is called), so the five bytes after a NUL that ends the whole target are "HTTP/";
/// anything else means the NUL was part of the target. Only reads inside the request line.
int ft_mhd_target_holds_nul(const char *uri, size_t length);

/// TLS (GnuTLS, as libmicrohttpd uses it): a certificate chain and its private key loaded from
/// PEM files, opaque to Swift. At most FT_TLS_MAX_CHAIN certificates per chain.
enum { FT_TLS_MAX_CHAIN = 16 };
struct ft_tls_credentials;

/// Loads a PEM chain (leaf first) and its PEM private key. NULL on failure, with the reason in
/// `error`.
struct ft_tls_credentials *ft_tls_load(const char *cert_path, const char *key_path, char *error, size_t error_size);

/// The credentials every TLS handshake on the server listening on `port` presents from now on
/// (see tls.c for why a callback). -1 when too many servers use TLS in this process.
int ft_tls_use(uint16_t port, struct ft_tls_credentials *credentials);

/// The function to pass as MHD_OPTION_HTTPS_CERT_CALLBACK (a gnutls_certificate_retrieve_function2).
void *ft_tls_retrieve_callback(void);

/// A client's one exchange over TLS on `fd`, a connected blocking socket whose send and receive
/// timeouts are set: the handshake, `request` sent whole, then the answer read into `answer`
/// up to its first line end, the end of the stream or `capacity` bytes. The server's
/// certificate is not verified (see tls.c). Returns the bytes read, or -1 with the reason in
/// `error`.
long ft_tls_client_exchange(int fd, unsigned int timeout_ms, const void *request, size_t request_size, void *answer,
                            size_t capacity, char *error, size_t error_size);

/// Error codes from ft_mhd_start besides NULL-with-errno.
enum { FT_MHD_BAD_BIND_HOST = -1, FT_MHD_START_FAILED = -2 };

/// Opaque storage the daemon's logger needs for its whole life (MHD keeps a pointer to it).
struct ft_mhd_logger_slot {
    ft_mhd_log_callback callback;
    void *cls;
};

/// Starts a daemon with a fixed set of options. `logger_slot` must stay valid until after
/// MHD_stop_daemon (it may be NULL when config->logger is NULL). Returns NULL on failure and
/// sets *error_out to one of the FT_MHD_* codes (errno is left as MHD set it).
struct MHD_Daemon *ft_mhd_start(const struct ft_mhd_config *config,
                                struct ft_mhd_logger_slot *logger_slot,
                                int *error_out);

#endif
