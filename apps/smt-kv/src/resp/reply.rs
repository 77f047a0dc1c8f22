//! Writing RESP2 replies into a connection's output buffer.

use crate::num::push_i64;

/// `+<text>\r\n`.
pub fn simple(out: &mut Vec<u8>, text: &str) {
    out.push(b'+');
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `+OK\r\n`.
pub fn ok(out: &mut Vec<u8>) {
    out.extend_from_slice(b"+OK\r\n");
}

/// `-<text>\r\n`. `text` starts with the error code (`ERR`, `WRONGTYPE`);
/// any `\r` or `\n` in it (an echoed argument) becomes a space, as Redis
/// does, so the reply stays one line.
pub fn error(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'-');
    out.extend(
        text.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// `:<n>\r\n`.
pub fn integer(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    push_i64(out, n);
    out.extend_from_slice(b"\r\n");
}

/// `$<len>\r\n<bytes>\r\n`.
pub fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'$');
    push_i64(out, len_i64(bytes.len()));
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// A bulk string, or the null bulk string `$-1\r\n` for `None`.
pub fn bulk_or_nil(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => bulk(out, b),
        None => nil(out),
    }
}

/// The null bulk string, RESP2's "no value".
pub fn nil(out: &mut Vec<u8>) {
    out.extend_from_slice(b"$-1\r\n");
}

/// The null array `*-1\r\n` (RESP2's "no values", where an array is due).
pub fn nil_array(out: &mut Vec<u8>) {
    out.extend_from_slice(b"*-1\r\n");
}

/// A score (a double) as a bulk string, as Redis 7.0 writes it.
pub fn double(out: &mut Vec<u8>, d: f64) {
    let mut text = Vec::with_capacity(24);
    crate::num::push_f64(&mut text, d);
    bulk(out, &text);
}

/// `*<len>\r\n`: an array header; its `len` elements follow.
pub fn array(out: &mut Vec<u8>, len: usize) {
    out.push(b'*');
    push_i64(out, len_i64(len));
    out.extend_from_slice(b"\r\n");
}

/// A length as RESP writes it (lengths of things in memory fit an `i64`).
fn len_i64(len: usize) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}

/// A whole command in multibulk form, as clients send it.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    array(out, args.len());
    for a in args {
        bulk(out, a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_byte_exact() {
        let mut out = Vec::new();
        ok(&mut out);
        integer(&mut out, -7);
        bulk(&mut out, b"a\r\nb");
        nil(&mut out);
        array(&mut out, 2);
        error(&mut out, b"ERR bad\r\narg");
        assert_eq!(
            out,
            b"+OK\r\n:-7\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n-ERR bad  arg\r\n"
        );
    }
}
