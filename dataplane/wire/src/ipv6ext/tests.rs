use super::*;
use crate::ipv6;
use crate::ipv6option::{option_type, Action};
use std::vec::Vec;

/// 2001:db8::1 -> 2001:db8::2: Hop-by-Hop (PadN, experimental option 0x1e), Segment
/// Routing header (type 4, one segment, segments left 0), Fragment (first fragment, M set,
/// id 0x12345678), then a UDP header 1234 -> 2152 (GTP-U) and 4 bytes of data.
static PACKET: [u8; 40 + 8 + 24 + 8 + 12] = [
    // IPv6: payload length 52, next header HbH, hop limit 64.
    0x60, 0x00, 0x00, 0x00, 0x00, 0x34, 0x00, 0x40, //
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, //
    // Hop-by-Hop: next Routing, len 0; PadN(0); option 0x1e len 2 aa bb.
    0x2b, 0x00, 0x01, 0x00, 0x1e, 0x02, 0xaa, 0xbb, //
    // Routing: next Fragment, len 2, type 4, segments left 0; last entry 0, flags 0,
    // tag 0; segment list [2001:db8::2].
    0x2c, 0x02, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, //
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, //
    // Fragment: next UDP, offset 0, M=1, id 0x12345678.
    0x11, 0x00, 0x00, 0x01, 0x12, 0x34, 0x56, 0x78, //
    // UDP 1234 -> 2152, length 12, checksum 0 (not checked here), data.
    0x04, 0xd2, 0x08, 0x68, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
];

fn payload() -> &'static [u8] {
    &PACKET[40..]
}

#[test]
fn walk_hbh_routing_fragment() {
    let ip = ipv6::Packet::new_checked(&PACKET[..]).unwrap();
    let mut w = walk(ip.next_header(), ip.payload());
    let hs: Vec<_> = (&mut w)
        .map(|h| h.map(|h| (h.header_type, h.offset, h.len)))
        .collect();
    assert_eq!(hs, [Ok((0, 0, 8)), Ok((43, 8, 24)), Ok((44, 32, 8))]);
    assert_eq!(w.upper(), Some((ip_protocol::UDP, 40)));
    assert!(!w.later_fragment());

    let c = parse_chain(ip.next_header(), ip.payload()).unwrap();
    assert_eq!(
        c,
        ExtChain {
            upper: ip_protocol::UDP,
            upper_offset: 40,
            count: 3,
            hbh: Some(0..8),
            dest_opts_routing: None,
            routing: Some(8..32),
            fragment: Some(32..40),
            auth: None,
            dest_opts: None,
            later_fragment: false,
        }
    );
    assert_eq!(
        &ip.payload()[c.upper_offset..][..4],
        &[0x04, 0xd2, 0x08, 0x68]
    );
}

#[test]
fn hbh_options() {
    let h = OptionsHeader::new_checked(&payload()[..8]).unwrap();
    assert_eq!(
        (h.next_header(), h.hdr_ext_len(), h.header_len()),
        (43, 0, 8)
    );
    let opts: Vec<_> = h.iter_options().collect::<Result<_>>().unwrap();
    assert_eq!(opts.len(), 2);
    assert_eq!(opts[0].kind, Kind::PadN(0));
    assert_eq!(
        opts[1].kind,
        Kind::Unknown {
            option_type: 0x1e,
            data: &[0xaa, 0xbb]
        }
    );
    assert_eq!(opts[1].action(), Action::Skip);
    let r = OptionsRepr::parse(&h).unwrap();
    assert_eq!(
        r,
        OptionsRepr {
            next_header: 43,
            options: &payload()[2..8]
        }
    );
    let mut out = [0u8; 8];
    r.emit(&mut out).unwrap();
    assert_eq!(&out, &payload()[..8]);
    assert_eq!(r.emit(&mut [0u8; 7]), Err(Error::BufferTooSmall));
    let bad = OptionsRepr {
        options: &[0; 5],
        ..r
    };
    assert_eq!(bad.emit(&mut out), Err(Error::Malformed));
}

