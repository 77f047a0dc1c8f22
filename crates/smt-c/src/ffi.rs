//! The boundary: C pointers and lengths into Rust values, results and
//! panics into codes. Every `unsafe` operation of the crate that reads or
//! writes the caller's memory is in here or in `msg.rs`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use crate::error::{
    self, Failure, SMT_ERR_ADDRESS, SMT_ERR_BUFFER, SMT_ERR_INTERNAL, SMT_ERR_INVALID,
};

/// Runs one API call: its failure becomes this thread's last error and its
/// (negative) code; a panic is caught here and never unwinds into C.
pub fn guard(f: impl FnOnce() -> Result<c_int, Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => value,
        Ok(Err(failure)) => error::record(failure),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            error::record(Failure::new(
                SMT_ERR_INTERNAL,
                format!("libsmt failed internally (a bug; please report it): {what}"),
            ))
        }
    }
}

/// A C string argument as UTF-8.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays valid and
/// unchanged for `'a`.
pub unsafe fn text<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: not NULL, and the caller promises a NUL-terminated string
    // valid for 'a.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str()
        .map_err(|_| Failure::new(SMT_ERR_INVALID, format!("{what} is not UTF-8 text")))
}

/// An optional C string argument (NULL: none).
///
/// # Safety
/// As [`text`].
pub unsafe fn optional_text<'a>(
    ptr: *const c_char,
    what: &str,
) -> Result<Option<&'a str>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's promise, passed on.
    unsafe { text(ptr, what) }.map(Some)
}

/// A path argument.
///
/// # Safety
/// As [`text`].
pub unsafe fn path<'a>(ptr: *const c_char, what: &str) -> Result<&'a Path, Failure> {
    // SAFETY: the caller's promise, passed on.
    unsafe { text(ptr, what) }.map(Path::new)
}

/// An `IP:PORT` argument.
///
/// # Safety
/// As [`text`].
pub unsafe fn addr(ptr: *const c_char, what: &str) -> Result<SocketAddr, Failure> {
    // SAFETY: the caller's promise, passed on.
    let text = unsafe { text(ptr, what) }?;
    text.parse().map_err(|_| {
        Failure::new(
            SMT_ERR_ADDRESS,
            format!(
                "{what} {text:?} is not IP:PORT (e.g. 127.0.0.1:7878 or [::1]:7878; host names: \
                 smt_resolve)"
            ),
        )
    })
}

/// A buffer argument: `len` bytes at `ptr` (NULL allowed when `len` is
/// zero). `max` is checked before the memory is looked at, so a huge
/// length is refused without touching it.
///
/// # Safety
/// Unless NULL, `ptr` points to `len` readable bytes that stay unchanged
/// for `'a`.
pub unsafe fn bytes<'a>(
    ptr: *const c_void,
    len: usize,
    max: usize,
    what: &str,
    too_long: impl FnOnce(usize) -> Failure,
) -> Result<&'a [u8], Failure> {
    if len > max {
        return Err(too_long(len));
    }
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::new(
            SMT_ERR_INVALID,
            format!("{what} is NULL but its length is {len}"),
        ));
    }
    // SAFETY: not NULL; the caller promises `len` readable bytes valid for
    // 'a; `len` is at most `max`, which is far below isize::MAX.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// Stores `value` where an out-pointer points.
///
/// # Safety
/// Unless NULL, `ptr` is valid for writing a `T` (it may be uninitialised).
pub unsafe fn write<T>(ptr: *mut T, value: T, what: &str) -> Result<(), Failure> {
    if ptr.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: not NULL; the caller promises it is valid for a write of T.
    // `write` does not read or drop what was there (it may be garbage).
    unsafe { ptr.write(value) };
    Ok(())
}

/// Copies `text` and a NUL into the caller's buffer of `len` bytes;
/// `SMT_ERR_BUFFER` if it does not fit.
///
/// # Safety
/// Unless NULL, `buf` is valid for writing `len` bytes.
pub unsafe fn write_text(
    buf: *mut c_char,
    len: usize,
    text: &str,
    what: &str,
) -> Result<(), Failure> {
    if buf.is_null() {
        return Err(Failure::null(what));
    }
    if text.len() >= len {
        return Err(Failure::new(
            SMT_ERR_BUFFER,
            format!(
                "{what} holds {len} bytes; {} are needed ({text:?} and its NUL)",
                text.len() + 1
            ),
        ));
    }
    // SAFETY: `buf` is not NULL and valid for `len` bytes (the caller's
    // promise); `text.len() + 1 <= len`; a Rust string and a C buffer never
    // overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        buf.add(text.len()).write(0);
    }
    Ok(())
}
