//! Platform sockets for SMT.
