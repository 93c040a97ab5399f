// The TNA ingress of the Peregrine UPF, shared by tna/upf.p4 (egress bypassed) and
// tna/upf_telemetry.p4 (which defines PG_TELEMETRY: the fridge in ingress, bridged metadata
// for Kestrel and the DTA reporter in egress). The packet path is p4/include/upf.p4, shared
// with the v1model twin; this file binds it to TNA externs.
#ifndef PG_TNA_UPF_INGRESS_P4
#define PG_TNA_UPF_INGRESS_P4

#include "headers.p4"

#define PG_CPU_PORT 9w64
#define PG_COLOR_RED 8w3

// Per-URR state: packets in a counter, T-PDU bytes in a register (the counter would count
// the whole frame).
#define PG_UPF_EXTERNS \
    Meter<bit<32>>(65536, MeterType_t.BYTES) qer_meter; \
    Counter<bit<64>, bit<32>>(131072, CounterType_t.PACKETS) urr_counter; \
    Register<bit<32>, bit<32>>(131072, 0) urr_bytes; \
    RegisterAction<bit<32>, bit<32>, bit<32>>(urr_bytes) urr_bytes_add = { \
        void apply(inout bit<32> v) { v = v + (bit<32>)md.inner_len; } \
    }; \
    Counter<bit<64>, bit<8>>(16, CounterType_t.PACKETS) drop_counter; \
    Hash<bit<16>>(HashAlgorithm_t.CRC16) flow_hash;

// Colour-blind (RFC 2698 3), bytes in front of the T-PDU not counted.
// Named arguments: execute(index, color) and execute(index, adjust_byte_count) both take two.
#define PG_METER_EXECUTE(c) c = qer_meter.execute(index = md.meter_idx, \
    adjust_byte_count = (bit<32>)md.hdr_len)
#define PG_URR_COUNT(i) { urr_counter.count(i); urr_bytes_add.execute(i); }
#define PG_DROP_COUNT(code) drop_counter.count(code)
// Tofino cannot multiply 64-bit words: a CRC of the same 5-tuple stands in for the Rust
// multiplicative hash (the port differs from the software's; it is ECMP entropy only).
#define PG_FLOW_PORT() md.flow_port = PG_FLOW_PORT_BASE | (flow_hash.get({md.flow_src, \
    md.flow_dst, md.flow_proto, md.flow_sport, md.flow_dport}) & PG_FLOW_PORT_MASK)

#include "parser.p4"
#include "upf.p4"
#ifdef PG_TELEMETRY
#include "fridge.p4"
#endif

parser PgIngressParser(packet_in pkt, out pg_headers_t hdr, out pg_meta_t md,
                       out ingress_intrinsic_metadata_t ig_intr_md) {
    PgPacketParser() packet_parser;
    Checksum() ipv4_csum;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        md.verdict = PG_V_FORWARD;
        md.n3_local = 0;
        md.uplink = 0;
        md.flow_sport = 0;
        md.flow_dport = 0;
        md.ioam_ok = 0;
        md.csum_err = false;
        md.gate_open = 1;
        md.metered = 0;
        md.counted = 0;
        md.match_qfi = 0;
        md.encap = 0;
        md.far_drop = 0;
        md.far_buffer = 0;
        md.ue_prefix64 = 0;
        md.tcp_flags = 0;
        md.colour = PG_COLOUR_GREEN;
        packet_parser.apply(pkt, hdr, md);
        transition select(hdr.ipv4.isValid()) {
            true: check_ipv4;
            false: accept;
        }
    }

    state check_ipv4 {
        ipv4_csum.add(hdr.ipv4);
        md.csum_err = !ipv4_csum.verify();
        transition accept;
    }
}

