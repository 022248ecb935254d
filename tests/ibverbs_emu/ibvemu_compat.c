// SPDX-License-Identifier: MIT
/*
 * The exported symbols this device does not implement, each failing the
 * way its caller expects (NULL or -1 with errno, or an errno return), and
 * the hidden IBVERBS_1.0 versions of the 2006 ABI.
 *
 * Which ones exist is libibverbs.map's business (gen-map.sh): the dynamic
 * linker must find every symbol and version that perftest, librdmacm,
 * libmlx5 and libefa import, even those no code path here reaches.
 */
#include "ibvemu.h"

#include <errno.h>
#include <stdarg.h>

/*
 * IBVERBS_PRIVATE_34: the provider interface of driver.h (not installed).
 * A provider library calls these only for a device it drives, and this
 * library never loads providers, so no caller reaches them; libmlx5 and
 * libefa still import them. Each takes no parameter here: on the SysV
 * ABIs a callee that reads no argument is called correctly whatever the
 * caller passes, and a prototype with the real struct types would need
 * driver.h.
 */
#define QPS_IBVEMU_CMD_STUB(name) \
	int ibv_cmd_##name(void); \
	int ibv_cmd_##name(void) \
	{ \
		return EOPNOTSUPP; \
	}

QPS_IBVEMU_CMD_STUB(advise_mr)
QPS_IBVEMU_CMD_STUB(alloc_dm)
QPS_IBVEMU_CMD_STUB(alloc_mw)
QPS_IBVEMU_CMD_STUB(alloc_pd)
QPS_IBVEMU_CMD_STUB(attach_mcast)
QPS_IBVEMU_CMD_STUB(close_xrcd)
QPS_IBVEMU_CMD_STUB(create_ah)
QPS_IBVEMU_CMD_STUB(create_counters)
QPS_IBVEMU_CMD_STUB(create_cq)
QPS_IBVEMU_CMD_STUB(create_cq_ex)
QPS_IBVEMU_CMD_STUB(create_flow)
QPS_IBVEMU_CMD_STUB(create_flow_action_esp)
QPS_IBVEMU_CMD_STUB(create_qp)
QPS_IBVEMU_CMD_STUB(create_qp_ex)
QPS_IBVEMU_CMD_STUB(create_qp_ex2)
QPS_IBVEMU_CMD_STUB(create_rwq_ind_table)
QPS_IBVEMU_CMD_STUB(create_srq)
QPS_IBVEMU_CMD_STUB(create_srq_ex)
QPS_IBVEMU_CMD_STUB(create_wq)
QPS_IBVEMU_CMD_STUB(dealloc_mw)
QPS_IBVEMU_CMD_STUB(dealloc_pd)
QPS_IBVEMU_CMD_STUB(dereg_mr)
QPS_IBVEMU_CMD_STUB(destroy_ah)
QPS_IBVEMU_CMD_STUB(destroy_counters)
QPS_IBVEMU_CMD_STUB(destroy_cq)
QPS_IBVEMU_CMD_STUB(destroy_flow)
QPS_IBVEMU_CMD_STUB(destroy_flow_action)
QPS_IBVEMU_CMD_STUB(destroy_qp)
QPS_IBVEMU_CMD_STUB(destroy_rwq_ind_table)
QPS_IBVEMU_CMD_STUB(destroy_srq)
QPS_IBVEMU_CMD_STUB(destroy_wq)
QPS_IBVEMU_CMD_STUB(detach_mcast)
QPS_IBVEMU_CMD_STUB(free_dm)
QPS_IBVEMU_CMD_STUB(get_context)
QPS_IBVEMU_CMD_STUB(modify_cq)
QPS_IBVEMU_CMD_STUB(modify_flow_action_esp)
QPS_IBVEMU_CMD_STUB(modify_qp)
QPS_IBVEMU_CMD_STUB(modify_qp_ex)
QPS_IBVEMU_CMD_STUB(modify_srq)
QPS_IBVEMU_CMD_STUB(modify_wq)
QPS_IBVEMU_CMD_STUB(open_qp)
QPS_IBVEMU_CMD_STUB(open_xrcd)
QPS_IBVEMU_CMD_STUB(poll_cq)
QPS_IBVEMU_CMD_STUB(post_recv)
QPS_IBVEMU_CMD_STUB(post_send)
QPS_IBVEMU_CMD_STUB(post_srq_recv)
QPS_IBVEMU_CMD_STUB(query_context)
QPS_IBVEMU_CMD_STUB(query_device_any)
QPS_IBVEMU_CMD_STUB(query_mr)
QPS_IBVEMU_CMD_STUB(query_port)
QPS_IBVEMU_CMD_STUB(query_qp)
QPS_IBVEMU_CMD_STUB(query_srq)
QPS_IBVEMU_CMD_STUB(read_counters)
QPS_IBVEMU_CMD_STUB(reg_dm_mr)
QPS_IBVEMU_CMD_STUB(reg_dmabuf_mr)
QPS_IBVEMU_CMD_STUB(reg_mr)
QPS_IBVEMU_CMD_STUB(req_notify_cq)
QPS_IBVEMU_CMD_STUB(rereg_mr)
QPS_IBVEMU_CMD_STUB(resize_cq)

