/*
 * Peregrine DPDK shim: the DPDK 22.11 headers we bind, plus real (exported) symbols for the
 * static-inline DPDK functions Rust needs. Every function here is named pg_* and is a thin
 * wrapper with exactly the semantics of the DPDK function it names.
 *
 * This header is also the single input of bindgen (see build.rs).
 */
#ifndef PEREGRINE_DPDK_SHIM_H
#define PEREGRINE_DPDK_SHIM_H

#include <stdint.h>
#include <stddef.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include <rte_version.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_ethdev.h>
#include <rte_bus_vdev.h>

/* ---- EAL ---- */

/* rte_eal_init(), but the calling thread's CPU affinity is restored afterwards (EAL pins the
 * calling thread to the main lcore; Peregrine pins its own workers). */
int pg_eal_init(int argc, char **argv);

/* rte_errno of the calling thread (it is a per-thread TLS variable in DPDK). */
int pg_errno(void);

/* rte_lcore_id(): LCORE_ID_ANY (UINT32_MAX) in an unregistered non-EAL thread. */
unsigned int pg_lcore_id(void);

uint64_t pg_get_tsc_cycles(void);
uint64_t pg_get_tsc_hz(void);

/* ---- mempool / mbuf ---- */

unsigned int pg_mempool_avail_count(const struct rte_mempool *mp);
unsigned int pg_mempool_in_use_count(const struct rte_mempool *mp);

struct rte_mbuf *pg_pktmbuf_alloc(struct rte_mempool *mp);
int pg_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int count);
void pg_pktmbuf_free(struct rte_mbuf *m);
void pg_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int count);

/* Pointer to the first byte of packet data of (the first segment of) m: rte_pktmbuf_mtod. */
void *pg_pktmbuf_mtod(struct rte_mbuf *m);
uint16_t pg_pktmbuf_headroom(const struct rte_mbuf *m);
/* Tailroom of the last segment, like rte_pktmbuf_tailroom(rte_pktmbuf_lastseg(m)). */
uint16_t pg_pktmbuf_tailroom(const struct rte_mbuf *m);
char *pg_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len);
char *pg_pktmbuf_adj(struct rte_mbuf *m, uint16_t len);
char *pg_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
int pg_pktmbuf_trim(struct rte_mbuf *m, uint16_t len);

/* Field getters (layout-independent access for callers that prefer it). */
uint32_t pg_pktmbuf_pkt_len(const struct rte_mbuf *m);
uint16_t pg_pktmbuf_data_len(const struct rte_mbuf *m);
uint16_t pg_pktmbuf_port(const struct rte_mbuf *m);
uint32_t pg_pktmbuf_rss(const struct rte_mbuf *m);
uint16_t pg_pktmbuf_nb_segs(const struct rte_mbuf *m);
uint64_t pg_pktmbuf_ol_flags(const struct rte_mbuf *m);

/* ---- ethdev fast path ---- */

uint16_t pg_eth_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **rx_pkts,
                         uint16_t nb_pkts);
uint16_t pg_eth_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **tx_pkts,
                         uint16_t nb_pkts);

#endif /* PEREGRINE_DPDK_SHIM_H */
