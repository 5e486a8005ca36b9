//! Stratus DVP provider (work in progress).
