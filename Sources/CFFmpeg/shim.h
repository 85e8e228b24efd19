#ifndef FRAMETAP_CFFMPEG_SHIM_H
#define FRAMETAP_CFFMPEG_SHIM_H

#include <libavcodec/avcodec.h>
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

// Swift cannot import function-like or expression macros; these wrappers exist only
// to expose those macro values under a callable name.

static inline int ft_averror(int posix_errno) { return AVERROR(posix_errno); }
static inline int ft_averror_eof(void) { return AVERROR_EOF; }
static inline int ft_averror_invaliddata(void) { return AVERROR_INVALIDDATA; }
static inline int ft_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline int ft_averror_enomem(void) { return AVERROR(ENOMEM); }
static inline int ft_averror_patchwelcome(void) { return AVERROR_PATCHWELCOME; }
static inline int64_t ft_av_nopts_value(void) { return AV_NOPTS_VALUE; }

#endif
