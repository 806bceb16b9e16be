//! system test support
