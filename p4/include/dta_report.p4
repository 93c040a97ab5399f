// The DTA reporter (Langlet et al., "Direct Telemetry Access", section 4 and Figure 4) in
// the egress of the TNA telemetry program: reports built by egress mirroring, byte for byte
// what dataplane/wire/src/dta writes (Ethernet / IPv4 / UDP to 40040 / the 3-byte
// NACK-tracking base header / one sub-header), the software reporter's `variant =
// "tracked"`:
// - Key-Write (N = `dta.sojourn_redundancy`, K = 1): key = CRC-32 of the user 5-tuple, data =
//   the packet's sojourn (ns), for one packet in `dta.sojourn_sample`;
// - Append (list `dta.drops_list`): the TEID of every packet in Kestrel's diagnostic latency
//   bin (bin 7, the tail), where the software appends drop events (the switch's drops
//   happen in ingress, before any of this).
// A report starts as an egress-to-egress mirror of the packet: the deparser prepends
// pg_dta_mirror_h (what to report); the mirror session (`$mirror.cfg`, generated) sends the
// copy to the collector's port truncated to that header and the Ethernet header
// (PG_DTA_MIRROR_TRUNC bytes); back in egress the copy becomes the report.
#ifndef PG_DTA_REPORT_P4
#define PG_DTA_REPORT_P4

#include "headers.p4"

const MirrorType_t PG_MIRROR_TYPE_DTA = 3w1;

// Original packets: whether to report, and what.
control PgDtaSample(inout pg_egress_headers_t eh, inout pg_egress_meta_t em,
                    inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    // One in dta_sample_last + 1 packets fires (the software's `sojourn_sample`).
    Register<bit<32>, bit<32>>(1, 0) dta_sample_ctr;
    RegisterAction<bit<32>, bit<32>, bit<1>>(dta_sample_ctr) dta_sample_next = {
        void apply(inout bit<32> v, out bit<1> fire) {
            if (v >= em.dta_sample_last) {
                v = 0;
                fire = 1;
            } else {
                v = v + 1;
                fire = 0;
            }
        }
    };

    apply {
        if (em.k_on == 1 && em.k_lat_bin == PG_KESTREL_TAIL_BIN) {
            em.dta_opcode = PG_DTA_OP_APPEND;
            em.dta_key = 0;
            em.dta_data = eh.bridge.teid;
            eg_dprsr_md.mirror_type = PG_MIRROR_TYPE_DTA;
        } else if (dta_sample_next.execute(0) == 1) {
            em.dta_opcode = PG_DTA_OP_KEY_WRITE;
            em.dta_key = eh.bridge.flow_hash;
            em.dta_data = em.sojourn;
            eg_dprsr_md.mirror_type = PG_MIRROR_TYPE_DTA;
        }
    }
}

// A mirrored copy (pg_dta_mirror_h + the packet's Ethernet header) becomes the report.
control PgDtaBuild(inout pg_egress_headers_t eh, inout pg_egress_meta_t em) {
    // The base header's sequence number: one per report, from 0 (the software's `seq`).
    Register<bit<8>, bit<32>>(1, 0) dta_seq;
    RegisterAction<bit<8>, bit<32>, bit<8>>(dta_seq) dta_seq_next = {
        void apply(inout bit<8> v, out bit<8> r) {
            r = v;
            v = v + 1;
        }
    };

    apply {
        eh.dta_ethernet.dst_addr = em.dta_dst_mac;
        eh.dta_ethernet.src_addr = em.dta_src_mac;
        eh.dta_ethernet.ether_type = PG_ETHERTYPE_IPV4;
        // As dta::emit_frame: TTL 64, DF, identification 0, DSCP/ECN 0.
        eh.dta_ipv4.setValid();
        eh.dta_ipv4.version = 4;
        eh.dta_ipv4.ihl = 5;
        eh.dta_ipv4.dscp_ecn = 0;
        eh.dta_ipv4.identification = 0;
        eh.dta_ipv4.flags = 3w2;
        eh.dta_ipv4.frag_offset = 0;
        eh.dta_ipv4.ttl = PG_OUTER_TTL;
        eh.dta_ipv4.protocol = PG_PROTO_UDP;
        eh.dta_ipv4.hdr_checksum = 0;
        eh.dta_ipv4.src_addr = em.dta_src_ip;
        eh.dta_ipv4.dst_addr = em.dta_dst_ip;
        eh.dta_udp.setValid();
        eh.dta_udp.src_port = em.dta_src_port;
        eh.dta_udp.dst_port = PG_DTA_REPORT_PORT;
        eh.dta_udp.checksum = 0;
        eh.dta_base.setValid();
        eh.dta_base.opcode = eh.dta_mirror.opcode;
        eh.dta_base.seqnum = dta_seq_next.execute(0);
        eh.dta_base.immediate = 0;
        eh.dta_base.retransmit = 0;
        eh.dta_base.reserved = 0;
        if (eh.dta_mirror.opcode == PG_DTA_OP_KEY_WRITE) {
            eh.dta_key_write.setValid();
            eh.dta_key_write.redundancy = em.dta_redundancy;
            eh.dta_key_write.key = eh.dta_mirror.key;
            eh.dta_key_write.data = eh.dta_mirror.data;
            eh.dta_ipv4.total_len = PG_DTA_KEY_WRITE_FRAME - PG_ETH_HEADER_LEN;
            eh.dta_udp.len = PG_DTA_KEY_WRITE_FRAME - (PG_ETH_HEADER_LEN + PG_IPV4_HEADER_LEN);
        } else {
            eh.dta_append.setValid();
            eh.dta_append.list_id = em.dta_list_id;
            eh.dta_append.data = eh.dta_mirror.data;
            eh.dta_ipv4.total_len = PG_DTA_APPEND_FRAME - PG_ETH_HEADER_LEN;
            eh.dta_udp.len = PG_DTA_APPEND_FRAME - (PG_ETH_HEADER_LEN + PG_IPV4_HEADER_LEN);
        }
        eh.dta_mirror.setInvalid();
    }
}

#endif // PG_DTA_REPORT_P4
