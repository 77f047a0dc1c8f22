//! What each thread of this process did between two moments, read from
//! Linux's `/proc/self/task/*/sched` (CPU time, voluntary and involuntary
//! context switches) and `/proc/self/stat` (minor page faults): for telling
//! a slow session's extra work from its waiting, with counts that do not
//! depend on the machine's load. Elsewhere [`Snapshot::take`] yields
//! `None` and callers print nothing.

use std::collections::{BTreeMap, HashMap};

/// One reading of every live thread of this process.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    threads: HashMap<u32, Sample>,
    minor_faults: u64,
}

/// One thread's totals since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    pub cpu_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
}

impl Sample {
    fn minus(self, earlier: Self) -> Self {
        Self {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }

    fn add(&mut self, other: Self) {
        self.cpu_ns += other.cpu_ns;
        self.voluntary += other.voluntary;
        self.involuntary += other.involuntary;
    }
}

impl Snapshot {
    /// Every thread now; `None` without a readable `/proc/self/task`.
    pub fn take() -> Option<Self> {
        Self::around(Caller::Last)
    }

    /// Every thread, the calling one read last (`Before` a measured span)
    /// or first (`After` it), so the reading itself, which runs on the
    /// calling thread, stays out of the caller's CPU time in the span.
    pub fn around(caller: Caller) -> Option<Self> {
        let me = own_tid();
        let mut tids: Vec<u32> = std::fs::read_dir("/proc/self/task")
            .ok()?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&t| Some(t) != me)
            .collect();
        match (me, caller) {
            (Some(me), Caller::First) => tids.insert(0, me),
            (Some(me), Caller::Last) => tids.push(me),
            (None, _) => {}
        }
        let mut threads = HashMap::new();
        let minor_faults = read_minor_faults().unwrap_or(0);
        for tid in tids {
            if Some(tid) == me {
                // The kernel brings a running thread's CPU time up to date
                // only when it schedules: a yield makes it count until now.
                std::thread::yield_now();
            }
            // A thread that ended meanwhile has no file: it is not counted.
            if let Some(sample) = read_sched(tid) {
                threads.insert(tid, sample);
            }
        }
        Some(Self {
            threads,
            minor_faults,
        })
    }

    /// The threads that exist now and did not in `earlier`.
    pub fn new_since(&self, earlier: &Self) -> Vec<u32> {
        let mut tids: Vec<_> = self
            .threads
            .keys()
            .filter(|t| !earlier.threads.contains_key(t))
            .copied()
            .collect();
        tids.sort_unstable();
        tids
    }
}

/// Where [`Snapshot::around`] reads the calling thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    First,
    Last,
}

/// The calling thread's id, from the `/proc/thread-self` link
/// ("PID/task/TID").
fn own_tid() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// Names for threads, by id; threads without one count as `other`.
#[derive(Debug, Default)]
pub struct Roles(HashMap<u32, &'static str>);

impl Roles {
    /// Names every thread `now` has that `earlier` had not.
    pub fn name_new(&mut self, earlier: &Snapshot, now: &Snapshot, role: &'static str) {
        for tid in now.new_since(earlier) {
            self.0.insert(tid, role);
        }
    }

    /// What each role's threads did from `before` to `after` (a thread
    /// born in between counts from zero), and the process's minor faults.
    pub fn delta(
        &self,
        before: &Snapshot,
        after: &Snapshot,
        other: &'static str,
    ) -> (BTreeMap<&'static str, Sample>, u64) {
        let mut by_role = BTreeMap::new();
        for (tid, sample) in &after.threads {
            let earlier = before.threads.get(tid).copied().unwrap_or_default();
            let role = self.0.get(tid).copied().unwrap_or(other);
            by_role
                .entry(role)
                .or_insert_with(Sample::default)
                .add(sample.minus(earlier));
        }
        let faults = after.minor_faults.saturating_sub(before.minor_faults);
        (by_role, faults)
    }
}

/// `se.sum_exec_runtime` (milliseconds with six decimals) and the switch
/// counts of one thread.
fn read_sched(tid: u32) -> Option<Sample> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).ok()?;
    let mut sample = Sample::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "se.sum_exec_runtime" => sample.cpu_ns = millis_to_ns(value)?,
            "nr_voluntary_switches" => sample.voluntary = value.parse().ok()?,
            "nr_involuntary_switches" => sample.involuntary = value.parse().ok()?,
            _ => {}
        }
    }
    Some(sample)
}

/// "217.869906" (ms) → 217869906 ns, without going through a float.
fn millis_to_ns(value: &str) -> Option<u64> {
    let (whole, frac) = value.split_once('.').unwrap_or((value, "0"));
    let frac = format!("{frac:0<6}");
    Some(whole.parse::<u64>().ok()? * 1_000_000 + frac.get(..6)?.parse::<u64>().ok()?)
}

/// Field 10 of `/proc/self/stat`: minor faults of the whole process,
/// ended threads included. The command name (field 2) may hold spaces, so
/// fields are counted after its closing parenthesis.
fn read_minor_faults() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(7)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_parse_to_nanoseconds() {
        assert_eq!(millis_to_ns("217.869906"), Some(217_869_906));
        assert_eq!(millis_to_ns("0.5"), Some(500_000));
        assert_eq!(millis_to_ns("3"), Some(3_000_000));
        assert_eq!(millis_to_ns("x.1"), None);
    }

    #[test]
    fn a_new_thread_is_named_and_its_work_counted() {
        let Some(before) = Snapshot::take() else {
            return; // no /proc: nothing to read
        };
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let _ = rx.recv();
        });
        let mut during = Snapshot::take().unwrap();
        for _ in 0..100 {
            if !during.new_since(&before).is_empty() {
                break;
            }
            std::thread::yield_now();
            during = Snapshot::take().unwrap();
        }
        let mut roles = Roles::default();
        roles.name_new(&before, &during, "worker");
        assert_eq!(roles.0.len(), during.new_since(&before).len());
        let (by_role, _) = roles.delta(&before, &during, "other");
        assert!(by_role.contains_key("worker"), "{by_role:?}");
        tx.send(()).unwrap();
        worker.join().unwrap();
    }
}
