//! The one place that calls libc directly: integer socket options socket2 does not wrap
//! (`UDP_GRO`, `SO_RCVBUFFORCE`, `SO_SNDBUFFORCE`).
#![allow(unsafe_code)]

use std::{
    io, mem,
    os::fd::{AsRawFd, BorrowedFd},
    ptr,
};

/// `setsockopt(fd, level, name, &value, sizeof(int))`.
pub(crate) fn set_int_option(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    let len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is an open descriptor for the duration of the borrow; the option value points
    // to a live `c_int` and `len` is exactly its size; setsockopt only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            ptr::from_ref(&value).cast(),
            len,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
