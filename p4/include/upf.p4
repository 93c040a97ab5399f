// The UPF packet path (TS 23.501 5.8.2, TS 29.244 5.2) as one control shared by the TNA
// program and the v1model twin, in the order of the Rust stage (dataplane/src/upf/:
// stage.rs, parse.rs, lookup.rs, enforce.rs, emit.rs): classify (GTP-U to one of our N3
// addresses = uplink, other IP = downlink); PDR lookup (uplink by TEID, downlink by UE IPv4
// address or UE IPv6 /64); QER gate and MBR meter (RFC 2698 TrTCM, colour-blind, red
// drops); URR counting (T-PDU bytes, per direction); FAR (decapsulate and route on N6 /
// encapsulate with the PDU Session Container / drop / buffer in software); route lookup,
// MTU, TTL; QFI -> queue.
//
// The including program defines, before including this file:
//   PG_UPF_EXTERNS        declares qer_meter, urr_counter, urr_bytes (+ its update) and
//                         drop_counter with the architecture's externs;
//   PG_METER_EXECUTE(c)   runs qer_meter at md.meter_idx over the T-PDU, colour into c;
//   PG_COLOR_RED          the architecture's red;
//   PG_URR_COUNT(i)       counts one packet and md.inner_len bytes at index i;
//   PG_DROP_COUNT(code)   counts a drop under its verdict code;
//   PG_FLOW_PORT()        sets md.flow_port from md.flow_* (outer UDP source port entropy);
//   PG_ENCAP_V6           if IPv6 outer headers are written here (else such FARs go to the CPU).
#ifndef PG_UPF_P4
#define PG_UPF_P4

#include "headers.p4"
#include "route.p4"

