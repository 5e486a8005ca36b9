//! Errors a cloud provider returns to the generic controllers.

use std::time::Duration;

/// An error answering a cloud question.
///
/// Contract (as in `k8s.io/cloud-provider`): [`CloudError::InstanceNotFound`] means the instance is
/// really gone (never "stopped", never "the cloud could not be reached").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloudError {
    /// The instance backing a node does not exist (or no longer exists).
    #[error("instance not found: {0}")]
    InstanceNotFound(String),
    /// The cloud API throttled the request; retry later.
    #[error("cloud API throttled {operation}: {message}")]
    Throttled {
        /// The operation.
        operation: String,
        /// What the cloud said.
        message: String,
    },
    /// The cloud API could not be reached or failed; the answer is unknown.
    #[error("cloud API {operation} failed: {message}")]
    Unavailable {
        /// The operation.
        operation: String,
        /// What the cloud said.
        message: String,
    },
    /// The credentials were rejected or lack a permission.
    #[error("cloud API {operation} denied: {message}")]
    Unauthorized {
        /// The operation.
        operation: String,
        /// What the cloud said.
        message: String,
    },
    /// The cloud API rejected the request for a reason retrying will not fix.
    #[error("cloud API {operation} rejected the request ({code}): {message}")]
    Rejected {
        /// The operation.
        operation: String,
        /// The cloud's error code.
        code: String,
        /// The cloud's message.
        message: String,
    },
    /// The input (node, provider ID, annotation…) cannot be used.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Another controller handles this object (e.g. an AWS Load Balancer Controller type).
    #[error("implemented elsewhere: {0}")]
    ImplementedElsewhere(String),
    /// Not an error: the cloud is still working on it (a load balancer in PENDING_UPDATE, a
    /// parent Service without an address yet). Ask again after `retry_after`.
    #[error("{what} is not ready yet; checking again in {retry_after:?}")]
    Pending {
        /// What is being waited for.
        what: String,
        /// When to look again.
        retry_after: Duration,
    },
}

impl CloudError {
    /// Short, bounded category used as a metric label and an Event reason suffix.
    pub fn category(&self) -> &'static str {
        match self {
            CloudError::InstanceNotFound(_) => "InstanceNotFound",
            CloudError::Throttled { .. } => "Throttled",
            CloudError::Unavailable { .. } => "CloudUnavailable",
            CloudError::Unauthorized { .. } => "Unauthorized",
            CloudError::Rejected { .. } => "CloudRejected",
            CloudError::InvalidInput(_) => "InvalidInput",
            CloudError::ImplementedElsewhere(_) => "ImplementedElsewhere",
            CloudError::Pending { .. } => "Pending",
        }
    }

    /// Whether retrying the same question later may give another answer.
    pub fn is_transient(&self) -> bool {
        !matches!(
            self,
            CloudError::InvalidInput(_)
                | CloudError::Rejected { .. }
                | CloudError::ImplementedElsewhere(_)
        )
    }
}
