// Peregrine UPF for Tofino 1 (TNA): GTP-U termination and encapsulation under PFCP rules
// compiled by the Rust rule compiler (entries from `peregrine-p4 entries`). The packet path
// is p4/include/upf.p4, shared with the v1model twin; this file binds it to TNA externs.
//
// Assumptions (see p4/README.md): ingress-only processing (egress bypassed); CPU port 64
// (pipe 0 PCIe port on Tofino 1; change PG_CPU_PORT for another port); packets to the CPU
// are sent as received and the software UPF handles them; IPv6 outer encapsulation goes to
// the CPU (the outer UDP checksum covers the payload); meters are Tofino byte meters over
// the T-PDU (adjust_byte_count removes the headers in front of it).
#include <core.p4>
#include <tna.p4>

#include "../include/headers.p4"
#include "../include/tna_upf_ingress.p4"

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
