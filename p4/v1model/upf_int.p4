// The v1model twin of the Peregrine UPF with INT transit on N6, for p4c-bm2-ss and BMv2
// simple_switch: the same parser (p4/include/parser.p4), UPF path (upf.p4), routing and
// IOAM transit (int_transit.p4) as the TNA programs, bound to v1model externs. Loaded with
// `peregrine-p4 entries` output (upf_int.bmv2.txt) through simple_switch_CLI. Its limits
// against the Rust dataplane are listed in p4/README.md.
#include <core.p4>
#include <v1model.p4>

#include "../include/headers.p4"

// The port packets for the software path leave on (the differential test captures it).
#define PG_CPU_PORT 9w255
#define PG_COLOR_RED 8w2
#define PG_ENCAP_V6

#define PG_UPF_EXTERNS \
    meter(65536, MeterType.bytes) qer_meter; \
    counter(131072, CounterType.packets) urr_counter; \
    register<bit<32>>(131072) urr_bytes; \
    counter(16, CounterType.packets) drop_counter;

// BMv2 meters count the whole frame (standard_metadata.packet_length), not the T-PDU.
#define PG_METER_EXECUTE(c) qer_meter.execute_meter(md.meter_idx, c)
#define PG_URR_COUNT(i) { \
    urr_counter.count(i); \
    bit<32> urr_b; \
    urr_bytes.read(urr_b, i); \
    urr_bytes.write(i, urr_b + (bit<32>)md.inner_len); }
#define PG_DROP_COUNT(code) drop_counter.count((bit<32>)(code))
// Exactly the Rust flow_port (dataplane/src/upf/emit.rs): multiplicative hash of the
// inner 5-tuple, top 14 bits into 49152..=65535.
#define PG_FLOW_PORT() { \
    bit<64> h = (md.flow_src[63:0] ^ md.flow_src[127:64]) * PG_FLOW_HASH_K; \
    h = (h ^ md.flow_dst[63:0] ^ md.flow_dst[127:64]) * PG_FLOW_HASH_K; \
    h = (h ^ ((bit<64>)md.flow_proto << 32 | (bit<64>)md.flow_sport << 16 \
              | (bit<64>)md.flow_dport)) * PG_FLOW_HASH_K; \
    md.flow_port = PG_FLOW_PORT_BASE | ((bit<16>)(h >> 50) & PG_FLOW_PORT_MASK); }

// Field lists for the IPv6-outer UDP checksum (fields, not headers: v1model checksums take
// bit<W> elements).
#define PG_V6_PSEUDO_UDP \
    hdr.enc_ipv6.src_addr, hdr.enc_ipv6.dst_addr, 16w0, hdr.enc_udp.len, 24w0, PG_PROTO_UDP, \
    hdr.enc_udp.src_port, hdr.enc_udp.dst_port, hdr.enc_udp.len
#define PG_ENC_GTPU \
    hdr.enc_gtpu.version, hdr.enc_gtpu.pt, hdr.enc_gtpu.spare, hdr.enc_gtpu.e, hdr.enc_gtpu.s, \
    hdr.enc_gtpu.pn, hdr.enc_gtpu.msg_type, hdr.enc_gtpu.msg_len, hdr.enc_gtpu.teid, \
    hdr.enc_gtpu_opt.seq, hdr.enc_gtpu_opt.npdu, hdr.enc_gtpu_opt.next_ext, \
    hdr.enc_psc.len, hdr.enc_psc.pdu_type, hdr.enc_psc.flags, hdr.enc_psc.ppp_rqi, \
    hdr.enc_psc.qfi, hdr.enc_psc.next_ext
#define PG_IPV4_ALL(h) \
    h.version, h.ihl, h.dscp_ecn, h.total_len, h.identification, h.flags, h.frag_offset, \
    h.ttl, h.protocol, h.hdr_checksum, h.src_addr, h.dst_addr
#define PG_IPV6_ALL(h) \
    h.version, h.traffic_class, h.flow_label, h.payload_len, h.next_hdr, h.hop_limit, \
    h.src_addr, h.dst_addr

#include "../include/parser.p4"
#include "../include/upf.p4"
#include "../include/int_transit.p4"

parser PgV1Parser(packet_in pkt, out pg_headers_t hdr, inout pg_meta_t md,
                  inout standard_metadata_t std) {
    PgPacketParser() packet_parser;

    state start {
        packet_parser.apply(pkt, hdr, md);
        transition accept;
    }
}

