//! The collector's side on a real RDMA NIC (feature `verbs`): register a region, connect a
//! QP per translator worker, and hand back what the translator's `[dta_translator.rocev2]`
//! needs. Skips, saying so, when `ibv_get_device_list` finds no RDMA device (CI, and the
//! development VM: no NIC and no rxe module).
#![cfg(feature = "verbs")]

use peregrine_dta::verbs::{devices, Peer, PortConfig, Responder, VerbsError};
use peregrine_dta::{Region, Sizes};
use std::sync::Arc;

#[test]
fn register_the_region_and_connect_per_worker_queue_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let region = Arc::new(Region::create(dir.path().join("r"), Sizes::default()).unwrap());
    let devs = devices();
    if devs.is_empty() {
        // Opening must then say so, not crash.
        let e = Responder::open(None, PortConfig::default(), region).unwrap_err();
        assert!(matches!(e, VerbsError::NoDevice), "{e}");
        eprintln!("skipping: no RDMA device ({e})");
        return;
    }
    eprintln!("RDMA devices: {devs:?}");
    let mut r = Responder::open(Some(&devs[0]), PortConfig::default(), region.clone())
        .expect("open the first device and register the region");
    let c = r
        .connect(&Peer {
            ip: "10.0.0.1".parse().unwrap(),
            local_qp: 0x100,
            workers: 2,
            first_psn: 0,
        })
        .expect("QPs to RTS");
    assert_eq!(c.qp.len(), 2);
    assert!(c.qp.iter().all(|q| *q != 0 && *q <= 0xff_ffff));
    assert_ne!(c.base_va, 0);
    let e = Responder::open(Some("no-such-device"), PortConfig::default(), region).unwrap_err();
    assert!(matches!(e, VerbsError::UnknownDevice(_)), "{e}");
}
