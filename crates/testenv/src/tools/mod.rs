//! One module per installed tool: what it is built from and how.

pub mod helm;
pub mod kubernetes;
pub mod moto;
