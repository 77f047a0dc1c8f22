//! AEAD backends for SMT.
