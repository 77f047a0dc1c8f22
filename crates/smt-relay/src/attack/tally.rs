//! Counting attempts and successes of one attack.

use std::fmt;

/// How many times an attack was tried and how many times the victim
/// accepted it (delivered, executed or changed state). The answer the
/// tests assert is zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// The attack's name, as reports print it.
    pub name: String,
    /// How many times it was tried.
    pub attempts: u64,
    /// How many times the victim accepted it (the tests want 0).
    pub accepted: u64,
}

impl Tally {
    /// A tally of no attempts yet.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            ..Self::default()
        }
    }

    /// Prints `attack NAME: N attempts, M accepted` (the line CI logs keep).
    pub fn report(&self) {
        println!("{self}");
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "attack {}: {} attempts, {} accepted",
            self.name, self.attempts, self.accepted
        )
    }
}
