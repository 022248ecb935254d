// SPDX-License-Identifier: MIT
/*
 * TPACKET_V2 rings, the geometry shared by TX and RX: frames are a power
 * of two and blocks a whole number of frames (at least a page), so frame i
 * is simply map + i * frame_size.
 */
#include "packet.h"

#include <errno.h>
#include <linux/if_packet.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define PKT_FRAME_MIN 2048u

uint32_t qps_packet_frame_size(uint32_t bytes)
{
	uint32_t s = qps_sw_pow2(bytes);

	return s < PKT_FRAME_MIN ? PKT_FRAME_MIN : s;
}

int qps_packet_ring_setup(int fd, int which, uint32_t frame_size,
			  uint32_t frame_nr, struct qps_packet_ring *ring)
{
	long page = sysconf(_SC_PAGESIZE);
	struct tpacket_req req;
	uint32_t block, per_block;
	int v = TPACKET_V2;
	void *map;

	if (page <= 0)
		page = 4096;
	block = frame_size < (uint32_t)page ? (uint32_t)page : frame_size;
	per_block = block / frame_size;
	frame_nr = (frame_nr + per_block - 1) / per_block * per_block;
	memset(&req, 0, sizeof(req));
	req.tp_block_size = block;
	req.tp_block_nr = frame_nr / per_block;
	req.tp_frame_size = frame_size;
	req.tp_frame_nr = frame_nr;
	if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)) < 0 ||
	    setsockopt(fd, SOL_PACKET, which, &req, sizeof(req)) < 0)
		return -errno;
	map = mmap(NULL, (size_t)block * req.tp_block_nr,
		   PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	ring->map = map;
	ring->map_len = (size_t)block * req.tp_block_nr;
	ring->frame_size = frame_size;
	ring->frame_nr = frame_nr;
	return 0;
}

void qps_packet_ring_unmap(struct qps_packet_ring *ring)
{
	if (ring->map)
		munmap(ring->map, ring->map_len);
	ring->map = NULL;
}
