/* shim.h - declarations shared by tables.c and the cgo preamble. */
#ifndef METAROCE_NET_SHIM_H
#define METAROCE_NET_SHIM_H
#include "metaroce/nccl_net.h"

/* MR_INTERNAL keeps a helper out of the library's dynamic symbol table:
 * only the ncclNetPlugin_v* tables and metaroce_* entry points are the
 * plugin's interface, and a generic name exported from a preloaded library
 * would interpose on a same-named symbol of the process. */
#define MR_INTERNAL __attribute__((visibility("hidden")))

/* mr_log forwards a preformatted message to NCCL's variadic logger. */
MR_INTERNAL void mr_log(ncclDebugLogger_t fn, int level, unsigned long flags, const char* msg);

/* mr_set_logger records the logger NCCL passed to init (NULL keeps stderr). */
MR_INTERNAL void mr_set_logger(ncclDebugLogger_t fn);
MR_INTERNAL ncclDebugLogger_t mr_get_logger(void);
#endif
