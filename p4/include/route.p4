// Next-hop lookup (the Rust l3fwd RouteTable the UPF uses): longest-prefix match over the
// config's [[route]]s, giving the egress port, the next hop's MAC and our port's MAC.
#ifndef PG_ROUTE_P4
#define PG_ROUTE_P4

#include "headers.p4"

control PgRoute(inout pg_headers_t hdr, inout pg_meta_t md) {
    action set_next_hop(bit<9> port, mac_addr_t dmac, mac_addr_t smac) {
        md.out_port = port;
        hdr.ethernet.dst_addr = dmac;
        hdr.ethernet.src_addr = smac;
        md.routed = 1;
    }

    table route_v4 {
        key = { md.route_v4 : lpm; }
        actions = { set_next_hop; @defaultonly NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    table route_v6 {
        key = { md.route_v6 : lpm; }
        actions = { set_next_hop; @defaultonly NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    apply {
        md.routed = 0;
        if (md.route_is_v6 == 1) {
            route_v6.apply();
        } else {
            route_v4.apply();
        }
    }
}

#endif // PG_ROUTE_P4
