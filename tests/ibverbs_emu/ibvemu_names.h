/* SPDX-License-Identifier: MIT */
/*
 * The verbs libibverbs exports twice: a hidden IBVERBS_1.0 version (the
 * 2006 ABI, stubbed in ibvemu_compat.c) and the default IBVERBS_1.1 one.
 * GNU ld gives a name listed in two version nodes the right default only
 * when both versions come from .symver aliases, so this library defines
 * them under internal names, each followed by QPS_IBVEMU_DEFAULT
 * (ibvemu.h) binding it to ibv_<name>@@IBVERBS_1.1. Included before
 * verbs.h, so that its prototypes declare the internal names and every
 * call here reaches them.
 */
#ifndef QPS_IBVEMU_NAMES_H
#define QPS_IBVEMU_NAMES_H

/* Also query_port and reg_mr, which verbs.h defines as macros: see
 * ibvemu.h. */

#define ibv_ack_async_event	qps_ibvemu_ack_async_event
#define ibv_ack_cq_events	qps_ibvemu_ack_cq_events
#define ibv_alloc_pd		qps_ibvemu_alloc_pd
#define ibv_attach_mcast	qps_ibvemu_attach_mcast
#define ibv_close_device	qps_ibvemu_close_device
#define ibv_create_ah		qps_ibvemu_create_ah
#define ibv_create_cq		qps_ibvemu_create_cq
#define ibv_create_qp		qps_ibvemu_create_qp
#define ibv_create_srq		qps_ibvemu_create_srq
#define ibv_dealloc_pd		qps_ibvemu_dealloc_pd
#define ibv_dereg_mr		qps_ibvemu_dereg_mr
#define ibv_destroy_ah		qps_ibvemu_destroy_ah
#define ibv_destroy_cq		qps_ibvemu_destroy_cq
#define ibv_destroy_qp		qps_ibvemu_destroy_qp
#define ibv_destroy_srq		qps_ibvemu_destroy_srq
#define ibv_detach_mcast	qps_ibvemu_detach_mcast
#define ibv_free_device_list	qps_ibvemu_free_device_list
#define ibv_get_async_event	qps_ibvemu_get_async_event
#define ibv_get_cq_event	qps_ibvemu_get_cq_event
#define ibv_get_device_guid	qps_ibvemu_get_device_guid
#define ibv_get_device_list	qps_ibvemu_get_device_list
#define ibv_get_device_name	qps_ibvemu_get_device_name
#define ibv_modify_qp		qps_ibvemu_modify_qp
#define ibv_modify_srq		qps_ibvemu_modify_srq
#define ibv_open_device		qps_ibvemu_open_device
#define ibv_query_device	qps_ibvemu_query_device
#define ibv_query_gid		qps_ibvemu_query_gid
#define ibv_query_pkey		qps_ibvemu_query_pkey
#define ibv_query_qp		qps_ibvemu_query_qp
#define ibv_query_srq		qps_ibvemu_query_srq
#define ibv_resize_cq		qps_ibvemu_resize_cq

#endif /* QPS_IBVEMU_NAMES_H */
