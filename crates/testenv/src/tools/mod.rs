//! Installers and process handles for the real upstream tools some components are tested
//! against (built from their pinned Go modules into the cache, like kube-apiserver).

pub mod ec2_metadata_mock;
