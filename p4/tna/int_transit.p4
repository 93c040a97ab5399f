// Peregrine INT transit for Tofino 1 (TNA): the stand-alone `int` pipeline with the transit
// role (IOAM pre-allocated trace, p4/include/int_transit.p4) followed by IPv4/IPv6 routing
// with TTL / hop-limit decrement (the Rust l3fwd stage). Seed-encoded INT, sources and sinks
// stay in software (see p4/README.md).
//
// Assumptions: ingress-only; the trace is in a Hop-by-Hop header that starts with PadN(0)
// (what our source and Linux write); a control plane should refresh int_time every second
// (no such agent exists yet: until then timestamps count from the switch clock's epoch).
#include <core.p4>
#include <tna.p4>

#include "../include/headers.p4"
#include "../include/parser.p4"
#include "../include/int_transit.p4"
#include "../include/route.p4"

parser PgIngressParser(packet_in pkt, out pg_headers_t hdr, out pg_meta_t md,
                       out ingress_intrinsic_metadata_t ig_intr_md) {
    PgPacketParser() packet_parser;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        md.ioam_ok = 0;
        md.routed = 0;
        packet_parser.apply(pkt, hdr, md);
        transition accept;
    }
}

control PgIngress(inout pg_headers_t hdr, inout pg_meta_t md,
                  in ingress_intrinsic_metadata_t ig_intr_md,
                  in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                  inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                  inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    PgIntTransit() int_transit;
    PgRoute() route;
    Counter<bit<64>, bit<8>>(16, CounterType_t.PACKETS) drop_counter;

    apply {
        md.now_ns = ig_prsr_md.global_tstamp;
        md.verdict = PG_V_FORWARD;
        int_transit.apply(hdr, md);
        if (hdr.ipv6.isValid()) {
            md.route_v6 = hdr.ipv6.dst_addr;
            md.route_is_v6 = 1;
        } else if (hdr.ipv4.isValid()) {
            md.route_v4 = hdr.ipv4.dst_addr;
            md.route_is_v6 = 0;
        } else {
            md.verdict = PG_V_TO_CPU;
        }
        if (md.verdict == PG_V_FORWARD) {
            route.apply(hdr, md);
            if (md.routed == 0) {
                md.verdict = PG_V_DROP_NO_ROUTE;
            } else if (hdr.ipv6.isValid()) {
                if (hdr.ipv6.hop_limit <= 1) { md.verdict = PG_V_DROP_TTL_EXCEEDED; }
                else { hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1; }
            } else {
                if (hdr.ipv4.ttl <= 1) { md.verdict = PG_V_DROP_TTL_EXCEEDED; }
                else { hdr.ipv4.ttl = hdr.ipv4.ttl - 1; }
            }
        }
        if (md.verdict == PG_V_FORWARD) {
            hdr.vlan.setInvalid();
            ig_tm_md.ucast_egress_port = md.out_port;
        } else if (md.verdict == PG_V_TO_CPU) {
            ig_tm_md.ucast_egress_port = 9w64;
        } else {
            drop_counter.count(md.verdict);
            ig_dprsr_md.drop_ctl = 1;
        }
        ig_tm_md.bypass_egress = 1;
    }
}

control PgIngressDeparser(packet_out pkt, inout pg_headers_t hdr, in pg_meta_t md,
                          in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_csum;

    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_csum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp_ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
                hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        }
        pkt.emit(hdr);
    }
}

parser PgEgressParser(packet_in pkt, out pg_egress_headers_t eh, out pg_egress_meta_t em,
                      out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        transition accept;
    }
}

control PgEgress(inout pg_egress_headers_t eh, inout pg_egress_meta_t em,
                 in egress_intrinsic_metadata_t eg_intr_md,
                 in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                 inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                 inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply { }
}

control PgEgressDeparser(packet_out pkt, inout pg_egress_headers_t eh, in pg_egress_meta_t em,
                         in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply { pkt.emit(eh); }
}

Pipeline(PgIngressParser(), PgIngress(), PgIngressDeparser(),
         PgEgressParser(), PgEgress(), PgEgressDeparser()) pipe;

Switch(pipe) main;
