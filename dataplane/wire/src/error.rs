use core::fmt;

/// Why a buffer is not a valid header of the kind asked for.
///
/// Kept small and `Copy` so that the hot path can turn it into a drop-reason counter
/// without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header (or than a length field inside it says).
    Truncated,
    /// A length, version or other field holds a value the format does not allow.
    Malformed,
    /// A checksum does not verify.
    Checksum,
    /// Well-formed, but a variant we do not implement (e.g. an IP version or GTP version).
    Unsupported,
    /// The destination buffer given to `emit` is too small for the representation.
    BufferTooSmall,
}

impl Error {
    /// A stable snake_case name, used as a drop-reason suffix and in logs.
    pub const fn name(self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::Malformed => "malformed",
            Error::Checksum => "bad_checksum",
            Error::Unsupported => "unsupported",
            Error::BufferTooSmall => "buffer_too_small",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(any(test, feature = "std"))]
impl std::error::Error for Error {}

pub type Result<T> = core::result::Result<T, Error>;
