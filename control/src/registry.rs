//! Every feature the daemon knows, in pipeline order: at each [`Place`](crate::feature::Place)
//! the stages of earlier features run first. Adding a feature is one module implementing
//! [`Configure`] and [`Feature`], and one line in [`features`].

use crate::error::ConfigError;
use crate::feature::{Configure, Feature};
use crate::platform::Platform;
use peregrine_dataplane::PacketBuf;

/// A registered feature: its section and its constructor for buffers `B`.
pub struct Registered<B> {
    pub section: &'static str,
    configure: Constructor<B>,
}

type Constructor<B> =
    fn(Option<&toml::Value>, &Platform) -> Result<Option<Box<dyn Feature<B>>>, ConfigError>;

impl<B> std::fmt::Debug for Registered<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("section", &self.section)
            .finish()
    }
}

fn kind<B: PacketBuf, F: Configure + Feature<B> + 'static>() -> Registered<B> {
    Registered {
        section: F::SECTION,
        configure: |s, p| Ok(F::configure(s, p)?.map(|f| Box::new(f) as Box<dyn Feature<B>>)),
    }
}

/// The features, in pipeline order.
pub fn features<B: PacketBuf + 'static>() -> Vec<Registered<B>> {
    vec![
        kind::<B, crate::upf::UpfFeature>(),
        kind::<B, crate::int::IntFeature>(),
        kind::<B, crate::kestrel::KestrelFeature>(),
        kind::<B, crate::dta::DtaTranslatorFeature>(),
        kind::<B, crate::dta::reporter::DtaReporterFeature>(),
        kind::<B, crate::fridge::FridgeFeature>(),
    ]
}

/// The sections the features own (top-level keys of the file).
pub fn sections() -> Vec<&'static str> {
    features::<peregrine_dataplane::OwnedBuf>()
        .iter()
        .map(|r| r.section)
        .collect()
}

/// The features `sections` enable, configured and validated, in pipeline order.
pub fn configure<B: PacketBuf + 'static>(
    sections: &toml::Table,
    p: &Platform,
) -> Result<Vec<Box<dyn Feature<B>>>, ConfigError> {
    let mut out = Vec::new();
    for r in features::<B>() {
        if let Some(f) = (r.configure)(sections.get(r.section), p)? {
            out.push(f);
        }
    }
    crate::telemetry::check_and_request(&mut out)?;
    Ok(out)
}
