//! The `calls` line: what each way of sending, receiving and waiting costs
//! the kernel for one small datagram on loopback, every call timed alone
//! (median of `n`), so the styles compare without a ping-pong's wake-ups.
//!
//! A send's time includes the whole loopback receive path (the kernel
//! delivers into the receiver's queue before `sendto` returns); a receive
//! finds one datagram waiting, queued by an untimed send just before. The
//! medians are wall time around one call: a call that was preempted lands
//! in the tail, not the median, so the figures hold on a busy machine
//! better than a p50 round trip does.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Instant;

use smt_udp::{RecvBuffers, Socket, SocketConfig};

/// Prints one line per call style.
pub(crate) fn report(any: SocketAddr, size: usize, n: usize) {
    let tx = UdpSocket::bind(any).unwrap();
    let rx = UdpSocket::bind(any).unwrap();
    rx.set_nonblocking(true).unwrap();
    let to = rx.local_addr().unwrap();
    let msg = vec![7u8; size.min(1472)];
    let mut buf = vec![0u8; 65536];
    let drain = |buf: &mut [u8]| while rx.recv_from(buf).is_ok() {};
    println!("per call, median of {n} (ns):");
    line(
        "sendto, unconnected (std, udp line)",
        n,
        || {
            tx.send_to(&msg, to).unwrap();
        },
        || drain(&mut buf),
    );
    let connected = UdpSocket::bind(any).unwrap();
    connected.connect(to).unwrap();
    let mut buf = vec![0u8; 65536];
    line(
        "send, connected socket (cached route)",
        n,
        || {
            connected.send(&msg).unwrap();
        },
        || drain(&mut buf),
    );
    let mut buf = vec![0u8; 65536];
    line(
        "sendmsg + IP_TOS cmsg (quinn-udp's)",
        n,
        || {
            sendmsg(&tx, to, &msg, Cmsg::Tos);
        },
        || drain(&mut buf),
    );
    let mut buf = vec![0u8; 65536];
    line(
        "sendmsg + IP_TOS + UDP_SEGMENT cmsgs",
        n,
        || {
            sendmsg(&tx, to, &msg, Cmsg::TosAndSegment);
        },
        || drain(&mut buf),
    );
    let smt_tx = Socket::bind(any, &SocketConfig::default()).unwrap();
    let mut buf = vec![0u8; 65536];
    line(
        "smt-udp Socket::send, one datagram",
        n,
        || {
            smt_tx.send(to, &msg, msg.len()).unwrap();
        },
        || drain(&mut buf),
    );
    receives(any, &msg, n);
    waits(&tx, &rx, to, &msg, n);
}

/// Receive styles, each finding one datagram waiting.
fn receives(any: SocketAddr, msg: &[u8], n: usize) {
    let tx = UdpSocket::bind(any).unwrap();
    let rx = UdpSocket::bind(any).unwrap();
    rx.set_nonblocking(true).unwrap();
    let to = rx.local_addr().unwrap();
    let mut buf = vec![0u8; 65536];
    let mut send = || {
        tx.send_to(msg, to).unwrap();
    };
    line(
        "recvfrom (std, udp line)",
        n,
        || {
            rx.recv_from(&mut buf).unwrap();
        },
        &mut send,
    );
    let mut buf = vec![0u8; 65536];
    line(
        "recvfrom, nothing waiting (EAGAIN)",
        n,
        || {
            let _ = rx.recv_from(&mut buf);
        },
        || {},
    );
    let mut slots = MmsgSlots::new(32);
    line(
        "recvmmsg, 32 slots, no cmsg",
        n,
        || {
            assert_eq!(slots.recv(&rx, 32), 1);
        },
        &mut send,
    );
    line(
        "recvmmsg, 1 slot, no cmsg",
        n,
        || {
            assert_eq!(slots.recv(&rx, 1), 1);
        },
        &mut send,
    );
    for (name, gro, one) in [
        ("smt-udp Socket::recv (recvmmsg 32, GRO)", true, false),
        ("smt-udp Socket::recv, GRO off", false, false),
        ("smt-udp Socket::recv_one (recvmsg, GRO)", true, true),
        ("smt-udp Socket::recv_one, GRO off", false, true),
    ] {
        let smt_rx = Socket::bind(any, SocketConfig::default().set_gro(gro)).unwrap();
        let smt_to = smt_rx.local_addr().unwrap();
        let mut bufs = RecvBuffers::new(smt_rx.features());
        line(
            name,
            n,
            || {
                let got = match one {
                    true => smt_rx.recv_one(&mut bufs),
                    false => smt_rx.recv(&mut bufs),
                };
                assert_eq!(got.unwrap(), 1);
            },
            || {
                tx.send_to(msg, smt_to).unwrap();
            },
        );
    }
}

