//! A peer's name inside the endpoint: a slot of the `Peers` slab. A leaf, so that the tables that index by peer need nothing else.

/// A peer's slot: index and generation in `Peers`. Replacing a peer's
/// session gives it a new `PeerId`, so a key kept from the old session
/// never finds the new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PeerId {
    index: u32,
    generation: u32,
}

impl PeerId {
    pub(crate) fn new(index: u32, generation: u32) -> Self {
        Self { index, generation }
    }

    pub(crate) fn index(self) -> u32 {
        self.index
    }

    pub(crate) fn generation(self) -> u32 {
        self.generation
    }
}
