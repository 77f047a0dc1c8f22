//! SMT.
