//! Fuzz `peregrine_planner::Topology::from_json`: any input is refused with a message or
//! parsed; a parsed topology of at most 48 nodes and 256 flows is planned (points, splits)
//! without panicking, and the plan's bounds are ordered.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_planner::Topology;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Topology::from_json(text) {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(t) if t.node_count() <= 48 && t.flows.len() <= 256 => {
            if let Ok(p) = peregrine_planner::plan(&t) {
                assert!(p.lower_bound <= p.objective + 1e-9);
                assert!((0.0..=1.0).contains(&p.coverage));
                assert!((0.0..=1.0).contains(&p.scale));
            }
        }
        Ok(_) => {}
    }
});
