//! CPU time from Linux's /proc, without `unsafe` (no libc calls): the
//! calling thread's in nanoseconds, the whole process's in clock ticks.

/// Nanoseconds the calling thread has run, from the first field of
/// `/proc/thread-self/schedstat`; `None` where the kernel lacks it.
pub fn thread_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// User plus system time of the whole process (live and exited threads)
/// in nanoseconds, from `/proc/self/stat`; the kernel counts it in ticks
/// of 10 ms (USER_HZ = 100), so short runs read coarse.
pub fn process_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14, stime 15.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 10_000_000)
}

/// What `lscpu` calls "Model name", from /proc/cpuinfo.
pub fn model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Logical CPUs the process may run on.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}
