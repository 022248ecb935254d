// SPDX-License-Identifier: MIT
/*
 * libmlx4.so.1 next to the emulated libibverbs: its direct verbs refuse
 * the emulated device's objects. The real libmlx4 would take our ibv_qp
 * for its own struct mlx4_qp and hand out whatever lies behind it; the
 * verbs provider, seeing a ConnectX-3 part number, dlopens libmlx4 for
 * its direct path and falls back to the generic one on this error.
 */
#include <errno.h>
#include <infiniband/mlx4dv.h>

int mlx4dv_init_obj(struct mlx4dv_obj *obj, uint64_t obj_type)
{
	(void)obj;
	(void)obj_type;
	return EOPNOTSUPP;
}

int mlx4dv_query_device(struct ibv_context *ctx,
			struct mlx4dv_context *attrs_out)
{
	(void)ctx;
	(void)attrs_out;
	return EOPNOTSUPP;
}

struct ibv_qp *mlx4dv_create_qp(struct ibv_context *ctx,
				struct ibv_qp_init_attr_ex *attr,
				struct mlx4dv_qp_init_attr *mlx4_qp_attr)
{
	(void)ctx;
	(void)attr;
	(void)mlx4_qp_attr;
	errno = EOPNOTSUPP;
	return NULL;
}

int mlx4dv_set_context_attr(struct ibv_context *ctx,
			    enum mlx4dv_set_ctx_attr_type type, void *attr)
{
	(void)ctx;
	(void)type;
	(void)attr;
	return EOPNOTSUPP;
}
