#ifndef FRAMETAP_CMICROHTTPD_H
#define FRAMETAP_CMICROHTTPD_H
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/// MHD_SIZE_UNKNOWN is a macro Swift cannot import.
static inline uint64_t ft_mhd_size_unknown(void) { return MHD_SIZE_UNKNOWN; }

#endif
