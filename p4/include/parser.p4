// The packet parser shared by every program, as a sub-parser the architecture's parser
// applies: Ethernet / one 802.1Q tag / IPv4 / IPv6 (with an IOAM pre-allocated trace in a
// Hop-by-Hop header) / UDP / GTP-U (TS 29.281) with the PDU Session Container (TS 38.415) /
// the inner IPv4 or IPv6 packet. L4 ports of the user packet are read with lookahead into
// metadata, not extracted, so the user payload stays unparsed (and checksums over it stay
// computable by the deparser as "payload").
//
// Not parsed (the control sends such packets to the CPU or forwards them untouched):
// IPv4 options (IHL != 5), IPv6 extension headers other than a leading Hop-by-Hop header
// carrying PadN + an IOAM pre-allocated trace, GTP-U extension headers other than one
// one-unit PDU Session Container.
#ifndef PG_PARSER_P4
#define PG_PARSER_P4

#include "headers.p4"

parser PgPacketParser(packet_in pkt, out pg_headers_t hdr, inout pg_meta_t md) {
#ifdef __TARGET_TOFINO__
    // Tofino parsers cannot subtract; the one parser counter walks the trace's free words.
    ParserCounter() ioam_ctr;
#endif

    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            PG_ETHERTYPE_VLAN: parse_vlan;
            PG_ETHERTYPE_IPV4: parse_ipv4;
            PG_ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }

    state parse_vlan {
        pkt.extract(hdr.vlan);
        transition select(hdr.vlan.ether_type) {
            PG_ETHERTYPE_IPV4: parse_ipv4;
            PG_ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w5, 13w0, PG_PROTO_UDP): parse_udp;
            (4w5, 13w0, PG_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        transition select(hdr.ipv6.next_hdr) {
            PG_PROTO_UDP: parse_udp;
            PG_PROTO_TCP: parse_tcp;
            PG_PROTO_HOPOPT: parse_hbh;
            default: accept;
        }
    }

    // UDP: GTP-U (dst 2152) is extracted; any other UDP is the user's and only read.
    state parse_udp {
        transition select(pkt.lookahead<bit<32>>()[15:0]) {
            PG_GTPU_PORT: parse_gtpu;
            default: parse_ports;
        }
    }

    state parse_ports {
        bit<32> ports = pkt.lookahead<bit<32>>();
        md.flow_sport = ports[31:16];
        md.flow_dport = ports[15:0];
        transition accept;
    }

    // TCP (RFC 9293 3.1): ports, sequence and acknowledgment numbers and the flags, read
    // for the fridge's request/response matching (p4/include/fridge.p4), not extracted.
    state parse_tcp {
        bit<112> t = pkt.lookahead<bit<112>>();
        md.flow_sport = t[111:96];
        md.flow_dport = t[95:80];
        md.tcp_seq = t[79:48];
        md.tcp_ack = t[47:16];
        md.tcp_flags = t[7:0];
        transition accept;
    }

    state parse_gtpu {
        pkt.extract(hdr.udp);
        pkt.extract(hdr.gtpu);
        transition select(hdr.gtpu.msg_type, hdr.gtpu.e, hdr.gtpu.s, hdr.gtpu.pn) {
            (PG_GTPU_MSG_G_PDU, 1w0, 1w0, 1w0): parse_inner;
            (PG_GTPU_MSG_G_PDU, _, _, _): parse_gtpu_opt;
            default: accept;
        }
    }

    state parse_gtpu_opt {
        pkt.extract(hdr.gtpu_opt);
        transition select(hdr.gtpu_opt.next_ext) {
            PG_GTPU_EXT_PSC: parse_psc;
            PG_GTPU_EXT_NO_MORE: parse_inner;
            default: accept;
        }
    }

    state parse_psc {
        pkt.extract(hdr.gtpu_psc);
        transition select(hdr.gtpu_psc.len, hdr.gtpu_psc.next_ext) {
            (8w1, PG_GTPU_EXT_NO_MORE): parse_inner;
            default: accept;
        }
    }

    state parse_inner {
        transition select(pkt.lookahead<bit<4>>()) {
            4w4: parse_inner_ipv4;
            4w6: parse_inner_ipv6;
            default: accept;
        }
    }

    state parse_inner_ipv4 {
        pkt.extract(hdr.inner_ipv4);
        transition select(hdr.inner_ipv4.ihl, hdr.inner_ipv4.frag_offset, hdr.inner_ipv4.protocol) {
            (4w5, 13w0, PG_PROTO_UDP): parse_ports;
            (4w5, 13w0, PG_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_inner_ipv6 {
        pkt.extract(hdr.inner_ipv6);
        transition select(hdr.inner_ipv6.next_hdr) {
            PG_PROTO_UDP: parse_ports;
            PG_PROTO_TCP: parse_tcp;
            default: accept;
        }
    }

    // Hop-by-Hop header starting with PadN(0) and an IOAM option (type 0x31, any length).
    state parse_hbh {
        pkt.extract(hdr.hbh);
        transition select(pkt.lookahead<bit<32>>()) {
            32w0x01003100 &&& 32w0xffffff00: parse_ioam;
            default: accept;
        }
    }

    state parse_ioam {
        pkt.extract(hdr.padn);
        pkt.extract(hdr.ioam_opt);
        transition select(hdr.ioam_opt.ioam_type) {
            PG_IOAM_PREALLOC_TRACE: parse_trace;
            default: accept;
        }
    }

    // The node data list of a pre-allocated trace: RemainingLen x 4 free octets, the last
    // NodeLen words of which are the entry this node fills (RFC 9197 section 4.4), then the
    // filled entries (left in the payload). Extract the free words before the entry into
    // ioam_free and the entry into ioam_slot.
#ifdef __TARGET_TOFINO__
    state parse_trace {
        pkt.extract(hdr.ioam_trace);
        transition select(hdr.ioam_trace.node_len) {
            1: ctr_1; 2: ctr_2; 3: ctr_3; 4: ctr_4;
            5: ctr_5; 6: ctr_6; 7: ctr_7; 8: ctr_8;
            default: accept;
        }
    }
    // counter = RemainingLen - NodeLen: the add operand is two's complement of NodeLen.
    state ctr_1 { ioam_ctr.set(hdr.ioam_trace.remaining_len, 127, 0, 6, 8w0xff); transition free_loop; }
    state ctr_2 { ioam_ctr.set(hdr.ioam_trace.remaining_len, 127, 0, 6, 8w0xfe); transition free_loop; }
    state ctr_3 { ioam_ctr.set(hdr.ioam_trace.remaining_len, 127, 0, 6, 8w0xfd); transition free_loop; }
    state ctr_4 { ioam_ctr.set(hdr.ioam_trace.remaining_len, 127, 0, 6, 8w0xfc); transition free_loop; }
    state ctr_5 { ioam_ctr.set(hdr.ioam_trace.remaining_len, 127, 0, 6, 8w0xfb); transition free_loop; }
    state ctr_6 { ioam_ctr.set(hdr.ioam_trace.remaining_len, 127, 0, 6, 8w0xfa); transition free_loop; }
    state ctr_7 { ioam_ctr.set(hdr.ioam_trace.remaining_len, 127, 0, 6, 8w0xf9); transition free_loop; }
    state ctr_8 { ioam_ctr.set(hdr.ioam_trace.remaining_len, 127, 0, 6, 8w0xf8); transition free_loop; }

    state free_loop {
        transition select(ioam_ctr.is_negative(), ioam_ctr.is_zero()) {
            (true, _): accept;          // no room: the control sets Overflow
            (false, true): slot_start;
            default: free_word;
        }
    }

    state free_word {
        pkt.extract(hdr.ioam_free.next);
        ioam_ctr.decrement(1);
        transition free_loop;
    }

    state slot_start {
        ioam_ctr.set(hdr.ioam_trace.node_len, 31, 0, 4, 8w0);
        transition slot_loop;
    }

    state slot_loop {
        transition select(ioam_ctr.is_zero()) {
            true: slot_done;
            false: slot_word;
        }
    }

    state slot_word {
        pkt.extract(hdr.ioam_slot.next);
        ioam_ctr.decrement(1);
        transition slot_loop;
    }
#else
    state parse_trace {
        pkt.extract(hdr.ioam_trace);
        md.ioam_slot_words = (bit<8>)hdr.ioam_trace.node_len;
        md.ioam_free_words = (bit<8>)hdr.ioam_trace.remaining_len - (bit<8>)hdr.ioam_trace.node_len;
        transition select(hdr.ioam_trace.node_len == 0
                          || hdr.ioam_trace.remaining_len < (bit<7>)hdr.ioam_trace.node_len) {
            true: accept;               // no room (the control sets Overflow) or malformed
            false: free_loop;
        }
    }

    state free_loop {
        transition select(md.ioam_free_words) {
            8w0: slot_loop;
            default: free_word;
        }
    }

    state free_word {
        pkt.extract(hdr.ioam_free.next);
        md.ioam_free_words = md.ioam_free_words - 1;
        transition free_loop;
    }

    state slot_loop {
        transition select(md.ioam_slot_words) {
            8w0: slot_done;
            default: slot_word;
        }
    }

    state slot_word {
        pkt.extract(hdr.ioam_slot.next);
        md.ioam_slot_words = md.ioam_slot_words - 1;
        transition slot_loop;
    }
#endif

    state slot_done {
        md.ioam_ok = 1;
        transition accept;
    }
}

#endif // PG_PARSER_P4
