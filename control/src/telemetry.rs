//! Telemetry one feature hands to another through the daemon (a platform hook, not a
//! dependency between features): producers (the INT sink, Kestrel, fridges) put records
//! on the control loop's bus after their tick, consumers (the DTA reporter) read them.
//!
//! Everything here happens on the control thread, from data the producer already has there
//! (sink reports it pumps, windows it closes, samples it drains): the workers are not
//! involved and nothing is produced unless a consumer asked for that kind
//! ([`crate::feature::Feature::telemetry_request`]). A consumer asking for a kind no enabled
//! feature produces is a configuration error naming the consumer's key
//! ([`check_and_request`]).

use crate::error::{invalid, ConfigError};
use peregrine_int::report::IntReport;

/// A kind of telemetry record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Every report the INT sink emits (its per-hop values).
    IntSink,
    /// Per closed Kestrel window, each installed session key's estimate.
    KestrelKeys,
    /// Every matched fridge delay sample.
    FridgeSamples,
}

impl Kind {
    /// What enables the producer, for error messages.
    pub fn producer(self) -> &'static str {
        match self {
            Kind::IntSink => "an [int] section with the \"sink\" role",
            Kind::KestrelKeys => {
                "a [kestrel] section in the upf pipeline (keys come from its PFCP sessions)"
            }
            Kind::FridgeSamples => "a [fridge] section",
        }
    }
}

/// One record on the bus.
#[derive(Debug, Clone, PartialEq)]
pub enum Telemetry {
    /// A report the INT sink emitted (boxed: it holds 16 hops).
    IntSink(Box<IntReport>),
    /// Kestrel: the estimate of one (direction, TEID, QFI) key of an installed session in a
    /// closed window (the Count-Min query of the window's sketch: minimum over rows).
    KestrelKey {
        seq: u64,
        /// 0 uplink, 1 downlink.
        dir: u8,
        teid: u32,
        qfi: u8,
        packets: u64,
        bytes: u64,
    },
    /// A fridge's matched delay sample (the raw samples of `docs/fridge.md`).
    FridgeSample {
        /// Index of the slice in `[[fridge.slice]]` order.
        slice: u16,
        fridge: u16,
        delay_ns: u64,
    },
}

impl Telemetry {
    pub fn kind(&self) -> Kind {
        match self {
            Telemetry::IntSink(_) => Kind::IntSink,
            Telemetry::KestrelKey { .. } => Kind::KestrelKeys,
            Telemetry::FridgeSample { .. } => Kind::FridgeSamples,
        }
    }
}

/// Every kind some consumer wants must have a producer: the first one without is an error
/// naming the consumer's key. Producers are then told which kinds to produce.
pub fn check_and_request<F: ?Sized + TelemetryHooks>(
    features: &mut [Box<F>],
) -> Result<(), ConfigError> {
    let produced: Vec<Kind> = features.iter().flat_map(|f| f.produces()).collect();
    let wanted: Vec<(Kind, &'static str)> = features.iter().flat_map(|f| f.wants()).collect();
    for (k, key) in &wanted {
        if !produced.contains(k) {
            return Err(invalid(
                *key,
                format!("nothing produces this feed: it needs {}", k.producer()),
            ));
        }
    }
    for f in features.iter_mut() {
        for k in f.produces() {
            if wanted.iter().any(|(w, _)| *w == k) {
                f.request(k);
            }
        }
    }
    Ok(())
}

/// The part of [`crate::feature::Feature`] that [`check_and_request`] uses.
pub trait TelemetryHooks {
    fn produces(&self) -> Vec<Kind>;
    fn wants(&self) -> Vec<(Kind, &'static str)>;
    fn request(&mut self, k: Kind);
}

#[cfg(test)]
mod tests {
    use super::*;

    struct F(Vec<Kind>, Vec<(Kind, &'static str)>, Vec<Kind>);
    impl TelemetryHooks for F {
        fn produces(&self) -> Vec<Kind> {
            self.0.clone()
        }
        fn wants(&self) -> Vec<(Kind, &'static str)> {
            self.1.clone()
        }
        fn request(&mut self, k: Kind) {
            self.2.push(k);
        }
    }

    #[test]
    fn a_wanted_kind_without_producer_names_the_key_and_producers_are_asked_only_for_wanted_kinds()
    {
        let mut fs = vec![
            Box::new(F(vec![Kind::IntSink, Kind::FridgeSamples], vec![], vec![])),
            Box::new(F(vec![], vec![(Kind::FridgeSamples, "dta.fridge")], vec![])),
        ];
        check_and_request(&mut fs).unwrap();
        assert_eq!(fs[0].2, vec![Kind::FridgeSamples]);
        let mut fs = vec![Box::new(F(
            vec![],
            vec![(Kind::KestrelKeys, "dta.kestrel")],
            vec![],
        ))];
        let e = check_and_request(&mut fs).unwrap_err().to_string();
        assert!(e.contains("dta.kestrel") && e.contains("[kestrel]"), "{e}");
    }
}
