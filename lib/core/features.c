/*
 * features.c - rf_features: what this build can do, from the RF_HAVE_*
 * definitions CMake sets for the optional libraries it found (see
 * CMakeLists.txt, RF_WITH_*). The Python binding lists them
 * (ringfeed.features()) and names what is missing at import.
 */
#include "ringfeed.h"

/* Each name with its leading space; the string starts past the first one. */
static const char features[] = " jpeg"
#ifdef RF_HAVE_SPNG
                               " png"
#endif
#ifdef RF_HAVE_DEFLATE
                               " deflate"
#endif
#ifdef RF_HAVE_WEBP
                               " webp"
#endif
                               " bmp pnm"
#ifdef RF_HAVE_CURL
                               " remote"
#endif
#ifdef RF_HAVE_URING
                               " io_uring"
#endif
#ifdef RF_HAVE_CUDA
                               " cuda"
#endif
    ;

const char *rf_features(void)
{
    return features + 1;
}
