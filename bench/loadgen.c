// A compiled load generator for bench.py's on-demand suites (D1-D3): N real-time camera pushes
// from one thread, and long-poll readers for every k-th session, each in its own thread, so
// that the load generator is not what limits the server (bench.py's Python sender capped B5).
//
//   loadgen --port P --units FILE --sessions N [--prefix ID] [--fps 30] [--loops L]
//           [--watch-every K] [--watch-after S] [--wait-ms MS] [--query Q]
//
// FILE holds the access units to send, each as a 4-byte big-endian length and its bytes (bench.py
// writes it from the stream it cut). Session k sends access unit i at t0 + (i + k/N) / fps: the
// cameras are spread over one picture interval, as independent cameras are. Each access unit is
// one HTTP chunk of a chunked POST /sessions/PREFIX-k/nalus?Q; after the last, every body is ended
// and its JSON answer read. Readers long-poll latest.jpg?after=SEQ&wait=MS from WATCH-AFTER seconds
// after the start until the pushes end, and note each picture's age (now minus its
// X-Frame-Received-At) and the first answer's wait (the wake-up of an idle on-demand session).
//
// stdout: "MID" once every session sent half its units (bench.py samples the server then), and one
// last line "RESULT {json}" with the sender's lateness, the answers, the readers' figures and this
// process's own CPU time. Exit 0 unless the generator itself failed (the server's answers are data).

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int port;
static const char *prefix = "load";
static const char *query = "flush=true";
static double fps = 30;
static int sessions_count;
static int loops = 1;
static int watch_every = 0;
static double watch_after = 2;
static int wait_ms = 2000;

static unsigned char **units;
static size_t *unit_sizes;
static int unit_count;

static atomic_int pushing_done;

static double now_mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double now_wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
    exit(2);
}

static int connect_server(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void send_all(int fd, const void *data, size_t size) {
    const char *p = data;
    while (size > 0) {
        ssize_t sent = send(fd, p, size, MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                struct pollfd waiting = {.fd = fd, .events = POLLOUT};
                poll(&waiting, 1, 1000);
                continue;
            }
            die("send");
        }
        p += sent;
        size -= (size_t)sent;
    }
}

// One HTTP response on a blocking socket: status, the headers wanted, the body's length.
// `buffer` keeps what was read past the response (keep-alive).
struct response {
    int status;
    long long seq;
    char received_at[64];
    long long frames;
};

struct reader_buffer {
    char data[1 << 16];
    size_t used;
};

static int read_response(int fd, struct reader_buffer *buffer, struct response *out, double timeout) {
    memset(out, 0, sizeof *out);
    out->seq = -1;
    out->frames = -1;
    double deadline = now_mono() + timeout;
    char *end;
    for (;;) {
        buffer->data[buffer->used] = 0;
        end = strstr(buffer->data, "\r\n\r\n");
        if (end) break;
        if (buffer->used >= sizeof buffer->data - 1) return -1;
        int left = (int)((deadline - now_mono()) * 1000);
        if (left <= 0) return -1;
        struct pollfd readable = {.fd = fd, .events = POLLIN};
        if (poll(&readable, 1, left) <= 0) return -1;
        ssize_t got = recv(fd, buffer->data + buffer->used, sizeof buffer->data - 1 - buffer->used, 0);
        if (got <= 0) return -1;
        buffer->used += (size_t)got;
    }
    size_t head_length = (size_t)(end - buffer->data) + 4;
    *end = 0;
    sscanf(buffer->data, "HTTP/1.1 %d", &out->status);
    long long length = 0;
    for (char *line = strstr(buffer->data, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
        char *field = line + 2;
        if (strncasecmp(field, "Content-Length:", 15) == 0) length = atoll(field + 15);
        else if (strncasecmp(field, "X-Frame-Seq:", 12) == 0) out->seq = atoll(field + 12);
        else if (strncasecmp(field, "X-Frame-Received-At:", 20) == 0) {
            const char *value = field + 20;
            while (*value == ' ') value++;
            size_t n = strcspn(value, "\r");
            if (n >= sizeof out->received_at) n = sizeof out->received_at - 1;
            memcpy(out->received_at, value, n);
            out->received_at[n] = 0;
        }
    }
    // The body: consume it from the buffer and the socket (a JSON body is searched for "frames").
    size_t in_buffer = buffer->used - head_length;
    char *body = malloc((size_t)length + 1);
    size_t have = in_buffer < (size_t)length ? in_buffer : (size_t)length;
    memcpy(body, buffer->data + head_length, have);
    memmove(buffer->data, buffer->data + head_length + have, buffer->used - head_length - have);
    buffer->used -= head_length + have;
    while (have < (size_t)length) {
        int left = (int)((deadline - now_mono()) * 1000);
        struct pollfd readable = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&readable, 1, left) <= 0) {
            free(body);
            return -1;
        }
        ssize_t got = recv(fd, body + have, (size_t)length - have, 0);
        if (got <= 0) {
            free(body);
            return -1;
        }
        have += (size_t)got;
    }
    body[length] = 0;
    char *frames = strstr(body, "\"frames\":");
    if (frames) out->frames = atoll(frames + 9);
    free(body);
    return 0;
}

