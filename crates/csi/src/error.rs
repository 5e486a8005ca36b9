//! Backend errors and the gRPC status each one becomes. The codes are chosen so the sidecars
//! retry what can succeed later (Unavailable, Aborted, DeadlineExceeded) and stop on what
//! cannot (InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, ResourceExhausted).

use tonic::{Code, Status};

/// What went wrong in a backend call.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BackendError {
    /// The volume, snapshot or node does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// An object of that name exists with different settings.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The request cannot be carried out as given.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The object is in a state that forbids the operation (e.g. attached elsewhere).
    #[error("failed precondition: {0}")]
    FailedPrecondition(String),
    /// A quota or attach limit is reached.
    #[error("resource exhausted: {0}")]
    ResourceExhausted(String),
    /// The operation is still under way in the cloud (attaching, modifying); the CO retries.
    #[error("operation pending: {0}")]
    Pending(String),
    /// The cloud was unreachable, throttled us or failed; the CO retries.
    #[error("cloud unavailable: {0}")]
    Unavailable(String),
    /// A local command (mkfs, mount) or an unexpected answer failed.
    #[error("internal: {0}")]
    Internal(String),
}

impl BackendError {
    /// The gRPC code this error is answered with.
    pub fn code(&self) -> Code {
        match self {
            BackendError::NotFound(_) => Code::NotFound,
            BackendError::AlreadyExists(_) => Code::AlreadyExists,
            BackendError::InvalidArgument(_) => Code::InvalidArgument,
            BackendError::FailedPrecondition(_) => Code::FailedPrecondition,
            BackendError::ResourceExhausted(_) => Code::ResourceExhausted,
            BackendError::Pending(_) => Code::Aborted,
            BackendError::Unavailable(_) => Code::Unavailable,
            BackendError::Internal(_) => Code::Internal,
        }
    }
}

impl From<String> for BackendError {
    /// An unexpected failure described by a message (a dropped batch, a task that died).
    fn from(message: String) -> Self {
        BackendError::Internal(message)
    }
}

impl From<BackendError> for Status {
    fn from(err: BackendError) -> Status {
        Status::new(err.code(), err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_errors_get_retryable_codes() {
        let cases = [
            (BackendError::Pending("attaching".into()), Code::Aborted),
            (
                BackendError::Unavailable("throttled".into()),
                Code::Unavailable,
            ),
            (BackendError::NotFound("vol".into()), Code::NotFound),
            (BackendError::AlreadyExists("n".into()), Code::AlreadyExists),
            (
                BackendError::ResourceExhausted("limit".into()),
                Code::ResourceExhausted,
            ),
        ];
        for (err, code) in cases {
            assert_eq!(Status::from(err).code(), code);
        }
    }
}