control PgVerifyChecksum(inout pg_headers_t hdr, inout pg_meta_t md) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp_ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control PgIngress(inout pg_headers_t hdr, inout pg_meta_t md, inout standard_metadata_t std) {
    PgIntTransit() int_transit;
    PgUpf() upf;

    apply {
        // BMv2 timestamps are microseconds.
        md.now_ns = std.ingress_global_timestamp * 1000;
        md.csum_err = std.checksum_error == 1;
        md.gate_open = 1;
        // INT transit on N6 traffic (anything that is not GTP-U), before the UPF, as the
        // daemon places it with [int] in the upf pipeline.
        if (!hdr.gtpu.isValid()) {
            int_transit.apply(hdr, md);
        }
        upf.apply(hdr, md);
        if (md.verdict == PG_V_FORWARD) {
            std.egress_spec = md.out_port;
            // Queue 0 is the highest priority in the Rust scheduler; BMv2 serves the
            // highest `priority` first (simple_switch --priority-queues 8).
            std.priority = (bit<3>)(7 - md.qid);
        } else if (md.verdict == PG_V_TO_CPU) {
            std.egress_spec = PG_CPU_PORT;
        } else {
            mark_to_drop(std);
        }
    }
}

control PgEgress(inout pg_headers_t hdr, inout pg_meta_t md, inout standard_metadata_t std) {
    apply { }
}

control PgComputeChecksum(inout pg_headers_t hdr, inout pg_meta_t md) {
    apply {
        update_checksum(hdr.enc_ipv4.isValid(),
            { hdr.enc_ipv4.version, hdr.enc_ipv4.ihl, hdr.enc_ipv4.dscp_ecn,
              hdr.enc_ipv4.total_len, hdr.enc_ipv4.identification, hdr.enc_ipv4.flags,
              hdr.enc_ipv4.frag_offset, hdr.enc_ipv4.ttl, hdr.enc_ipv4.protocol,
              hdr.enc_ipv4.src_addr, hdr.enc_ipv4.dst_addr },
            hdr.enc_ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp_ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.inner_ipv4.isValid(),
            { hdr.inner_ipv4.version, hdr.inner_ipv4.ihl, hdr.inner_ipv4.dscp_ecn,
              hdr.inner_ipv4.total_len, hdr.inner_ipv4.identification, hdr.inner_ipv4.flags,
              hdr.inner_ipv4.frag_offset, hdr.inner_ipv4.ttl, hdr.inner_ipv4.protocol,
              hdr.inner_ipv4.src_addr, hdr.inner_ipv4.dst_addr },
            hdr.inner_ipv4.hdr_checksum, HashAlgorithm.csum16);
        // UDP over an IPv6 outer header (RFC 8200 8.1): pseudo-header, the new headers,
        // the user packet's parsed header(s) and the unparsed payload. One call per shape
        // of what was parsed behind the new headers.
        update_checksum_with_payload(hdr.enc_ipv6.isValid() && hdr.ipv4.isValid(),
            { PG_V6_PSEUDO_UDP, PG_ENC_GTPU, PG_IPV4_ALL(hdr.ipv4) },
            hdr.enc_udp.checksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.enc_ipv6.isValid() && hdr.ipv6.isValid()
                                     && !hdr.hbh.isValid(),
            { PG_V6_PSEUDO_UDP, PG_ENC_GTPU, PG_IPV6_ALL(hdr.ipv6) },
            hdr.enc_udp.checksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.enc_ipv6.isValid() && hdr.inner_ipv4.isValid(),
            { PG_V6_PSEUDO_UDP, PG_ENC_GTPU, PG_IPV4_ALL(hdr.inner_ipv4) },
            hdr.enc_udp.checksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.enc_ipv6.isValid() && hdr.inner_ipv6.isValid(),
            { PG_V6_PSEUDO_UDP, PG_ENC_GTPU, PG_IPV6_ALL(hdr.inner_ipv6) },
            hdr.enc_udp.checksum, HashAlgorithm.csum16);
    }
}

control PgDeparser(packet_out pkt, in pg_headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(PgV1Parser(), PgVerifyChecksum(), PgIngress(), PgEgress(), PgComputeChecksum(),
         PgDeparser()) main;
