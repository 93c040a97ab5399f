/*
 * Peregrine DPDK shim: exported wrappers for DPDK static-inline functions (see shim.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>

#include "shim.h"

int pg_eal_init(int argc, char **argv)
{
	cpu_set_t saved;
	int have_saved =
		pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
	int ret = rte_eal_init(argc, argv);
	if (have_saved) {
		int saved_errno = rte_errno;
		(void)pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
		rte_errno = saved_errno;
	}
	return ret;
}

int pg_errno(void)
{
	return rte_errno;
}

unsigned int pg_lcore_id(void)
{
	return rte_lcore_id();
}




uint64_t pg_get_tsc_cycles(void)
{
	return rte_get_tsc_cycles();
}

uint64_t pg_get_tsc_hz(void)
{
	return rte_get_tsc_hz();
}

unsigned int pg_mempool_avail_count(const struct rte_mempool *mp)
{
	return rte_mempool_avail_count(mp);
}

unsigned int pg_mempool_in_use_count(const struct rte_mempool *mp)
{
	return rte_mempool_in_use_count(mp);
}

struct rte_mbuf *pg_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

int pg_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int count)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, count);
}

void pg_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

void pg_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int count)
{
	rte_pktmbuf_free_bulk(mbufs, count);
}

void *pg_pktmbuf_mtod(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, void *);
}

uint16_t pg_pktmbuf_headroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_headroom(m);
}

uint16_t pg_pktmbuf_tailroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_tailroom(rte_pktmbuf_lastseg((struct rte_mbuf *)m));
}

char *pg_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_prepend(m, len);
}

char *pg_pktmbuf_adj(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_adj(m, len);
}

char *pg_pktmbuf_append(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_append(m, len);
}

int pg_pktmbuf_trim(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_trim(m, len);
}

uint32_t pg_pktmbuf_pkt_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_pkt_len(m);
}

uint16_t pg_pktmbuf_data_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_data_len(m);
}

uint16_t pg_pktmbuf_port(const struct rte_mbuf *m)
{
	return m->port;
}

uint32_t pg_pktmbuf_rss(const struct rte_mbuf *m)
{
	return m->hash.rss;
}

uint16_t pg_pktmbuf_nb_segs(const struct rte_mbuf *m)
{
	return m->nb_segs;
}

uint64_t pg_pktmbuf_ol_flags(const struct rte_mbuf *m)
{
	return m->ol_flags;
}

uint16_t pg_eth_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **rx_pkts,
			 uint16_t nb_pkts)
{
	return rte_eth_rx_burst(port_id, queue_id, rx_pkts, nb_pkts);
}

uint16_t pg_eth_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **tx_pkts,
			 uint16_t nb_pkts)
{
	return rte_eth_tx_burst(port_id, queue_id, tx_pkts, nb_pkts);
}






