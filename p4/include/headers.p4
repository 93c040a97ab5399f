// Headers and metadata shared by every Peregrine P4 program (TNA and v1model). Layouts follow
// the Rust wire crate (dataplane/wire/src): field names and widths as in the cited specs.
#ifndef PG_HEADERS_P4
#define PG_HEADERS_P4

#include "constants.p4"

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<128> ipv6_addr_t;

// IEEE 802.3
header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

// IEEE 802.1Q: one tag is accepted on ingress; egress frames are untagged, as in Rust.
header vlan_h {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> ether_type;
}

// RFC 791 (no options: IHL 5; anything else goes to the CPU)
header ipv4_h {
    bit<4>      version;
    bit<4>      ihl;
    bit<8>      dscp_ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

// RFC 8200
header ipv6_h {
    bit<4>      version;
    bit<8>      traffic_class;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

// RFC 768
header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> len;
    bit<16> checksum;
}

// TS 29.281 section 5.1: the mandatory part.
header gtpu_h {
    bit<3>  version;
    bit<1>  pt;
    bit<1>  spare;
    bit<1>  e;
    bit<1>  s;
    bit<1>  pn;
    bit<8>  msg_type;
    bit<16> msg_len;
    bit<32> teid;
}

// TS 29.281 section 5.1: present when any of E, S, PN is set.
header gtpu_opt_h {
    bit<16> seq;
    bit<8>  npdu;
    bit<8>  next_ext;
}

// TS 38.415 section 5.5.2 PDU Session Container as a one-unit GTP-U extension header
// (TS 29.281 section 5.2.1): length 1, PDU type, flags, QFI, next extension type. The
// second octet is PPP | RQI | QFI (DL) or N3/N9 delay | new IE | QFI (UL): the QFI is at
// the same place in both.
header gtpu_psc_h {
    bit<8> len;
    bit<4> pdu_type;
    bit<4> flags;
    bit<2> ppp_rqi;
    bit<6> qfi;
    bit<8> next_ext;
}

// RFC 8200 section 4.3 Hop-by-Hop Options header: its first two octets.
header ipv6_hbh_h {
    bit<8> next_hdr;
    bit<8> hdr_ext_len;
}

// PadN with no data (type 1, length 0), which our IOAM source (ioam::emit_hbh_with_trace)
// and Linux put first so the IOAM option is 4n-aligned (RFC 9486 section 3).
header ipv6_padn_h {
    bit<8> opt_type;
    bit<8> opt_len;
}

// RFC 9486 section 3: the IPv6 option carrying IOAM.
header ioam_opt_h {
    bit<8> opt_type;
    bit<8> opt_len;
    bit<8> reserved;
    bit<8> ioam_type;
}

// RFC 9197 section 4.4 trace option header.
header ioam_trace_h {
    bit<16> namespace_id;
    bit<5>  node_len;
    bit<4>  flags;
    bit<7>  remaining_len;
    bit<24> trace_type;
    bit<8>  reserved;
}

// One 4-octet word of the node data list.
header ioam_word_h {
    bit<32> w;
}

// Ingress -> egress bridged metadata of the TNA telemetry program (tna/upf_telemetry.p4):
// the first bytes of every packet its egress parser sees; `kind` tells it from a mirrored
// DTA copy (pg_dta_mirror_h). 17 bytes.
header pg_bridge_h {
    bit<8>  kind;        // PG_BRIDGE_KIND_PACKET
    bit<1>  kestrel;     // a UPF packet with a direction: Kestrel counts it
    bit<1>  dir;         // Kestrel's direction index: 0 uplink, 1 downlink
    bit<2>  colour;      // our TrTCM colour codes: 0 green, 1 yellow, 2 red
    bit<1>  dta;         // the DTA reporter may report it
    bit<3>  pad0;
    bit<3>  pad1;
    bit<5>  qid;         // the UPF's QID (pg_meta_t.qid), not Tofino's physical queue
    bit<8>  qfi;
    bit<32> teid;        // N3 TEID: received (uplink) or written by the encapsulation
    bit<16> len;         // inner IP length: what Kestrel's bytes count
    bit<32> ig_tstamp;   // ingress global timestamp, low 32 bits (ns)
    bit<32> flow_hash;   // DTA Key-Write key: CRC-32 of the user 5-tuple
}

// The header an egress mirror prepends to a DTA copy (p4/include/dta_report.p4): what the
// report will say. 10 bytes.
header pg_dta_mirror_h {
    bit<8>  kind;        // PG_BRIDGE_KIND_DTA
    bit<8>  opcode;      // PG_DTA_OP_KEY_WRITE or PG_DTA_OP_APPEND
    bit<32> key;         // Key-Write key (Append: unused, the list id is configured)
    bit<32> data;
}

// DTA (Langlet et al., "Direct Telemetry Access", section 4 and Figure 4) as
// dataplane/wire/src/dta writes it: the NACK-tracking base header (3 bytes) ...
header pg_dta_base_h {
    bit<8> opcode;
    bit<8> seqnum;
    bit<1> immediate;
    bit<1> retransmit;
    bit<6> reserved;
}

// ... then Key-Write with one data word (9 bytes) ...
header pg_dta_key_write_h {
    bit<8>  redundancy;
    bit<32> key;
    bit<32> data;
}

// ... or Append (8 bytes).
header pg_dta_append_h {
    bit<32> list_id;
    bit<32> data;
}

struct pg_headers_t {
    // TNA telemetry program only: emitted in front of the packet for the egress pipeline.
    pg_bridge_h  bridge;
    ethernet_h   ethernet;
    vlan_h       vlan;
    // Outer headers added by an encapsulation (downlink to a gNB, or N9 relay).
    ipv4_h       enc_ipv4;
    ipv6_h       enc_ipv6;
    udp_h        enc_udp;
    gtpu_h       enc_gtpu;
    gtpu_opt_h   enc_gtpu_opt;
    gtpu_psc_h   enc_psc;
    // The received IP header (outer on N3, the user packet on N6).
    ipv4_h       ipv4;
    ipv6_h       ipv6;
    // IOAM pre-allocated trace in a Hop-by-Hop header (INT transit).
    ipv6_hbh_h   hbh;
    ipv6_padn_h  padn;
    ioam_opt_h   ioam_opt;
    ioam_trace_h ioam_trace;
    ioam_word_h[PG_IOAM_MAX_FREE_WORDS] ioam_free;
    ioam_word_h[PG_IOAM_MAX_NODE_WORDS] ioam_slot;
    // GTP-U received on N3.
    udp_h        udp;
    gtpu_h       gtpu;
    gtpu_opt_h   gtpu_opt;
    gtpu_psc_h   gtpu_psc;
    // The user packet inside a received G-PDU.
    ipv4_h       inner_ipv4;
    ipv6_h       inner_ipv6;
}

// Per-packet metadata (the P4 counterpart of the Rust PacketMeta record).
struct pg_meta_t {
    bit<8>  verdict;       // PG_V_*
    bit<1>  uplink;        // 1: G-PDU from N3, 0: N6 (downlink)
    bit<1>  n3_local;      // destination is one of our N3 addresses
    bit<64> ue_prefix64;   // downlink IPv6 key: upper 64 bits of the destination
    // The user (inner) packet's flow, read once by the parser.
    bit<1>  flow_v6;
    bit<128> flow_src;
    bit<128> flow_dst;
    bit<8>  flow_proto;
    bit<16> flow_sport;
    bit<16> flow_dport;
    bit<16> inner_len;     // T-PDU length: what URRs and meters count (TS 29.244 5.2.2.2)
    bit<1>  inner_frag;    // a fragment: no ports
    // PDR match
    bit<32> far_idx;
    bit<1>  gate_open;
    bit<32> meter_idx;
    bit<1>  metered;
    bit<32> urr_idx;
    bit<1>  counted;
    bit<8>  qfi;           // the QFI counted and marked
    bit<1>  has_psc;
    // Routing
    bit<32> route_v4;
    bit<128> route_v6;
    bit<1>  route_is_v6;
    bit<9>  out_port;
    bit<5>  qid;
    // Time
    bit<48> now_ns;
    // IOAM transit
    bit<8>  ioam_free_words;  // v1model parser loop counter
    bit<8>  ioam_slot_words;
    bit<1>  ioam_ok;          // the entry to fill was extracted whole
    bool    csum_err;         // the received IPv4 header checksum is wrong (set by the arch)
    bit<8>  pdr_qfi;
    bit<1>  match_qfi;
    bit<8>  mark_qfi;
    bit<1>  encap;
    bit<1>  far_drop;
    bit<1>  far_buffer;
    bit<32> enc_teid;
    bit<4>  psc_type;
    bit<16> flow_port;
    bit<16> hdr_len;          // bytes in front of the T-PDU (meter adjustment)
    bit<16> mtu;
    bit<1>  routed;
    // INT transit settings and results
    bit<24> int_node_id;
    bit<1>  int_hop_lim_dec;
    bit<1>  int_ts_posix;
    bit<8>  int_w0;
    bit<8>  int_w1;
    bit<8>  int_w2;
    bit<8>  int_w3;
    bit<48> int_base_ns;
    bit<32> int_base_secs;
    // TCP fields of the user packet (parse_tcp) for the fridge.
    bit<32> tcp_seq;
    bit<32> tcp_ack;
    bit<8>  tcp_flags;
    // Telemetry (TNA telemetry program)
    bit<2>  colour;           // the QER meter's colour, our codes (0 green, 1 yellow, 2 red)
    // Fridge (p4/include/fridge.p4)
    bit<1>  fr_on;
    bit<1>  fr_req_uplink;
    bit<32> fr_mask;
    bit<1>  fr_eligible;
    bit<128> fr_req_addr;
    bit<128> fr_resp_addr;
    bit<16> fr_req_port;
    bit<16> fr_resp_port;
    bit<32> fr_pairing;
    bit<32> fr_hash;
    bit<32> fr_sig;
    bit<32> fr_idx;
    bit<32> fr_inserts;
    bit<32> fr_delay;
    bit<32> fr_x;
    bit<32> fr_factor;
    bit<5>  fr_bin;
}

// Egress headers of the TNA telemetry program: the bridged metadata or a DTA copy's mirror
// header, and the report a DTA copy becomes.
struct pg_egress_headers_t {
    pg_bridge_h        bridge;
    pg_dta_mirror_h    dta_mirror;
    ethernet_h         dta_ethernet;
    ipv4_h             dta_ipv4;
    udp_h              dta_udp;
    pg_dta_base_h      dta_base;
    pg_dta_key_write_h dta_key_write;
    pg_dta_append_h    dta_append;
}

// Egress metadata of the TNA telemetry program.
struct pg_egress_meta_t {
    bit<32> now;              // egress global timestamp, low 32 bits (ns)
    bit<32> sojourn;          // now - bridge.ig_tstamp: queueing + the fixed pipeline latency
    bit<1>  bank;             // Kestrel window parity: bit PG_KESTREL_WINDOW_SHIFT of the clock
    bit<1>  k_on;             // the QID has a Kestrel seed: count the packet
    bit<32> k_seed;
    bit<32> k_hash;
    bit<3>  k_lat_bin;
    bit<1>  dta_on;           // dta_config has an entry
    bit<8>  dta_opcode;       // what the mirror header says
    bit<32> dta_key;
    bit<32> dta_data;
    // The reporter's settings (dta_config)
    bit<10> dta_session;      // MirrorId_t on Tofino 1
    bit<8>  dta_redundancy;
    bit<32> dta_list_id;
    bit<32> dta_sample_last;
    bit<48> dta_src_mac;
    bit<48> dta_dst_mac;
    bit<32> dta_src_ip;
    bit<32> dta_dst_ip;
    bit<16> dta_src_port;
}

#endif // PG_HEADERS_P4