#[test]
fn routing_and_fragment_views() {
    let rh = RoutingHeader::new_checked(&payload()[8..]).unwrap();
    assert_eq!(
        (
            rh.next_header(),
            rh.header_len(),
            rh.routing_type(),
            rh.segments_left()
        ),
        (44, 24, 4, 0)
    );
    assert_eq!(rh.data().len(), 20);
    let r = RoutingRepr::parse(&rh).unwrap();
    let mut out = [0u8; 24];
    r.emit(&mut out).unwrap();
    assert_eq!(&out[..], &payload()[8..32]);
    assert_eq!(
        RoutingRepr { data: &[0; 5], ..r }.emit(&mut out),
        Err(Error::Malformed)
    );

    let fh = FragmentHeader::new_checked(&payload()[32..]).unwrap();
    let f = FragmentRepr::parse(&fh).unwrap();
    assert_eq!(
        f,
        FragmentRepr {
            next_header: 17,
            frag_offset: 0,
            more_frags: true,
            ident: 0x1234_5678
        }
    );
    assert!(!f.is_atomic());
    let mut out = [0xffu8; 8];
    f.emit(&mut out).unwrap();
    assert_eq!(&out, &payload()[32..40]);
    let later = FragmentRepr {
        frag_offset: 1232,
        more_frags: false,
        ..f
    };
    later.emit(&mut out).unwrap();
    assert_eq!(&out[2..4], &[0x04, 0xd0]);
    assert_eq!(
        FragmentRepr::parse(&FragmentHeader::new_checked(&out[..]).unwrap()),
        Ok(later)
    );
    assert_eq!(
        FragmentRepr {
            frag_offset: 3,
            ..f
        }
        .emit(&mut out),
        Err(Error::Malformed)
    );
    assert_eq!(f.emit(&mut [0u8; 7]), Err(Error::BufferTooSmall));
}

#[test]
fn later_fragment_stops_walk() {
    let mut p = [0u8; 16];
    p[..8].copy_from_slice(&[0x11, 0x00, 0x05, 0x00, 0, 0, 0, 1]); // offset 160
    p[8..].copy_from_slice(&[0x00, 0x00, 0, 0, 0, 0, 0, 0]); // looks like HbH: not walked
    let c = parse_chain(ip_protocol::IPV6_FRAG, &p).unwrap();
    assert_eq!(
        (c.upper, c.upper_offset, c.later_fragment, c.count),
        (17, 8, true, 1)
    );
}

#[test]
fn no_extension_headers() {
    let c = parse_chain(ip_protocol::TCP, &[]).unwrap();
    assert_eq!((c.upper, c.upper_offset, c.count), (ip_protocol::TCP, 0, 0));
    let c = parse_chain(ip_protocol::IPV6_NONXT, &[1, 2, 3]).unwrap();
    assert_eq!((c.upper, c.upper_offset), (ip_protocol::IPV6_NONXT, 0));
}

#[test]
fn dest_opts_placement_and_auth() {
    // DestOpts -> Routing(type 0 empty) -> AH (len 1 = 12 bytes: not a multiple of 8
    // would be malformed, so len 2 = 16) -> DestOpts -> ICMPv6.
    let mut p = [0u8; 8 + 8 + 16 + 8];
    p[0] = ip_protocol::IPV6_ROUTE;
    p[8] = ip_protocol::AH;
    p[16] = ip_protocol::IPV6_OPTS;
    p[17] = 2;
    p[32] = ip_protocol::IPV6_ICMP;
    let c = parse_chain(ip_protocol::IPV6_OPTS, &p).unwrap();
    assert_eq!(c.dest_opts_routing, Some(0..8));
    assert_eq!(c.routing, Some(8..16));
    assert_eq!(c.auth, Some(16..32));
    assert_eq!(c.dest_opts, Some(32..40));
    assert_eq!(
        (c.upper, c.upper_offset, c.count),
        (ip_protocol::IPV6_ICMP, 40, 4)
    );
    p[17] = 1;
    assert_eq!(
        parse_chain(ip_protocol::IPV6_OPTS, &p),
        Err(Error::Malformed)
    );
}

