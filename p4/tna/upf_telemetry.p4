// Peregrine UPF with its telemetry for Tofino 1 (TNA): the UPF ingress of tna/upf.p4 plus
// the fridge (TCP handshake delays) in ingress, and in egress Kestrel's per-queue sketches
// and the DTA reporter. Entries from `peregrine-p4 entries` (upf_telemetry.bfrt.json).
//
// Assumptions beyond tna/upf.p4's (see p4/README.md): egress is not bypassed; every packet
// leaving ingress carries 17 bytes of bridged metadata (pg_bridge_h), so the CPU port's
// packets pass through egress too (which strips it); DTA copies use mirror type 1 and the
// egress-to-egress mirror session written into `$mirror.cfg`.
#include <core.p4>
#include <tna.p4>

#define PG_TELEMETRY 1

#include "../include/headers.p4"
#include "../include/tna_upf_ingress.p4"
#include "../include/kestrel.p4"
#include "../include/dta_report.p4"

parser PgEgressParser(packet_in pkt, out pg_egress_headers_t eh, out pg_egress_meta_t em,
                      out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        em.k_on = 0;
        em.k_lat_bin = 0;
        em.dta_on = 0;
        em.dta_opcode = 0;
        transition select(pkt.lookahead<bit<8>>()) {
            PG_BRIDGE_KIND_PACKET: parse_bridge;
            PG_BRIDGE_KIND_DTA: parse_dta_copy;
            default: accept;
        }
    }

    state parse_bridge {
        pkt.extract(eh.bridge);
        transition accept;
    }

    // A mirrored copy, truncated to the mirror header and the Ethernet header.
    state parse_dta_copy {
        pkt.extract(eh.dta_mirror);
        pkt.extract(eh.dta_ethernet);
        transition accept;
    }
}

control PgEgress(inout pg_egress_headers_t eh, inout pg_egress_meta_t em,
                 in egress_intrinsic_metadata_t eg_intr_md,
                 in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                 inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                 inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    PgKestrel() kestrel;
    PgDtaSample() dta_sample;
    PgDtaBuild() dta_build;

    action dta_set(bit<10> session, bit<8> redundancy, bit<32> list_id, bit<32> sample_last,
                   bit<48> src_mac, bit<48> dst_mac, bit<32> src_ip, bit<32> dst_ip,
                   bit<16> src_port) {
        em.dta_on = 1;
        em.dta_session = session;
        em.dta_redundancy = redundancy;
        em.dta_list_id = list_id;
        em.dta_sample_last = sample_last;
        em.dta_src_mac = src_mac;
        em.dta_dst_mac = dst_mac;
        em.dta_src_ip = src_ip;
        em.dta_dst_ip = dst_ip;
        em.dta_src_port = src_port;
    }
    action dta_off() { em.dta_on = 0; }

    // The reporter's settings ([dta]); no entry: no reports, DTA copies dropped.
    table dta_config {
        actions = { dta_set; dta_off; }
        default_action = dta_off();
        size = 1;
    }

    apply {
        em.now = eg_prsr_md.global_tstamp[31:0];
#ifdef PG_KESTREL_ONE_BANK
        em.bank = 0;
#else
        em.bank = eg_prsr_md.global_tstamp[PG_KESTREL_WINDOW_SHIFT:PG_KESTREL_WINDOW_SHIFT];
#endif
        dta_config.apply();
        if (eh.bridge.isValid()) {
            em.sojourn = em.now - eh.bridge.ig_tstamp;
            if (eh.bridge.kestrel == 1) {
                kestrel.apply(eh, em);
            }
            if (eh.bridge.dta == 1 && em.dta_on == 1) {
                dta_sample.apply(eh, em, eg_dprsr_md);
            }
            eh.bridge.setInvalid();
        } else if (eh.dta_mirror.isValid()) {
            if (em.dta_on == 1) {
                dta_build.apply(eh, em);
            } else {
                eg_dprsr_md.drop_ctl = 1;
            }
        }
    }
}

control PgEgressDeparser(packet_out pkt, inout pg_egress_headers_t eh, in pg_egress_meta_t em,
                         in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Mirror(PG_MIRROR_TYPE_DTA) dta_mirror;
    Checksum() dta_ipv4_csum;
    Checksum() dta_udp_csum;

    apply {
        if (eg_dprsr_md.mirror_type == PG_MIRROR_TYPE_DTA) {
            dta_mirror.emit<pg_dta_mirror_h>(em.dta_session,
                {PG_BRIDGE_KIND_DTA, em.dta_opcode, em.dta_key, em.dta_data});
        }
        if (eh.dta_ipv4.isValid()) {
            eh.dta_ipv4.hdr_checksum = dta_ipv4_csum.update({
                eh.dta_ipv4.version, eh.dta_ipv4.ihl, eh.dta_ipv4.dscp_ecn,
                eh.dta_ipv4.total_len, eh.dta_ipv4.identification, eh.dta_ipv4.flags,
                eh.dta_ipv4.frag_offset, eh.dta_ipv4.ttl, eh.dta_ipv4.protocol,
                eh.dta_ipv4.src_addr, eh.dta_ipv4.dst_addr});
        }
        // RFC 768 over the pseudo-header and the whole datagram (headers only: the report
        // has no payload). The deparser's checksum engine adds a header's fields only when
        // the header is valid, so one list covers Key-Write and Append (Append, 8 bytes,
        // first: leaving it out keeps Key-Write's byte parity); a sum of 0 is sent as 0xffff,
        // as the software writes it.
        if (eh.dta_udp.isValid()) {
            eh.dta_udp.checksum = dta_udp_csum.update({
                eh.dta_ipv4.src_addr, eh.dta_ipv4.dst_addr, 8w0, eh.dta_ipv4.protocol,
                eh.dta_udp.len,
                eh.dta_udp.src_port, eh.dta_udp.dst_port, eh.dta_udp.len,
                eh.dta_base.opcode, eh.dta_base.seqnum, eh.dta_base.immediate,
                eh.dta_base.retransmit, eh.dta_base.reserved,
                eh.dta_append.list_id, eh.dta_append.data,
                eh.dta_key_write.redundancy, eh.dta_key_write.key, eh.dta_key_write.data},
                true);
        }
        pkt.emit(eh);
    }
}

Pipeline(PgIngressParser(), PgIngress(), PgIngressDeparser(),
         PgEgressParser(), PgEgress(), PgEgressDeparser()) pipe;

Switch(pipe) main;