// "2026-01-01T12:00:00.250Z" as seconds since 1970.
static double parse_rfc3339(const char *text) {
    struct tm tm = {0};
    int milliseconds = 0;
    if (sscanf(text, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
               &tm.tm_sec, &milliseconds) < 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + milliseconds / 1000.0;
}

// --- readers ---------------------------------------------------------------------------------

struct reader {
    pthread_t thread;
    int session;
    double start;
    // results
    int answers, not_modified, failures;
    double first_wait;  // request to answer of the first picture (the wake-up), seconds
    double *ages;       // picture ages at their answer, seconds
    int ages_count, ages_capacity;
    long long last_seq;
};

static void *reader_main(void *argument) {
    struct reader *reader = argument;
    while (now_mono() < reader->start) usleep(1000);
    int fd = connect_server();
    struct reader_buffer *buffer = calloc(1, sizeof *buffer);
    long long after = -1;
    reader->first_wait = -1;
    while (!atomic_load(&pushing_done)) {
        char request[512];
        if (after < 0)
            snprintf(request, sizeof request, "GET /sessions/%s-%d/frame/latest.jpg HTTP/1.1\r\nHost: loadgen\r\n\r\n",
                     prefix, reader->session);
        else
            snprintf(request, sizeof request,
                     "GET /sessions/%s-%d/frame/latest.jpg?after=%lld&wait=%d HTTP/1.1\r\nHost: loadgen\r\n\r\n",
                     prefix, reader->session, after, wait_ms);
        double asked = now_mono();
        send_all(fd, request, strlen(request));
        struct response response;
        if (read_response(fd, buffer, &response, wait_ms / 1000.0 + 10) != 0) {
            reader->failures++;
            close(fd);
            fd = connect_server();
            buffer->used = 0;
            continue;
        }
        double answered = now_mono();
        if (response.status == 304) {
            reader->not_modified++;
            continue;
        }
        if (response.status != 200) {
            reader->failures++;
            usleep(100 * 1000);
            continue;
        }
        reader->answers++;
        if (reader->first_wait < 0) reader->first_wait = answered - asked;
        if (response.received_at[0]) {
            double age = now_wall() - parse_rfc3339(response.received_at);
            if (reader->ages_count == reader->ages_capacity) {
                reader->ages_capacity = reader->ages_capacity ? 2 * reader->ages_capacity : 1024;
                reader->ages = realloc(reader->ages, sizeof(double) * (size_t)reader->ages_capacity);
            }
            reader->ages[reader->ages_count++] = age;
        }
        after = response.seq;
        reader->last_seq = response.seq;
    }
    close(fd);
    free(buffer);
    return NULL;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// --- pushes ----------------------------------------------------------------------------------

struct push {
    int fd;
    char *outbox;
    size_t length, offset, capacity;
    int status;
    long long frames;
    double answer_delay;
};

static void enqueue(struct push *push, const unsigned char *data, size_t size) {
    char head[32];
    int head_length = snprintf(head, sizeof head, "%zx\r\n", size);
    size_t needed = push->length - push->offset + (size_t)head_length + size + 2;
    if (push->offset > 0) {
        memmove(push->outbox, push->outbox + push->offset, push->length - push->offset);
        push->length -= push->offset;
        push->offset = 0;
    }
    if (needed > push->capacity) {
        push->capacity = needed * 2;
        push->outbox = realloc(push->outbox, push->capacity);
    }
    memcpy(push->outbox + push->length, head, (size_t)head_length);
    push->length += (size_t)head_length;
    memcpy(push->outbox + push->length, data, size);
    push->length += size;
    memcpy(push->outbox + push->length, "\r\n", 2);
    push->length += 2;
}

static void flush_push(struct push *push) {
    while (push->offset < push->length) {
        ssize_t sent = send(push->fd, push->outbox + push->offset, push->length - push->offset, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            die("send (push)");
        }
        push->offset += (size_t)sent;
    }
}

static void read_units(const char *path) {
    FILE *file = fopen(path, "rb");
    if (!file) die("open the units file");
    int capacity = 1024;
    units = malloc(sizeof *units * (size_t)capacity);
    unit_sizes = malloc(sizeof *unit_sizes * (size_t)capacity);
    unsigned char length_bytes[4];
    while (fread(length_bytes, 1, 4, file) == 4) {
        size_t size = (size_t)length_bytes[0] << 24 | (size_t)length_bytes[1] << 16 | (size_t)length_bytes[2] << 8 | length_bytes[3];
        if (unit_count == capacity) {
            capacity *= 2;
            units = realloc(units, sizeof *units * (size_t)capacity);
            unit_sizes = realloc(unit_sizes, sizeof *unit_sizes * (size_t)capacity);
        }
        units[unit_count] = malloc(size);
        if (fread(units[unit_count], 1, size, file) != size) die("read the units file");
        unit_sizes[unit_count++] = size;
    }
    fclose(file);
    if (unit_count == 0) {
        fprintf(stderr, "loadgen: no access units in %s\n", path);
        exit(2);
    }
}

int main(int argc, char **argv) {
    const char *units_path = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *name = argv[i], *value = argv[i + 1];
        if (!strcmp(name, "--port")) port = atoi(value);
        else if (!strcmp(name, "--units")) units_path = value;
        else if (!strcmp(name, "--sessions")) sessions_count = atoi(value);
        else if (!strcmp(name, "--prefix")) prefix = value;
        else if (!strcmp(name, "--fps")) fps = atof(value);
        else if (!strcmp(name, "--loops")) loops = atoi(value);
        else if (!strcmp(name, "--watch-every")) watch_every = atoi(value);
        else if (!strcmp(name, "--watch-after")) watch_after = atof(value);
        else if (!strcmp(name, "--wait-ms")) wait_ms = atoi(value);
        else if (!strcmp(name, "--query")) query = value;
        else {
            fprintf(stderr, "loadgen: unknown option %s\n", name);
            return 64;
        }
    }
    if (!units_path || port <= 0 || sessions_count <= 0 || loops <= 0 || fps <= 0) {
        fprintf(stderr, "usage: loadgen --port P --units FILE --sessions N [--prefix ID] [--fps 30] [--loops L] "
                        "[--watch-every K] [--watch-after S] [--wait-ms MS] [--query Q]\n");
        return 64;
    }
    read_units(units_path);
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }

    int n = sessions_count;
    struct push *pushes = calloc((size_t)n, sizeof *pushes);
    for (int k = 0; k < n; k++) {
        pushes[k].fd = connect_server();
        char head[512];
        int length = snprintf(head, sizeof head,
                              "POST /sessions/%s-%d/nalus%s%s HTTP/1.1\r\nHost: loadgen\r\nContent-Type: "
                              "application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
                              prefix, k, query[0] ? "?" : "", query);
        send_all(pushes[k].fd, head, (size_t)length);
        fcntl(pushes[k].fd, F_SETFL, fcntl(pushes[k].fd, F_GETFL) | O_NONBLOCK);
    }
    int epoll = epoll_create1(0);
    if (epoll < 0) die("epoll_create1");
    for (int k = 0; k < n; k++) {
        struct epoll_event event = {.events = EPOLLOUT | EPOLLET, .data.u32 = (uint32_t)k};
        epoll_ctl(epoll, EPOLL_CTL_ADD, pushes[k].fd, &event);
    }

    double t0 = now_mono() + 0.2;
    int reader_count = watch_every > 0 ? (n + watch_every - 1) / watch_every : 0;
    struct reader *readers = calloc((size_t)(reader_count ? reader_count : 1), sizeof *readers);
    for (int r = 0; r < reader_count; r++) {
        readers[r].session = r * watch_every;
        readers[r].start = t0 + watch_after;
        if (pthread_create(&readers[r].thread, NULL, reader_main, &readers[r]) != 0) die("pthread_create");
    }

    // Events in time order: event e is session e % n sending unit e / n, due at t0 + e / (fps n).
    long long total_events = (long long)n * unit_count * loops;
    long long event = 0;
    double late = 0;
    int mid_said = 0;
    struct epoll_event ready[256];
    while (event < total_events) {
        double now = now_mono();
        while (event < total_events && now >= t0 + (double)event / (fps * n)) {
            late = fmax(late, now - (t0 + (double)event / (fps * n)));
            int k = (int)(event % n);
            long long i = event / n;
            enqueue(&pushes[k], units[i % unit_count], unit_sizes[i % unit_count]);
            flush_push(&pushes[k]);
            event++;
        }
        if (!mid_said && event >= total_events / 2) {
            printf("MID\n");
            fflush(stdout);
            mid_said = 1;
        }
        if (event >= total_events) break;
        double wait = t0 + (double)event / (fps * n) - now_mono();
        int timeout = wait > 0 ? (int)(wait * 1000) : 0;
        int count = epoll_wait(epoll, ready, 256, timeout);
        for (int j = 0; j < count; j++) flush_push(&pushes[ready[j].data.u32]);
        if (wait > 0 && wait < 0.001) {
            struct timespec pause = {0, (long)(wait * 1e9)};
            nanosleep(&pause, NULL);
        }
    }
    // Every unit is out: end the bodies, then read the answers.
    for (int k = 0; k < n; k++) {
        enqueue(&pushes[k], (const unsigned char *)"", 0);  // "0\r\n" + "\r\n": the last chunk, no trailer
    }
    double last_sent = now_mono();
    for (int k = 0; k < n; k++) {
        fcntl(pushes[k].fd, F_SETFL, fcntl(pushes[k].fd, F_GETFL) & ~O_NONBLOCK);
        send_all(pushes[k].fd, pushes[k].outbox + pushes[k].offset, pushes[k].length - pushes[k].offset);
    }
    struct reader_buffer *buffer = calloc(1, sizeof *buffer);
    double max_delay = 0;
    int answered_ok = 0;
    long long watched_frames = 0;
    for (int k = 0; k < n; k++) {
        buffer->used = 0;
        struct response response;
        if (read_response(pushes[k].fd, buffer, &response, 120) != 0) {
            pushes[k].status = 0;
        } else {
            pushes[k].status = response.status;
            pushes[k].frames = response.frames;
        }
        pushes[k].answer_delay = now_mono() - last_sent;
        max_delay = fmax(max_delay, pushes[k].answer_delay);
        if (pushes[k].status == 200) answered_ok++;
        if (watch_every > 0 && k % watch_every == 0 && pushes[k].frames > 0) watched_frames += pushes[k].frames;
        close(pushes[k].fd);
    }
    atomic_store(&pushing_done, 1);

    // Readers: every picture's age, pooled; the first answer's wait of each.
    double *ages = NULL;
    int ages_count = 0, answers = 0, not_modified = 0, failures = 0;
    double max_first_wait = 0;
    for (int r = 0; r < reader_count; r++) {
        pthread_join(readers[r].thread, NULL);
        answers += readers[r].answers;
        not_modified += readers[r].not_modified;
        failures += readers[r].failures;
        max_first_wait = fmax(max_first_wait, readers[r].first_wait);
        ages = realloc(ages, sizeof(double) * (size_t)(ages_count + readers[r].ages_count + 1));
        memcpy(ages + ages_count, readers[r].ages, sizeof(double) * (size_t)readers[r].ages_count);
        ages_count += readers[r].ages_count;
    }
    qsort(ages, (size_t)ages_count, sizeof(double), compare_doubles);
    double p50 = ages_count ? ages[ages_count / 2] : -1;
    double p99 = ages_count ? ages[(int)(ages_count * 0.99) < ages_count ? (int)(ages_count * 0.99) : ages_count - 1] : -1;
    double worst = ages_count ? ages[ages_count - 1] : -1;

    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    double wall = now_mono() - (t0 - 0.2);
    printf("RESULT {\"sessions\":%d,\"units\":%d,\"loops\":%d,\"senderLateSeconds\":%.4f,\"answeredOK\":%d,"
           "\"maxAnswerDelaySeconds\":%.4f,\"readers\":%d,\"readerAnswers\":%d,\"readerNotModified\":%d,"
           "\"readerFailures\":%d,\"ageP50Seconds\":%.4f,\"ageP99Seconds\":%.4f,\"ageMaxSeconds\":%.4f,"
           "\"maxFirstWaitSeconds\":%.4f,\"watchedFrames\":%lld,\"cpuSeconds\":%.3f,\"wallSeconds\":%.3f}\n",
           n, unit_count, loops, late, answered_ok, max_delay, reader_count, answers, not_modified, failures, p50, p99,
           worst, max_first_wait, watched_frames, cpu, wall);
    fflush(stdout);
    return 0;
}
