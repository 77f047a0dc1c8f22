//! The `udp-uring` line: the UDP ping-pong with each side waiting and
//! receiving in one `io_uring_enter`, with a timeout it honours (1 ms,
//! armed again at each wait, as the protocol's next deadline would be).
//!
//! Against `udp-poll` (`ppoll` then a receive: two system calls) it prices
//! io_uring as SMT's wait: a `RECVMSG` request stays armed on the socket,
//! a multishot poll on an eventfd stands for the drivers' wake-up (never
//! written here), and the wait submits the next receive, sleeps until a
//! completion or the timeout (`IORING_ENTER_EXT_ARG`) and finds the
//! datagram already received.
//!
//! `RTT_URING_WAIT` picks how the wait honours its deadline: `timerfd`
//! (default; a multishot poll on a timerfd whose deadline moves only when
//! the protocol's does, as the drivers' `ppoll` watches one) or `ext`
//! (`IORING_ENTER_EXT_ARG` with a 1 ms `timespec` at every wait) or `none`.
//! `RTT_URING_MULTI` set: one multishot `RECVMSG` on a provided-buffer
//! ring, armed once, instead of a `RECVMSG` submitted at each wait.
//!
//! `RTT_URING_SEND` set: the send, too, goes through the ring, in the same
//! `io_uring_enter` as the wait (one system call per side per round trip).
//!
//! `RTT_URING_GRO` set (with `RTT_URING_MULTI`): the socket has `UDP_GRO`
//! on and the receive asks for control messages, reading the segment size
//! as smt-udp's receive does.
//!
//! `RTT_URING` picks the ring's set-up: `plain` (default), `coop`
//! (`IORING_SETUP_COOP_TASKRUN`) or `defer` (`DEFER_TASKRUN` and
//! `SINGLE_ISSUER`: completion work runs only when the waiter asks).

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

/// The completion of the socket's receive.
const RECV: u64 = 1;
/// The completion of a poll on the wake-up eventfd.
const WAKE: u64 = 2;
/// The completion of a failed send.
const SEND: u64 = 4;
/// The completion of a poll on the deadline's timerfd.
const ALARM: u64 = 3;
/// Provided buffers of the multishot receive: count and size.
const BUFS: u16 = 8;
/// Room for the multishot header, a name, a control message and a GRO
/// batch.
const BUF_LEN: usize = 65536 + 256;
/// Control-message room when `RTT_URING_GRO` is set (as smt-udp's 64).
const CONTROL_LEN: usize = 64;

pub fn udp_uring(any: SocketAddr, size: usize, n: usize) -> Vec<Duration> {
    let server = UdpSocket::bind(any).unwrap();
    let client = UdpSocket::bind(any).unwrap();
    let addr = server.local_addr().unwrap();
    let through_ring = std::env::var_os("RTT_URING_SEND").is_some();
    let echo = std::thread::spawn(move || {
        let mut waiter = UringWaiter::new(&server);
        let mut got = waiter.recv_from();
        let mut reply = vec![0u8; 65536];
        for i in 0..n {
            let (len, from) = got;
            reply[..len].copy_from_slice(&waiter.buf[..len]);
            waiter.recycle();
            if through_ring && i + 1 < n {
                waiter.queue_send(&reply[..len], from);
            } else {
                server.send_to(&reply[..len], from).unwrap();
            }
            if i + 1 < n {
                got = waiter.recv_from();
            }
        }
        waiter.timeouts
    });
    let mut waiter = UringWaiter::new(&client);
    let msg = vec![7u8; size.min(smt_udp::MAX_GSO_PAYLOAD)];
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            if through_ring {
                waiter.queue_send(&msg, addr);
            } else {
                client.send_to(&msg, addr).unwrap();
            }
            waiter.recv_from();
            waiter.recycle();
            start.elapsed()
        })
        .collect();
    let server_timeouts = echo.join().unwrap();
    if waiter.timeouts + server_timeouts > 0 {
        eprintln!(
            "udp-uring: {} + {} waits timed out (1 ms)",
            waiter.timeouts, server_timeouts
        );
    }
    samples
}

