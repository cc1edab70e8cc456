/* shim.h - declarations shared by tables.c and the cgo preamble. */
#ifndef METAROCE_NET_SHIM_H
#define METAROCE_NET_SHIM_H
#include "metaroce/nccl_net.h"

/* mr_log forwards a preformatted message to NCCL's variadic logger. */
void mr_log(ncclDebugLogger_t fn, int level, unsigned long flags, const char* msg);

/* mr_set_logger records the logger NCCL passed to init (NULL keeps stderr). */
void mr_set_logger(ncclDebugLogger_t fn);
ncclDebugLogger_t mr_get_logger(void);
#endif
