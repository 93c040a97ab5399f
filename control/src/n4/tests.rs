use super::*;
use peregrine_pfcp::ie::{Bitmap, NodeId};
use peregrine_pfcp::message::{AssociationRequest, Body, Heartbeat};
use peregrine_pfcp::Message;
use std::net::Ipv4Addr;

/// Counts what the endpoint asks of the rule side.
#[derive(Default)]
struct Count(Arc<Mutex<(u32, u32, u32)>>);

impl SessionRules for Count {
    fn check(&self, _s: &Session) -> Result<(), Reject> {
        Ok(())
    }
    fn usage(&mut self, _seid: u64, _urr: u32) -> Option<Usage> {
        None
    }
    fn quota_exhausted(&mut self, _s: &Session, _urr: u32) {}
    fn upsert(&mut self, _s: &Session) -> Result<(), Reject> {
        self.0.lock().unwrap().0 += 1;
        Ok(())
    }
    fn remove(&mut self, _up_seid: u64) {
        self.0.lock().unwrap().1 += 1;
    }
    fn publish(&mut self) -> u64 {
        let mut c = self.0.lock().unwrap();
        c.2 += 1;
        u64::from(c.2)
    }
    fn seen(&mut self, _g: u64) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

/// A node-level request (no SEID), encoded.
fn req(seq: u32, body: Body) -> Vec<u8> {
    peregrine_testkit::pfcp::requests::msg(seq, None, body)
}

fn exchange(c: &UdpSocket, to: SocketAddr, bytes: &[u8]) -> Option<Message> {
    c.send_to(bytes, to).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = c.recv_from(&mut buf).ok()?;
    Some(Message::parse(&buf[..n]).expect("our response decodes"))
}

#[test]
fn n4_sockets_get_a_receive_buffer_for_a_burst() {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let got = grow_rcvbuf(&s);
    // SO_RCVBUFFORCE (root, as in CI) grants the whole request; SO_RCVBUF up to rmem_max.
    let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        got >= N4_RCVBUF.min(rmem_max),
        "{got} (rmem_max {rmem_max})"
    );
}

#[test]
fn answers_heartbeat_and_association_over_udp_and_survives_garbage() {
    let node = NodeConfig::new(
        NodeId::Ipv4(Ipv4Addr::LOCALHOST),
        0x1234_5678,
        Some(Ipv4Addr::LOCALHOST),
    );
    let ep = N4Endpoint::start(
        N4Config {
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            node,
            usage_interval: Duration::from_millis(100),
        },
        Count::default(),
    )
    .unwrap();
    let to = ep.local_addrs()[0];
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let hb = req(
        1,
        Body::HeartbeatRequest(Heartbeat {
            recovery_time_stamp: 9,
            extra: vec![],
        }),
    );
    let r = exchange(&c, to, &hb).expect("heartbeat answered");
    assert_eq!(r.seq, 1);
    match r.body {
        Body::HeartbeatResponse(h) => assert_eq!(h.recovery_time_stamp, 0x1234_5678),
        b => panic!("{b:?}"),
    }
    // Garbage and a truncated header are not answered and do not stop the endpoint.
    c.send_to(&[0xde, 0xad], to).unwrap();
    c.send_to(&hb[..6], to).unwrap();
    let setup = req(
        2,
        Body::AssociationSetupRequest(AssociationRequest {
            node_id: NodeId::fqdn("smf.test"),
            recovery_time_stamp: Some(5),
            up_function_features: None,
            extra: vec![],
        }),
    );
    let r = exchange(&c, to, &setup).expect("setup answered");
    match r.body {
        Body::AssociationSetupResponse(a) => {
            assert_eq!(a.cause, peregrine_pfcp::cause::REQUEST_ACCEPTED);
            assert_eq!(a.up_function_features, Some(Bitmap(0x10)));
        }
        b => panic!("{b:?}"),
    }
    // The status is shared after the responses go out; give the thread a moment.
    let t0 = Instant::now();
    let mut st = ep.status();
    while st.counts.datagrams_out < 2 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
        st = ep.status();
    }
    assert_eq!(st.associations, 1);
    assert_eq!(st.counts.datagrams_in, 4);
    assert_eq!(st.counts.datagrams_out, 2);
}
