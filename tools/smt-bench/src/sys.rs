//! The machine: CPU pinning, waiting for an idle machine, a precise timer.
//!
//! The only module with `unsafe`: three Linux calls libc wraps without a
//! safe API (`sched_setaffinity`, `timerfd_*`, `read` on a timerfd).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;

/// The CPUs this process may use, read once before anything is pinned
/// (a container or `taskset` may exclude CPU 0).
pub fn allowed_cpus() -> &'static [usize] {
    static ALLOWED: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    ALLOWED.get_or_init(|| {
        // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid 0 is the calling thread; the size matches the set.
        let rc =
            unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        let cpus: Vec<usize> = if rc == 0 {
            // SAFETY: CPU_ISSET reads inside `set` for indices below CPU_SETSIZE.
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
                .collect()
        } else {
            Vec::new()
        };
        if cpus.is_empty() {
            (0..online_cpus()).collect()
        } else {
            cpus
        }
    })
}

/// Restricts the calling thread to the first allowed CPU (`pin`) or to
/// every allowed CPU. Threads created afterwards inherit the mask, so
/// pinning before a run starts covers its server, client and SMT driver
/// threads.
pub fn set_affinity(pin: bool) -> io::Result<()> {
    let allowed = allowed_cpus();
    set_affinity_to(if pin { &allowed[..1] } else { allowed })
}

/// Restricts the calling thread (and threads it creates afterwards) to
/// `cpus`, e.g. a server on some cores and its client on others.
pub fn set_affinity_to(cpus: &[usize]) -> io::Result<()> {
    if cpus.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU numbers must be below {}", libc::CPU_SETSIZE),
        ));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: CPU_SET writes inside `set`; cpu < CPU_SETSIZE here.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; the size matches the set.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How many CPUs are online: the machine's count, not this thread's
/// affinity mask (which `available_parallelism` reports, and which is one
/// CPU while a pinned run is being set up or torn down).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf only reads a system value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// Aggregate CPU time counters from /proc/stat: (busy, total) jiffies.
fn cpu_times() -> io::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat.lines().next().unwrap_or_default();
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    // idle + iowait are the idle columns.
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Ok((total - idle, total))
}

/// The busy fraction of all CPUs over `window` (0.0 idle, 1.0 saturated).
pub fn busy_fraction(window: Duration) -> f64 {
    let Ok((b0, t0)) = cpu_times() else {
        return 0.0;
    };
    std::thread::sleep(window);
    let Ok((b1, t1)) = cpu_times() else {
        return 0.0;
    };
    if t1 <= t0 {
        return 0.0;
    }
    (b1 - b0) as f64 / (t1 - t0) as f64
}

/// What the idle wait saw before a run.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct LoadSeen {
    /// Busy fraction of all CPUs in the last sample before the run.
    pub busy: f64,
    /// Seconds spent waiting.
    pub waited_s: f64,
    /// Whether the machine got below the threshold before the deadline.
    pub idle: bool,
}

/// Waits until the machine's busy fraction drops below `threshold` or
/// `max_wait` passes. Other people's compilers skew every figure; the
/// recorded load says how much to trust a run.
pub fn wait_for_idle(threshold: f64, max_wait: Duration) -> LoadSeen {
    let start = Instant::now();
    let mut last_report = start;
    loop {
        let busy = busy_fraction(Duration::from_millis(250));
        let waited_s = start.elapsed().as_secs_f64();
        if last_report.elapsed() >= Duration::from_secs(5) {
            last_report = Instant::now();
            eprintln!(
                "  waiting for an idle machine: {:.0}% busy after {waited_s:.0} s",
                busy * 100.0
            );
        }
        if busy < threshold || start.elapsed() >= max_wait {
            return LoadSeen {
                busy,
                waited_s,
                idle: busy < threshold,
            };
        }
    }
}

/// The CPU model from /proc/cpuinfo (what `lscpu` calls "Model name").
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// A one-shot timer with nanosecond resolution that wakes the runtime's
/// own thread: tokio's timer wheel ticks in milliseconds, too coarse for
/// Poisson arrivals microseconds apart, and a timer thread would pay a
/// cross-core wake-up (~50 µs here) per arrival.
#[derive(Debug)]
pub struct PreciseTimer {
    fd: AsyncFd<OwnedFd>,
}

impl PreciseTimer {
    /// A disarmed timer registered with the current tokio runtime.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the result is checked.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the AsyncFd owns the OwnedFd, so the descriptor stays
        // open and the same for the AsyncFd's whole life.
        let fd = unsafe { AsyncFd::register(fd)? };
        Ok(Self { fd })
    }

    /// Waits until `deadline` (returns at once if it has passed).
    pub async fn sleep_until(&self, deadline: Instant) -> io::Result<()> {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Ok(());
        };
        if left < Duration::from_micros(2) {
            return Ok(());
        }
        self.arm(left)?;
        loop {
            let mut guard = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            // SAFETY: reads 8 bytes into a local 8-byte buffer.
            let n = unsafe {
                libc::read(
                    self.fd.get_ref().as_raw_fd(),
                    expirations.as_mut_ptr().cast(),
                    8,
                )
            };
            if n == 8 {
                return Ok(());
            }
            guard.clear_ready();
        }
    }

    fn arm(&self, after: Duration) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: valid descriptor and a fully initialised itimerspec.
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.get_ref().as_raw_fd(),
                0,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