/// One socket's ring, its armed receive and the buffers that receive
/// writes into (boxed: the kernel holds their addresses while armed).
struct UringWaiter {
    ring: IoUring,
    socket: libc::c_int,
    header: Box<Header>,
    buf: Box<[u8]>,
    /// The queued send's header and its destination.
    out: Box<Header>,
    armed: bool,
    timeouts: u64,
    wait: Wait,
    multi: Option<Provided>,
    /// GRO segment sizes read (`RTT_URING_GRO`).
    segments: u64,
}

/// How a wait honours its deadline (`RTT_URING_WAIT`).
#[derive(PartialEq)]
enum Wait {
    Timerfd,
    ExtArg,
    Forever,
}

/// The multishot receive's provided-buffer ring and its buffers.
struct Provided {
    ring: *mut types::BufRingEntry,
    bufs: Box<[u8]>,
    tail: u16,
    /// The buffer the last datagram was received into, to give back.
    held: Option<u16>,
}

/// What a `RECVMSG` request points at.
struct Header {
    msg: libc::msghdr,
    iov: libc::iovec,
    name: libc::sockaddr_storage,
}

impl UringWaiter {
    fn new(socket: &UdpSocket) -> Self {
        let mut builder = IoUring::builder();
        match std::env::var("RTT_URING").as_deref() {
            Ok("coop") => {
                builder.setup_coop_taskrun();
            }
            Ok("defer") => {
                builder.setup_defer_taskrun().setup_single_issuer();
            }
            _ => {}
        }
        let mut ring = builder.build(8).expect("io_uring_setup");
        // SAFETY: neither call takes pointers; the eventfd leaks with the
        // process (a benchmark line).
        let wake = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(wake >= 0, "eventfd");
        // SAFETY: as above.
        let alarm = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK) };
        assert!(alarm >= 0, "timerfd");
        for (fd, what) in [(wake, WAKE), (alarm, ALARM)] {
            let poll = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
                .multi(true)
                .build()
                .user_data(what);
            // SAFETY: a poll request points at no memory.
            unsafe { ring.submission().push(&poll) }.expect("an empty queue");
        }
        ring.submit().expect("io_uring_enter");
        let wait = match std::env::var("RTT_URING_WAIT").as_deref() {
            Ok("ext") => Wait::ExtArg,
            Ok("none") => Wait::Forever,
            _ => Wait::Timerfd,
        };
        let multi = std::env::var_os("RTT_URING_MULTI").map(|_| Provided::register(&ring));
        let gro = std::env::var_os("RTT_URING_GRO").is_some();
        if gro {
            let on: libc::c_int = 1;
            // SAFETY: `on` is a live c_int whose size is passed.
            let set = unsafe {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::SOL_UDP,
                    libc::UDP_GRO,
                    (&raw const on).cast(),
                    std::mem::size_of::<libc::c_int>() as u32,
                )
            };
            assert_eq!(set, 0, "UDP_GRO");
        }
        // SAFETY: all-zero is a valid msghdr, iovec and sockaddr_storage.
        let mut header: Box<Header> = Box::new(unsafe { std::mem::zeroed() });
        if gro {
            // A multishot receive reads only the length.
            header.msg.msg_controllen = CONTROL_LEN as _;
        }
        Self {
            ring,
            socket: socket.as_raw_fd(),
            header,
            buf: vec![0u8; 65536].into_boxed_slice(),
            // SAFETY: as `header`.
            out: Box::new(unsafe { std::mem::zeroed() }),
            armed: false,
            timeouts: 0,
            wait,
            multi,
            segments: 0,
        }
    }

    /// Queues a send of `data` to `to`, submitted by the next wait, which
    /// returns after it completed: `data` must live until then (the
    /// callers' buffers do). No completion on success.
    fn queue_send(&mut self, data: &[u8], to: SocketAddr) {
        let SocketAddr::V4(to) = to else {
            panic!("IPv4 loopback")
        };
        let h = &mut *self.out;
        // SAFETY: sockaddr_storage is larger than sockaddr_in and aligned
        // for it.
        let v4 = unsafe { &mut *(&raw mut h.name).cast::<libc::sockaddr_in>() };
        v4.sin_family = libc::AF_INET as libc::sa_family_t;
        v4.sin_port = to.port().to_be();
        v4.sin_addr.s_addr = u32::from(*to.ip()).to_be();
        h.iov = libc::iovec {
            iov_base: data.as_ptr().cast_mut().cast(),
            iov_len: data.len(),
        };
        h.msg.msg_name = (&raw mut h.name).cast();
        h.msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
        h.msg.msg_iov = &raw mut h.iov;
        h.msg.msg_iovlen = 1;
        let send = opcode::SendMsg::new(types::Fd(self.socket), &raw const h.msg)
            .build()
            .flags(io_uring::squeue::Flags::SKIP_SUCCESS)
            .user_data(SEND);
        // SAFETY: header and data outlive the submitting wait, which the
        // caller makes before it touches either.
        unsafe { self.ring.submission().push(&send) }.expect("room for one send");
    }

    /// Gives the multishot receive's last buffer back to the kernel.
    fn recycle(&mut self) {
        if let Some(p) = &mut self.multi {
            p.give_back();
        }
    }

    /// Waits until a datagram is received: one `io_uring_enter` that
    /// submits the receive and sleeps, with a 1 ms timeout each time.
    fn recv_from(&mut self) -> (usize, SocketAddr) {
        loop {
            if !self.armed {
                self.arm();
            }
            let timeout = types::Timespec::new().nsec(1_000_000);
            let args = types::SubmitArgs::new().timespec(&timeout);
            let entered = if self.wait == Wait::ExtArg {
                self.ring.submitter().submit_with_args(1, &args)
            } else {
                self.ring.submitter().submit_and_wait(1)
            };
            match entered {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => self.timeouts += 1,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => panic!("io_uring_enter: {e}"),
            }
            if let Some(got) = self.reap() {
                return got;
            }
        }
    }

    /// Points the header at the buffers and queues a `RECVMSG`.
    fn arm(&mut self) {
        let h = &mut *self.header;
        if self.multi.is_some() {
            h.msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            let recv = opcode::RecvMsgMulti::new(types::Fd(self.socket), &raw const h.msg, 0)
                .build()
                .user_data(RECV);
            // SAFETY: the kernel reads the header's lengths at submission;
            // the buffers are registered and owned by `self`.
            unsafe { self.ring.submission().push(&recv) }.expect("room for one receive");
            self.armed = true;
            return;
        }
        h.iov = libc::iovec {
            iov_base: self.buf.as_mut_ptr().cast(),
            iov_len: self.buf.len(),
        };
        h.msg.msg_name = (&raw mut h.name).cast();
        h.msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
        h.msg.msg_iov = &raw mut h.iov;
        h.msg.msg_iovlen = 1;
        let recv = opcode::RecvMsg::new(types::Fd(self.socket), &raw mut h.msg)
            .build()
            .user_data(RECV);
        // SAFETY: the header and buffer are boxed and owned by `self`,
        // which waits for this request's completion before it rearms, and
        // the ring (dropped first, declared first) cancels it on drop.
        unsafe { self.ring.submission().push(&recv) }.expect("room for one receive");
        self.armed = true;
    }

    /// Takes the completions: the datagram's length and source once the
    /// receive completed with one.
    fn reap(&mut self) -> Option<(usize, SocketAddr)> {
        let mut got = None;
        for cqe in self.ring.completion() {
            if cqe.user_data() == SEND {
                panic!("send: {}", std::io::Error::from_raw_os_error(-cqe.result()));
            }
            if cqe.user_data() != RECV {
                continue;
            }
            if let Some(p) = &mut self.multi {
                self.armed = io_uring::cqueue::more(cqe.flags());
                let Some(bid) = io_uring::cqueue::buffer_select(cqe.flags()) else {
                    continue;
                };
                let len = cqe.result().max(0) as usize;
                let at = usize::from(bid) * BUF_LEN;
                let out = types::RecvMsgOut::parse(&p.bufs[at..at + len], &self.header.msg)
                    .expect("a whole multishot header");
                self.buf[..out.payload_data().len()].copy_from_slice(out.payload_data());
                self.segments += u64::from(gro_segment(out.control_data()).is_some());
                let name = out.name_data();
                // SAFETY: `name` holds at most a sockaddr_storage's bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        name.as_ptr(),
                        (&raw mut self.header.name).cast::<u8>(),
                        name.len(),
                    )
                };
                p.held = Some(bid);
                got = Some(out.payload_data().len());
                continue;
            }
            self.armed = false;
            match cqe.result() {
                len if len >= 0 => got = Some(len as usize),
                e if -e == libc::EAGAIN || -e == libc::EINTR => {}
                e => panic!("receive: {}", std::io::Error::from_raw_os_error(-e)),
            }
        }
        got.map(|len| (len, self.source()))
    }

    fn source(&self) -> SocketAddr {
        let name = &self.header.name;
        assert_eq!(i32::from(name.ss_family), libc::AF_INET, "IPv4 loopback");
        // SAFETY: the family says the storage holds a sockaddr_in.
        let v4: &libc::sockaddr_in = unsafe { &*(name as *const _ as *const libc::sockaddr_in) };
        SocketAddr::from((
            u32::from_be(v4.sin_addr.s_addr).to_be_bytes(),
            u16::from_be(v4.sin_port),
        ))
    }
}

