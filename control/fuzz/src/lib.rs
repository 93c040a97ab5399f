//! What the fuzz targets of this crate share.

/// The messages of one fuzz input: the bytes between `\n--\n` separators (one message when
/// there is none), so one input can hold a sequence a collector receives.
pub fn split_messages(data: &[u8]) -> Vec<&[u8]> {
    let sep = b"\n--\n";
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(i) = rest.windows(sep.len()).position(|w| w == sep) {
        out.push(&rest[..i]);
        rest = &rest[i + sep.len()..];
    }
    out.push(rest);
    out
}
