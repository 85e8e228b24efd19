#ifndef FRAMETAP_CFFMPEG_SHIM_H
#define FRAMETAP_CFFMPEG_SHIM_H

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavformat/avio.h>
#include <libavutil/avutil.h>
#include <libavutil/error.h>
#include <libavutil/frame.h>
#include <libavutil/hwcontext.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
// libva itself (not only through libavutil's hwcontext): Decoding's HardwareProbe asks each
// render node for its driver, VA-API version and H.264 decode profiles.
#include <va/va.h>
#include <va/va_drm.h>
#include <sys/prctl.h>

// libavutil/hwcontext_cuda.h needs the CUDA toolkit's <cuda.h>, which is not installed (the
// driver is loaded at run time). Its device context, as FFmpeg 5.1 lays it out: the CUDA context,
// the stream its copies and NVDEC's mapping run on (NULL: the context's default stream), and
// libavutil's own state.
typedef struct FTCUDADeviceContext {
    void *cuda_ctx;
    void *stream;
    void *internal;
} FTCUDADeviceContext;
static inline FTCUDADeviceContext *ft_cuda_device_context(AVHWDeviceContext *device) {
    return (FTCUDADeviceContext *)device->hwctx;
}

// Swift cannot import function-like or expression macros; these wrappers exist only
// to expose those macro values under a callable name.

static inline int ft_averror(int posix_errno) { return AVERROR(posix_errno); }
static inline int ft_averror_eof(void) { return AVERROR_EOF; }
static inline int ft_averror_invaliddata(void) { return AVERROR_INVALIDDATA; }
static inline int ft_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline int ft_averror_enomem(void) { return AVERROR(ENOMEM); }
static inline int ft_averror_patchwelcome(void) { return AVERROR_PATCHWELCOME; }
static inline int64_t ft_av_nopts_value(void) { return AV_NOPTS_VALUE; }
static inline int ft_averror_exit(void) { return AVERROR_EXIT; }
// Names the calling thread (what `top -H` shows; at most 15 bytes): the Containers target's
// demuxing and pulling threads. prctl is variadic, which Swift cannot call.
static inline void ft_name_this_thread(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }
static inline int ft_averror_protocol_not_found(void) { return AVERROR_PROTOCOL_NOT_FOUND; }
static inline int ft_averror_demuxer_not_found(void) { return AVERROR_DEMUXER_NOT_FOUND; }
static inline int ft_averror_stream_not_found(void) { return AVERROR_STREAM_NOT_FOUND; }
static inline int ft_averror_http_not_found(void) { return AVERROR_HTTP_NOT_FOUND; }
static inline int ft_averror_http_forbidden(void) { return AVERROR_HTTP_FORBIDDEN; }
static inline int ft_averror_http_unauthorized(void) { return AVERROR_HTTP_UNAUTHORIZED; }
static inline int ft_averror_http_other_4xx(void) { return AVERROR_HTTP_OTHER_4XX; }
static inline int ft_averror_http_server_error(void) { return AVERROR_HTTP_SERVER_ERROR; }

#endif
