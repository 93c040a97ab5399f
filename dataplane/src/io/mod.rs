//! I/O backends.
