//! `stratus-ecr`: the kubelet image credential provider plugin for Amazon ECR (every partition,
//! FIPS and dual-stack hosts) and ECR Public, as a library; `bins/ecr-credential-provider` is its
//! thin `main` (flags, stdin, stdout, exit code).
//!
//! Reads one `CredentialProviderRequest` (`credentialprovider.kubelet.k8s.io/v1`, `v1beta1` or
//! `v1alpha1`) from stdin and writes one `CredentialProviderResponse` in the same version to
//! stdout. It calls ECR `GetAuthorizationToken` (after STS `AssumeRoleWithWebIdentity` when the
//! kubelet passes a service-account token and a role is named), and keeps answers in a small
//! on-disk cache (`<cache-dir>/<key hash>.json`, mode 0600) that later invocations read without
//! starting a runtime or touching AWS. Nothing secret is ever written anywhere but stdout.
//!
//! The pure parts (protocol, hosts, cache files, durations, identity) are separate modules;
//! [`aws`] is the only one that talks to AWS, behind the [`app::TokenSource`] seam.

pub mod app;
pub mod aws;
pub mod cache;
pub mod duration;
pub mod identity;
pub mod log;
pub mod registry;
pub mod request;
pub mod response;
pub mod secret;
