#include "CMicroHTTPD.h"

#include <arpa/inet.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Certificates for libmicrohttpd's TLS through a retrieve callback, not MHD_OPTION_HTTPS_MEM_*:
// the callback is asked at every handshake, so a new certificate (SIGHUP) takes effect for new
// connections without restarting the daemon, which the MEM options cannot do.

struct ft_tls_credentials {
    gnutls_pcert_st chain[FT_TLS_MAX_CHAIN];
    unsigned int count;
    gnutls_privkey_t key;
};

// The credentials each listening port serves from the next handshake on (a process may run
// several servers, as the tests do). Replaced ones are never freed: a handshake in progress
// may still use them, reloads are rare, and each is a few kilobytes.
enum { FT_TLS_MAX_SERVERS = 64 };
static struct {
    uint16_t port;
    struct ft_tls_credentials *credentials;
} servers[FT_TLS_MAX_SERVERS];
static pthread_mutex_t servers_lock = PTHREAD_MUTEX_INITIALIZER;

static void describe(char *error, size_t error_size, const char *what, const char *path, int code) {
    if (error != NULL && error_size > 0) {
        snprintf(error, error_size, "%s %s: %s", what, path, gnutls_strerror(code));
    }
}

// Whether `key` is the private half of `certificate_key`: their public keys are the same
// (compared in DER, which covers every key type GnuTLS reads).
static int key_matches_certificate(gnutls_privkey_t key, gnutls_pubkey_t certificate_key) {
    gnutls_pubkey_t derived = NULL;
    gnutls_datum_t ours = { NULL, 0 };
    gnutls_datum_t theirs = { NULL, 0 };
    int matches = gnutls_pubkey_init(&derived) >= 0
        && gnutls_pubkey_import_privkey(derived, key, 0, 0) >= 0
        && gnutls_pubkey_export2(derived, GNUTLS_X509_FMT_DER, &ours) >= 0
        && gnutls_pubkey_export2(certificate_key, GNUTLS_X509_FMT_DER, &theirs) >= 0
        && ours.size == theirs.size && memcmp(ours.data, theirs.data, ours.size) == 0;
    gnutls_free(ours.data);
    gnutls_free(theirs.data);
    if (derived != NULL) {
        gnutls_pubkey_deinit(derived);
    }
    return matches;
}

struct ft_tls_credentials *ft_tls_load(const char *cert_path, const char *key_path, char *error, size_t error_size) {
    struct ft_tls_credentials *credentials = calloc(1, sizeof *credentials);
    if (credentials == NULL) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    gnutls_datum_t certs = { NULL, 0 };
    gnutls_datum_t key = { NULL, 0 };
    int status = gnutls_load_file(cert_path, &certs);
    if (status < 0) {
        describe(error, error_size, "cannot read the certificate", cert_path, status);
        goto failed;
    }
    credentials->count = FT_TLS_MAX_CHAIN;
    status = gnutls_pcert_list_import_x509_raw(
        credentials->chain, &credentials->count, &certs, GNUTLS_X509_FMT_PEM, 0);
    if (status < 0 || credentials->count == 0) {
        describe(error, error_size, "no PEM certificate chain in", cert_path, status < 0 ? status : GNUTLS_E_NO_CERTIFICATE_FOUND);
        credentials->count = 0;
        goto failed;
    }
    status = gnutls_load_file(key_path, &key);
    if (status < 0) {
        describe(error, error_size, "cannot read the key", key_path, status);
        goto failed;
    }
    status = gnutls_privkey_init(&credentials->key);
    if (status >= 0) {
        status = gnutls_privkey_import_x509_raw(credentials->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    }
    if (status < 0) {
        describe(error, error_size, "no PEM private key in", key_path, status);
        goto failed;
    }
    // A key that is not the leaf certificate's makes every handshake fail later, with nothing
    // in the log to say why; refused here, the server keeps serving its previous pair.
    if (!key_matches_certificate(credentials->key, credentials->chain[0].pubkey)) {
        snprintf(error, error_size, "the private key %s does not belong to the certificate %s", key_path, cert_path);
        goto failed;
    }
    gnutls_free(certs.data);
    gnutls_free(key.data);
    return credentials;

failed:
    gnutls_free(certs.data);
    gnutls_free(key.data);
    for (unsigned int index = 0; index < credentials->count; index++) {
        gnutls_pcert_deinit(&credentials->chain[index]);
    }
    if (credentials->key != NULL) {
        gnutls_privkey_deinit(credentials->key);
    }
    free(credentials);
    return NULL;
}

int ft_tls_use(uint16_t port, struct ft_tls_credentials *credentials) {
    int stored = -1;
    pthread_mutex_lock(&servers_lock);
    for (int index = 0; index < FT_TLS_MAX_SERVERS && stored < 0; index++) {
        if (servers[index].port == port || servers[index].port == 0) {
            servers[index].port = port;
            servers[index].credentials = credentials;
            stored = 0;
        }
    }
    pthread_mutex_unlock(&servers_lock);
    return stored;
}

static struct ft_tls_credentials *credentials_for(gnutls_session_t session) {
    struct sockaddr_storage local;
    socklen_t length = sizeof local;
    int fd = gnutls_transport_get_int(session);
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&local, &length) != 0) {
        return NULL;
    }
    uint16_t port = local.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&local)->sin6_port)
                                                : ntohs(((struct sockaddr_in *)&local)->sin_port);
    struct ft_tls_credentials *found = NULL;
    pthread_mutex_lock(&servers_lock);
    for (int index = 0; index < FT_TLS_MAX_SERVERS && servers[index].port != 0; index++) {
        if (servers[index].port == port) {
            found = servers[index].credentials;
        }
    }
    pthread_mutex_unlock(&servers_lock);
    return found;
}