control PgIngress(inout pg_headers_t hdr, inout pg_meta_t md,
                  in ingress_intrinsic_metadata_t ig_intr_md,
                  in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                  inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                  inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    PgUpf() upf;
#ifdef PG_TELEMETRY
    PgFridge() fridge;
    // DTA Key-Write key: CRC-32 of the user 5-tuple (the software reporter keys by the
    // classifier's flow hash instead: the two do not share keys).
    Hash<bit<32>>(HashAlgorithm_t.CRC32) dta_flow_hash;
#endif

    apply {
        md.now_ns = ig_prsr_md.global_tstamp;
        upf.apply(hdr, md);
#ifdef PG_TELEMETRY
        fridge.apply(hdr, md);
#endif
        if (md.verdict == PG_V_FORWARD) {
            ig_tm_md.ucast_egress_port = md.out_port;
            ig_tm_md.qid = md.qid;
        } else if (md.verdict == PG_V_TO_CPU) {
            ig_tm_md.ucast_egress_port = PG_CPU_PORT;
        } else {
            ig_dprsr_md.drop_ctl = 1;
        }
#ifdef PG_TELEMETRY
        // Everything that reaches egress carries the bridged metadata (its parser reads it
        // first); Kestrel counts forwarded UPF packets, each with a direction.
        if (md.verdict == PG_V_FORWARD || md.verdict == PG_V_TO_CPU) {
            hdr.bridge.setValid();
            hdr.bridge.kind = PG_BRIDGE_KIND_PACKET;
            hdr.bridge.kestrel = 0;
            hdr.bridge.dta = 0;
            if (md.verdict == PG_V_FORWARD) {
                hdr.bridge.kestrel = 1;
                hdr.bridge.dta = 1;
            }
            hdr.bridge.dir = ~md.uplink;
            hdr.bridge.colour = md.colour;
            hdr.bridge.pad0 = 0;
            hdr.bridge.pad1 = 0;
            hdr.bridge.qid = md.qid;
            hdr.bridge.qfi = md.qfi;
            if (md.uplink == 1) {
                hdr.bridge.teid = hdr.gtpu.teid;
            } else {
                hdr.bridge.teid = md.enc_teid;
            }
            hdr.bridge.len = md.inner_len;
            hdr.bridge.ig_tstamp = md.now_ns[31:0];
            hdr.bridge.flow_hash = dta_flow_hash.get({md.flow_src, md.flow_dst, md.flow_proto,
                                                      md.flow_sport, md.flow_dport});
        }
        ig_tm_md.bypass_egress = 0;
#else
        ig_tm_md.bypass_egress = 1;
#endif
    }
}

control PgIngressDeparser(packet_out pkt, inout pg_headers_t hdr, in pg_meta_t md,
                          in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() enc_ipv4_csum;
    Checksum() ipv4_csum;
    Checksum() inner_ipv4_csum;

    apply {
        if (hdr.enc_ipv4.isValid()) {
            hdr.enc_ipv4.hdr_checksum = enc_ipv4_csum.update({
                hdr.enc_ipv4.version, hdr.enc_ipv4.ihl, hdr.enc_ipv4.dscp_ecn,
                hdr.enc_ipv4.total_len, hdr.enc_ipv4.identification, hdr.enc_ipv4.flags,
                hdr.enc_ipv4.frag_offset, hdr.enc_ipv4.ttl, hdr.enc_ipv4.protocol,
                hdr.enc_ipv4.src_addr, hdr.enc_ipv4.dst_addr});
        }
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_csum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp_ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
                hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        }
        if (hdr.inner_ipv4.isValid()) {
            hdr.inner_ipv4.hdr_checksum = inner_ipv4_csum.update({
                hdr.inner_ipv4.version, hdr.inner_ipv4.ihl, hdr.inner_ipv4.dscp_ecn,
                hdr.inner_ipv4.total_len, hdr.inner_ipv4.identification, hdr.inner_ipv4.flags,
                hdr.inner_ipv4.frag_offset, hdr.inner_ipv4.ttl, hdr.inner_ipv4.protocol,
                hdr.inner_ipv4.src_addr, hdr.inner_ipv4.dst_addr});
        }
        pkt.emit(hdr);
    }
}

#endif // PG_TNA_UPF_INGRESS_P4
