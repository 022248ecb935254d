/* SPDX-License-Identifier: MIT */
/*
 * The compiled XDP program (xdp_prog.bpf.c), as bytes linked into the
 * library: the build generates their definition (bin2c.cmake).
 */
#ifndef QPS_XDP_OBJ_H
#define QPS_XDP_OBJ_H

#include <stddef.h>

extern const unsigned char qps_xdp_prog_obj[];
extern const size_t qps_xdp_prog_obj_len;

#endif /* QPS_XDP_OBJ_H */