int execute_ioctl(void);
int execute_ioctl(void)
{
	return EOPNOTSUPP;
}

/* A pure helper of the ioctl command builder: the count is unchanged. */
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link);
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link)
{
	(void)link;
	return num_attrs;
}

void __verbs_log(void *ctx, uint32_t level, const char *fmt, ...);
void __verbs_log(void *ctx, uint32_t level, const char *fmt, ...)
{
	(void)ctx;
	(void)level;
	(void)fmt;
}

void *_verbs_init_and_alloc_context(void);
void *_verbs_init_and_alloc_context(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

void *verbs_open_device(void);
void *verbs_open_device(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

void verbs_init_cq(void);
void verbs_init_cq(void)
{
}

void verbs_set_ops(void);
void verbs_set_ops(void)
{
}

void verbs_uninit_context(void);
void verbs_uninit_context(void)
{
}

int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev,
			      const char *fnfmt, ...);
int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev,
			      const char *fnfmt, ...)
{
	(void)buf;
	(void)size;
	(void)sysfs_dev;
	(void)fnfmt;
	errno = EOPNOTSUPP;
	return -1;
}

bool verbs_allow_disassociate_destroy;

/* libmlx5 and libefa register their driver from a constructor: accepted
 * and ignored, since the device list is ours alone. */
void verbs_register_driver_34(const void *ops);
void verbs_register_driver_34(const void *ops)
{
	(void)ops;
}

/* 0 = RoCE v1, 1 = RoCE v2 (enum ibv_gid_type_sysfs of driver.h). */
int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port,
		       unsigned int index, int *type);
int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port,
		       unsigned int index, int *type)
{
	if (!qps_ibvemu_is_ours(ctx) || port != 1 || !type ||
	    index >= QPS_GID_TABLE_LEN) {
		errno = EINVAL;
		return -1;
	}
	*type = index == QPS_GID_ROCE_V1_LL ? 0 : 1;
	return 0;
}

/* --- public verbs without an emu counterpart ---------------------------- */

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	(void)pd;
	(void)attr;
	errno = EOPNOTSUPP;
	return NULL;
}
QPS_IBVEMU_DEFAULT(create_srq);

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	(void)srq;
	(void)attr;
	(void)mask;
	return EOPNOTSUPP;
}
QPS_IBVEMU_DEFAULT(modify_srq);

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	(void)srq;
	(void)attr;
	return EOPNOTSUPP;
}
QPS_IBVEMU_DEFAULT(query_srq);

int ibv_destroy_srq(struct ibv_srq *srq)
{
	(void)srq;
	return EOPNOTSUPP;
}
QPS_IBVEMU_DEFAULT(destroy_srq);

int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	(void)cq;
	(void)cqe;
	return EOPNOTSUPP;
}
QPS_IBVEMU_DEFAULT(resize_cq);