impl Provided {
    /// Maps a page for the buffer ring, fills it and registers it as
    /// group 0.
    fn register(ring: &IoUring) -> Self {
        // SAFETY: an anonymous private mapping of one page; no pointers in.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(page, libc::MAP_FAILED, "mmap");
        let mut p = Self {
            ring: page.cast(),
            bufs: vec![0u8; usize::from(BUFS) * BUF_LEN].into_boxed_slice(),
            tail: 0,
            held: None,
        };
        for bid in 0..BUFS {
            p.push(bid);
        }
        p.publish();
        // SAFETY: the page and buffers live as long as the process (the
        // line leaks them with the ring).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(page as u64, BUFS, 0, 0)
        }
        .expect("provided-buffer ring (kernel 5.19)");
        p
    }

    fn give_back(&mut self) {
        if let Some(bid) = self.held.take() {
            self.push(bid);
            self.publish();
        }
    }

    fn push(&mut self, bid: u16) {
        let slot = usize::from(self.tail & (BUFS - 1));
        // SAFETY: `slot` < BUFS entries inside the mapped page.
        let entry = unsafe { &mut *self.ring.add(slot) };
        entry.set_addr(self.bufs[usize::from(bid) * BUF_LEN..].as_ptr() as u64);
        entry.set_len(BUF_LEN as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Stores the tail with release ordering: the kernel reads it.
    fn publish(&self) {
        // SAFETY: the tail is the first entry's reserved u16, aligned.
        let tail =
            unsafe { types::BufRingEntry::tail(self.ring) } as *const std::sync::atomic::AtomicU16;
        // SAFETY: as above; the kernel only reads it.
        unsafe { &*tail }.store(self.tail, std::sync::atomic::Ordering::Release);
    }
}

/// The `UDP_GRO` segment size in a control buffer, as smt-udp reads it
/// (present when the kernel coalesced; a lone datagram may carry one too).
fn gro_segment(control: &[u8]) -> Option<u16> {
    const HEADER: usize = std::mem::size_of::<libc::cmsghdr>();
    let mut at = 0;
    while control.len() >= at + HEADER {
        // SAFETY: HEADER bytes from `at` are in bounds (checked above).
        let cmsg: libc::cmsghdr = unsafe {
            control[at..]
                .as_ptr()
                .cast::<libc::cmsghdr>()
                .read_unaligned()
        };
        // `cmsg_len` is a `usize` on glibc, a `u32` on musl.
        #[allow(clippy::unnecessary_cast)]
        let len = cmsg.cmsg_len as usize;
        if len < HEADER || at + len > control.len() {
            return None;
        }
        if cmsg.cmsg_level == libc::SOL_UDP && cmsg.cmsg_type == libc::UDP_GRO && len >= HEADER + 2
        {
            return Some(u16::from_ne_bytes([
                control[at + HEADER],
                control[at + HEADER + 1],
            ]));
        }
        at += len.next_multiple_of(std::mem::size_of::<usize>());
    }
    None
}
