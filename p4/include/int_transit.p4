// INT transit (INTInter) for the IOAM encoding: fill the next pre-allocated trace entry
// exactly as the Rust transit does (int-framework/src/stages.rs `IntTransit::ioam`, with
// `TraceOption::fill_next` and `NodeData::emit` of dataplane/wire/src/ioam.rs; RFC 9197
// section 4.4): for an enabled namespace, write the entry just before the filled ones
// (the last NodeLen words of the free space) and lower RemainingLen by NodeLen; without
// room set the Overflow flag. The entry holds Hop_Lim and node_id (bit 0) and the
// timestamp seconds and fraction (bits 2, 3); every other field is all-ones ("not
// collected"), which is what the Rust transit writes for a flow it does not count.
//
// Differences from the Rust transit, by design of this first version:
// * per-flow counters (namespace data, bits 5 and 10) are not kept: all-ones;
// * seed-encoded INT, in-band requests and piggy-backed reports stay in software;
// * a NodeLen that disagrees with the trace type is not detected (Rust: dropped as
//   int_transit_malformed);
// * more than PG_IOAM_MAX_FREE_WORDS free words, or an entry longer than
//   PG_IOAM_MAX_NODE_WORDS, is left untouched;
// * the timestamp comes from the data plane clock plus a time base the control plane
//   writes (int_time); POSIX fractions are ns/1000 approximated by shifts on Tofino.
#ifndef PG_INT_TRANSIT_P4
#define PG_INT_TRANSIT_P4

#include "headers.p4"

control PgIntTransit(inout pg_headers_t hdr, inout pg_meta_t md) {
    bit<1> enabled = 0;

    action int_set_node(bit<24> node_id, bit<1> hop_lim_dec, bit<1> ts_posix) {
        md.int_node_id = node_id;
        md.int_hop_lim_dec = hop_lim_dec;
        md.int_ts_posix = ts_posix;
    }

    table int_node {
        actions = { int_set_node; }
        default_action = int_set_node(0, 1, 1);
    }

    // Wall-clock time of data-plane time base_ns is base_secs seconds (set every second).
    action int_set_time_base(bit<48> base_ns, bit<32> base_secs) {
        md.int_base_ns = base_ns;
        md.int_base_secs = base_secs;
    }

    table int_time {
        actions = { int_set_time_base; }
        default_action = int_set_time_base(0, 0);
    }

    action int_ns_enabled() { enabled = 1; }

    table int_ns {
        key = { hdr.ioam_trace.namespace_id : exact; }
        actions = { int_ns_enabled; @defaultonly NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    // Where the filled fields sit among the first four words (generated from NodeData::emit).
    action int_set_layout(bit<8> w0, bit<8> w1, bit<8> w2, bit<8> w3) {
        md.int_w0 = w0;
        md.int_w1 = w1;
        md.int_w2 = w2;
        md.int_w3 = w3;
    }

    table int_layout {
        key = { hdr.ioam_trace.trace_type : ternary; }
        actions = { int_set_layout; @defaultonly NoAction; }
        default_action = NoAction();
        size = 16;
    }

    apply {
        if (hdr.ioam_trace.isValid() && hdr.ipv6.isValid()) {
            int_ns.apply();
        }
        if (enabled == 1) {
            if (md.ioam_ok == 0) {
                if (hdr.ioam_trace.remaining_len < (bit<7>)hdr.ioam_trace.node_len) {
                    hdr.ioam_trace.flags = hdr.ioam_trace.flags | PG_IOAM_FLAG_OVERFLOW;
                }
            } else {
                int_node.apply();
                int_time.apply();
                int_layout.apply();
                bit<8> hop_lim = hdr.ipv6.hop_limit;
                if (md.int_hop_lim_dec == 1 && hop_lim > 0) {
                    hop_lim = hop_lim - 1;
                }
                bit<32> hop_node = hop_lim ++ md.int_node_id;
                bit<48> rel = md.now_ns - md.int_base_ns;
                bit<32> secs = md.int_base_secs;
                bit<32> frac = rel[31:0];
                if (rel >= 1000000000) {
                    secs = secs + 1;
                    frac = frac - 1000000000;
                }
                if (md.int_ts_posix == 1) {
                    frac = (frac >> 10) + (frac >> 16) + (frac >> 17);
                }
                // Every word all-ones, then the filled fields.
                if (hdr.ioam_slot[0].isValid()) { hdr.ioam_slot[0].w = PG_IOAM_UNAVAILABLE; }
                if (hdr.ioam_slot[1].isValid()) { hdr.ioam_slot[1].w = PG_IOAM_UNAVAILABLE; }
                if (hdr.ioam_slot[2].isValid()) { hdr.ioam_slot[2].w = PG_IOAM_UNAVAILABLE; }
                if (hdr.ioam_slot[3].isValid()) { hdr.ioam_slot[3].w = PG_IOAM_UNAVAILABLE; }
                if (hdr.ioam_slot[4].isValid()) { hdr.ioam_slot[4].w = PG_IOAM_UNAVAILABLE; }
                if (hdr.ioam_slot[5].isValid()) { hdr.ioam_slot[5].w = PG_IOAM_UNAVAILABLE; }
                if (hdr.ioam_slot[6].isValid()) { hdr.ioam_slot[6].w = PG_IOAM_UNAVAILABLE; }
                if (hdr.ioam_slot[7].isValid()) { hdr.ioam_slot[7].w = PG_IOAM_UNAVAILABLE; }
                if (md.int_w0 == 1) { hdr.ioam_slot[0].w = hop_node; }
                else if (md.int_w0 == 2) { hdr.ioam_slot[0].w = secs; }
                else if (md.int_w0 == 3) { hdr.ioam_slot[0].w = frac; }
                if (md.int_w1 == 2) { hdr.ioam_slot[1].w = secs; }
                else if (md.int_w1 == 3) { hdr.ioam_slot[1].w = frac; }
                if (md.int_w2 == 2) { hdr.ioam_slot[2].w = secs; }
                else if (md.int_w2 == 3) { hdr.ioam_slot[2].w = frac; }
                if (md.int_w3 == 3) { hdr.ioam_slot[3].w = frac; }
                hdr.ioam_trace.remaining_len =
                    hdr.ioam_trace.remaining_len - (bit<7>)hdr.ioam_trace.node_len;
            }
        }
    }
}

#endif // PG_INT_TRANSIT_P4