/* The old MR stays valid. */
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
		 size_t length, int access)
{
	(void)mr;
	(void)flags;
	(void)pd;
	(void)addr;
	(void)length;
	(void)access;
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_INPUT;
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				 size_t length, uint64_t iova, int fd,
				 int access)
{
	(void)pd;
	(void)offset;
	(void)length;
	(void)iova;
	(void)fd;
	(void)access;
	errno = EOPNOTSUPP;
	return NULL;
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	errno = EOPNOTSUPP;
	return NULL;
}

struct ibv_pd *ibv_import_pd(struct ibv_context *ctx, uint32_t pd_handle)
{
	(void)ctx;
	(void)pd_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd;
	(void)mr_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
}

struct ibv_dm *ibv_import_dm(struct ibv_context *ctx, uint32_t dm_handle)
{
	(void)ctx;
	(void)dm_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	return EOPNOTSUPP;
}

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	return EOPNOTSUPP;
}

/* Nothing is promised about placement order: 0 is the safe answer. */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
			       uint32_t flags)
{
	(void)qp;
	(void)op;
	(void)flags;
	return 0;
}

/* No QP is created with send ops flags (create_qp_ex refuses them). */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	(void)qp;
	errno = EOPNOTSUPP;
	return NULL;
}

/* --- versions --------------------------------------------------------- */


/* ibv_register_driver@IBVERBS_1.1, for providers of before 2017: accepted
 * and ignored like verbs_register_driver_34. */
void qps_ibvemu_register_driver(const char *name, void *init);
void qps_ibvemu_register_driver(const char *name, void *init)
{
	(void)name;
	(void)init;
}
__asm__(".symver qps_ibvemu_register_driver, ibv_register_driver@IBVERBS_1.1");

/*
 * The IBVERBS_1.0 ABI (struct layouts of 2006, wrapped by rdma-core's
 * compat layer) is not emulated: a binary linked against it gets clean
 * failures. Parameters are not read, hence not declared (see above).
 */
#define QPS_IBVEMU_V10(name, type, body) \
	type qps_ibvemu_v10_##name(void); \
	type qps_ibvemu_v10_##name(void) \
	{ \
		body \
	} \
	__asm__(".symver qps_ibvemu_v10_" #name ", ibv_" #name "@IBVERBS_1.0");

QPS_IBVEMU_V10(alloc_pd, void *, errno = EOPNOTSUPP; return NULL;)
QPS_IBVEMU_V10(create_ah, void *, errno = EOPNOTSUPP; return NULL;)
QPS_IBVEMU_V10(create_cq, void *, errno = EOPNOTSUPP; return NULL;)
QPS_IBVEMU_V10(create_qp, void *, errno = EOPNOTSUPP; return NULL;)
QPS_IBVEMU_V10(create_srq, void *, errno = EOPNOTSUPP; return NULL;)
QPS_IBVEMU_V10(get_device_list, void *, errno = EOPNOTSUPP; return NULL;)
QPS_IBVEMU_V10(get_device_name, void *, errno = EOPNOTSUPP; return NULL;)
QPS_IBVEMU_V10(open_device, void *, errno = EOPNOTSUPP; return NULL;)
QPS_IBVEMU_V10(reg_mr, void *, errno = EOPNOTSUPP; return NULL;)
QPS_IBVEMU_V10(attach_mcast, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(close_device, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(dealloc_pd, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(dereg_mr, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(destroy_ah, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(destroy_cq, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(destroy_qp, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(destroy_srq, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(detach_mcast, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(modify_qp, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(modify_srq, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(query_device, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(query_pkey, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(query_port, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(query_qp, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(query_srq, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(resize_cq, int, return EOPNOTSUPP;)
QPS_IBVEMU_V10(get_async_event, int, errno = EOPNOTSUPP; return -1;)
QPS_IBVEMU_V10(get_cq_event, int, errno = EOPNOTSUPP; return -1;)
QPS_IBVEMU_V10(query_gid, int, errno = EOPNOTSUPP; return -1;)
QPS_IBVEMU_V10(ack_async_event, void, return;)
QPS_IBVEMU_V10(ack_cq_events, void, return;)
QPS_IBVEMU_V10(free_device_list, void, return;)
QPS_IBVEMU_V10(get_device_guid, uint64_t, return 0;)
