#ifndef FRAMETAP_CTURBOJPEG_SHIM_H
#define FRAMETAP_CTURBOJPEG_SHIM_H
#include <turbojpeg.h>
#endif
