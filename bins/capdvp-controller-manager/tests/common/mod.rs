//! capdvp's test bed (`stratus_scenarios::capdvp_bed`, shared with `stratus-bench-capdvp`) with
//! this build's capdvp binary.
#![allow(dead_code, unused_imports)] // each test binary uses a part of it

pub use stratus_scenarios::capdvp_bed::*;
pub use stratus_scenarios::wait_for as wait;

/// The capdvp binary the tests run: `CAPDVP_BINARY` when set, else this build's own.
pub fn capdvp_binary() -> std::path::PathBuf {
    std::env::var_os("CAPDVP_BINARY")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_capdvp-controller-manager").into())
}
