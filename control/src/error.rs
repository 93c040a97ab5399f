//! The daemon's errors: a configuration error that names its key, and what can stop a run.
//! A leaf module: every other module may use it, it uses none of them.

/// A configuration error that names the field and says why.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{0}")]
    Syntax(String),
    #[error("invalid `{field}`: {reason}")]
    Invalid { field: String, reason: String },
}

/// A [`ConfigError::Invalid`] naming `field` (dotted, as in the file: `upf.mtu`).
pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

/// A feature section that does not deserialize: an unknown key is named in full
/// (`upf.mtux`), anything else under the section's name.
pub fn section_error(section: &str, e: &toml::de::Error) -> ConfigError {
    let m = e.message();
    if let Some(rest) = m.strip_prefix("unknown field `") {
        if let Some((key, expected)) = rest.split_once('`') {
            let expected = expected.trim_start_matches(',').trim();
            return invalid(
                format!("{section}.{key}"),
                format!("unknown key ({expected})"),
            );
        }
    }
    invalid(section, m.to_string())
}

/// Why `peregrine run` could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("backend: {0}")]
    Backend(String),
    #[error("cannot start workers: {0}")]
    Spawn(#[from] std::io::Error),
    #[error("DTA: {0}")]
    Dta(String),
    #[error("INT manager: {0}")]
    IntManager(std::io::Error),
    #[error("metrics endpoint {addr}: {error}")]
    Metrics {
        addr: std::net::SocketAddr,
        error: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct S {
        mtu: u16,
    }

    #[test]
    fn an_unknown_key_is_named_with_its_section() {
        let e = toml::Value::Table(toml::from_str("mtux = 1").unwrap())
            .try_into::<S>()
            .unwrap_err();
        let m = section_error("upf", &e).to_string();
        assert!(m.starts_with("invalid `upf.mtux`: unknown key"), "{m}");
        assert!(m.contains("mtu"), "the keys it could be: {m}");
        let e = toml::Value::Table(toml::from_str("mtu = \"big\"").unwrap())
            .try_into::<S>()
            .unwrap_err();
        assert!(section_error("upf", &e)
            .to_string()
            .starts_with("invalid `upf`: "));
    }
}