// gnutls_certificate_retrieve_function2: the server's chain and key for this handshake.
static int ft_tls_retrieve(gnutls_session_t session, const gnutls_datum_t *requested_issuers, int issuer_count,
                           const gnutls_pk_algorithm_t *algorithms, int algorithm_count,
                           gnutls_pcert_st **chain, unsigned int *chain_length, gnutls_privkey_t *key) {
    (void)requested_issuers;
    (void)issuer_count;
    (void)algorithms;
    (void)algorithm_count;
    struct ft_tls_credentials *credentials = credentials_for(session);
    if (credentials == NULL) {
        return -1;
    }
    *chain = credentials->chain;
    *chain_length = credentials->count;
    *key = credentials->key;
    return 0;
}

void *ft_tls_retrieve_callback(void) {
    return (void *)ft_tls_retrieve;
}

ssize_t ft_tls_send(void *tls_session, const void *data, size_t size) {
    return gnutls_record_send((gnutls_session_t)tls_session, data, size);
}

int ft_tls_again(ssize_t status) {
    return status == GNUTLS_E_AGAIN || status == GNUTLS_E_INTERRUPTED;
}

// The client side exists for `frametap healthcheck`, which asks this host's own server whether
// it is alive. It does not verify the certificate: the server's name is a public one (or the
// certificate is self-signed) while the probe connects to a loopback address, and it sends no
// secret and trusts nothing of the answer beyond its status line.
static void client_error(char *error, size_t error_size, const char *what, int code) {
    if (error != NULL && error_size > 0) {
        if (code == GNUTLS_E_AGAIN) {
            snprintf(error, error_size, "%s: no answer in time", what);
        } else {
            snprintf(error, error_size, "%s: %s", what, gnutls_strerror(code));
        }
    }
}

long ft_tls_client_exchange(int fd, unsigned int timeout_ms, const void *request, size_t request_size, void *answer,
                            size_t capacity, char *error, size_t error_size) {
    gnutls_certificate_credentials_t credentials = NULL;
    gnutls_session_t session = NULL;
    long received = -1;
    int code = gnutls_certificate_allocate_credentials(&credentials);
    if (code < 0) {
        client_error(error, error_size, "TLS credentials", code);
        return -1;
    }
    // No SIGPIPE for a write to a peer that has gone: the error comes back as a result.
    code = gnutls_init(&session, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL);
    if (code < 0) {
        session = NULL;
    } else {
        code = gnutls_set_default_priority(session);
    }
    if (code >= 0) code = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, credentials);
    if (code < 0) {
        client_error(error, error_size, "TLS session", code);
        goto done;
    }
    gnutls_transport_set_int(session, fd);
    gnutls_handshake_set_timeout(session, timeout_ms);
    do {
        code = gnutls_handshake(session);
    } while (code == GNUTLS_E_INTERRUPTED);
    if (code < 0) {
        client_error(error, error_size, "TLS handshake", code);
        goto done;
    }
    for (size_t sent = 0; sent < request_size;) {
        ssize_t count = gnutls_record_send(session, (const char *)request + sent, request_size - sent);
        if (count == GNUTLS_E_INTERRUPTED) continue;
        if (count < 0) {
            client_error(error, error_size, "TLS send", (int)count);
            goto done;
        }
        sent += (size_t)count;
    }
    size_t used = 0;
    while (used < capacity && memchr(answer, '\n', used) == NULL) {
        ssize_t count = gnutls_record_recv(session, (char *)answer + used, capacity - used);
        if (count == GNUTLS_E_INTERRUPTED) continue;
        // A server may close without TLS's close_notify once its answer is out.
        if (count == 0 || (count == GNUTLS_E_PREMATURE_TERMINATION && used > 0)) break;
        if (count < 0) {
            client_error(error, error_size, "TLS receive", (int)count);
            goto done;
        }
        used += (size_t)count;
    }
    received = (long)used;
    gnutls_bye(session, GNUTLS_SHUT_WR);
done:
    if (session != NULL) gnutls_deinit(session);
    gnutls_certificate_free_credentials(credentials);
    return received;
}