#[test]
fn walk_errors() {
    // A header running past the payload.
    for n in [1, 7, 20, 39] {
        let mut w = walk(ip_protocol::HOPOPT, &payload()[..n]);
        let last = (&mut w).last().unwrap();
        assert_eq!(last, Err(Error::Truncated), "n = {n}");
        assert_eq!(w.next(), None);
        assert_eq!(w.upper(), None);
    }
    assert_eq!(parse_chain(ip_protocol::HOPOPT, &[]), Err(Error::Truncated));
    // Hop-by-Hop after another header.
    let mut p = [0u8; 16];
    p[0] = ip_protocol::HOPOPT;
    assert_eq!(
        parse_chain(ip_protocol::IPV6_OPTS, &p),
        Err(Error::Malformed)
    );
}

#[test]
fn walk_is_bounded() {
    // 17 Destination Options headers, each pointing at the next.
    let mut p = [0u8; 17 * 8 + 8];
    for i in 0..17 {
        p[i * 8] = ip_protocol::IPV6_OPTS;
    }
    let mut w = walk(ip_protocol::IPV6_OPTS, &p);
    assert_eq!((&mut w).filter(Result::is_ok).count(), MAX_EXT_HEADERS);
    assert_eq!(
        parse_chain(ip_protocol::IPV6_OPTS, &p),
        Err(Error::Unsupported)
    );
    p[15 * 8] = ip_protocol::UDP;
    assert_eq!(parse_chain(ip_protocol::IPV6_OPTS, &p).unwrap().count, 16);
}

#[test]
fn emit_options_header_pads() {
    let ra = [0u8, 0];
    let opts = [Kind::Unknown {
        option_type: option_type::ROUTER_ALERT,
        data: &ra,
    }];
    assert_eq!(options_header_len(&opts), 8);
    let mut buf = [0xffu8; 16];
    assert_eq!(
        emit_options_header(ip_protocol::IPV6_ICMP, &opts, &mut buf),
        Ok(8)
    );
    // RFC 2711 Router Alert as sent with MLD: 3a 00 05 02 00 00 01 00.
    assert_eq!(&buf[..8], &[0x3a, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00]);

    let d = [0x11u8; 4];
    let opts = [
        Kind::Unknown {
            option_type: 0x1e,
            data: &d,
        },
        Kind::Pad1,
    ];
    assert_eq!(emit_options_header(0x11, &opts, &mut buf), Ok(16));
    let h = OptionsHeader::new_checked(&buf[..]).unwrap();
    assert_eq!(h.hdr_ext_len(), 1);
    let kinds: Vec<_> = h.iter_options().map(|o| o.unwrap().kind).collect();
    assert_eq!(kinds, [opts[0], Kind::Pad1, Kind::PadN(5)]);

    // Exactly 8 bytes of option: no padding at all.
    let opts = [Kind::Unknown {
        option_type: 0x1e,
        data: &d,
    }];
    assert_eq!(emit_options_header(0x11, &opts, &mut buf), Ok(8));
    assert_eq!(
        emit_options_header(0x11, &opts, &mut buf[..7]),
        Err(Error::BufferTooSmall)
    );
    // A 7-byte tail gets one Pad1 only.
    let opts = [Kind::Unknown {
        option_type: 0x1e,
        data: &d[..3],
    }];
    assert_eq!(emit_options_header(0x11, &opts, &mut buf), Ok(8));
    assert_eq!(buf[7], 0);
}

#[test]
fn truncated_views() {
    assert_eq!(
        OptionsHeader::new_checked(&payload()[..7]).unwrap_err(),
        Error::Truncated
    );
    assert_eq!(
        RoutingHeader::new_checked(&payload()[8..31]).unwrap_err(),
        Error::Truncated
    );
    assert_eq!(
        FragmentHeader::new_checked(&payload()[32..39]).unwrap_err(),
        Error::Truncated
    );
    // Options that run past the header: the view checks, the Repr does not parse.
    let bad = [0x3a, 0x00, 0x1e, 0x09, 0, 0, 0, 0];
    let h = OptionsHeader::new_checked(&bad[..]).unwrap();
    assert_eq!(OptionsRepr::parse(&h), Err(Error::Truncated));
}

#[test]
fn fuzz_smoke() {
    let mut d = [0u8; 1 + 52];
    d[0] = 0;
    d[1..].copy_from_slice(payload());
    for n in 0..=d.len() {
        fuzz(&d[..n]);
        fuzz(&d[n..]);
    }
}