control PgUpf(inout pg_headers_t hdr, inout pg_meta_t md) {
    PG_UPF_EXTERNS
    PgRoute() route;
    bit<8> colour = 0;

    // Our GTP-U endpoint addresses (UpfTables::local_v4 / local_v6).
    action n3_local() { md.n3_local = 1; }

    table n3_v4 {
        key = { hdr.ipv4.dst_addr : exact; }
        actions = { n3_local; @defaultonly NoAction; }
        default_action = NoAction();
        size = 16;
    }

    table n3_v6 {
        key = { hdr.ipv6.dst_addr : exact; }
        actions = { n3_local; @defaultonly NoAction; }
        default_action = NoAction();
        size = 16;
    }

    // A key's single PDR with its QER and URR flattened in (the Rust FastPath record).
    action pdr_apply(bit<32> far_idx, bit<1> gate_open, bit<32> meter_idx, bit<1> metered,
                     bit<32> urr_idx, bit<1> counted, bit<8> pdr_qfi, bit<1> match_qfi,
                     bit<8> mark_qfi) {
        md.far_idx = far_idx;
        md.gate_open = gate_open;
        md.meter_idx = meter_idx;
        md.metered = metered;
        md.urr_idx = urr_idx;
        md.counted = counted;
        md.pdr_qfi = pdr_qfi;
        md.match_qfi = match_qfi;
        md.mark_qfi = mark_qfi;
    }

    // Several PDRs, SDF filters, two meters or two URRs: the software UPF decides.
    action pdr_to_cpu() { md.verdict = PG_V_TO_CPU; }
    // Unknown TEID: the software answers with an Error Indication (TS 29.281 7.3.1).
    action pdr_miss_ul() { md.verdict = PG_V_TO_CPU; }
    action pdr_miss_dl() { md.verdict = PG_V_DROP_DOWNLINK_NO_SESSION; }

    table ul_pdr {
        key = { hdr.gtpu.teid : exact; }
        actions = { pdr_apply; pdr_to_cpu; @defaultonly pdr_miss_ul; }
        default_action = pdr_miss_ul();
        size = 65536;
    }

    table dl_pdr_v4 {
        key = { hdr.ipv4.dst_addr : exact; }
        actions = { pdr_apply; pdr_to_cpu; @defaultonly pdr_miss_dl; }
        default_action = pdr_miss_dl();
        size = 65536;
    }

    table dl_pdr_v6 {
        key = { md.ue_prefix64 : exact; }
        actions = { pdr_apply; pdr_to_cpu; @defaultonly pdr_miss_dl; }
        default_action = pdr_miss_dl();
        size = 65536;
    }

    // FARs (TS 29.244 8.2.26 Apply Action, 8.2.56 Outer Header Creation).
    action far_route() { md.encap = 0; }

    action far_encap_v4(bit<32> teid, ipv4_addr_t peer, ipv4_addr_t local, bit<4> psc_type) {
        md.encap = 1;
        md.enc_teid = teid;
        md.psc_type = psc_type;
        md.route_v4 = peer;
        md.route_is_v6 = 0;
        hdr.enc_ipv4.setValid();
        hdr.enc_ipv4.version = 4;
        hdr.enc_ipv4.ihl = 5;
        hdr.enc_ipv4.dscp_ecn = 0;
        hdr.enc_ipv4.identification = 0;
        hdr.enc_ipv4.flags = 3w2;          // DF
        hdr.enc_ipv4.frag_offset = 0;
        hdr.enc_ipv4.ttl = PG_OUTER_TTL;
        hdr.enc_ipv4.protocol = PG_PROTO_UDP;
        hdr.enc_ipv4.hdr_checksum = 0;     // the deparser fills it
        hdr.enc_ipv4.src_addr = local;
        hdr.enc_ipv4.dst_addr = peer;
    }

    action far_encap_v6(bit<32> teid, ipv6_addr_t peer, ipv6_addr_t local, bit<4> psc_type) {
#ifdef PG_ENCAP_V6
        md.encap = 1;
        md.enc_teid = teid;
        md.psc_type = psc_type;
        md.route_v6 = peer;
        md.route_is_v6 = 1;
        hdr.enc_ipv6.setValid();
        hdr.enc_ipv6.version = 6;
        hdr.enc_ipv6.traffic_class = 0;
        hdr.enc_ipv6.flow_label = 0;
        hdr.enc_ipv6.next_hdr = PG_PROTO_UDP;
        hdr.enc_ipv6.hop_limit = PG_OUTER_TTL;
        hdr.enc_ipv6.src_addr = local;
        hdr.enc_ipv6.dst_addr = peer;
#else
        // The UDP checksum over IPv6 covers the user payload (RFC 8200 8.1); this target's
        // deparser cannot sum it, so the software UPF encapsulates.
        md.verdict = PG_V_TO_CPU;
#endif
    }

    action far_drop() { md.far_drop = 1; }
    // BUFF (and NOCP): buffering and Downlink Data Reports stay in software.
    action far_buffer() { md.far_buffer = 1; }

    table far {
        key = { md.far_idx : exact; }
        actions = { far_route; far_encap_v4; far_encap_v6; far_drop; far_buffer; }
        default_action = far_drop();
        size = 131072;
    }

    // QFI -> egress queue (QfiMap).
    action set_qid(bit<5> qid) { md.qid = qid; }

    table qfi_qid {
        key = { md.qfi : exact; }
        actions = { set_qid; }
        default_action = set_qid(7);
        size = PG_NUM_QFI;
    }

    // [upf] mtu: the largest outer IP packet sent.
    action set_mtu(bit<16> mtu) { md.mtu = mtu; }

    table upf_mtu {
        actions = { set_mtu; }
        default_action = set_mtu(1500);
    }

    // The user packet's flow, from the header the parser extracted.
    action flow_v4(in ipv4_h ip) {
        md.flow_v6 = 0;
        md.flow_src = (bit<128>)ip.src_addr;
        md.flow_dst = (bit<128>)ip.dst_addr;
        md.flow_proto = ip.protocol;
        md.inner_len = ip.total_len;
        md.route_v4 = ip.dst_addr;
        md.route_is_v6 = 0;
    }

    action flow_v6(in ipv6_h ip) {
        md.flow_v6 = 1;
        md.flow_src = ip.src_addr;
        md.flow_dst = ip.dst_addr;
        md.flow_proto = ip.next_hdr;
        md.inner_len = ip.payload_len + PG_IPV6_HEADER_LEN;
        md.route_v6 = ip.dst_addr;
        md.route_is_v6 = 1;
    }

    apply {
        md.verdict = PG_V_FORWARD;
        upf_mtu.apply();
        // Classify (stage.rs "Classification").
        if (!hdr.ipv4.isValid() && !hdr.ipv6.isValid()) {
            if (hdr.ethernet.ether_type == PG_ETHERTYPE_ARP) {
                md.verdict = PG_V_TO_CPU;
            } else {
                md.verdict = PG_V_DROP_UNSUPPORTED_ETHERTYPE;
            }
        } else if (hdr.ipv4.isValid() && md.csum_err) {
            md.verdict = PG_V_DROP_IPV4_BAD_CHECKSUM;
        } else if (hdr.ipv4.isValid() && hdr.ipv4.ihl != 5) {
            md.verdict = PG_V_TO_CPU;
        } else if (hdr.ethernet.dst_addr[40:40] == 1) {
            // Multicast and broadcast (ARP, ND): the control core.
            md.verdict = PG_V_TO_CPU;
        }
        if (md.verdict == PG_V_FORWARD) {
            if (hdr.ipv4.isValid()) {
                n3_v4.apply();
            } else {
                n3_v6.apply();
            }
            if (md.n3_local == 1) {
                if (!hdr.gtpu.isValid()) {
                    md.verdict = PG_V_TO_CPU;       // other traffic to us: exception path
                } else if (hdr.gtpu.msg_type == PG_GTPU_MSG_END_MARKER) {
                    md.verdict = PG_V_DROP_END_MARKER;
                } else if (hdr.gtpu.msg_type != PG_GTPU_MSG_G_PDU) {
                    md.verdict = PG_V_TO_CPU;       // Echo, Error Indication, ...
                } else if (hdr.inner_ipv4.isValid()) {
                    md.uplink = 1;
                    flow_v4(hdr.inner_ipv4);
                } else if (hdr.inner_ipv6.isValid()) {
                    md.uplink = 1;
                    flow_v6(hdr.inner_ipv6);
                } else {
                    md.verdict = PG_V_TO_CPU;       // other extension headers, odd inner
                }
            } else if (hdr.ipv4.isValid()) {
                md.uplink = 0;
                flow_v4(hdr.ipv4);
            } else {
                md.uplink = 0;
                flow_v6(hdr.ipv6);
                md.ue_prefix64 = hdr.ipv6.dst_addr[127:64];
            }
        }
        // Bytes in front of the T-PDU, which meters must not count (TS 29.244 5.2.2.2).
        md.hdr_len = PG_ETH_HEADER_LEN;
        if (hdr.vlan.isValid()) { md.hdr_len = md.hdr_len + 4; }
        if (md.uplink == 1) {
            md.hdr_len = md.hdr_len + (PG_UDP_HEADER_LEN + PG_GTPU_HEADER_LEN);
            if (hdr.ipv4.isValid()) { md.hdr_len = md.hdr_len + PG_IPV4_HEADER_LEN; }
            else { md.hdr_len = md.hdr_len + PG_IPV6_HEADER_LEN; }
            if (hdr.gtpu_opt.isValid()) { md.hdr_len = md.hdr_len + 4; }
            if (hdr.gtpu_psc.isValid()) { md.hdr_len = md.hdr_len + 4; }
        }
        // PDR lookup.
        if (md.verdict == PG_V_FORWARD) {
            if (md.uplink == 1) {
                ul_pdr.apply();
                if (hdr.gtpu_psc.isValid()) {
                    md.qfi = (bit<8>)hdr.gtpu_psc.qfi;
                } else {
                    md.qfi = md.pdr_qfi;
                }
                if (md.match_qfi == 1
                    && (!hdr.gtpu_psc.isValid() || (bit<8>)hdr.gtpu_psc.qfi != md.pdr_qfi)) {
                    md.verdict = PG_V_DROP_UPLINK_NO_PDR;
                }
            } else if (hdr.ipv4.isValid()) {
                dl_pdr_v4.apply();
                md.qfi = md.mark_qfi;
            } else {
                dl_pdr_v6.apply();
                md.qfi = md.mark_qfi;
            }
        }
        // QER gate and meter, URR, FAR.
        if (md.verdict == PG_V_FORWARD && md.gate_open == 0) {
            md.verdict = PG_V_DROP_GATE_CLOSED;
        }
        if (md.verdict == PG_V_FORWARD && md.metered == 1) {
            PG_METER_EXECUTE(colour);
            // Our colour codes (Kestrel's colour counters): green 0, yellow 1, red 2.
            if (colour == PG_COLOR_RED) {
                md.colour = PG_COLOUR_RED;
            } else {
                md.colour = colour[1:0];
            }
            if (colour == PG_COLOR_RED) {
                md.verdict = PG_V_DROP_MBR_EXCEEDED;
            }
        }
        if (md.verdict == PG_V_FORWARD && md.counted == 1) {
            PG_URR_COUNT(md.urr_idx * 2 + (bit<32>)(~md.uplink));
        }
        if (md.verdict == PG_V_FORWARD) {
            far.apply();
            if (md.far_drop == 1) {
                md.verdict = PG_V_DROP_FAR_DROP;
            } else if (md.far_buffer == 1) {
                md.verdict = PG_V_TO_CPU;
            }
        }
        // Route, MTU, TTL (the inner TTL is decremented except on an N9 relay).
        mac_addr_t rx_dst = hdr.ethernet.dst_addr;
        mac_addr_t rx_src = hdr.ethernet.src_addr;
        if (md.verdict == PG_V_FORWARD) {
            route.apply(hdr, md);
            bit<16> overhead = 0;
            if (hdr.enc_ipv4.isValid()) {
                overhead = PG_ENCAP_OVERHEAD_V4;
            } else if (hdr.enc_ipv6.isValid()) {
                overhead = PG_ENCAP_OVERHEAD_V6;
            }
            bool dec_ttl = md.uplink == 0 || md.encap == 0;
            if (md.routed == 0) {
                md.verdict = PG_V_DROP_NO_ROUTE;
            } else if (md.inner_len + overhead > md.mtu) {
                md.verdict = PG_V_TO_CPU;   // ICMP too big / mtu_exceeded: software
            } else if (dec_ttl && md.uplink == 1 && hdr.inner_ipv4.isValid()) {
                if (hdr.inner_ipv4.ttl <= 1) { md.verdict = PG_V_DROP_TTL_EXCEEDED; }
                else { hdr.inner_ipv4.ttl = hdr.inner_ipv4.ttl - 1; }
            } else if (dec_ttl && md.uplink == 1 && hdr.inner_ipv6.isValid()) {
                if (hdr.inner_ipv6.hop_limit <= 1) { md.verdict = PG_V_DROP_TTL_EXCEEDED; }
                else { hdr.inner_ipv6.hop_limit = hdr.inner_ipv6.hop_limit - 1; }
            } else if (dec_ttl && md.uplink == 0 && hdr.ipv4.isValid()) {
                if (hdr.ipv4.ttl <= 1) { md.verdict = PG_V_DROP_TTL_EXCEEDED; }
                else { hdr.ipv4.ttl = hdr.ipv4.ttl - 1; }
            } else if (dec_ttl && md.uplink == 0 && hdr.ipv6.isValid()) {
                if (hdr.ipv6.hop_limit <= 1) { md.verdict = PG_V_DROP_TTL_EXCEEDED; }
                else { hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1; }
            }
        }
        // Rewrite: strip the received outer headers (uplink), add the new ones (encap).
        if (md.verdict == PG_V_FORWARD) {
            hdr.vlan.setInvalid();
            if (md.uplink == 1) {
                hdr.ipv4.setInvalid();
                hdr.ipv6.setInvalid();
                hdr.udp.setInvalid();
                hdr.gtpu.setInvalid();
                hdr.gtpu_opt.setInvalid();
                hdr.gtpu_psc.setInvalid();
            }
            if (md.encap == 1) {
                PG_FLOW_PORT();
                hdr.enc_udp.setValid();
                hdr.enc_udp.src_port = md.flow_port;
                hdr.enc_udp.dst_port = PG_GTPU_PORT;
                hdr.enc_udp.len = md.inner_len + (PG_UDP_HEADER_LEN + PG_GTPU_PSC_LEN);
                hdr.enc_udp.checksum = 0;   // IPv4: 0 (RFC 768); IPv6: the deparser fills it
                hdr.enc_gtpu.setValid();
                hdr.enc_gtpu.version = PG_GTPU_VERSION;
                hdr.enc_gtpu.pt = 1;
                hdr.enc_gtpu.spare = 0;
                hdr.enc_gtpu.e = 1;
                hdr.enc_gtpu.s = 0;
                hdr.enc_gtpu.pn = 0;
                hdr.enc_gtpu.msg_type = PG_GTPU_MSG_G_PDU;
                hdr.enc_gtpu.msg_len = md.inner_len + (PG_GTPU_PSC_LEN - PG_GTPU_HEADER_LEN);
                hdr.enc_gtpu.teid = md.enc_teid;
                hdr.enc_gtpu_opt.setValid();
                hdr.enc_gtpu_opt.seq = 0;
                hdr.enc_gtpu_opt.npdu = 0;
                hdr.enc_gtpu_opt.next_ext = PG_GTPU_EXT_PSC;
                hdr.enc_psc.setValid();
                hdr.enc_psc.len = 1;
                hdr.enc_psc.pdu_type = md.psc_type;
                hdr.enc_psc.flags = 0;
                hdr.enc_psc.ppp_rqi = 0;
                hdr.enc_psc.qfi = md.qfi[5:0];
                hdr.enc_psc.next_ext = PG_GTPU_EXT_NO_MORE;
                if (hdr.enc_ipv4.isValid()) {
                    hdr.enc_ipv4.total_len = md.inner_len + PG_ENCAP_OVERHEAD_V4;
                    hdr.ethernet.ether_type = PG_ETHERTYPE_IPV4;
                } else {
                    hdr.enc_ipv6.payload_len = md.inner_len + (PG_UDP_HEADER_LEN + PG_GTPU_PSC_LEN);
                    hdr.ethernet.ether_type = PG_ETHERTYPE_IPV6;
                }
            } else if (md.flow_v6 == 1) {
                hdr.ethernet.ether_type = PG_ETHERTYPE_IPV6;
            } else {
                hdr.ethernet.ether_type = PG_ETHERTYPE_IPV4;
            }
            qfi_qid.apply();
        }
        if (md.verdict != PG_V_FORWARD) {
            // To the CPU (or dropped) as received.
            hdr.ethernet.dst_addr = rx_dst;
            hdr.ethernet.src_addr = rx_src;
            hdr.enc_ipv4.setInvalid();
            hdr.enc_ipv6.setInvalid();
        }
        if (md.verdict >= PG_V_FIRST_DROP) {
            PG_DROP_COUNT(md.verdict);
        }
    }
}

#endif // PG_UPF_P4
