//! Every `unsafe` operation of the paging front end: the anonymous
//! mapping, dropping a page from it, and the userfaultfd copy that fills
//! a missing page. Nothing else in the crate is `unsafe`.

#![allow(unsafe_code)]

use std::io;
use std::ptr::NonNull;

use smt_pagecrypt::{Page, PAGE_SIZE};
use userfaultfd::Uffd;

/// A private anonymous read-only mapping of whole pages, registered with
/// a userfaultfd for missing pages by its owner.
#[derive(Debug)]
pub(super) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; the region
// shares it read-only between the application's threads and the fault
// handler, which changes it only through the kernel (UFFDIO_COPY, madvise).
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` hands out only shared, read-only views.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `pages` pages, readable only, reserving no swap.
    pub(super) fn new(pages: usize) -> io::Result<Self> {
        let len = pages
            .checked_mul(PAGE_SIZE)
            .filter(|&l| l > 0)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "region size"))?;
        // SAFETY: a fresh anonymous mapping at an address of the kernel's
        // choice aliases nothing; the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        Ok(Self { base, len })
    }

    pub(super) fn base(&self) -> *mut libc::c_void {
        self.base.as_ptr().cast()
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The mapping's bytes. A missing page faults and the reading thread
    /// waits until the handler fills it.
    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: `base..base+len` is one live mapping for as long as
        // `self` is. Its contents never change while shared: it is
        // read-only to every thread, a page is filled only while missing
        // (UFFDIO_COPY of that page's one true content), and eviction
        // (MADV_DONTNEED) makes the next read fault and be filled with the
        // same bytes again, as swapping does.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.len) }
    }

    /// Fills missing page `index` with `page` and wakes the threads
    /// waiting for it. `Ok(false)`: the page was already there (another
    /// fault filled it first); the waiters are woken anyway.
    pub(super) fn fill(&self, uffd: &Uffd, index: usize, page: &Page) -> io::Result<bool> {
        let dst = self.page_ptr(index)?;
        // SAFETY: `dst` is a page of this mapping (checked above), which is
        // registered with `uffd`; `page` is a readable 4096-byte buffer.
        // The kernel copies atomically into the missing page: no Rust
        // reference observes a change (the page was absent until now).
        let copied = unsafe { uffd.copy(page.as_ptr().cast(), dst, PAGE_SIZE, true) };
        match copied {
            Ok(_) => Ok(true),
            Err(userfaultfd::Error::CopyFailed(e)) if e as i32 == libc::EEXIST => {
                uffd.wake(dst, PAGE_SIZE).map_err(io::Error::other)?;
                Ok(false)
            }
            Err(e) => Err(io::Error::other(e)),
        }
    }

    /// Drops page `index`; the next access faults again.
    pub(super) fn evict(&self, index: usize) -> io::Result<()> {
        let ptr = self.page_ptr(index)?;
        // SAFETY: a page of this mapping; MADV_DONTNEED on a private
        // anonymous mapping only discards its contents (no Rust reference
        // sees a change: the next read faults and is filled with the same
        // bytes, see `bytes`).
        let r = unsafe { libc::madvise(ptr, PAGE_SIZE, libc::MADV_DONTNEED) };
        match r {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    fn page_ptr(&self, index: usize) -> io::Result<*mut libc::c_void> {
        if index >= self.len / PAGE_SIZE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "page outside the region",
            ));
        }
        // SAFETY: the offset is inside the mapping (checked above).
        Ok(unsafe { self.base.as_ptr().add(index * PAGE_SIZE) }.cast())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no reference to it outlives
        // `self` (`bytes` borrows `self`).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// Makes this thread's timed sleeps end on time: Linux lets a normal
/// thread's timers fire up to 50 µs late by default (timer slack), which
/// would add as much to the open-loop workers' start times.
pub(crate) fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only
    // the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}