/// Wait styles with the socket readable already: the set-up and
/// tear-down of a wait, without the sleep.
fn waits(tx: &UdpSocket, rx: &UdpSocket, to: SocketAddr, msg: &[u8], n: usize) {
    tx.send_to(msg, to).unwrap();
    // SAFETY: neither call takes pointers; the descriptors leak with the
    // process (a benchmark line).
    let wake = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    // SAFETY: as above.
    let alarm = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK) };
    for (name, fds) in [
        ("ppoll, socket readable, 1 descriptor", vec![rx.as_raw_fd()]),
        (
            "ppoll, socket readable, 3 descriptors",
            vec![rx.as_raw_fd(), wake, alarm],
        ),
    ] {
        line(
            name,
            n,
            || {
                let mut polled: Vec<libc::pollfd> = fds
                    .iter()
                    .map(|&fd| libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    })
                    .collect();
                let zero = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: `polled` is a live vector of pollfd structs of the
                // length given; `zero` outlives the call.
                unsafe {
                    libc::ppoll(
                        polled.as_mut_ptr(),
                        polled.len() as _,
                        &zero,
                        std::ptr::null(),
                    )
                };
            },
            || {},
        );
    }
}

/// Times `timed` `n` times, running `between` untimed before each, and
/// prints the median.
fn line(name: &str, n: usize, mut timed: impl FnMut(), mut between: impl FnMut()) {
    let mut ns: Vec<u64> = (0..n)
        .map(|_| {
            between();
            let start = Instant::now();
            timed();
            start.elapsed().as_nanos() as u64
        })
        .collect();
    ns.sort_unstable();
    println!("  {name:<42} {:>6}", ns[ns.len() / 2]);
}

/// The control messages of a hand-made `sendmsg`.
#[derive(Clone, Copy)]
enum Cmsg {
    Tos,
    TosAndSegment,
}

/// One datagram through `sendmsg` with control messages, as quinn-udp
/// builds it.
fn sendmsg(socket: &UdpSocket, to: SocketAddr, datagram: &[u8], cmsg: Cmsg) {
    let SocketAddr::V4(v4) = to else {
        panic!("IPv4 only")
    };
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(v4.ip().octets()),
        },
        sin_zero: [0; 8],
    };
    let mut iov = libc::iovec {
        iov_base: datagram.as_ptr() as *mut libc::c_void,
        iov_len: datagram.len(),
    };
    let mut control = [0u64; 8];
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = std::ptr::from_ref(&addr) as *mut libc::c_void;
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    let mut len = 0;
    // SAFETY: the control buffer is 64 bytes and 8-aligned; CMSG_FIRSTHDR
    // and CMSG_NXTHDR stay within `msg_controllen`, and each cmsg written
    // (CMSG_SPACE(4) = 24 bytes at most twice) fits.
    unsafe {
        let first = libc::CMSG_FIRSTHDR(&msg);
        (*first).cmsg_level = libc::IPPROTO_IP;
        (*first).cmsg_type = libc::IP_TOS;
        (*first).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(first).cast::<libc::c_int>(), 0);
        len += libc::CMSG_SPACE(4) as usize;
        if let Cmsg::TosAndSegment = cmsg {
            let second = libc::CMSG_NXTHDR(&msg, first);
            (*second).cmsg_level = libc::SOL_UDP;
            (*second).cmsg_type = libc::UDP_SEGMENT;
            (*second).cmsg_len = libc::CMSG_LEN(2) as _;
            let segment = datagram.len() as u16;
            std::ptr::write_unaligned(libc::CMSG_DATA(second).cast::<u16>(), segment);
            len += libc::CMSG_SPACE(2) as usize;
        }
    }
    msg.msg_controllen = len as _;
    // SAFETY: every pointer in `msg` points to a live buffer of the stated
    // length for the whole call; sendmsg only reads them.
    let sent = unsafe { libc::sendmsg(socket.as_raw_fd(), &msg, 0) };
    assert!(sent >= 0, "sendmsg: {}", std::io::Error::last_os_error());
}

/// `recvmmsg` headers prepared once (no control buffers), over 64 KiB
/// slots: the kernel's share of a batch receive without quinn-udp's
/// per-call set-up.
struct MmsgSlots {
    storage: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl MmsgSlots {
    fn new(slots: usize) -> Self {
        let mut storage = vec![0u8; slots << 16];
        let iovs: Vec<libc::iovec> = storage
            .chunks_mut(1 << 16)
            .map(|slot| libc::iovec {
                iov_base: slot.as_mut_ptr().cast(),
                iov_len: slot.len(),
            })
            .collect();
        // SAFETY: all-zero is a valid mmsghdr.
        let hdrs = (0..slots).map(|_| unsafe { std::mem::zeroed() }).collect();
        let mut this = Self {
            storage,
            iovs,
            hdrs,
        };
        for (hdr, iov) in this.hdrs.iter_mut().zip(this.iovs.iter_mut()) {
            hdr.msg_hdr.msg_iov = iov;
            hdr.msg_hdr.msg_iovlen = 1;
        }
        this
    }

    /// One `recvmmsg` of up to `slots` datagrams; how many it got.
    fn recv(&mut self, socket: &UdpSocket, slots: usize) -> usize {
        let _ = &self.storage;
        // SAFETY: `hdrs` holds at least `slots` headers whose iovecs point
        // into `storage`, alive and unaliased for the call; no names and
        // no control buffers are asked for; a null timeout.
        let got = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                slots.min(self.hdrs.len()) as _,
                0,
                std::ptr::null_mut(),
            )
        };
        usize::try_from(got).unwrap_or(0)
    }
}
