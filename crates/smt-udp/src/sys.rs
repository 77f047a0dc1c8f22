//! The one place that calls libc directly: integer socket options socket2 does not wrap
//! (`UDP_GRO`, `SO_RCVBUFFORCE`, `SO_SNDBUFFORCE`), the ICMP error queue, and the batch receive
//! (`recvmmsg`).
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

/// `getsockopt(fd, level, name)` of an integer option (tests check what bind left on).
#[cfg(test)]
pub(crate) fn get_int_option(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is open for the borrow; `value` is a live `c_int` and `len` its size, which
    // getsockopt may lower but not exceed.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            ptr::from_mut(&mut value).cast(),
            &mut len,
        )
    };
    match rc {
        0 => Ok(value),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Asks the kernel to queue ICMP errors for this datagram socket (`IP_RECVERR` /
/// `IPV6_RECVERR`), so port and host unreachables for datagrams it sent can be read back with
/// [`recv_error`] instead of being discarded (unconnected sockets get none otherwise).
pub(crate) fn enable_recv_errors(fd: BorrowedFd<'_>, ipv6: bool) -> io::Result<()> {
    match ipv6 {
        false => set_int_option(fd, libc::SOL_IP, libc::IP_RECVERR, 1),
        true => set_int_option(fd, libc::SOL_IPV6, libc::IPV6_RECVERR, 1),
    }
}

/// Turns off the per-datagram control messages quinn-udp asks for at set-up and nothing in
/// this crate reads: the receive timestamp (`SO_TIMESTAMPNS`), the TOS/traffic class with its
/// ECN bits (`IP_RECVTOS`, `IPV6_RECVTCLASS`) and the destination address (`IP_PKTINFO`,
/// `IPV6_RECVPKTINFO`). [`RecvBuffers`](crate::RecvBuffers) keeps only the source address,
/// length and GRO stride of a datagram, so each of these was kernel work per datagram (a clock
/// read, `put_cmsg` copies to user space) and cmsg parsing in quinn-udp for nothing; the
/// timestamp also switches on receive timestamping for every packet of the host. `UDP_GRO`
/// stays. Best effort: an option the platform lacks is skipped. A feature that needs one of
/// them (ECN marks, the local address on a wildcard bind) should turn it back on with itself.
pub(crate) fn drop_unread_control_messages(fd: BorrowedFd<'_>, ipv6: bool) {
    let mut options = vec![
        (libc::SOL_SOCKET, libc::SO_TIMESTAMPNS),
        (libc::IPPROTO_IP, libc::IP_RECVTOS),
        (libc::IPPROTO_IP, libc::IP_PKTINFO),
    ];
    if ipv6 {
        options.push((libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS));
        options.push((libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO));
    }
    for (level, name) in options {
        // An IPv6-only socket refuses the IPv4 options; they were never on there either.
        if let Err(e) = set_int_option(fd, level, name, 0) {
            tracing::trace!(level, name, "control message option not turned off: {e}");
        }
    }
}

/// An ICMP report: the destination that could not be reached, and why.
pub(crate) type Report = (std::net::SocketAddr, io::Error);

/// One queued ICMP error: the destination of the datagram that caused it and the error it
/// reports (`ECONNREFUSED` for port unreachable, `EHOSTUNREACH`, `ENETUNREACH`...). `Ok(None)`
/// when the queue is empty. Entries that carry no address or no extended error are skipped.
pub(crate) fn recv_error(fd: BorrowedFd<'_>) -> io::Result<Option<Report>> {
    loop {
        match recv_error_entry(fd)? {
            None => return Ok(None),
            Some(Some(report)) => return Ok(Some(report)),
            Some(None) => continue,
        }
    }
}

/// One error-queue entry: `None` when the queue is empty, `Some(None)` for
/// an entry without an address or an extended error.
fn recv_error_entry(fd: BorrowedFd<'_>) -> io::Result<Option<Option<Report>>> {
    // SAFETY: all-zero is a valid `sockaddr_storage`, `iovec`, `msghdr`.
    let mut name: libc::sockaddr_storage = unsafe { mem::zeroed() };
    // The error queue returns the offending datagram's head; 64 bytes are enough to keep (and
    // ignore); the control buffer holds one `sock_extended_err` and the offender's address.
    let mut head = [0u8; 64];
    let mut control = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: head.as_mut_ptr().cast(),
        iov_len: head.len(),
    };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_name = ptr::from_mut(&mut name).cast();
    msg.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = mem::size_of_val(&control) as _;
    // SAFETY: every pointer in `msg` points to a live buffer of the length it states, for the
    // duration of the call; the kernel writes at most those lengths.
    let rc = unsafe {
        libc::recvmsg(
            fd.as_raw_fd(),
            &mut msg,
            libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ => Err(e),
        };
    }
    let mut errno = None;
    // SAFETY: `msg` was filled by a successful recvmsg; CMSG_FIRSTHDR/NXTHDR walk its control
    // buffer within `msg_controllen`, and each header's data is read only if its level and type
    // say it holds a `sock_extended_err` (read unaligned: the buffer gives no alignment promise).
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let (level, kind) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
            let ours = (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR);
            if ours {
                let err: libc::sock_extended_err =
                    ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                errno = Some(err.ee_errno as i32);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    let addr = socket_addr(&name);
    let entry = match (addr, errno) {
        (Some(addr), Some(errno)) => Some((addr, io::Error::from_raw_os_error(errno))),
        _ => None,
    };
    Ok(Some(entry))
}

/// The IPv4 or IPv6 address in `name`, if it holds one.
fn socket_addr(name: &libc::sockaddr_storage) -> Option<std::net::SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
    match libc::c_int::from(name.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says `name` holds a `sockaddr_in`, which fits in (and is no
            // more aligned than) `sockaddr_storage`.
            let a: libc::sockaddr_in = unsafe { ptr::read(ptr::from_ref(name).cast()) };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::from((ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for `sockaddr_in6`.
            let a: libc::sockaddr_in6 = unsafe { ptr::read(ptr::from_ref(name).cast()) };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            let port = u16::from_be(a.sin6_port);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                port,
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Control-message room per receive slot, in 8-byte words: one `UDP_GRO` message
/// (`CMSG_SPACE(sizeof(int))`, 24 bytes on 64-bit Linux) with room to spare. Bind turns off the
/// other per-datagram messages ([`drop_unread_control_messages`]); one that still arrives and
/// does not fit is cut off (`MSG_CTRUNC`), which loses nothing this crate reads.
const CONTROL_WORDS: usize = 8;

/// `recvmmsg` headers for a batch of receive slots, prepared once: each points to its own
/// source-address buffer, iovec and control buffer, all owned here. A receive call then only
/// points the iovecs at the slots and resets the lengths the kernel overwrites.
///
/// Why not quinn-udp's receive: it zeroes and prepares all 32 headers with a 96-byte control
/// buffer each and decodes every control message it knows on each call, ~750 instructions per
/// call for the one datagram a small RPC brings; this reads only what [`RecvBuffers`] keeps.
/// The kernel's work is the same.
///
/// [`RecvBuffers`]: crate::RecvBuffers
pub(crate) struct RecvHeaders {
    hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    names: Box<[libc::sockaddr_storage]>,
    controls: Box<[[u64; CONTROL_WORDS]]>,
}

// SAFETY: the pointers in `hdrs` point into the other boxes of the same value (heap memory that
// does not move with it and is freed with it), and `iovs` is re-pointed at the caller's slots at
// every receive; nothing else holds them, so the value may move to another thread.
unsafe impl Send for RecvHeaders {}

impl RecvHeaders {
    /// Headers for `slots` receive slots.
    pub(crate) fn new(slots: usize) -> Self {
        let mut this = Self {
            hdrs: (0..slots).map(|_| zeroed_mmsghdr()).collect(),
            // SAFETY: all-zero is a valid `iovec` (a null pointer with length 0).
            iovs: (0..slots).map(|_| unsafe { mem::zeroed() }).collect(),
            // SAFETY: all-zero is a valid `sockaddr_storage` (family `AF_UNSPEC`).
            names: (0..slots).map(|_| unsafe { mem::zeroed() }).collect(),
            controls: vec![[0; CONTROL_WORDS]; slots].into_boxed_slice(),
        };
        for i in 0..slots {
            let hdr = &mut this.hdrs[i].msg_hdr;
            hdr.msg_name = ptr::from_mut(&mut this.names[i]).cast();
            hdr.msg_iov = ptr::from_mut(&mut this.iovs[i]);
            hdr.msg_iovlen = 1;
            hdr.msg_control = this.controls[i].as_mut_ptr().cast();
        }
        this
    }

    /// One `recvmmsg` into `storage` cut into slots of `slot` bytes (as many as there are
    /// headers, `meta` entries and whole slots): each filled slot's source, length and GRO
    /// stride go to `meta`. Returns how many slots were filled.
    pub(crate) fn recv(
        &mut self,
        fd: BorrowedFd<'_>,
        storage: &mut [u8],
        slot: usize,
        meta: &mut [quinn_udp::RecvMeta],
    ) -> io::Result<usize> {
        let mut count = 0;
        for ((hdr, iov), buf) in self
            .hdrs
            .iter_mut()
            .zip(self.iovs.iter_mut())
            .zip(storage.chunks_exact_mut(slot))
            .take(meta.len())
        {
            iov.iov_base = buf.as_mut_ptr().cast();
            iov.iov_len = buf.len();
            // The kernel wrote back the lengths it used.
            hdr.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            hdr.msg_hdr.msg_controllen = (CONTROL_WORDS * mem::size_of::<u64>()) as _;
            count += 1;
        }
        let received = self.call(fd, count)?;
        for (hdr, meta) in self.hdrs.iter().zip(meta.iter_mut()).take(received) {
            let len = hdr.msg_len as usize;
            // SAFETY: the kernel wrote `msg_namelen` bytes of a received datagram's source into
            // the name buffer this header points to.
            let addr =
                unsafe { written_addr(hdr.msg_hdr.msg_name.cast(), hdr.msg_hdr.msg_namelen) };
            meta.addr = addr.ok_or_else(|| io::Error::other("datagram without an IP source"))?;
            meta.len = len;
            meta.stride = gro_stride(&hdr.msg_hdr).unwrap_or(len);
        }
        Ok(received)
    }

    /// The system call, over the first `count` headers, retried if interrupted. One header
    /// takes a `recvmsg`: `recvmmsg`'s own set-up costs ~100 ns more for the same datagram (the
    /// `calls` line of smt's `rtt` example).
    fn call(&mut self, fd: BorrowedFd<'_>, count: usize) -> io::Result<usize> {
        if count == 1 {
            return self.call_one(fd);
        }
        loop {
            // SAFETY: the first `count` headers point to live buffers owned by `self` (a name, a
            // control buffer, an iovec) and, through the iovecs, to the caller's slots, which
            // `recv` borrows exclusively for the call; each states its length, and the kernel
            // fills at most that; a null timeout.
            let n = unsafe {
                libc::recvmmsg(
                    fd.as_raw_fd(),
                    self.hdrs.as_mut_ptr(),
                    count as _,
                    0,
                    ptr::null_mut(),
                )
            };
            match usize::try_from(n) {
                Ok(n) => return Ok(n),
                Err(_) => match io::Error::last_os_error() {
                    e if e.kind() == io::ErrorKind::Interrupted => continue,
                    e => return Err(e),
                },
            }
        }
    }
}

impl RecvHeaders {
    /// `recvmsg` into the first header, retried if interrupted; the length goes where
    /// `recvmmsg` would have put it.
    fn call_one(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        let Some(first) = self.hdrs.first_mut() else {
            return Ok(0);
        };
        loop {
            // SAFETY: the header points to live buffers owned by `self` (a name, a control
            // buffer, an iovec) and, through the iovec, to the caller's first slot, which `recv`
            // borrows exclusively for the call; each states its length, and the kernel fills at
            // most that.
            let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut first.msg_hdr, 0) };
            match usize::try_from(n) {
                Ok(n) => {
                    first.msg_len = n as _;
                    return Ok(1);
                }
                Err(_) => match io::Error::last_os_error() {
                    e if e.kind() == io::ErrorKind::Interrupted => continue,
                    e => return Err(e),
                },
            }
        }
    }
}

/// An all-zero `mmsghdr`: no name, no iovec, no control buffer.
fn zeroed_mmsghdr() -> libc::mmsghdr {
    // SAFETY: all-zero is a valid `mmsghdr` (null pointers with lengths 0).
    unsafe { mem::zeroed() }
}

impl std::fmt::Debug for RecvHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvHeaders")
            .field("slots", &self.hdrs.len())
            .finish()
    }
}

/// The IPv4 or IPv6 address in the first `len` bytes of `name`, if it holds one.
///
/// # Safety
///
/// `name` points to a `sockaddr_storage` whose first `len` bytes are initialised.
unsafe fn written_addr(
    name: *const libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<std::net::SocketAddr> {
    let len = len as usize;
    if len < mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: the family field is within the initialised bytes (checked above).
    let family = unsafe { ptr::addr_of!((*name).ss_family).read() };
    let needed = match libc::c_int::from(family) {
        libc::AF_INET => mem::size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => mem::size_of::<libc::sockaddr_in6>(),
        _ => return None,
    };
    if len < needed {
        return None;
    }
    let mut full: libc::sockaddr_storage =
        // SAFETY: all-zero is a valid `sockaddr_storage`.
        unsafe { mem::zeroed() };
    // SAFETY: `needed` bytes of `name` are initialised (checked above) and fit in `full`.
    unsafe { ptr::copy_nonoverlapping(name.cast::<u8>(), ptr::from_mut(&mut full).cast(), needed) };
    socket_addr(&full)
}

/// The GRO segment size the kernel reported for a received buffer (`UDP_GRO`), if any.
fn gro_stride(msg: &libc::msghdr) -> Option<usize> {
    let mut stride = None;
    // SAFETY: `msg` was filled by a successful receive: CMSG_FIRSTHDR/NXTHDR walk its control
    // buffer within the `msg_controllen` bytes the kernel wrote, and a header's data is read
    // only if its level and type say it holds an `int` (read unaligned).
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == libc::UDP_GRO {
                let size: libc::c_int = ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                stride = usize::try_from(size).ok().filter(|&s| s > 0);
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    stride
}
