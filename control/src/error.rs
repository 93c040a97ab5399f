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
