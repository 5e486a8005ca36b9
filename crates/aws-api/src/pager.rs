//! The one pager of every AWS listing: one guarded request per page, each page handed to the
//! caller, the continuation token (`NextToken`, `Marker`/`NextMarker`) followed until AWS gives
//! none.
//!
//! Not the SDK's `into_paginator()`: its stream ends at the first failed page, so the call guard
//! could neither retry one page without restarting the listing nor count and rate-limit each
//! request; one pager over the guard keeps both and costs exactly one request per page.

use std::future::Future;

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use stratus_cloud::CloudError;

use crate::call::AwsApi;

/// Lists across pages: `send(token)` sends one page's request with the continuation token (None
/// for the first page); `take(page)` keeps what the caller wants from the page and returns the
/// next token. An empty or missing token ends the listing; so does `take` returning None early
/// (a search that has found its answer).
pub async fn pages<P, E, R, S, Fut, T>(
    api: &AwsApi,
    operation: &'static str,
    mut send: S,
    mut take: T,
) -> Result<(), CloudError>
where
    S: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<P, SdkError<E, R>>>,
    T: FnMut(P) -> Option<String>,
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    let mut token: Option<String> = None;
    loop {
        let page = api.call(operation, || send(token.clone())).await?;
        token = take(page).filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(());
        }
    }
}
