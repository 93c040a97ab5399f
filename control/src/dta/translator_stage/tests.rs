//! The translator stage's tests: the fixed-offset outer parse against the general one, and
//! the benchmark loop-back.

use super::*;
use peregrine_wire::dta::{FrameAddrs, Primitive, Repr};
use peregrine_wire::ethernet::Address;

fn valid() -> Vec<u8> {
    let r = Repr {
        seqnum: 3,
        retransmittable: true,
        ..Repr::new(Variant::Tracked, Primitive::Append { list: 1, data: 7 })
    };
    let a = FrameAddrs {
        eth_src: Address([2, 0, 0, 0, 0, 2]),
        eth_dst: Address([2, 0, 0, 0, 0, 1]),
        ip_src: std::net::Ipv4Addr::new(10, 0, 0, 200),
        ip_dst: std::net::Ipv4Addr::new(10, 0, 0, 51),
        src_port: 40041,
        dst_port: dta::UDP_PORT,
    };
    let mut b = vec![0u8; 96];
    let len = r.emit(&mut b[dta::FRAME_OVERHEAD..]).unwrap();
    let n = dta::emit_frame(&mut b, &a, len).unwrap();
    b.truncate(n.max(60));
    b
}

/// The fixed-offset parse agrees with the wire crate's general one on valid frames and
/// on frames with bytes of their headers changed, cut short, or padded.
#[test]
fn fast_outer_parse_is_the_general_parse() {
    let f = valid();
    let got = report_offsets(&f);
    assert_eq!(got, report_offsets_general(&f));
    assert_eq!(got.map(|g| (g.0, g.1, g.3)), Some((34, 0x0a00_00c8, 40040)));
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..200_000 {
        let mut g = valid();
        for _ in 0..=(next() % 3) {
            let r = next();
            // Mostly the Ethernet / IPv4 / UDP headers, some of the payload.
            let at = (r % 48) as usize;
            let v = (r >> 8) as u8;
            match r >> 60 {
                0 => g.truncate(at),
                1 => g.extend_from_slice(&[v; 9]),
                2 if g.len() > 14 => g[14] = 0x40 | (v & 0x0f),
                _ if at < g.len() => g[at] = v,
                _ => {}
            }
        }
        // Some with the IPv4 checksum made right again, so later checks are reached.
        if next() % 2 == 0 && g.len() >= 34 && g[14] == 0x45 {
            let mut ip = ipv4::Packet::new_unchecked(&mut g[14..34]);
            ip.fill_checksum();
        }
        let (a, b) = (report_offsets(&g), report_offsets_general(&g));
        assert_eq!(a, b, "frame {g:02x?}");
        if a.is_some() {
            ok += 1;
        } else {
            refused += 1;
        }
    }
    assert!(ok > 10_000 && refused > 10_000, "{ok} {refused}");
}

/// The bounded loop-back keeps Key-Write / Key-Increment / Postcarding keys in [0, K)
/// and visits all K of them; Postcarding's hop is left alone; unbounded is the old +step.
#[test]
fn loopback_bounded_keys() {
    let emit = |p: Primitive| {
        let r = Repr::new(Variant::Tracked, p);
        let mut b = vec![0u8; 32];
        let n = r.emit(&mut b).unwrap();
        b.truncate(n);
        b
    };
    let parse = |b: &[u8]| {
        Repr::parse(&dta::Packet::new_checked(b, Variant::Tracked).unwrap())
            .unwrap()
            .primitive
    };
    for k in [1u32, 7, 12, 1_048_573] {
        let lb = Loopback::new(Variant::Tracked).with_keys(k);
        let mut kw = emit(Primitive::key_write(2, lb.key(0x9e37_79b9), &[5]).unwrap());
        let mut pc = emit(Primitive::Postcard {
            key: lb.key(77),
            hop: 3,
            data: 9,
        });
        let mut seen = std::collections::HashSet::new();
        for _ in 0..k.min(5000) {
            lb.advance(&mut kw);
            lb.advance(&mut pc);
            match parse(&kw) {
                Primitive::KeyWrite { key, .. } => {
                    assert!(key < k);
                    seen.insert(key);
                }
                p => panic!("{p:?}"),
            }
            match parse(&pc) {
                Primitive::Postcard { key, hop, .. } => assert!(key < k && hop == 3),
                p => panic!("{p:?}"),
            }
        }
        assert_eq!(seen.len() as u32, k.min(5000), "K = {k}");
    }
    let lb = Loopback::new(Variant::Tracked);
    let mut ki = emit(Primitive::KeyIncrement {
        redundancy: 2,
        key: u32::MAX,
        counter: 1,
    });
    lb.advance(&mut ki);
    assert!(matches!(parse(&ki), Primitive::KeyIncrement { key, .. } if key == KEY_STEP - 1));
}
